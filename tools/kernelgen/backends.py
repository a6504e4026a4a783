"""The kernel languages kernelgen renders (a profile's ``backend``) and whether the optional one is installed.

Triton is the default and always there. TileLang (tier 1 only) is an optional extra of ``pyproject.toml``:
generating TileLang kernels needs no GPU, but ``new`` refuses them where ``tilelang`` is not installed, since
nothing there could run or compile them.
"""

from __future__ import annotations

import importlib.util

from tools.kernelgen.profile import BACKENDS

TILELANG_INSTALL = 'pip install -e ".[tilelang]"'  # tilelang==0.1.15, the optional extra of pyproject.toml


def tilelang_installed() -> bool:
    """Whether ``import tilelang`` can find the package (without importing it: that takes seconds)."""
    return importlib.util.find_spec("tilelang") is not None


def missing_backend(backend: str) -> str | None:
    """One line saying why kernels in ``backend`` cannot be generated here, or None when they can."""
    if backend == "tilelang" and not tilelang_installed():
        return f"--backend tilelang needs the tilelang package, which is not installed: {TILELANG_INSTALL}"
    return None


__all__ = ["BACKENDS", "TILELANG_INSTALL", "missing_backend", "tilelang_installed"]
