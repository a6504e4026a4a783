"""ReGLU: the ReLU of the gate projection times the up projection."""

import torch
import torch.nn.functional as F


def reglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.relu(a) * b


KERNELGEN = {
    "entry": "reglu",
    "function_class_name": "LigerReLUMulFunction",
    "module_class_name": "LigerReGLUMLP",
    "module_kind": "mlp",
    # The activation's result is rounded to the projections' dtype before the product, as eager PyTorch (and Liger's
    # hand-written MLP kernels) do: a bf16 MLP then matches eager's outputs after the down projection.
    "rounding": "per_op",
    "closest_existing_kernel": "swiglu",
    "description": "relu(a) * b, the gated activation of a ReGLU MLP",
    "benchmark": {"fixed_config": {"hidden_size": 4096, "intermediate_size": 11008}},
}
