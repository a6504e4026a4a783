import torch


def is_npu_available() -> bool:
    """Whether an Ascend NPU can be used (torch_npu registers ``torch.npu`` only when it is installed)."""
    npu = getattr(torch, "npu", None)
    return npu is not None and npu.is_available()


def infer_device() -> str:
    """Return the name of the accelerator torch can use here: "cuda", "xpu", "npu" or "cpu"."""
    if torch.cuda.is_available():
        return "cuda"
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    if is_npu_available():
        return "npu"
    return "cpu"


# The collective library each accelerator's process groups use; CPU process groups use gloo.
_COMM_BACKEND_BY_DEVICE = {"cuda": "nccl", "xpu": "xccl", "npu": "hccl"}


def infer_comm_backend() -> str:
    """Name of the ``torch.distributed`` backend for the device ``infer_device`` picks ("nccl", "gloo", ...)."""
    import torch.distributed as dist

    backend = _COMM_BACKEND_BY_DEVICE.get(infer_device())
    if backend == "nccl" and not dist.is_nccl_available():
        backend = None
    if backend is None:
        if dist.is_gloo_available():
            return "gloo"
        if dist.is_mpi_available():
            return "mpi"
        raise RuntimeError("torch.distributed has no usable backend on this machine (no NCCL, gloo or MPI)")
    return backend
