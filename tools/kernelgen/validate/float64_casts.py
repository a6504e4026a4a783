"""A reference run in float64 as the truth, with its casts up to float32 kept at float64.

A reference that widens to float32 to compute precisely (``x.float()``, ``x.to(torch.float32)``,
``x.type(torch.float32)``, CLIP's LayerNorm subclass) narrows a float64 run to float32 there: its truth loses the
digits it is meant to have, and a module's float64 parameters then meet float32 activations, which ops such as
``F.layer_norm`` refuse. Under ``kept_float64()`` such a cast of a float64 tensor returns the tensor itself."""

from __future__ import annotations

import contextlib

import torch

from torch.overrides import TorchFunctionMode

_CASTS = {torch.Tensor.float, torch.Tensor.to, torch.Tensor.type}


def _to_float32(func, args, kwargs) -> bool:
    if func is torch.Tensor.float:
        return True
    targets = [*args, *kwargs.values()]
    return any(t is torch.float32 or t in ("torch.FloatTensor", "torch.float32") for t in targets)


class _KeepFloat64(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _CASTS and args and isinstance(args[0], torch.Tensor) and args[0].dtype == torch.float64:
            if _to_float32(func, args[1:], kwargs):
                return args[0]
        return func(*args, **kwargs)


def kept_float64(dtype: torch.dtype):
    """The context a reference runs in at ``dtype``: float64 keeps its float32 casts at float64."""
    return _KeepFloat64() if dtype == torch.float64 else contextlib.nullcontext()
