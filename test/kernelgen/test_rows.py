"""Tier-2 synthesis: row programs lowered from references and derived in reverse mode, checked on float64 torch.

The derived statements run on torch (``torch_tl.TorchTL``) over whole rows; forward and every gradient must match
torch.autograd on the reference. The generated Triton kernels are tested by their own generated tests
(test_row_kernels.py runs them).
"""

import inspect
import re
import textwrap

import pytest
import torch

from test.kernelgen.test_analyze import TIER2_BUILTINS
from test.kernelgen.torch_tl import run_statements
from tools.kernelgen.analyze import AnalyzeError
from tools.kernelgen.analyze import analyze
from tools.kernelgen.derivation import row_math
from tools.kernelgen.float64_casts import kept_float64
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.synth import parse_formula
from tools.kernelgen.synth.rows import RowProgramError
from tools.kernelgen.synth.rows import synthesize_rows

# References in the styles people write, beside the built-ins: functions and modules, torch.* / F.* / methods,
# library calls and the same math by hand, Llama-style casts, extra per-row outputs, scalar parameters.
STYLES = textwrap.dedent(
    """
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    def functional_layer_norm(x, eps: float = 1e-5):
        return F.layer_norm(x, (x.shape[-1],), eps=eps)


    def method_softmax(x):
        return x.softmax(dim=-1)


    class WrappedLayerNorm(nn.Module):
        def __init__(self, hidden_size):
            super().__init__()
            self.norm = nn.LayerNorm(hidden_size)

        def forward(self, x):
            return self.norm(x)


    class FunctionalRMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))
            self.eps = eps

        def forward(self, x):
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


    def standardize(x):
        return (x - x.mean(dim=-1, keepdim=True)) / (x.std(dim=-1, keepdim=True) + 1e-6)


    def masked_inf_softmax(scores, keep):
        # attention's mask: a masked fill of -inf, which the softmax turns into exact zeros
        return scores.masked_fill(keep == 0, float("-inf")).softmax(dim=-1)


    def abs_sum_scale(x):
        # the magnitude of a row sum: |s|' is sign(s), which sympy leaves half unevaluated
        return x / (x.sum(dim=-1, keepdim=True).abs() + 1.0)


    def logsumexp_rows(x):
        return torch.logsumexp(x, -1)


    class NormWithRstd(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.eps = eps

        def forward(self, x):
            input_dtype = x.dtype
            rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
            y = (x.float() * rstd).to(input_dtype) * self.weight
            return y, rstd


    def temperature_softmax(x, temperature: float = 2.0):
        z = x / temperature
        return torch.exp(z - torch.logsumexp(z, dim=-1, keepdim=True))


    def max_shift(x):
        return x - x.amax(dim=-1, keepdim=True)


    def logaddexp_rms(x, gate, eps: float = 1e-6):
        # logaddexp as a function and a method inside a row statistic
        h = torch.logaddexp(x, gate) + 0.5 * x.logaddexp2(gate)
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)


    class PolyNorm(nn.Module):
        # upstream's PolyNorm: three weights and a bias, each weight read by its index
        def __init__(self, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(3) / 3)
            self.bias = nn.Parameter(torch.zeros(1))
            self.eps = eps

        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            return (
                self.weight[0] * self._norm(x**3)
                + self.weight[1] * self._norm(x**2)
                + self.weight[2] * self._norm(x)
                + self.bias
            )


    class IndexedPolyNorm(nn.Module):
        # the weights through a local name, in a loop and from the end, the norm as F.rms_norm in fp32
        def __init__(self, hidden_size, eps=1e-5):
            super().__init__()
            self.weight = nn.Parameter(torch.full((3,), 0.25))
            self.bias = nn.Parameter(torch.full((1,), 0.1))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            w = self.weight
            x = hidden_states.float()
            terms = [w[i] * F.rms_norm(x ** (3 - i), (x.shape[-1],), eps=self.variance_epsilon) for i in range(2)]
            out = terms[0] + terms[1] + w[-1] * F.rms_norm(x, (x.shape[-1],), eps=self.variance_epsilon)
            return (out + self.bias).to(hidden_states.dtype)


    def polynorm(x, w0: float = 0.5, w1: float = 0.3, eps: float = 1e-6):
        def rms(t):
            return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps)

        return w0 * rms(x) + w1 * rms(x * x)


    class ScaledRMSNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.scale = nn.Parameter(torch.full((), 0.5))
            self.eps = eps

        def forward(self, x):
            return self.scale * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


    def centered_l1(x):
        centered = x - x.mean(-1, keepdim=True)
        return centered / centered.abs().sum(-1, keepdim=True)


    class HeldEpsNorm(nn.Module):
        # eps set without a constructor argument, and a hyper-parameter of forward's own
        def __init__(self, dim):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(dim))
            self.eps = 1e-6

        def forward(self, x, offset: float = 0.0):
            shifted = x - offset
            return shifted * torch.rsqrt(shifted.pow(2).mean(-1, keepdim=True) + self.eps) * self.scale


    class BufferGainNorm(nn.Module):
        # constants held as tensors of one value: a buffer set from the constructor, a plain tensor attribute
        def __init__(self, hidden_size, gain: float = 2.0):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.register_buffer("gain", torch.tensor(gain))
            self.eps = torch.tensor([1e-6])

        def forward(self, x):
            return self.gain * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


    def mean_by_size(x):
        # the row length as the reference reads it: x.size(-1), x.shape[-1]
        return x - x.sum(dim=-1, keepdim=True) / x.size(-1) + torch.tanh(x * x.shape[-1] ** -0.5)


    def l1_normalize(x):
        # F.normalize with another p: the row's sum of magnitudes
        return F.normalize(x, p=1.0, dim=-1)


    def var_mean_norm(x, eps: float = 1e-5):
        # both statistics from one call, a tuple the reference unpacks
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return (x - mean) * torch.rsqrt(var + eps)


    class StdMeanNorm(nn.Module):
        # torch's default (unbiased) std, indexed instead of unpacked, in fp32
        def __init__(self, hidden_size, eps: float = 1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.eps = eps

        def forward(self, x):
            stats = torch.std_mean(x.float(), dim=-1, keepdim=True)
            return (self.weight * (x.float() - stats[1]) / (stats[0] + self.eps)).to(x.dtype)


    class CosineGate(nn.Module):
        # one value per row from two inputs: their cosine, scaled by a learnable scalar
        def __init__(self, hidden_size):
            super().__init__()
            self.temperature = nn.Parameter(torch.tensor([2.0]))

        def forward(self, q, k):
            return self.temperature * F.cosine_similarity(q.float(), k.float(), dim=-1).to(q.dtype)


    class DtypeBranchNorm(nn.Module):
        # the weight's dtype decides a cast in Python control flow (T5's layer norm does so)
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            if self.weight.dtype != torch.float32:
                hidden_states = hidden_states.to(self.weight.dtype)
            return self.weight * hidden_states


    class WideWeightRMSNorm(nn.Module):
        # the weight held as (1, 1, H), as LayerScale-style code keeps it
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(1, 1, hidden_size))
            self.eps = eps

        def forward(self, x):
            variance = x.float().pow(2).mean(-1, keepdim=True)
            return (x.float() * torch.rsqrt(variance + self.eps)).to(x.dtype) * self.weight


    def detached_shift_log_softmax(x):
        # the max shift detached, as numerically careful code writes it: it stops no gradient that counts
        x = x - x.max(dim=-1, keepdim=True).values.detach()
        return x - torch.log(torch.exp(x).sum(-1, keepdim=True))


    def max_abs_scaled_stopped(x):
        # a scale detached where its gradient does not cancel: it is a constant of the gradient, as autograd has it
        return x / x.abs().amax(-1, keepdim=True).detach()


    def numpy_keywords_rms(x, eps: float = 1e-6):
        # NumPy's keyword spellings, which torch's reductions take too
        return x * (torch.mean(torch.square(x), axis=-1, keepdims=True) + eps) ** -0.5


    class SoftminOverNorm(nn.Module):
        # nn.Softmin of the row over its torch.linalg.norm (a vector norm of one dim)
        def __init__(self, tau: float = 0.5):
            super().__init__()
            self.tau = tau
            self.softmin = nn.Softmin(dim=-1)

        def forward(self, x):
            return self.softmin(x / (self.tau * torch.linalg.norm(x, dim=-1, keepdim=True)))


    class MambaStyleGatedNorm(nn.Module):
        # the gate defaults to None and is read as a tensor where given: an input of the kernel
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states, gate=None):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            if gate is not None:
                hidden_states = hidden_states * nn.functional.silu(gate.to(torch.float32))
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            return self.weight * hidden_states.to(input_dtype)


    class CohereStyleLayerNorm(nn.Module):
        # the size defaults to None (a model always passes it); the mean's centring written out, no bias
        def __init__(self, hidden_size=None, eps=1e-5, bias=False):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            mean = hidden_states.mean(-1, keepdim=True)
            variance = (hidden_states - mean).pow(2).mean(-1, keepdim=True)
            hidden_states = (hidden_states - mean) * torch.rsqrt(variance + self.variance_epsilon)
            return (self.weight.to(torch.float32) * hidden_states).to(input_dtype)


    def cosine_logits(x, scale: float = 10.0):
        # rounded back to the input's dtype in the forward only: its backward reads no dtype
        return scale * F.normalize(x.float(), p=2, dim=-1, eps=1e-12).to(x.dtype)


    class ClipLayerNorm(nn.LayerNorm):
        # CLIP's: torch's LayerNorm on an fp32 copy, the result cast back (parameters of the module's own dtype)
        def forward(self, x: torch.Tensor):
            orig_type = x.dtype
            ret = super().forward(x.type(torch.float32))
            return ret.type(orig_type)


    def no_grad_absmax(x):
        # a scale computed without gradient: a constant of the math, as .detach() makes it
        with torch.no_grad():
            scale = x.abs().amax(dim=-1, keepdim=True)
        return x / scale


    class CosineRows(nn.Module):
        # F.normalize at its default dim=1, written for [rows, columns]: the kernel takes 2-d inputs only
        def __init__(self, hidden_size):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))

        def forward(self, x):
            return F.normalize(x) * self.weight


    class SqrtSizeNorm(nn.Module):
        # lucidrains' RMSNorm: the size read as a number in forward (fx reads self.dim as the int it was built with)
        def __init__(self, dim):
            super().__init__()
            self.dim = dim
            self.gamma = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            return F.normalize(x, dim=-1) * math.sqrt(self.dim) * self.gamma


    class InitScaleNorm(nn.Module):
        # the same with the scale computed in __init__ from the size
        def __init__(self, dim):
            super().__init__()
            self.scale = dim**0.5
            self.g = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            return F.normalize(x, dim=-1) * self.scale * self.g


    class SizeMeanRMSNorm(nn.Module):
        # the mean as a sum over the stored hidden size
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.hidden_size = hidden_size
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(hidden_size))

        def forward(self, x):
            return x * torch.rsqrt((x * x).sum(-1, keepdim=True) / self.hidden_size + self.eps) * self.weight


    def lp_normalize(x, p: float = 3.0, eps: float = 1e-12):
        # the norm's order a hyper-parameter: |x| ** p summed, its p-th root (it was refused)
        return F.normalize(x, p=p, dim=-1, eps=eps)
    """
)
STYLE_ENTRIES = [
    "abs_sum_scale",
    "lp_normalize",
    "functional_layer_norm",
    "method_softmax",
    "WrappedLayerNorm",
    "FunctionalRMSNorm",
    "standardize",
    "logsumexp_rows",
    "NormWithRstd",
    "temperature_softmax",
    "max_shift",
    "polynorm",
    "ScaledRMSNorm",
    "centered_l1",
    "HeldEpsNorm",
    "mean_by_size",
    "BufferGainNorm",
    "var_mean_norm",
    "StdMeanNorm",
    "l1_normalize",
    "WideWeightRMSNorm",
    "CosineGate",
    "DtypeBranchNorm",
    "logaddexp_rms",
    "PolyNorm",
    "IndexedPolyNorm",
    "cosine_logits",
    "detached_shift_log_softmax",
    "max_abs_scaled_stopped",
    "numpy_keywords_rms",
    "SoftminOverNorm",
    "MambaStyleGatedNorm",
    "CohereStyleLayerNorm",
    "ClipLayerNorm",
    "CosineRows",
    "no_grad_absmax",
    "SqrtSizeNorm",
    "InitScaleNorm",
    "SizeMeanRMSNorm",
]


@pytest.fixture(scope="module")
def styles_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("refs") / "styles.py"
    path.write_text(STYLES)
    return path


def _reference_call(profile, params: dict[str, torch.Tensor], cols: int):
    namespace = {}
    exec(compile(profile.reference.source, "<reference>", "exec"), namespace)
    entry = namespace[profile.reference.entry]
    if profile.reference.kind != "module":
        return entry
    sized = profile.module.size_param in inspect.signature(entry).parameters  # PolyNorm takes no size
    module = entry(**({profile.module.size_param: cols} if sized else {})).double()
    elements = {}  # parameter vectors read element by element (self.weight[0]): attribute -> {index: name}
    for param in profile.parameters:
        held, _, index = (param.attribute or param.name).partition("[")
        if index:
            elements.setdefault(held, {})[int(index.rstrip("]"))] = param.name
            continue
        owner, _, attribute = held.rpartition(".")
        setattr(module.get_submodule(owner) if owner else module, attribute, params[param.name])
    for held, names in elements.items():
        # The vector made of the test's scalars, so that each element's gradient reaches its scalar.
        owner, _, attribute = held.rpartition(".")
        holder = module.get_submodule(owner) if owner else module
        vector = holder._parameters.pop(attribute)
        values = [params[names[i]] if i in names else vector[i].detach() for i in range(vector.shape[0])]
        setattr(holder, attribute, torch.stack(values))
    return module


def _check_against_autograd(profile, rows=5, cols=37, seed=0, degenerate=False, tied=False):
    """``degenerate``: the first row all zeros and the second constant (a zero norm, a zero deviation); ``tied``:
    the first row quantized to a few values, each held by several columns, its maximum and minimum among them."""
    math = row_math(profile)
    rtol, atol = 1e-9, 1e-10
    generator = torch.Generator().manual_seed(seed)
    inputs = {t.name: torch.randn(rows, cols, generator=generator, dtype=torch.float64) for t in profile.inputs}
    if degenerate:
        for value in inputs.values():
            value[0], value[1] = 0.0, 1.5
    if tied:
        for value in inputs.values():
            value[0] = value[0].clamp(-0.5, 0.5).mul(2.0).round()  # -1, 0 and 1, a ReLU'd or quantized row
    params = {}
    for param in profile.parameters:
        shape = (cols,) if param.shape == "channel" else ()
        params[param.name] = torch.nn.Parameter(torch.rand(shape, generator=generator, dtype=torch.float64) + 0.5)
    hypers = {h.name: h.default for h in profile.hyperparameters}
    leaves = {name: value.clone().requires_grad_() for name, value in inputs.items()}
    reference = _reference_call(profile, params, cols)
    args = [leaves[t.name] for t in profile.inputs]
    # A reference that casts to float32 on purpose (Llama, Gemma, CLIP) keeps float64 there.
    with kept_float64(torch.float64):
        expected = reference(*args, **hypers) if profile.reference.kind != "module" else reference(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    grads = [torch.randn(out.shape, generator=generator, dtype=torch.float64) for out in expected]
    differentiable = [leaves[t.name] for t in profile.inputs] + list(params.values())
    expected_grads = torch.autograd.grad(expected, differentiable, grads, allow_unused=True)

    tile = {"mask": torch.ones(rows, cols, dtype=torch.bool), "n_cols": cols, "BLOCK_ROWS": rows, "BLOCK_COLS": cols}
    tile["cols"] = torch.arange(cols).view(1, -1)  # the kernels' column index (x.max(dim).values reads it)
    tile["input_dtype"] = torch.float64  # rounding to the input's dtype: float64 here, so exact
    values = {
        **tile,
        **inputs,
        **{name: p.detach().view(1, -1) if p.dim() else p.detach() for name, p in params.items()},
    }
    values.update(hypers)
    forward = run_statements(math.forward, dict(values))
    for spec, want in zip(profile.outputs, expected):
        got = forward[spec.name]
        torch.testing.assert_close(got.reshape(want.shape), want.detach().to(got.dtype), rtol=rtol, atol=atol)
    # The backward reads the saved statistics and, where it is written in them, the outputs (a softmax's y).
    backward_values = {**values, **{s: forward[s] for s in math.saved + math.reused_outputs}}
    for spec, grad in zip(profile.outputs, grads):
        row_output = spec.name in math.row_outputs
        backward_values[f"grad_{spec.name}"] = grad.reshape(rows, 1) if row_output else grad
    backward = run_statements(math.backward, backward_values)
    names = [t.name for t in profile.inputs] + list(params)
    for name, want in zip(names, expected_grads):
        if want is None and f"grad_{name}" not in backward:
            continue  # an input read only as a condition (a mask's keep == 0) takes no gradient
        got = backward[math.gradient_aliases.get(f"grad_{name}", f"grad_{name}")]
        if name in params:
            got = got.sum(dim=0) if params[name].dim() == 1 else got.sum()
        want = torch.zeros_like(got) if want is None else want
        want = want.to(got.dtype)
        torch.testing.assert_close(got.reshape(want.shape), want, rtol=rtol * 10, atol=atol * 10, msg=f"grad_{name}")
    return math


@pytest.mark.parametrize("name", TIER2_BUILTINS)
def test_builtin_row_programs_match_autograd(name):
    profile = analyze(name, name=f"{name}_gen")
    assert profile.tier == 2 and validate_profile(profile) == []
    _check_against_autograd(profile)


@pytest.mark.parametrize("entry", STYLE_ENTRIES)
def test_references_in_other_styles_match_autograd(styles_path, entry):
    profile = analyze(f"{styles_path}:{entry}", name=f"style_{entry.lower()}")
    assert profile.tier == 2, profile.notes.tier_reason
    assert validate_profile(profile) == []
    _check_against_autograd(profile)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_the_max_shift_of_a_softmax_has_an_exactly_zero_gradient(name):
    profile = analyze(name, name=f"{name}_gen")
    math = row_math(profile)
    (peak,) = [s.name for s in profile.math.statistics if s.reduce == "max"]
    assert math.zero_adjoints == [peak]
    assert not any(f"{peak}_recomputed" in line for line in math.backward)


def test_a_max_that_is_really_used_gets_its_gradient(styles_path):
    profile = analyze(f"{styles_path}:max_shift", name="max_shift")
    math = _check_against_autograd(profile)
    assert math.zero_adjoints == []
    assert any("amax_recomputed = tl.max(" in line for line in math.backward)


def test_ties_of_a_max_split_the_gradient_evenly():
    statistics = [("m", "max", parse_formula("x", ["x"]))]
    math = synthesize_rows(statistics, {"y": parse_formula("x - m", ["x", "m"])}, ["x"])
    rows = torch.tensor([[1.0, 3.0, 3.0, 2.0]], dtype=torch.float64)
    tile = {"mask": torch.ones(1, 4, dtype=torch.bool), "n_cols": 4, "BLOCK_ROWS": 1, "BLOCK_COLS": 4}
    forward = run_statements(math.forward, {**tile, "x": rows})
    grad = run_statements(math.backward, {**tile, "x": rows, "grad_y": torch.ones(1, 4, dtype=torch.float64)})
    reference = rows.clone().requires_grad_()
    (reference - reference.amax(-1, keepdim=True)).backward(torch.ones(1, 4, dtype=torch.float64))
    torch.testing.assert_close(grad["grad_x"], reference.grad)
    assert forward["y"].tolist() == [[-2.0, 0.0, 0.0, -1.0]]


MAX_VALUES = textwrap.dedent(
    """
    import torch


    def min_max_norm(x, eps=0.3):
        lo = x.min(dim=-1, keepdim=True).values
        hi = x.max(dim=-1, keepdim=True).values
        return (x - lo) / (hi - lo + eps)


    def getitem_max(x):
        return x * torch.max(x, dim=-1)[0].unsqueeze(-1)


    def positional_min(x):
        return x * x.min(-1).values[..., None]


    def unpacked_max(x):
        values, _ = x.max(-1, keepdim=True)
        return x / (values + 2.0)


    def max_shifted_softmax(x):
        e = (x - x.max(dim=-1, keepdim=True).values).exp()
        return e / e.sum(-1, keepdim=True)
    """
)


@pytest.mark.parametrize("entry", ["min_max_norm", "getitem_max", "positional_min", "unpacked_max"])
def test_max_values_give_the_gradient_to_the_first_maximal_column_as_torch_does(tmp_path, entry):
    # torch.max(x, dim) returns the first index holding the maximum and its values' backward gives that index the
    # whole gradient; amax splits it between ties. The kernels followed amax: a ReLU'd row got a wrong gradient.
    path = tmp_path / "max_values.py"
    path.write_text(MAX_VALUES)
    profile = analyze(f"{path}:{entry}", name=entry)
    assert profile.tier == 2 and validate_profile(profile) == []
    for seed in range(3):
        _check_against_autograd(profile, seed=seed, tied=True)
    assert not any("recomputed" in line for line in row_math(profile).backward)  # no even split between ties


def test_the_min_max_norm_of_a_tied_row_has_torch_s_gradient(tmp_path):
    path = tmp_path / "max_values.py"
    path.write_text(MAX_VALUES)
    math = row_math(analyze(f"{path}:min_max_norm", name="min_max_norm"))
    x = torch.tensor([[0.0, 0.0, 1.0, 2.0, 2.0]], dtype=torch.float64)  # two minima, two maxima
    grad_y = torch.tensor([[1.0, -2.0, 0.5, 3.0, 1.0]], dtype=torch.float64)
    tile = {"mask": torch.ones(1, 5, dtype=torch.bool), "n_cols": 5, "BLOCK_ROWS": 1, "BLOCK_COLS": 5}
    values = {**tile, "cols": torch.arange(5).view(1, -1), "input_dtype": torch.float64, "x": x, "eps": 0.3}
    forward = run_statements(math.forward, dict(values))
    saved = {name: forward[name] for name in math.saved}
    grad = run_statements(math.backward, {**values, **saved, "grad_y": grad_y})["grad_x"]
    reference = x.clone().requires_grad_()
    lo, hi = reference.min(-1, keepdim=True).values, reference.max(-1, keepdim=True).values
    ((reference - lo) / (hi - lo + 0.3)).backward(grad_y)
    torch.testing.assert_close(grad, reference.grad)
    assert grad[0, 3] != grad[0, 4]  # the first maximum takes the max's part alone, not half of it


def test_a_max_values_shift_of_no_gradient_reduces_once_as_amax_does(tmp_path):
    path = tmp_path / "max_values.py"
    path.write_text(MAX_VALUES)
    profile = analyze(f"{path}:max_shifted_softmax", name="max_shifted_softmax")
    math = _check_against_autograd(profile, tied=True)
    assert [line for line in math.forward if "tl.max(" in line or "tl.min(" in line] == [
        "max_1_max = tl.max(x, axis=1, keep_dims=True)"
    ]
    assert not any("cols" in line for line in math.forward + math.backward)


def test_max_values_of_a_loss_are_one_line(tmp_path):
    path = tmp_path / "loss.py"
    path.write_text(
        "import torch\n\n\ndef peak_loss(x, target):\n"
        "    return (x.max(-1).values - x.gather(-1, target[:, None]).squeeze(-1)).mean()\n"
    )
    with pytest.raises(AnalyzeError) as error:
        analyze(str(path))
    assert "`.max()` in a loss: its gradient goes to the first column holding the maximum" in str(error.value)
    assert f"{path}:5" in str(error.value)
    assert "(write x.amax(-1), or .detach() a max subtracted as a shift)" in str(error.value)


def test_the_mean_inside_a_centred_variance_passes_no_gradient_through_the_variance():
    profile = analyze("layer_norm", name="layer_norm_gen")
    math = row_math(profile)
    # The mean's adjoint is only its direct use in (x - mean); the path through the variance simplified to 0, so
    # the backward reduces two row sums, not three.
    assert sum("tl.sum(" in line for line in math.backward) == 2
    assert math.saved == ["mean", "variance"]


LIBRARY_AND_BY_HAND = [
    (
        "F.layer_norm(x, (x.shape[-1],), eps=1e-5)",
        "(x - x.mean(-1, keepdim=True)) / torch.sqrt((x - x.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True) + 1e-5)",
    ),
    (
        "(x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)",
        "F.layer_norm(x, (x.shape[-1],), eps=1e-5)",
    ),
    (
        "torch.softmax(x, dim=-1)",
        "torch.exp(x - x.amax(-1, keepdim=True)) / torch.exp(x - x.amax(-1, keepdim=True)).sum(-1, keepdim=True)",
    ),
    ("F.log_softmax(x, -1)", "x - torch.logsumexp(x, -1, keepdim=True)"),
    ("F.normalize(x, dim=-1)", "x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)"),
    ("F.normalize(x, p=3, dim=-1)", "x / x.norm(p=3, dim=-1, keepdim=True).clamp_min(1e-12)"),
    (
        "torch.std_mean(x, -1, keepdim=True)[0] + torch.var_mean(x, -1, keepdim=True)[1]",
        "x.std(-1, keepdim=True) + x.mean(-1, keepdim=True)",
    ),
    ("F.softmin(x, dim=-1)", "torch.softmax(-x, dim=-1)"),
    ("x / torch.linalg.norm(x, dim=-1, keepdim=True)", "x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)"),
]


def _canonical(profile) -> tuple:
    """The profile's math with statistics renamed s0, s1, ... in order."""
    renames = {s.name: f"s{i}" for i, s in enumerate(profile.math.statistics)}

    def rename(text):
        return re.sub(r"\b\w+\b", lambda m: renames.get(m.group(0), m.group(0)), text)

    names = [t.name for t in profile.inputs] + ["n_cols"]
    statistics = []
    for statistic in profile.math.statistics:
        statistics.append((statistic.reduce, parse_formula(rename(statistic.of), names)))
        names.append(renames[statistic.name])
    outputs = tuple(parse_formula(rename(text), names) for text in profile.math.outputs.values())
    return tuple(statistics), outputs


@pytest.mark.parametrize("library, by_hand", LIBRARY_AND_BY_HAND)
def test_a_library_call_and_the_same_math_by_hand_lower_to_one_program(tmp_path, library, by_hand):
    source = "import torch\nimport torch.nn.functional as F\n\n\ndef library(x):\n    return {}\n\n\ndef by_hand(x):\n    return {}\n"
    path = tmp_path / "pair.py"
    path.write_text(source.format(library, by_hand))
    first = analyze(f"{path}:library", name="library")
    second = analyze(f"{path}:by_hand", name="by_hand")
    assert _canonical(first) == _canonical(second)


UNPACKED = """import torch


def flat_rms(x):
    B, T, H = x.shape
    h = x.reshape(B * T, H)
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).view(B, T, H)


def plain_rms(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def heads_gate(x, alpha: float = 1.5):
    B, H, T, D = x.shape
    return x * torch.sigmoid(alpha * x)


def flat_rms_weight(x, weight):
    B, T, H = x.shape
    h = x.reshape(B * T, H)
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * weight).view(B, T, H)
"""
HEADS_BIAS = """import torch


def heads_bias(x, bias):
    B, H, T, D = x.shape
    return torch.tanh(x.reshape(B * H * T, D) + bias).view(B, H, T, D)


KERNELGEN = {"shapes": {"x": "batch heads seq dim", "bias": "dim"}}
"""


def test_a_shape_unpacked_into_names_gives_the_examples_its_rank_and_a_flatten_of_them_keeps_the_rows(tmp_path):
    """``B, T, H = x.shape`` then ``x.reshape(B * T, H)``: the leading dims flattened, each row whole (it was refused
    as a regrouping of the row); ``B, H, T, D = x.shape`` is written for 4 dims, which its tests take (it failed its
    smoke run on 3)."""
    path = tmp_path / "unpacked.py"
    path.write_text(UNPACKED)
    flat, plain = analyze(f"{path}:flat_rms"), analyze(f"{path}:plain_rms")
    assert flat.tier == 2 and _canonical(flat) == _canonical(plain)
    heads = analyze(f"{path}:heads_gate")
    assert heads.tier == 1 and {len(shape) for shape in heads.test.cpu_shapes} == {4}
    # Beside an input that broadcasts (a [hidden] weight, a declared [dim] bias): the smoke run's and the probes'
    # examples take the written rank too (they were 2-d: "not enough values to unpack"; the 4-d hint raised an
    # IndexError).
    assert analyze(f"{path}:flat_rms_weight").example_rank() == 3
    (tmp_path / "heads_bias.py").write_text(HEADS_BIAS)
    assert analyze(f"{tmp_path / 'heads_bias.py'}:heads_bias").example_rank() == 4


def test_a_statistic_of_a_per_row_value_is_refused():
    with pytest.raises(RowProgramError, match="does not vary along the row"):
        synthesize_rows(
            [("s", "sum", parse_formula("eps * 2", ["eps"]))],
            {"y": parse_formula("x", ["x"])},
            ["x"],
            hyperparameters=["eps"],
        )


@pytest.mark.parametrize(
    "body, message",
    [
        ("return x.prod(-1, keepdim=True) * x", r"`\.prod\(\)` \(prod\) is a reduction kernelgen cannot write out"),
        ("return x.norm(p=3, dim=-1, keepdim=True) * x", None),
    ],
)
def test_reductions_outside_the_representation_name_the_op_and_line(tmp_path, body, message):
    path = tmp_path / "ref.py"
    path.write_text(f"import torch\n\n\ndef ref(x):\n    {body}\n")
    if message is None:  # a p-norm is written out as sum(|x|^p)^(1/p)
        profile = analyze(str(path))
        _check_against_autograd(profile)
        return
    with pytest.raises(AnalyzeError, match=message) as caught:
        analyze(str(path))
    assert "ref.py:5:" in str(caught.value)


@pytest.mark.parametrize("reference", ["softmax", "styles:method_softmax", "styles:temperature_softmax"])
def test_a_softmax_backward_reads_its_output_instead_of_recomputing_the_exponential(styles_path, reference):
    """y = exp(x - max) / sum is one call times a per-row factor: the backward is written in y (saved instead of x
    and the statistics) and evaluates no exponential, whatever the spelling."""
    source = reference.replace("styles", str(styles_path))
    math = _check_against_autograd(analyze(source, name="softmax_like"))
    assert math.reused_outputs == ["y"] and math.saved == []
    assert "x" not in math.backward_reads and not any("tl.exp" in line for line in math.backward)


def test_outputs_that_are_not_one_call_times_a_row_factor_are_recomputed():
    for reference in ("log_softmax", "layer_norm", "rms_norm", "l2_normalize"):
        assert row_math(analyze(reference, name=f"{reference}_gen")).reused_outputs == [], reference


@pytest.mark.parametrize(
    "body",
    [
        "    hidden = x + residual\n    return hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + eps) * weight, hidden",
        "    s = residual + x\n    var = (s * s).mean(dim=-1, keepdim=True)\n    return weight * (s / torch.sqrt(var + eps)), s",
    ],
)
def test_a_fused_add_norm_backward_reads_the_returned_sum_instead_of_both_addends(tmp_path, body):
    """x + residual returned as an output stands for the sum in the backward: one saved tensor is loaded instead of
    x and residual, and both inputs get one gradient buffer, whatever the spelling."""
    path = tmp_path / "ref.py"
    path.write_text(f"import torch\n\n\ndef fused(x, residual, weight, eps: float = 1e-6):\n{body}\n")
    math = _check_against_autograd(analyze(f"{path}:fused", name="fused_add_norm"))
    assert len(math.reused_outputs) == 1
    assert {"x", "residual"}.isdisjoint(math.backward_reads)
    assert math.gradient_aliases == {"grad_residual": "grad_x"}


def test_a_sum_output_is_not_reused_where_the_backward_still_needs_an_addend(tmp_path):
    """normed depends on x alone beside the sum: loading the sum would not spare a load of x, so nothing is reused."""
    path = tmp_path / "ref.py"
    path.write_text(
        "import torch\n\n\ndef fused(x, residual, eps: float = 1e-6):\n    s = x + residual\n"
        "    return x * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps), s\n"
    )
    math = _check_against_autograd(analyze(f"{path}:fused", name="partly_fused"))
    assert math.reused_outputs == [] and "x" in math.backward_reads


def test_only_outputs_are_listed_as_reused_when_the_backward_still_reads_a_statistic():
    """A softmax that also returns its sum: the backward is written in y and still reads the statistic `s` (the sum's
    gradient reaches x as grad_z * y * s), which stays a saved statistic, not an output loaded per element."""
    from tools.kernelgen.synth.rows import synthesize_rows

    math = synthesize_rows(
        [("s", "sum", "exp(x)")],
        {"y": "exp(x) / s", "z": "s"},
        ["x"],
    )
    assert math.reused_outputs == ["y"]
    assert "s" in math.saved and "x" not in math.backward_reads
    x = torch.randn(3, 7, dtype=torch.float64)
    tile = {"mask": torch.ones(3, 7, dtype=torch.bool), "n_cols": 7, "BLOCK_ROWS": 3, "BLOCK_COLS": 7}
    forward = run_statements(math.forward, {**tile, "x": x})
    grad_y, grad_z = torch.randn(3, 7, dtype=torch.float64), torch.randn(3, 1, dtype=torch.float64)
    values = {**tile, "y": forward["y"], "s": forward["s"], "grad_y": grad_y, "grad_z": grad_z}
    got = run_statements(math.backward, values)["grad_x"]
    leaf = x.clone().requires_grad_()
    total = leaf.exp().sum(-1, keepdim=True)
    torch.autograd.backward([leaf.exp() / total, total], [grad_y, grad_z])
    torch.testing.assert_close(got, leaf.grad)


def test_a_reduction_drops_its_where_only_where_the_loads_fill_gives_its_identity():
    """Softmax: x loaded with -inf in masked lanes makes the max of x and the sum of exp(x - max) need no tl.where
    (and the backward's sum of grad_y * y, loaded with 0, none either); LayerNorm's centred variance keeps its own
    (x = 0 there gives mean**2); a sum of x / w keeps it too (0 / 0 in masked columns, where w reads 0)."""
    softmax, layer_norm = (row_math(analyze(r, name=f"{r}_gen")) for r in ("softmax", "layer_norm"))
    assert softmax.forward_fills == {"x": 'float("-inf")'} and layer_norm.forward_fills == {}
    reductions = [line for line in softmax.forward + softmax.backward if re.search(r"tl\.(max|sum)\(", line)]
    assert len(reductions) == 3 and not any("tl.where" in line for line in reductions)
    variance = next(line for line in layer_norm.forward if line.startswith("variance = "))
    mean = next(line for line in layer_norm.forward if line.startswith("mean = "))
    assert "tl.where(mask" in variance and "tl.where" not in mean
    quotient = synthesize_rows([("s", "sum", "x / w")], {"y": "x * s"}, ["x"], {"w": "channel"})
    assert quotient.forward_fills == {} and "tl.where(mask" in quotient.forward[0]


@pytest.mark.parametrize("reference", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
def test_padded_lanes_filled_as_the_loads_fill_them_leave_the_real_lanes_exact(reference):
    """The forward and backward statements on a tile of 8 columns of which 5 are real: the masked lanes hold what the
    kernels' loads give them (the forward's fill, 0 in the backward, 0 for parameters in masked columns) and the real
    lanes match the same statements on the 5 columns alone."""
    math = row_math(analyze(reference, name=f"{reference}_gen"))
    torch.manual_seed(0)
    rows, cols, real = 3, 8, 5
    mask = torch.zeros(rows, cols, dtype=torch.bool)
    mask[:, :real] = True
    padded = {"mask": mask, "n_cols": real, "BLOCK_ROWS": rows, "BLOCK_COLS": cols, "eps": 1e-5}
    whole = {"mask": torch.ones(rows, real, dtype=torch.bool), "n_cols": real, "BLOCK_ROWS": rows, "BLOCK_COLS": real}
    whole["eps"] = 1e-5
    fills = {name: float(text.replace('float("', "").replace('")', "")) for name, text in math.forward_fills.items()}
    values = {"x": torch.randn(rows, cols, dtype=torch.float64)}
    for name in ("weight", "bias"):
        values[name] = (torch.rand(1, cols, dtype=torch.float64) + 0.5) * mask[:1]
    values["x"] = torch.where(mask, values["x"], fills.get("x", 0.0))
    forward_padded = run_statements(math.forward, {**padded, **values})
    forward_whole = run_statements(math.forward, {**whole, **{k: v[:, :real] for k, v in values.items()}})
    for name in math.saved + ["y"]:
        ours = forward_padded[name][:, :real] if forward_padded[name].shape[-1] == cols else forward_padded[name]
        torch.testing.assert_close(ours, forward_whole[name], msg=name)
    grad_y = torch.randn(rows, cols, dtype=torch.float64) * mask
    backward_values = {**values, "grad_y": grad_y, "x": values["x"].masked_fill(~mask, 0.0), "y": forward_padded["y"]}
    backward_values["y"] = backward_values["y"].masked_fill(~mask, 0.0)
    saved = {name: forward_padded[name] for name in math.saved}
    backward_padded = run_statements(math.backward, {**padded, **backward_values, **saved})
    backward_whole = run_statements(
        math.backward, {**whole, **{k: v[:, :real] for k, v in backward_values.items()}, **saved}
    )
    torch.testing.assert_close(backward_padded["grad_x"][:, :real], backward_whole["grad_x"], msg="grad_x")


DEGENERATE_ROWS = textwrap.dedent(
    """
    import torch


    def std_normalize(x, eps: float = 1e-4):
        return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps)


    def cube_norm_scale(x):
        return x * torch.linalg.vector_norm(x, ord=3, dim=-1, keepdim=True)


    def shifted_l2(x):
        return x / (x.norm(2, -1, True) + 1e-6)


    def cosine_rows(a, b):
        return torch.cosine_similarity(a, b, dim=-1, eps=1e-6)
    """
)


@pytest.mark.parametrize("entry", ["std_normalize", "cube_norm_scale", "shifted_l2", "cosine_rows"])
def test_a_zero_row_s_norm_and_a_constant_row_s_std_have_torch_s_gradients(tmp_path, entry):
    """torch's std and norm backwards are 0 where the std or norm is 0; the plain root's derivative is 1 / 0 there
    (every gradient of such a row was nan)."""
    path = tmp_path / "degenerate.py"
    path.write_text(DEGENERATE_ROWS)
    _check_against_autograd(analyze(f"{path}:{entry}"), degenerate=True)


def test_a_cosine_similarity_whose_norms_are_below_eps_has_torch_s_gradient(tmp_path):
    """torch clamps cosine_similarity's norms to eps in place under no_grad: a row whose norm is below eps divides by
    eps but takes its unclamped norm's gradient. eps = 100 clamps every row of randn's (norms about 6) and eps = 3
    some of a row pair's norms only."""
    path = tmp_path / "clamped.py"
    path.write_text(
        "import torch.nn.functional as F\n\n\n"
        "def all_clamped(a, b):\n    return F.cosine_similarity(a, b, dim=-1, eps=100.0)\n\n\n"
        "def some_clamped(a, b):\n    return F.cosine_similarity(a * 0.5, b, dim=-1, eps=3.0)\n"
    )
    for entry in ("all_clamped", "some_clamped"):
        _check_against_autograd(analyze(f"{path}:{entry}"))


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm", "softmax", "fused_add_rms_norm"])
def test_the_split_backward_reduces_without_masks_its_zero_filled_loads_make_redundant(name):
    """The split backward's row sums (and the one-device sweep, whose sums they are) drop the tl.where the fused
    backward drops: each summand carries a d(y) loaded as 0 in masked lanes. The forward's split passes, whose loads
    may fill otherwise, keep theirs."""
    math = row_math(analyze(name))
    backward_sums = [line for step in math.split_backward for line in step.lines if " = tl.sum(" in line]
    assert backward_sums and not any("tl.where(mask" in line for line in backward_sums)
    forward_sums = [
        line for step in math.split_forward for line in step.lines if re.match(r"\w+ = tl\.(sum|max)", line)
    ]
    assert forward_sums and all("tl.where(mask" in line for line in forward_sums)


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm"])
def test_a_norm_s_backward_multiplies_by_its_rsqrt_instead_of_dividing_by_its_variance(name):
    """1 / (var + eps) beside the rsqrt(var + eps) the backward names anyway is that rsqrt squared: no division
    between a row's sums and its gradients, in the fused backward and the split passes alike."""
    math = row_math(analyze(name))
    for lines in [math.backward] + [step.lines for step in math.split_backward]:
        text = "\n".join(lines)
        root = re.search(r"^(\w+) = tl\.rsqrt\((\w+)\)$", text, re.M)
        if root is None:
            continue
        assert f"{root.group(1)} * {root.group(1)}" in text
        assert f"/ {root.group(2)}" not in text
    assert any(re.search(r"= tl\.rsqrt\(", line) for line in math.backward)


def test_a_masked_fill_of_minus_infinity_before_a_softmax_gives_exact_zeros(styles_path):
    """``scores.masked_fill(keep == 0, float("-inf"))``: -inf is a constant of the formulas (printed
    ``float("-inf")``), the masked columns' probabilities and gradients are exact zeros; the row with masked columns
    (the tied row's zeros of ``keep``) is checked against autograd like the others."""
    profile = analyze(f"{styles_path}:masked_inf_softmax", name="masked_inf_softmax")
    assert profile.tier == 2 and validate_profile(profile) == []
    assert "-inf" in profile.math.statistics[0].of
    _check_against_autograd(profile, tied=True)


def test_a_dim_the_shapes_hint_puts_before_the_last_is_refused_not_taken_as_the_row(tmp_path):
    """``q.norm(dim=1)`` of a q the hint declares [batch, heads, seq, dim]: dim 1 is the heads', not the row; the
    2-d reading (dim 1 the last) would generate a kernel that refuses every 4-d q at run time."""
    path = tmp_path / "heads_norm.py"
    path.write_text(
        'import torch\n\nKERNELGEN = {"shapes": {"q": "batch heads seq dim"}}\n\n\n'
        "def heads_norm(q):\n    return q / q.norm(dim=1, keepdim=True)\n"
    )
    with pytest.raises(AnalyzeError, match="reduces dim 1 of q, which the shapes hint declares 'batch heads seq dim'"):
        analyze(str(path))


def test_a_row_masked_whole_gets_torch_s_zero_gradient(tmp_path):
    """softmax(where(x > t, x, -inf)) of a row with every column masked: torch's where passes the masked columns
    no gradient, though the softmax's is NaN there (its max is -inf); the backward's step selects, not multiplies."""
    path = tmp_path / "masked.py"
    path.write_text(
        "import math\nimport torch\n\n\ndef masked(x, threshold: float = 0.0):\n"
        "    return torch.softmax(torch.where(x > threshold, x, -math.inf), dim=-1)\n"
    )
    profile = analyze(str(path))
    math = row_math(profile)
    x = torch.randn(2, 8, dtype=torch.float64)
    x[0] = -x[0].abs() - 0.1  # row 0 masked whole
    leaf = x.clone().requires_grad_()
    expected = torch.softmax(torch.where(leaf > 0, leaf, float("-inf")), dim=-1)
    grad_y = torch.randn(2, 8, dtype=torch.float64)
    expected.backward(grad_y)
    values = {"x": x, "threshold": 0.0, "n_cols": 8, "BLOCK_ROWS": 2, "BLOCK_COLS": 8}
    values.update({"mask": torch.ones(2, 8, dtype=torch.bool), "cols": torch.arange(8).view(1, -1)})
    forward = run_statements(math.forward, dict(values))
    backward_values = {**values, **{s: forward[s] for s in math.saved + math.reused_outputs}, "grad_y": grad_y}
    grad_x = run_statements(math.backward, backward_values)[math.gradient_aliases.get("grad_x", "grad_x")]
    assert torch.equal(grad_x[0], torch.zeros(8, dtype=torch.float64)) and torch.equal(leaf.grad[0], grad_x[0])
    torch.testing.assert_close(grad_x[1], leaf.grad[1], rtol=1e-9, atol=1e-10)
