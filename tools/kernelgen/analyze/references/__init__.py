"""The built-in reference library: one small PyTorch file per reference, with a ``KERNELGEN`` dict of hints.

Hints kernelgen reads: ``entry`` (the function or module to analyze), ``function_class_name``,
``module_class_name``, ``functional_name``, ``module_kind``, ``module_variants`` (model-specific subclasses of an
mlp module, ``profile.MLP_VARIANTS``), ``description``, ``closest_existing_kernel``,
``init_args`` (arguments used to instantiate a module reference for tracing), ``rounding`` (tier 1's
``math.rounding``), ``backward``, ``benchmark``, ``test`` and ``tiling`` (fields of the profile sections of the
same names; a reference's ``tiling`` hint is what ``tune`` chose for it on an H200 where that differs from the
template's defaults).
"""

from __future__ import annotations

from pathlib import Path

REFERENCES_DIR = Path(__file__).resolve().parent


def list_builtin_references() -> list[str]:
    return sorted(path.stem for path in REFERENCES_DIR.glob("*.py") if not path.stem.startswith("_"))


def builtin_reference_path(name: str) -> Path:
    return REFERENCES_DIR / f"{name}.py"


__all__ = ["REFERENCES_DIR", "builtin_reference_path", "list_builtin_references"]
