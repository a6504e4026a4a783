"""Kernels written for compiled Triton run under the interpreter inside ``compiled_scalars``: a float argument is an
fp32 scalar with ``.to``, a scalar argument bounds a ``range``, a libdevice function computes; outside, the
interpreter is as Triton ships it."""

import torch
import triton
import triton.language as tl

from triton.language.extra.libdevice import rsqrt
from triton.runtime import interpreter

from tools.kernelgen.interpreter import compiled_scalars


@triton.jit
def _scaled_rsqrt_kernel(x_ptr, y_ptr, eps, n_cols, BLOCK: tl.constexpr):
    for start in range(0, n_cols, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < n_cols
        x = tl.load(x_ptr + offsets, mask=mask, other=1.0)
        tl.store(y_ptr + offsets, rsqrt(x + eps.to(tl.float32)), mask=mask)


def test_a_kernel_written_for_compiled_triton_runs_and_computes_inside_compiled_scalars():
    x = torch.rand(37) + 0.5
    y = torch.empty_like(x)
    originals = (interpreter._implicit_cvt, interpreter._patch_lang_tensor, interpreter._patch_lang)
    with compiled_scalars():
        _scaled_rsqrt_kernel[(1,)](x, y, 0.25, x.numel(), BLOCK=16)
    torch.testing.assert_close(y, torch.rsqrt(x + 0.25))
    assert (interpreter._implicit_cvt, interpreter._patch_lang_tensor, interpreter._patch_lang) == originals
    assert _scaled_rsqrt_kernel.fn.__globals__["rsqrt"] is rsqrt  # the libdevice name is back


@triton.autotune(
    configs=[triton.Config({"BLOCK": 8}), triton.Config({"BLOCK": 32})], key=["n_cols"], restore_value=["y_ptr"]
)
@triton.jit
def _autotuned_double_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_cols
    tl.store(y_ptr + offsets, 2.0 * tl.load(x_ptr + offsets, mask=mask), mask=mask)


def test_an_autotuned_kernel_takes_its_first_configuration_without_timing_inside_compiled_scalars():
    """Timing needs a GPU driver the interpreter lacks; every configuration computes the same."""
    x = torch.rand(37)
    y = torch.empty_like(x)
    bench = triton.runtime.autotuner.Autotuner._bench
    with compiled_scalars():
        _autotuned_double_kernel[lambda meta: (triton.cdiv(37, meta["BLOCK"]),)](x, y, 37)
    torch.testing.assert_close(y, 2.0 * x)
    assert _autotuned_double_kernel.best_config.kwargs == {"BLOCK": 8}
    assert triton.runtime.autotuner.Autotuner._bench is bench
