"""The one shared module generated ops files import besides ``ops/utils.py``: ``liger_kernel/ops/layout_utils.py``
(inputs as rows, inputs that broadcast, element-wise tiles, DTensor arguments as local shards). Its text is this
repository's own copy; a target that lacks it gets that copy once, with the first generated kernel that imports it,
together with the module's own tests (``test/transformers/test_layout_utils.py``, where the target has no file of
that name), and a target's copy, edited or not, is never replaced."""

from __future__ import annotations

import ast

from pathlib import Path

from tools.kernelgen.layout import LAYOUT_UTILS
from tools.kernelgen.repo import LigerRepo

LAYOUT_MODULE = "liger_kernel.ops.layout_utils"

LAYOUT_UTILS_TESTS = "test/transformers/test_layout_utils.py"

# tools/kernelgen/ sits two levels below the repository root, whose src/ holds the module and test/ its tests.
_OWN_COPY = Path(__file__).resolve().parents[2] / LAYOUT_UTILS
_OWN_TESTS = Path(__file__).resolve().parents[2] / LAYOUT_UTILS_TESTS


class SharedModuleError(ValueError):
    """The target's copy of the shared module lacks what a generated kernel imports from it."""


def imported_names(files: dict[str, str]) -> set[str]:
    """The names the generated Python files of ``files`` import from the shared module."""
    return {
        alias.name
        for path, text in files.items()
        if path.endswith(".py")
        for node in ast.parse(text).body
        if isinstance(node, ast.ImportFrom) and node.module == LAYOUT_MODULE
        for alias in node.names
    }


def layout_utils_to_add(repo: LigerRepo, files: dict[str, str]) -> str | None:
    """The module's text when the generated ``files`` import it and ``repo`` lacks it, else None. A copy the target
    has stays as it is; one that lacks a name the files import (an older copy) is refused in one line, as the
    kernel would not import."""
    wanted = imported_names(files)
    if not wanted:
        return None
    if not repo.exists(LAYOUT_UTILS):
        return _OWN_COPY.read_text()
    defined = set()
    for node in ast.parse(repo.read(LAYOUT_UTILS)).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {target.id for target in targets if isinstance(target, ast.Name)}
    missing = sorted(wanted - defined)
    if missing:
        raise SharedModuleError(
            f"{LAYOUT_UTILS} lacks {', '.join(missing)}, which the generated kernel imports: replace it with "
            f"kernelgen's copy ({_OWN_COPY}) or merge those definitions in"
        )
    return None


def shared_module_files(repo: LigerRepo, files: dict[str, str]) -> dict[str, str]:
    """The files a target gains with the shared module (path -> text): the module, when the generated ``files``
    import it and ``repo`` lacks it, with its tests unless the target has a file of their name; else none."""
    module = layout_utils_to_add(repo, files)
    if module is None:
        return {}
    added = {LAYOUT_UTILS: module}
    if not repo.exists(LAYOUT_UTILS_TESTS):
        added[LAYOUT_UTILS_TESTS] = _OWN_TESTS.read_text()
    return added
