"""GEGLU: the tanh-approximated GELU of the gate projection times the up projection (Gemma's MLP)."""

import torch
import torch.nn.functional as F


def geglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(a, approximate="tanh") * b


KERNELGEN = {
    "entry": "geglu",
    "function_class_name": "LigerGELUMulFunction",
    "module_class_name": "LigerGEGLUMLP",
    "module_kind": "mlp",
    # The activation's result is rounded to the projections' dtype before the product, as eager PyTorch (and Liger's
    # hand-written MLP kernels) do: a bf16 MLP then matches eager's outputs after the down projection.
    "rounding": "per_op",
    # Liger's LigerGEGLUMLPForGemma4: Gemma 4's (config, layer_idx) constructor, double-wide KV-shared layers.
    "module_variants": ["gemma4"],
    "closest_existing_kernel": "swiglu",
    "description": "gelu(a, approximate='tanh') * b, the gated activation of a GEGLU MLP",
    "benchmark": {"fixed_config": {"hidden_size": 4096, "intermediate_size": 11008}},
}
