"""Shared helpers for the unit tests: seeding, verbose comparisons, device and dtype capabilities."""

import random

import numpy as np
import torch

from liger_kernel.utils import infer_device as _infer_device


def infer_device() -> str:
    return _infer_device()


def set_seed(seed: int = 42) -> None:
    """Seed Python, NumPy and torch (every device) so a failing case reproduces."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def supports_bfloat16() -> bool:
    """bf16 runs on Ampere+ GPUs; the Triton interpreter on the CPU cannot load bf16, so CPU runs skip it."""
    device = infer_device()
    if device == "cuda":
        return torch.cuda.get_device_capability() >= (8, 0)
    return device == "xpu"


def assert_verbose_allclose(tensor1, tensor2, rtol=1e-05, atol=1e-08, max_print=5, extra_info=""):
    """``torch.testing.assert_close`` that names the worst mismatching elements when it fails.

    NaN and Inf must appear in the same places in both tensors; everything else must satisfy
    ``|a - b| <= atol + rtol * |b|``.
    """
    if tensor1.shape != tensor2.shape:
        raise AssertionError(f"shape mismatch: {tuple(tensor1.shape)} vs {tuple(tensor2.shape)} {extra_info}")
    # Compared where the tensors live (a model-sized gradient copied to the host costs seconds), in fp32.
    a = tensor1.detach().float()
    b = tensor2.detach().to(a.device).float()
    nan_mismatch = torch.isnan(a) ^ torch.isnan(b)
    inf_mismatch = torch.isinf(a) ^ torch.isinf(b) | (
        torch.isinf(a) & torch.isinf(b) & (torch.sign(a) != torch.sign(b))
    )
    finite = torch.isfinite(a) & torch.isfinite(b)
    diff = torch.where(finite, (a - b).abs(), 0.0)
    tolerance = atol + rtol * b.abs()
    mismatched = (finite & (diff > tolerance)) | nan_mismatch | inf_mismatch
    count = int(mismatched.sum())
    if count == 0:
        return
    excess = torch.where(mismatched, diff - torch.where(finite, tolerance, torch.zeros_like(tolerance)), 0.0)
    excess[nan_mismatch | inf_mismatch] = float("inf")
    worst = torch.topk(excess.flatten(), k=min(max_print, count)).indices
    lines = [f"Number of mismatched elements: {count} of {a.numel()} (rtol={rtol}, atol={atol}) {extra_info}"]
    for flat in worst.tolist():
        index = tuple(int(i) for i in np.unravel_index(flat, a.shape)) if a.dim() else ()
        lines.append(
            f"Mismatch at index {index}: tensor1[{index}] = {a[index].item()}, tensor2[{index}] = {b[index].item()}"
        )
    raise AssertionError("\n".join(lines))
