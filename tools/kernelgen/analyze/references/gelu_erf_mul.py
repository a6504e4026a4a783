"""GeGLU with the exact (erf) GELU: gelu(a) * b, as models trained with approximate="none" use it."""

import torch
import torch.nn.functional as F


def gelu_erf_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(a) * b


KERNELGEN = {
    "entry": "gelu_erf_mul",
    "module_kind": "mlp",
    # The activation's result is rounded to the projections' dtype before the product, as eager PyTorch (and Liger's
    # hand-written MLP kernels) do: a bf16 MLP then matches eager's outputs after the down projection.
    "rounding": "per_op",
    "closest_existing_kernel": "swiglu",
    "description": "gelu(a) * b with the erf form of GELU",
    "benchmark": {"fixed_config": {"hidden_size": 4096, "intermediate_size": 11008}},
}
