import pytest
import torch
import torch.nn.functional as F

from transformers.models.llama.configuration_llama import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaMLP

from liger_kernel.ops.swiglu import LigerSiLUMulFunction
from liger_kernel.ops.swiglu import swiglu_backward
from liger_kernel.ops.swiglu import swiglu_forward
from liger_kernel.transformers.functional import liger_swiglu
from liger_kernel.transformers.swiglu import LigerBlockSparseTop2MLP
from liger_kernel.transformers.swiglu import LigerExperts
from liger_kernel.transformers.swiglu import LigerFalconH1SwiGLUMLP
from liger_kernel.transformers.swiglu import LigerPhi3SwiGLUMLP
from liger_kernel.transformers.swiglu import LigerSwiGLUMLP
from test.utils import assert_verbose_allclose
from test.utils import infer_device
from test.utils import set_seed
from test.utils import supports_bfloat16

device = infer_device()
ON_GPU = device != "cpu"

# (batch, seq, hidden, intermediate): small, odd and prime widths under the interpreter; Llama 2 / Llama 3
# MLP widths on an accelerator.
if ON_GPU:
    MLP_SHAPES = [(2, 256, 4096, 11008), (1, 128, 4096, 14336), (3, 67, 127, 331)]
else:
    MLP_SHAPES = [(2, 3, 32, 64), (1, 5, 31, 47), (2, 2, 16, 127)]

# (shape of a and b) for the raw function.
if ON_GPU:
    ACT_SHAPES = [(4, 1024, 11008), (2, 333, 14336), (7, 127)]
else:
    ACT_SHAPES = [(3, 7, 127), (5, 64), (2, 1, 31), (1, 1)]

DTYPES = [
    pytest.param(torch.float32, 1e-5, 1e-5, id="fp32"),
    pytest.param(
        torch.bfloat16,
        1e-2,
        1e-2,
        id="bf16",
        marks=pytest.mark.skipif(not supports_bfloat16(), reason="bf16 needs an Ampere+ GPU (no interpreter)"),
    ),
]


def _llama_config(hidden_size, intermediate_size, hidden_act="silu", mlp_bias=False):
    return LlamaConfig(
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        hidden_act=hidden_act,
        mlp_bias=mlp_bias,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=2,  # only the MLP is used; RoPE validation wants an even head size whatever hidden_size is
        vocab_size=32,
    )


def _run_mlp(mlp, x, dy):
    x = x.clone().requires_grad_(True)
    y = mlp(x)
    y.backward(dy)
    grads = {name: getattr(mlp, name).weight.grad for name in ("gate_proj", "up_proj", "down_proj")}
    return {"y": y.detach(), "dx": x.grad, **grads}


@pytest.mark.parametrize("bsz, seq_len, hidden_size, intermediate_size", MLP_SHAPES)
def test_liger_swiglu_mlp_matches_hf_llama_mlp_forward_and_backward_fp32(bsz, seq_len, hidden_size, intermediate_size):
    set_seed(0)
    config = _llama_config(hidden_size, intermediate_size)
    hf_mlp = LlamaMLP(config).to(device)
    liger_mlp = LigerSwiGLUMLP(config).to(device)
    liger_mlp.load_state_dict(hf_mlp.state_dict())

    x = torch.randn(bsz, seq_len, hidden_size, device=device)
    dy = torch.randn(bsz, seq_len, hidden_size, device=device)
    expected = _run_mlp(hf_mlp, x, dy)
    actual = _run_mlp(liger_mlp, x, dy)
    # Only the activation differs between the two; the fp32 matmuls around it only accumulate its 1-ulp changes.
    for name in expected:
        assert_verbose_allclose(actual[name], expected[name], atol=1e-5, rtol=1e-4, extra_info=f"[{name}]")


@pytest.mark.skipif(not supports_bfloat16(), reason="bf16 needs an Ampere+ GPU (no interpreter)")
@pytest.mark.parametrize("bsz, seq_len, hidden_size, intermediate_size", MLP_SHAPES)
def test_liger_swiglu_mlp_bf16_is_as_accurate_as_hf_llama_mlp(bsz, seq_len, hidden_size, intermediate_size):
    # bf16 weight gradients of HF and Liger differ by an ulp or two of values up to ~20 (the activation
    # gradient is rounded at different points), so each is measured against fp32 arithmetic on the same
    # bf16-representable inputs instead: Liger must be at least about as accurate as HF.
    set_seed(0)
    config = _llama_config(hidden_size, intermediate_size)
    hf_mlp = LlamaMLP(config).to(device=device, dtype=torch.bfloat16)
    liger_mlp = LigerSwiGLUMLP(config).to(device=device, dtype=torch.bfloat16)
    liger_mlp.load_state_dict(hf_mlp.state_dict())
    fp32_mlp = LlamaMLP(config).to(device)
    fp32_mlp.load_state_dict(hf_mlp.state_dict())

    x = torch.randn(bsz, seq_len, hidden_size, device=device, dtype=torch.bfloat16)
    dy = torch.randn(bsz, seq_len, hidden_size, device=device, dtype=torch.bfloat16)
    truth = _run_mlp(fp32_mlp, x.float(), dy.float())
    hf = _run_mlp(hf_mlp, x, dy)
    liger = _run_mlp(liger_mlp, x, dy)
    for name, exact in truth.items():
        hf_error = (hf[name].float() - exact).abs().max().item()
        liger_error = (liger[name].float() - exact).abs().max().item()
        assert liger_error <= 1.5 * hf_error + 1e-3, f"[{name}] liger error {liger_error} vs HF error {hf_error}"
    assert_verbose_allclose(liger["y"], hf["y"], atol=1e-2, rtol=1e-2, extra_info="[y]")


@pytest.mark.parametrize("shape", ACT_SHAPES)
@pytest.mark.parametrize("dtype, atol, rtol", DTYPES)
def test_silu_mul_function_matches_torch_silu_times_b(shape, dtype, atol, rtol):
    set_seed(1)
    a = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
    a_ref = a.detach().clone().requires_grad_(True)
    b_ref = b.detach().clone().requires_grad_(True)

    # Clones, because backward writes the gradients into the buffers of the tensors passed in.
    c = LigerSiLUMulFunction.apply(a.clone(), b.clone())
    c_ref = F.silu(a_ref) * b_ref
    assert_verbose_allclose(c, c_ref, atol=atol, rtol=rtol, extra_info="[c]")

    dc = torch.randn_like(c_ref)
    c.backward(dc)
    c_ref.backward(dc)
    assert_verbose_allclose(a.grad, a_ref.grad, atol=atol, rtol=rtol, extra_info="[da]")
    assert_verbose_allclose(b.grad, b_ref.grad, atol=atol, rtol=rtol, extra_info="[db]")


def test_silu_mul_function_accepts_non_contiguous_inputs():
    set_seed(2)
    a = torch.randn(31, 6, device=device).t()
    b = torch.randn(31, 6, device=device).t()
    assert not a.is_contiguous()
    a_ref = a.clone().requires_grad_(True)
    b_ref = b.clone().requires_grad_(True)
    a.requires_grad_(True)
    b.requires_grad_(True)

    c = LigerSiLUMulFunction.apply(a, b)
    c_ref = F.silu(a_ref) * b_ref
    assert_verbose_allclose(c, c_ref, atol=1e-6, rtol=1e-5)
    c.sum().backward()
    c_ref.sum().backward()
    assert_verbose_allclose(a.grad, a_ref.grad, atol=1e-6, rtol=1e-5)
    assert_verbose_allclose(b.grad, b_ref.grad, atol=1e-6, rtol=1e-5)


def test_swiglu_backward_writes_gradients_into_input_buffers():
    set_seed(3)
    a = torch.randn(4, 47, device=device)
    b = torch.randn(4, 47, device=device)
    expected_db = F.silu(a) * 1.0
    a2d, b2d, _ = swiglu_forward(a, b)
    da, db = swiglu_backward(a2d, b2d, torch.ones_like(a))
    assert da.data_ptr() == a.data_ptr()
    assert db.data_ptr() == b.data_ptr()
    assert_verbose_allclose(db, expected_db, atol=1e-6, rtol=1e-5)


def test_swiglu_forward_rejects_mismatched_shapes():
    a = torch.randn(2, 8, device=device)
    b = torch.randn(2, 9, device=device)
    with pytest.raises(ValueError, match="same shape"):
        swiglu_forward(a, b)


def test_functional_liger_swiglu_equals_function_apply():
    set_seed(4)
    a = torch.randn(3, 5, 33, device=device)
    b = torch.randn(3, 5, 33, device=device)
    grads = []
    outputs = []
    for fn in (liger_swiglu, LigerSiLUMulFunction.apply):
        a_leaf = a.clone().requires_grad_(True)
        b_leaf = b.clone().requires_grad_(True)
        out = fn(a_leaf.clone(), b_leaf.clone())
        out.backward(torch.ones_like(out))
        outputs.append(out.detach())
        grads.append((a_leaf.grad, b_leaf.grad))
    assert torch.equal(outputs[0], outputs[1])
    assert torch.equal(grads[0][0], grads[1][0])
    assert torch.equal(grads[0][1], grads[1][1])


@pytest.mark.parametrize("hidden_act", ["gelu", "relu"])
def test_liger_swiglu_mlp_rejects_non_silu_activation(hidden_act):
    with pytest.raises(ValueError, match="hidden_act"):
        LigerSwiGLUMLP(_llama_config(16, 32, hidden_act=hidden_act))


def test_liger_swiglu_mlp_accepts_swish_and_rejects_bias():
    assert LigerSwiGLUMLP(_llama_config(16, 32, hidden_act="swish")).gate_proj.bias is None
    with pytest.raises(ValueError, match="mlp_bias"):
        LigerSwiGLUMLP(_llama_config(16, 32, mlp_bias=True))


def test_liger_swiglu_mlp_state_dict_keys_match_hf_llama_mlp():
    config = _llama_config(16, 40)
    liger_keys = set(LigerSwiGLUMLP(config).state_dict())
    hf_keys = set(LlamaMLP(config).state_dict())
    assert liger_keys == hf_keys
    assert "intermediate_size=40" in repr(LigerSwiGLUMLP(config))


# Gate / down multipliers (Falcon-H1) -------------------------------------------------------------------------
MULTIPLIERS = [(0.7, 1.3), (1.5, 0.5), (1.0, 2.0), (0.25, 1.0)]
# Against an fp32 reference, bf16 output carries up to three roundings (silu, the product, the down multiplier).
SCALED_DTYPES = [
    pytest.param(torch.float32, 1e-5, 1e-5, id="fp32"),
    pytest.param(
        torch.bfloat16,
        2e-2,
        2e-2,
        id="bf16",
        marks=pytest.mark.skipif(not supports_bfloat16(), reason="bf16 needs an Ampere+ GPU (no interpreter)"),
    ),
]


@pytest.mark.parametrize("shape", ACT_SHAPES)
@pytest.mark.parametrize("gate_multiplier, down_multiplier", MULTIPLIERS)
@pytest.mark.parametrize("dtype, atol, rtol", SCALED_DTYPES)
def test_silu_mul_function_with_multipliers_matches_torch(shape, gate_multiplier, down_multiplier, dtype, atol, rtol):
    set_seed(5)
    a = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
    a_ref = a.detach().float().requires_grad_(True)
    b_ref = b.detach().float().requires_grad_(True)

    c = LigerSiLUMulFunction.apply(a.clone(), b.clone(), gate_multiplier, down_multiplier)
    c_ref = F.silu(a_ref * gate_multiplier) * b_ref * down_multiplier
    assert c.dtype == dtype
    assert_verbose_allclose(c, c_ref, atol=atol, rtol=rtol, extra_info="[c]")

    dc = torch.randn_like(c)
    c.backward(dc)
    c_ref.backward(dc.float())
    assert_verbose_allclose(a.grad, a_ref.grad, atol=atol, rtol=rtol, extra_info="[da]")
    assert_verbose_allclose(b.grad, b_ref.grad, atol=atol, rtol=rtol, extra_info="[db]")


def test_unit_multipliers_are_bit_identical_to_plain_swiglu():
    set_seed(6)
    a = torch.randn(5, 67, device=device)
    b = torch.randn(5, 67, device=device)
    dc = torch.randn(5, 67, device=device)
    results = []
    for extra in ((), (1.0, 1.0), (1, 1)):
        a_leaf = a.clone().requires_grad_(True)
        b_leaf = b.clone().requires_grad_(True)
        c = LigerSiLUMulFunction.apply(a_leaf.clone(), b_leaf.clone(), *extra)
        c.backward(dc)
        results.append((c.detach(), a_leaf.grad, b_leaf.grad))
    for other in results[1:]:
        for expected, actual in zip(results[0], other):
            assert torch.equal(actual, expected)


def test_functional_liger_swiglu_passes_multipliers():
    set_seed(7)
    a = torch.randn(3, 41, device=device)
    b = torch.randn(3, 41, device=device)
    expected = LigerSiLUMulFunction.apply(a.clone(), b.clone(), 0.5, 3.0)
    assert torch.equal(liger_swiglu(a.clone(), b.clone(), gate_multiplier=0.5, down_multiplier=3.0), expected)
    assert_verbose_allclose(expected, F.silu(a * 0.5) * b * 3.0, atol=1e-5, rtol=1e-5)


# Other model families' MLPs ----------------------------------------------------------------------------------
def _run_module(module, x, dy, *extra_inputs):
    """Output, input gradient and every parameter gradient of ``module`` on a copy of ``x``."""
    x = x.clone().requires_grad_(True)
    y = module(x, *extra_inputs)
    y.backward(dy)
    return {"y": y.detach(), "dx": x.grad, **{name: p.grad for name, p in module.named_parameters()}}


def _assert_same_results(actual, expected, atol=1e-5, rtol=1e-4):
    """``atol`` holds for the output and the input gradient; a weight's gradient sums over every row (token), so
    its absolute error grows with the square root of their count: an fp32 rounding apart in the activation's
    gradient came to 1.3e-5 on a few of 45M weight-gradient elements at 512 tokens (H200)."""
    assert actual.keys() == expected.keys()
    rows = expected["y"].numel() // expected["y"].shape[-1]
    for name in expected:
        summed = name not in ("y", "dx")
        tolerance = atol * rows**0.5 if summed else atol
        assert_verbose_allclose(actual[name], expected[name], atol=tolerance, rtol=rtol, extra_info=f"[{name}]")


@pytest.mark.parametrize("bsz, seq_len, hidden_size, intermediate_size", MLP_SHAPES)
def test_liger_phi3_mlp_matches_hf_phi3_mlp(bsz, seq_len, hidden_size, intermediate_size):
    from transformers.models.phi3.configuration_phi3 import Phi3Config
    from transformers.models.phi3.modeling_phi3 import Phi3MLP

    set_seed(8)
    config = Phi3Config(hidden_size=hidden_size, intermediate_size=intermediate_size, hidden_act="silu")
    hf_mlp = Phi3MLP(config).to(device)
    liger_mlp = LigerPhi3SwiGLUMLP(config).to(device)
    liger_mlp.load_state_dict(hf_mlp.state_dict())
    x = torch.randn(bsz, seq_len, hidden_size, device=device)
    dy = torch.randn(bsz, seq_len, hidden_size, device=device)
    _assert_same_results(_run_module(liger_mlp, x, dy), _run_module(hf_mlp, x, dy))


class _MixtralExpertReference(torch.nn.Module):
    """One Mixtral expert as transformers < 5 wrote it: w2(silu(w1(x)) * w3(x))."""

    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.w1 = torch.nn.Linear(hidden_size, intermediate_size, bias=False)
        self.w2 = torch.nn.Linear(intermediate_size, hidden_size, bias=False)
        self.w3 = torch.nn.Linear(hidden_size, intermediate_size, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


@pytest.mark.parametrize("bsz, seq_len, hidden_size, intermediate_size", MLP_SHAPES)
def test_liger_block_sparse_top2_mlp_matches_a_mixtral_expert(bsz, seq_len, hidden_size, intermediate_size):
    set_seed(9)
    config = _llama_config(hidden_size, intermediate_size)
    reference = _MixtralExpertReference(hidden_size, intermediate_size).to(device)
    liger_mlp = LigerBlockSparseTop2MLP(config).to(device)
    liger_mlp.load_state_dict(reference.state_dict())
    x = torch.randn(bsz, seq_len, hidden_size, device=device)
    dy = torch.randn(bsz, seq_len, hidden_size, device=device)
    _assert_same_results(_run_module(liger_mlp, x, dy), _run_module(reference, x, dy))


@pytest.mark.parametrize("bsz, seq_len, hidden_size, intermediate_size", MLP_SHAPES)
@pytest.mark.parametrize("num_experts, top_k", [(4, 2), (3, 1)])
def test_liger_experts_match_hf_mixtral_experts(bsz, seq_len, hidden_size, intermediate_size, num_experts, top_k):
    modeling_mixtral = pytest.importorskip("transformers.models.mixtral.modeling_mixtral")
    if not hasattr(modeling_mixtral, "MixtralExperts"):
        pytest.skip("MixtralExperts (3-D expert weights) exists from transformers v5 on")
    from transformers.models.mixtral.configuration_mixtral import MixtralConfig

    set_seed(10)
    config = MixtralConfig(
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_local_experts=num_experts,
        num_experts_per_tok=top_k,
        hidden_act="silu",
        experts_implementation="eager",
    )
    hf_experts = modeling_mixtral.MixtralExperts(config).to(device)
    liger_experts = LigerExperts(config).to(device)
    with torch.no_grad():
        for param in hf_experts.parameters():
            param.copy_(torch.randn_like(param) / hidden_size**0.5)
    liger_experts.load_state_dict(hf_experts.state_dict())

    tokens = bsz * seq_len
    x = torch.randn(tokens, hidden_size, device=device)
    dy = torch.randn(tokens, hidden_size, device=device)
    router = torch.randn(tokens, num_experts, device=device).softmax(dim=-1)
    top_k_weights, top_k_index = router.topk(top_k, dim=-1)
    expected = _run_module(hf_experts, x, dy, top_k_index, top_k_weights)
    actual = _run_module(liger_experts, x, dy, top_k_index, top_k_weights)
    _assert_same_results(actual, expected)


class _FalconH1MLPReference(torch.nn.Module):
    def __init__(self, hidden_size, intermediate_size, gate_multiplier, down_multiplier):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = torch.nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = torch.nn.Linear(intermediate_size, hidden_size, bias=False)
        self.gate_multiplier = gate_multiplier
        self.down_multiplier = down_multiplier

    def forward(self, x):
        hidden = F.silu(self.gate_proj(x) * self.gate_multiplier) * self.up_proj(x)
        return self.down_proj(hidden) * self.down_multiplier


@pytest.mark.parametrize("bsz, seq_len, hidden_size, intermediate_size", MLP_SHAPES)
@pytest.mark.parametrize("gate_multiplier, down_multiplier", [(0.7, 1.3), (2.0, 0.25)])
def test_liger_falcon_h1_mlp_matches_reference(
    bsz, seq_len, hidden_size, intermediate_size, gate_multiplier, down_multiplier
):
    from transformers.models.falcon_h1.configuration_falcon_h1 import FalconH1Config

    set_seed(11)
    config = FalconH1Config(
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        mlp_multipliers=[gate_multiplier, down_multiplier],
    )
    reference = _FalconH1MLPReference(hidden_size, intermediate_size, gate_multiplier, down_multiplier).to(device)
    liger_mlp = LigerFalconH1SwiGLUMLP(config).to(device)
    liger_mlp.load_state_dict(reference.state_dict())
    x = torch.randn(bsz, seq_len, hidden_size, device=device)
    dy = torch.randn(bsz, seq_len, hidden_size, device=device)
    _assert_same_results(_run_module(liger_mlp, x, dy), _run_module(reference, x, dy))
    assert "gate_multiplier=" in repr(liger_mlp)


@pytest.mark.parametrize("module_class", [LigerPhi3SwiGLUMLP, LigerBlockSparseTop2MLP, LigerExperts])
def test_other_mlps_reject_non_silu_activation(module_class):
    config = _llama_config(16, 32, hidden_act="gelu")
    config.num_local_experts = 2
    with pytest.raises(ValueError, match="hidden_act"):
        module_class(config)
