"""Memory measurement shared by the benchmark harness and the sweep sizing.

On an accelerator the caching allocator reports the peak bytes allocated while an op runs. The CPU has no such
statistic, so there the measurement is the bytes of the tensors the op produced (its outputs, or the gradients it
wrote): a smoke-test stand-in that still depends on the shapes, not a peak.
"""

from typing import Any
from typing import Callable

import torch

BYTES_PER_MB = 2**20


def accelerator_module():
    """``torch.cuda`` / ``torch.xpu`` when one is present (they share the allocator-statistics API), else None.

    Deliberately not ``liger_kernel.utils.infer_device``: importing ``liger_kernel`` may import Triton, and the
    scripts must decide on ``TRITON_INTERPRET`` before that happens.
    """
    if torch.cuda.is_available():
        return torch.cuda
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return torch.xpu
    return None


def tensor_bytes(obj: Any) -> int:
    """Bytes held by every tensor inside ``obj`` (a tensor, or nested tuples / lists / dicts of them)."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(item) for item in obj)
    if isinstance(obj, dict):
        return sum(tensor_bytes(item) for item in obj.values())
    return 0


def measure_peak_bytes(fn: Callable[[], Any]) -> int:
    """Run ``fn`` once and return the bytes it needed on top of what was allocated before.

    Accelerator: peak allocated during the call minus the allocation before it. CPU: bytes of the tensors
    ``fn`` returned (see the module docstring).
    """
    backend = accelerator_module()
    if backend is None:
        return tensor_bytes(fn())
    backend.synchronize()
    backend.reset_peak_memory_stats()
    baseline = backend.memory_allocated()
    result = fn()
    backend.synchronize()
    peak = backend.max_memory_allocated() - baseline
    del result
    return peak
