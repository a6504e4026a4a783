import copy

import pytest
import torch

from transformers.models.llama.modeling_llama import LlamaRMSNorm

from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from liger_kernel.ops.rms_norm import rms_norm_backward
from liger_kernel.ops.rms_norm import rms_norm_forward
from liger_kernel.transformers.functional import liger_rms_norm
from liger_kernel.transformers.rms_norm import LigerRMSNorm
from test.utils import assert_verbose_allclose
from test.utils import infer_device
from test.utils import set_seed
from test.utils import supports_bfloat16

device = infer_device()
ON_GPU = device != "cpu"
EPS = 1e-6

# (batch, seq, hidden). On the CPU the backward grid has 4 programs, so 15 rows exercise several rows per program
# and 2 rows exercise a grid smaller than that; widths are non-powers of 2 (31, 127) and one power of 2 (64).
if ON_GPU:
    SHAPES = [(4, 1024, 4096), (2, 512, 8192), (3, 423, 4097), (1, 7, 127)]
else:
    SHAPES = [(3, 5, 127), (2, 1, 31), (4, 4, 64)]

FP32_TOL = (1e-5, 1e-4) if ON_GPU else (1e-5, 1e-5)
DTYPES = [
    pytest.param(torch.float32, *FP32_TOL, id="fp32"),
    pytest.param(
        torch.bfloat16,
        2e-2,
        2e-2,
        id="bf16",
        marks=pytest.mark.skipif(not supports_bfloat16(), reason="bf16 needs an Ampere+ GPU (no interpreter)"),
    ),
]


class GemmaStyleRMSNorm(torch.nn.Module):
    """Reference for casting_mode="gemma": all in fp32 with weight (1 + w), cast to the input dtype at the end."""

    def __init__(self, hidden_size, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(hidden_size))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * (1.0 + self.weight.float())).to(x.dtype)


class InputDtypeRMSNorm(torch.nn.Module):
    """Reference for casting_mode="none": every step in the input dtype."""

    def __init__(self, hidden_size, eps, offset):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.eps = eps
        self.offset = offset

    def forward(self, x):
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed * (self.offset + self.weight)


def _max_error_against_fp32(module, x, dy, fp32_weight_grad):
    """Largest deviation of ``module``'s weight gradient from an fp32 computation of the same function."""
    x = x.clone().requires_grad_(True)
    module.weight.grad = None
    module(x).backward(dy)
    return (module.weight.grad.float() - fp32_weight_grad).abs().max().item()


def _compare_with_reference(reference, liger, shape, dtype, atol, rtol):
    with torch.no_grad():
        reference.weight.copy_(torch.randn_like(reference.weight) * 0.5 + 1.0)
        liger.weight.copy_(reference.weight)

    x = torch.randn(shape, device=device, dtype=dtype)
    x_ref = x.clone().requires_grad_(True)
    x_liger = x.clone().requires_grad_(True)
    y_ref = reference(x_ref)
    y_liger = liger(x_liger)
    assert_verbose_allclose(y_liger, y_ref, atol=atol, rtol=rtol, extra_info="[y]")

    dy = torch.randn_like(y_ref)
    y_ref.backward(dy)
    # A clone: with in_place=True the kernel overwrites the gradient it receives.
    y_liger.backward(dy.clone())
    assert_verbose_allclose(x_liger.grad, x_ref.grad, atol=atol, rtol=rtol, extra_info="[dx]")

    if dtype == torch.float32:
        # dW sums over every row, so its rounding error grows with the row count.
        assert_verbose_allclose(
            liger.weight.grad, reference.weight.grad, atol=atol * 10, rtol=rtol * 10, extra_info="[dw]"
        )
        return
    # In half precision the reference's own dW (per-element products rounded before the row sum) is off by
    # several ulps of the sum, so both are measured against the reference evaluated in fp32: Liger must be at
    # least about as accurate as the module it replaces.
    fp32_reference = copy.deepcopy(reference).float()
    fp32_reference(x.float()).backward(dy.float())
    fp32_weight_grad = fp32_reference.weight.grad
    reference_error = _max_error_against_fp32(reference, x, dy, fp32_weight_grad)
    liger_error = _max_error_against_fp32(liger, x, dy.clone(), fp32_weight_grad)
    assert liger_error <= 1.5 * reference_error + atol, f"[dw] liger error {liger_error} vs reference {reference_error}"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, atol, rtol", DTYPES)
@pytest.mark.parametrize("in_place", [True, False])
def test_llama_mode_matches_hf_llama_rms_norm(shape, dtype, atol, rtol, in_place):
    set_seed(0)
    hidden = shape[-1]
    reference = LlamaRMSNorm(hidden, eps=EPS).to(device=device, dtype=dtype)
    liger = LigerRMSNorm(hidden, eps=EPS, casting_mode="llama", in_place=in_place).to(device=device, dtype=dtype)
    _compare_with_reference(reference, liger, shape, dtype, atol, rtol)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, atol, rtol", DTYPES)
@pytest.mark.parametrize("in_place", [True, False])
def test_gemma_mode_with_offset_one_matches_fp32_reference(shape, dtype, atol, rtol, in_place):
    set_seed(1)
    hidden = shape[-1]
    reference = GemmaStyleRMSNorm(hidden, eps=EPS).to(device=device, dtype=dtype)
    liger = LigerRMSNorm(hidden, eps=EPS, offset=1.0, casting_mode="gemma", init_fn="zeros", in_place=in_place)
    liger = liger.to(device=device, dtype=dtype)
    _compare_with_reference(reference, liger, shape, dtype, atol, rtol)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "dtype, atol, rtol",
    [
        pytest.param(torch.float32, *FP32_TOL, id="fp32"),
        # fp16 runs under the interpreter, so the input-dtype arithmetic of "none" is checked on the CPU too.
        pytest.param(torch.float16, 1e-2, 1e-2, id="fp16"),
    ],
)
def test_none_mode_matches_input_dtype_reference(shape, dtype, atol, rtol):
    set_seed(2)
    hidden = shape[-1]
    reference = InputDtypeRMSNorm(hidden, eps=EPS, offset=0.5).to(device=device, dtype=dtype)
    liger = LigerRMSNorm(hidden, eps=EPS, offset=0.5, casting_mode="none", in_place=False).to(
        device=device, dtype=dtype
    )
    _compare_with_reference(reference, liger, shape, dtype, atol, rtol)


@pytest.mark.parametrize("casting_mode, rstd_dtype", [("llama", torch.float32), ("gemma", torch.float32)])
def test_forward_caches_fp32_rstd_per_row_for_upcasting_modes(casting_mode, rstd_dtype):
    set_seed(3)
    x = torch.randn(2, 3, 31, device=device, dtype=torch.float16)
    w = torch.randn(31, device=device, dtype=torch.float16)
    _, x2d, rstd, _, _, _ = rms_norm_forward(x, w, EPS, 0.0, casting_mode)
    assert rstd.shape == (6,) and rstd.dtype == rstd_dtype
    expected = torch.rsqrt(x2d.float().pow(2).mean(-1) + EPS)
    assert_verbose_allclose(rstd, expected, atol=1e-5, rtol=1e-5)


def test_in_place_backward_returns_dx_in_dy_buffer_and_out_of_place_keeps_dy():
    set_seed(4)
    x = torch.randn(9, 63, device=device)
    w = torch.randn(63, device=device)
    _, x2d, rstd, block_size, num_warps, mode = rms_norm_forward(x, w, EPS, 0.0, "llama")
    dy = torch.randn_like(x)
    dy_before = dy.clone()

    dx_copy, dw_copy = rms_norm_backward(dy, x2d, w, rstd, 0.0, mode, block_size, num_warps, in_place=False)
    assert dx_copy.data_ptr() != dy.data_ptr()
    assert torch.equal(dy, dy_before)

    dx_in_place, dw_in_place = rms_norm_backward(dy, x2d, w, rstd, 0.0, mode, block_size, num_warps, in_place=True)
    assert dx_in_place.data_ptr() == dy.data_ptr()
    assert torch.equal(dx_in_place, dx_copy)
    assert torch.equal(dw_in_place, dw_copy)


def test_functional_liger_rms_norm_equals_function_apply():
    set_seed(5)
    x = torch.randn(2, 3, 47, device=device)
    w = torch.randn(47, device=device)
    results = []
    for fn in (liger_rms_norm, LigerRMSNormFunction.apply):
        x_leaf = x.clone().requires_grad_(True)
        w_leaf = w.clone().requires_grad_(True)
        y = fn(x_leaf, w_leaf, EPS, 0.25, "gemma", False)
        y.backward(torch.ones_like(y))
        results.append((y.detach(), x_leaf.grad, w_leaf.grad))
    for functional, direct in zip(*results):
        assert torch.equal(functional, direct)


def test_function_apply_defaults_are_llama_mode_with_zero_offset():
    set_seed(6)
    x = torch.randn(4, 33, device=device)
    w = torch.randn(33, device=device)
    explicit = LigerRMSNormFunction.apply(x, w, EPS, 0.0, "llama", True)
    assert torch.equal(LigerRMSNormFunction.apply(x, w, EPS), explicit)


@pytest.mark.parametrize("casting_mode", ["Llama", "fp32", "", 7])
def test_invalid_casting_mode_raises_value_error(casting_mode):
    x = torch.randn(2, 16, device=device)
    w = torch.ones(16, device=device)
    with pytest.raises(ValueError, match="casting mode"):
        LigerRMSNormFunction.apply(x, w, EPS, 0.0, casting_mode)
    with pytest.raises(ValueError, match="casting mode"):
        LigerRMSNorm(16, casting_mode=casting_mode).to(device)(x)


def test_weight_with_wrong_shape_raises_value_error():
    with pytest.raises(ValueError, match="weight must have shape"):
        rms_norm_forward(torch.randn(2, 16, device=device), torch.ones(15, device=device), EPS, 0.0, "llama")


@pytest.mark.parametrize("init_fn, value", [("ones", 1.0), ("zeros", 0.0)])
def test_liger_rms_norm_initialises_weight_per_init_fn(init_fn, value):
    norm = LigerRMSNorm(12, init_fn=init_fn)
    assert torch.equal(norm.weight.data, torch.full((12,), value))


def test_liger_rms_norm_rejects_unknown_init_fn_and_reports_settings():
    with pytest.raises(ValueError, match="init_fn"):
        LigerRMSNorm(12, init_fn="normal")
    text = repr(LigerRMSNorm(12, eps=1e-5, offset=1.0, casting_mode="gemma", init_fn="zeros", in_place=False))
    for expected in ("(12,)", "eps=1e-05", "offset=1.0", "casting_mode=gemma", "in_place=False"):
        assert expected in text


# No elementwise affine (W=None) and row_mode ------------------------------------------------------------------
class NoAffineRMSNorm(torch.nn.Module):
    """``x / rms(x)`` with the arithmetic in fp32 ("llama", "gemma") or in the input dtype ("none")."""

    def __init__(self, eps, upcast):
        super().__init__()
        self.eps = eps
        self.upcast = upcast

    def forward(self, x):
        h = x.float() if self.upcast else x
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


NO_AFFINE_MODES = [
    pytest.param("llama", True, torch.float32, *FP32_TOL, id="llama-fp32"),
    pytest.param("gemma", True, torch.float32, *FP32_TOL, id="gemma-fp32"),
    pytest.param("none", False, torch.float32, *FP32_TOL, id="none-fp32"),
    pytest.param("none", False, torch.float16, 1e-2, 1e-2, id="none-fp16"),
    pytest.param(
        "llama",
        True,
        torch.bfloat16,
        2e-2,
        2e-2,
        id="llama-bf16",
        marks=pytest.mark.skipif(not supports_bfloat16(), reason="bf16 needs an Ampere+ GPU (no interpreter)"),
    ),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("casting_mode, upcast, dtype, atol, rtol", NO_AFFINE_MODES)
@pytest.mark.parametrize("in_place", [True, False])
def test_no_elementwise_affine_matches_reference(shape, casting_mode, upcast, dtype, atol, rtol, in_place):
    set_seed(7)
    hidden = shape[-1]
    # offset has no weight to shift without an affine: it must not change the result.
    liger = LigerRMSNorm(
        hidden, eps=EPS, offset=1.0, casting_mode=casting_mode, in_place=in_place, elementwise_affine=False
    )
    assert liger.weight is None and list(liger.parameters()) == []
    reference = NoAffineRMSNorm(EPS, upcast)

    x = torch.randn(shape, device=device, dtype=dtype)
    x_ref = x.clone().requires_grad_(True)
    x_liger = x.clone().requires_grad_(True)
    y_ref = reference(x_ref)
    y_liger = liger.to(device)(x_liger)
    assert y_liger.dtype == dtype
    assert_verbose_allclose(y_liger, y_ref, atol=atol, rtol=rtol, extra_info="[y]")

    dy = torch.randn_like(y_ref)
    y_ref.backward(dy)
    y_liger.backward(dy.clone())
    assert_verbose_allclose(x_liger.grad, x_ref.grad, atol=atol, rtol=rtol, extra_info="[dx]")


def test_function_without_weight_returns_no_weight_gradient():
    set_seed(8)
    x = torch.randn(5, 3, 37, device=device)
    results = []
    for fn in (liger_rms_norm, LigerRMSNormFunction.apply):
        x_leaf = x.clone().requires_grad_(True)
        y = fn(x_leaf, None, EPS, 0.0, "gemma", False)
        y.backward(torch.ones_like(y))
        results.append((y.detach(), x_leaf.grad))
    for functional, direct in zip(*results):
        assert torch.equal(functional, direct)
    _, x2d, rstd, block_size, num_warps, mode = rms_norm_forward(x, None, EPS, 0.0, "gemma")
    dx, dw = rms_norm_backward(torch.ones_like(x), x2d, None, rstd, 0.0, mode, block_size, num_warps, False)
    assert dw is None
    assert torch.equal(dx, results[0][1])


@pytest.mark.parametrize("row_mode", [None, True, False])
@pytest.mark.parametrize("elementwise_affine", [True, False])
def test_row_mode_is_accepted_and_changes_nothing(row_mode, elementwise_affine):
    set_seed(9)
    x = torch.randn(7, 5, 64, device=device)
    dy = torch.randn_like(x)
    outputs = []
    for mode in (row_mode, None):
        norm = LigerRMSNorm(64, row_mode=mode, elementwise_affine=elementwise_affine, in_place=False).to(device)
        x_leaf = x.clone().requires_grad_(True)
        y = norm(x_leaf)
        y.backward(dy)
        outputs.append((y.detach(), x_leaf.grad) + ((norm.weight.grad,) if elementwise_affine else ()))
    for first, second in zip(*outputs):
        assert torch.equal(first, second)
    w = torch.ones(64, device=device) if elementwise_affine else None
    assert torch.equal(liger_rms_norm(x, w, EPS, row_mode=row_mode), LigerRMSNormFunction.apply(x, w, EPS))


def test_no_affine_repr_and_state_dict():
    norm = LigerRMSNorm(12, elementwise_affine=False, row_mode=True)
    assert dict(norm.state_dict()) == {}
    text = repr(norm)
    for expected in ("(12,)", "elementwise_affine=False", "row_mode=True"):
        assert expected in text
