"""The shared modules generated ops files import besides ``ops/utils.py``: ``liger_kernel/ops/layout_utils.py``
(inputs as rows, inputs that broadcast, element-wise tiles), ``liger_kernel/ops/row_utils.py`` (row kernels' tiles,
backward schedules and gradient buffers) and ``liger_kernel/ops/dtensor_utils.py`` (DTensor arguments as local
shards). Their text is this repository's own copy; a target that lacks one gets that copy once,
with the first generated kernel that imports it, together with the module's own tests (where the target has no file
of that name), and a target's copy, edited or not, is never replaced."""

from __future__ import annotations

import ast

from dataclasses import dataclass
from pathlib import Path

from tools.kernelgen.layout import DTENSOR_UTILS
from tools.kernelgen.layout import LAYOUT_UTILS
from tools.kernelgen.layout import ROW_UTILS
from tools.kernelgen.repo import LigerRepo

# tools/kernelgen/ sits two levels below the repository root, whose src/ holds the modules and test/ their tests.
_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SharedModule:
    path: str  # repository-relative, under src/
    tests: str  # its own tests, repository-relative
    what: str  # in a report line: what the module holds

    @property
    def module(self) -> str:
        """The dotted name generated files import it by."""
        return ".".join(Path(self.path).relative_to("src").with_suffix("").parts)


SHARED_MODULES = (
    SharedModule(LAYOUT_UTILS, "test/transformers/test_layout_utils.py", "the shared layout helpers"),
    SharedModule(DTENSOR_UTILS, "test/transformers/test_dtensor_utils.py", "the shared DTensor helpers"),
    SharedModule(ROW_UTILS, "test/transformers/test_row_utils.py", "the shared row-kernel helpers"),
)


class SharedModuleError(ValueError):
    """The target's copy of a shared module lacks what a generated kernel imports from it."""


def imported_names(files: dict[str, str], module: str) -> set[str]:
    """The names the generated Python files of ``files`` import from ``module``."""
    return {
        alias.name
        for path, text in files.items()
        if path.endswith(".py")
        for node in ast.parse(text).body
        if isinstance(node, ast.ImportFrom) and node.module == module
        for alias in node.names
    }


def module_to_add(repo: LigerRepo, files: dict[str, str], shared: SharedModule) -> str | None:
    """The shared module's text when the generated ``files`` import it and ``repo`` lacks it, else None. A copy the
    target has stays as it is; one that lacks a name the files import (an older copy) is refused in one line, as
    the kernel would not import."""
    wanted = imported_names(files, shared.module)
    if not wanted:
        return None
    if not repo.exists(shared.path):
        return (_ROOT / shared.path).read_text()
    defined = set()
    for node in ast.parse(repo.read(shared.path)).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {target.id for target in targets if isinstance(target, ast.Name)}
    missing = sorted(wanted - defined)
    if missing:
        raise SharedModuleError(
            f"{shared.path} lacks {', '.join(missing)}, which the generated kernel imports: replace it with "
            f"kernelgen's copy ({_ROOT / shared.path}) or merge those definitions in"
        )
    return None


def shared_module_files(repo: LigerRepo, files: dict[str, str]) -> dict[str, str]:
    """The files a target gains with the shared modules (path -> text): each module the generated ``files`` import
    and ``repo`` lacks, with its tests unless the target has a file of their name; else none."""
    added = {}
    for shared in SHARED_MODULES:
        module = module_to_add(repo, files, shared)
        if module is None:
            continue
        added[shared.path] = module
        if not repo.exists(shared.tests):
            added[shared.tests] = (_ROOT / shared.tests).read_text()
    return added


def added_file_reason(path: str) -> str:
    """Why a shared file was added, for generate's and modify's reports."""
    for shared in SHARED_MODULES:
        if path == shared.path:
            return f"{shared.what} the new kernel imports"
        if path == shared.tests:
            return f"{shared.what}' own tests"
    raise KeyError(path)
