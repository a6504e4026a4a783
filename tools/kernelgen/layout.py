"""Where things live in a Liger checkout: the files every kernel registers in and each kernel's own files. Every
path is repository-relative; nothing here touches the disk (generation records live outside the tree: record.py)."""

from __future__ import annotations

import keyword
import re

SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
MAX_KERNEL_NAME = 100  # with the longest prefix kernelgen adds (test_fused_linear_), a file name far below 255

OPS_INIT = "src/liger_kernel/ops/__init__.py"
TRANSFORMERS_INIT = "src/liger_kernel/transformers/__init__.py"
FUNCTIONAL = "src/liger_kernel/transformers/functional.py"
OPS_UTILS = "src/liger_kernel/ops/utils.py"
LAYOUT_UTILS = "src/liger_kernel/ops/layout_utils.py"  # shared by generated kernels: shared_module.py
DTENSOR_UTILS = "src/liger_kernel/ops/dtensor_utils.py"  # likewise
ROW_UTILS = "src/liger_kernel/ops/row_utils.py"  # likewise
MONKEY_PATCH = "src/liger_kernel/transformers/monkey_patch.py"
REGISTRATION_FILES = (OPS_INIT, TRANSFORMERS_INIT, FUNCTIONAL)

# Kernels ``validate --archive`` accepted, which ``analyze`` may name as the closest existing kernel.
KNOWLEDGE_DIR = ".claude/skills/liger-kernel-gen/knowledge"
KNOWLEDGE_PROFILE = "profile.yaml"


def kernel_paths(name: str) -> dict[str, str]:
    """A kernel's own files, by role."""
    return {
        "ops": f"src/liger_kernel/ops/{name}.py",
        "module": f"src/liger_kernel/transformers/{name}.py",
        "test": f"test/transformers/test_{name}.py",
        "benchmark": f"benchmark/scripts/benchmark_{name}.py",
    }


class KernelNameError(ValueError):
    """A kernel name that cannot name files and Python modules."""


NATIVE_LAUNCH = "src/liger_kernel/ops/native_launch.py"  # this repository's host library only
SHARED_FILES = (
    *REGISTRATION_FILES,
    OPS_UTILS,
    LAYOUT_UTILS,
    DTENSOR_UTILS,
    ROW_UTILS,
    NATIVE_LAUNCH,
    MONKEY_PATCH,
)


def check_kernel_name(name: str) -> None:
    if isinstance(name, str) and len(name) > MAX_KERNEL_NAME:
        raise KernelNameError(
            f"kernel name {name[:40]!r}... is {len(name)} characters long; at most {MAX_KERNEL_NAME} (it names files "
            f"such as test_fused_linear_NAME.py)"
        )
    if not SNAKE_CASE.match(name or ""):
        raise KernelNameError(f"kernel name {name!r} is not a snake_case identifier (e.g. geglu, relu_squared)")
    if keyword.iskeyword(name):
        raise KernelNameError(f"kernel name {name!r} is a Python keyword; it cannot name a module")
    taken = [path for path in kernel_paths(name).values() if path in SHARED_FILES]
    if taken:
        raise KernelNameError(f"kernel name {name!r} is taken: {taken[0]} is a file every kernel shares")
