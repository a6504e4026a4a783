"""The one shared module generated ops files import besides ``ops/utils.py``: ``liger_kernel/ops/layout_utils.py``
(inputs as rows, element-wise tiles, DTensor arguments as local shards). Its text is this repository's own copy; a
target that lacks it gets that copy once, with the first generated kernel that imports it, and a target's copy,
edited or not, is never replaced."""

from __future__ import annotations

import ast

from pathlib import Path

from tools.kernelgen.layout import LAYOUT_UTILS
from tools.kernelgen.repo import LigerRepo

LAYOUT_MODULE = "liger_kernel.ops.layout_utils"

# tools/kernelgen/ sits two levels below the repository root, whose src/ holds the module.
_OWN_COPY = Path(__file__).resolve().parents[2] / LAYOUT_UTILS


def imports_layout_utils(files: dict[str, str]) -> bool:
    """Whether any generated Python file of ``files`` imports from the shared module."""
    return any(
        isinstance(node, ast.ImportFrom) and node.module == LAYOUT_MODULE
        for path, text in files.items()
        if path.endswith(".py")
        for node in ast.parse(text).body
    )


def layout_utils_to_add(repo: LigerRepo, files: dict[str, str]) -> str | None:
    """The module's text when the generated ``files`` import it and ``repo`` lacks it, else None."""
    if repo.exists(LAYOUT_UTILS) or not imports_layout_utils(files):
        return None
    return _OWN_COPY.read_text()
