import torch


def infer_device() -> str:
    """Return the name of the accelerator torch can use here: "cuda", "xpu", "npu" or "cpu"."""
    if torch.cuda.is_available():
        return "cuda"
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    # torch_npu registers torch.npu only when Ascend's extension is installed.
    npu = getattr(torch, "npu", None)
    if npu is not None and npu.is_available():
        return "npu"
    return "cpu"
