"""SwiGLU: the SiLU of the gate projection times the up projection (Llama's MLP)."""

import torch
import torch.nn.functional as F


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.silu(a) * b


KERNELGEN = {
    "entry": "swiglu",
    "function_class_name": "LigerSiLUMulFunction",
    "module_class_name": "LigerSwiGLUMLP",
    "module_kind": "mlp",
    # The activation's result is rounded to the projections' dtype before the product, as eager PyTorch (and Liger's
    # hand-written MLP kernels) do: a bf16 MLP then matches eager's outputs after the down projection.
    "rounding": "per_op",
    "closest_existing_kernel": "swiglu",
    "description": "silu(a) * b, the gated activation of a SwiGLU MLP",
    "benchmark": {"fixed_config": {"hidden_size": 4096, "intermediate_size": 11008}},
}
