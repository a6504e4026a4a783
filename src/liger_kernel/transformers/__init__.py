"""Liger modules and functions for Hugging Face-style models.

Everything here works without ``transformers``; only the monkey-patching entry points need it, and those are
imported lazily, on first access, so that ``import liger_kernel.transformers`` never pulls ``transformers`` in.
"""

import importlib
import importlib.util  # find_spec: 'import importlib' alone does not load the submodule

from typing import TYPE_CHECKING

# Always-safe imports (independent of 'transformers')
from liger_kernel.transformers.cross_entropy import LigerCrossEntropyLoss  # noqa: F401
from liger_kernel.transformers.functional import CrossEntropyOutput  # noqa: F401
from liger_kernel.transformers.functional import liger_cross_entropy  # noqa: F401
from liger_kernel.transformers.functional import liger_rms_norm  # noqa: F401
from liger_kernel.transformers.functional import liger_swiglu  # noqa: F401
from liger_kernel.transformers.rms_norm import LigerRMSNorm  # noqa: F401
from liger_kernel.transformers.swiglu import LigerBlockSparseTop2MLP  # noqa: F401
from liger_kernel.transformers.swiglu import LigerExperts  # noqa: F401
from liger_kernel.transformers.swiglu import LigerFalconH1SwiGLUMLP  # noqa: F401
from liger_kernel.transformers.swiglu import LigerPhi3SwiGLUMLP  # noqa: F401
from liger_kernel.transformers.swiglu import LigerSwiGLUMLP  # noqa: F401

if TYPE_CHECKING:
    from liger_kernel.transformers.monkey_patch import apply_liger_kernel_to_llama  # noqa: F401


# Public name -> module that defines it, for every symbol whose module imports 'transformers'.
_TRANSFORMERS_DEPENDENT_SYMBOLS = {
    "apply_liger_kernel_to_llama": "liger_kernel.transformers.monkey_patch",
}

_transformers_available = None


def is_transformers_available() -> bool:
    """Whether ``transformers`` can be imported (a ``None`` entry in ``sys.modules`` counts as missing)."""
    global _transformers_available
    if _transformers_available is None:
        try:
            _transformers_available = importlib.util.find_spec("transformers") is not None
        except ValueError:  # the module is in sys.modules but has no spec
            _transformers_available = False
    return _transformers_available


def __getattr__(name: str):
    module_name = _TRANSFORMERS_DEPENDENT_SYMBOLS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not is_transformers_available():
        raise ImportError(
            f"{__name__}.{name} requires the 'transformers' package: pip install transformers "
            f"(or pip install 'liger_kernel[transformers]')"
        )
    value = getattr(importlib.import_module(module_name), name)
    # Cache it as a real attribute so later lookups skip this function.
    globals()[name] = value
    return value


__all__ = [
    "CrossEntropyOutput",
    "LigerBlockSparseTop2MLP",
    "LigerCrossEntropyLoss",
    "LigerExperts",
    "LigerFalconH1SwiGLUMLP",
    "LigerPhi3SwiGLUMLP",
    "LigerRMSNorm",
    "LigerSwiGLUMLP",
    "liger_cross_entropy",
    "liger_rms_norm",
    "liger_swiglu",
]

if is_transformers_available():
    __all__.extend(["apply_liger_kernel_to_llama"])
