"""Device helpers of ``liger_kernel.utils`` and ``liger_kernel.ops.utils``."""

import torch

from liger_kernel.ops.utils import is_hip
from liger_kernel.utils import infer_comm_backend
from liger_kernel.utils import infer_device
from liger_kernel.utils import is_npu_available


def test_infer_comm_backend_matches_the_device():
    backend = infer_comm_backend()
    device = infer_device()
    if device == "cuda" and torch.distributed.is_nccl_available():
        assert backend == "nccl"
    elif device == "cpu":
        assert backend in ("gloo", "mpi")
    # The name is one torch.distributed knows (or an accelerator's own, registered by its extension).
    assert backend in ("nccl", "gloo", "mpi", "xccl", "hccl")


def test_device_predicates_agree_with_torch():
    assert is_npu_available() == (infer_device() == "npu")
    assert is_hip() == (torch.version.hip is not None)
