"""A reference run in float64 as the truth, with its casts up to float32 kept at float64.

A reference that widens to float32 to compute precisely (``x.float()``, ``x.to(torch.float32)``,
``x.type(torch.float32)``, CLIP's LayerNorm subclass) narrows a float64 run to float32 there: its truth loses the
digits it is meant to have, and a module's float64 parameters then meet float32 activations, which ops such as
``F.layer_norm`` refuse. Under ``kept_float64()`` such a cast of a float64 tensor returns the tensor itself. The
generated tests of such references carry the same mode (``KEEP_FLOAT64_SOURCE``, the class's own source)."""

from __future__ import annotations

import contextlib
import inspect

import torch

from torch.overrides import TorchFunctionMode


class _KeepFloat64(TorchFunctionMode):
    """The reference widens to float32 to compute precisely: a float64 run keeps float64 there (a float32 cast of a
    float64 tensor returns it), so the truth keeps its digits and float64 parameters meet float64 values."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        targets = (*args[1:], *kwargs.values())
        widening = func is torch.Tensor.float or (
            func in (torch.Tensor.to, torch.Tensor.type)
            and any(t is torch.float32 or (isinstance(t, str) and t == "torch.FloatTensor") for t in targets)
        )
        if widening and isinstance(args[0], torch.Tensor) and args[0].dtype == torch.float64:
            return args[0]
        return func(*args, **kwargs)


# The class as the generated tests define it (they import torch and TorchFunctionMode themselves).
KEEP_FLOAT64_SOURCE = inspect.getsource(_KeepFloat64)


def kept_float64(dtype: torch.dtype):
    """The context a reference runs in at ``dtype``: float64 keeps its float32 casts at float64."""
    return _KeepFloat64() if dtype == torch.float64 else contextlib.nullcontext()
