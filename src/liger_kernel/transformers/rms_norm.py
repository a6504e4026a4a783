"""RMSNorm module backed by the fused Triton kernels of ``liger_kernel.ops.rms_norm``."""

import torch
import torch.nn as nn

from liger_kernel.ops import LigerRMSNormFunction

_INIT_FNS = {"ones": torch.ones, "zeros": torch.zeros}


class LigerRMSNorm(nn.Module):
    """``x / rms(x) * (offset + weight)``, or just ``x / rms(x)`` with ``elementwise_affine=False``.

    Llama: ``offset=0.0, casting_mode="llama", init_fn="ones"``; Gemma: ``offset=1.0, casting_mode="gemma",
    init_fn="zeros"``. ``in_place`` lets backward overwrite the incoming gradient with dX; turn it off when that
    gradient tensor is read again elsewhere. Without an elementwise affine the module has no parameters
    (``weight`` is None, as in ``torch.nn.RMSNorm``). ``row_mode`` is kept for API compatibility and has no
    effect: the kernels always work one row per program.
    """

    def __init__(
        self,
        hidden_size,
        eps=1e-6,
        offset=0.0,
        casting_mode="llama",
        init_fn="ones",
        in_place=True,
        row_mode=None,
        elementwise_affine=True,
    ):
        super().__init__()
        if init_fn not in _INIT_FNS:
            raise ValueError(f"init_fn must be one of {sorted(_INIT_FNS)}, got {init_fn!r}")
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(_INIT_FNS[init_fn](hidden_size))
        else:
            self.register_parameter("weight", None)
        self.hidden_size = hidden_size
        self.variance_epsilon = eps
        self.offset = offset
        self.casting_mode = casting_mode
        self.in_place = in_place
        self.row_mode = row_mode

    def forward(self, hidden_states):
        return LigerRMSNormFunction.apply(
            hidden_states,
            self.weight,
            self.variance_epsilon,
            self.offset,
            self.casting_mode,
            self.in_place,
            self.row_mode,
        )

    def extra_repr(self) -> str:
        shape = tuple(self.weight.shape) if self.weight is not None else (self.hidden_size,)
        return (
            f"{shape}, eps={self.variance_epsilon}, offset={self.offset}, casting_mode={self.casting_mode}, "
            f"in_place={self.in_place}, elementwise_affine={self.elementwise_affine}, row_mode={self.row_mode}"
        )
