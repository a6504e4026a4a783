"""Root conftest: runs before any test module, so Triton is configured before anything imports it."""

import os

import torch

# Without an accelerator Triton kernels run on the CPU under Triton's interpreter; the variable is read when
# triton is first imported, so it must be set here, before any test module imports liger_kernel.
if not torch.cuda.is_available() and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
    os.environ.setdefault("TRITON_INTERPRET", "1")
