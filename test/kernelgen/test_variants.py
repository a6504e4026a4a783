"""Variants become options, not duplicates: ``new`` of a reference an existing kernel computes at some option values
names that kernel and the call (exit 2, nothing written); ``--force-new`` generates it anyway; references that are
not such variants (another eps placement, another smoothing formula, gelu instead of silu) generate as before."""

import textwrap

import pytest

from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import generated_geglu
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import snapshot
from tools.kernelgen.analyze import analyze
from tools.kernelgen.hostapi import KernelApi
from tools.kernelgen.hostapi import Param
from tools.kernelgen.hostapi import Signature
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.variants import find_variant
from tools.kernelgen.variants.options import MAX_TENSOR_ORDERS
from tools.kernelgen.variants.options import Bound
from tools.kernelgen.variants.options import CallPlan
from tools.kernelgen.variants.options import Option
from tools.kernelgen.variants.options import _map_tensors
from tools.kernelgen.variants.options import call_plans
from tools.kernelgen.variants.options import call_text
from tools.kernelgen.variants.options import reference_literals

# Gemma's RMSNorm written in another style than the built-in: other names, the eps as `epsilon`, sqrt then divide.
OFFSET_NORM = """
import torch
import torch.nn as nn


class OffsetNorm(nn.Module):
    def __init__(self, dim: int, epsilon: float = 1e-5):
        super().__init__()
        self.scale = nn.Parameter(torch.zeros(dim))
        self.epsilon = epsilon

    def forward(self, h):
        h32 = h.float()
        normed = h32 / torch.sqrt(h32.square().mean(-1, keepdim=True) + self.epsilon)
        return (normed * (1 + self.scale.float())).to(h.dtype)
"""
# The offset added to the weight in the weight's dtype, the rest in fp32 and one cast at the end: of the two casting
# modes gemma's rounds as it does nearly everywhere, llama's (normalized rows cast before the weight) in most places
# by one ulp, and both by one ulp somewhere.
OFFSET_FUNCTION = """
import torch


def offset_function(hidden, weight, eps: float = 1e-5, offset: float = 1.0):
    h = hidden.to(torch.float32)
    h = h / torch.sqrt(torch.mean(h * h, dim=-1, keepdim=True) + eps)
    return ((offset + weight) * h).to(hidden.dtype)
"""
SMOOTHED_CE = """
import torch.nn.functional as F


def smoothed_ce(logits, target):
    return F.cross_entropy(logits, target, label_smoothing=0.1)
"""
# Label smoothing by hand, its amount a hyper-parameter of another name: the kernel's option takes it.
HAND_SMOOTHED_CE = """
import torch


def hand_smoothed_ce(logits, target, smoothing: float = 0.2):
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return ((1 - smoothing) * nll - smoothing * logp.mean(-1)).mean()
"""
# Llama's casting with (1 + w), its eps named as the module's but with another default than the module's 1e-6.
LLAMA_OFFSET_NORM = """
import torch
import torch.nn as nn


class LlamaOffsetNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, h):
        var = h.float().pow(2).mean(-1, keepdim=True)
        h = (h.float() * torch.rsqrt(var + self.eps)).to(h.dtype)
        return h * (1.0 + self.w)
"""
# A weight starting at 0.5: no option of LigerRMSNorm starts it there, and the line says so.
HALF_START_NORM = """
import torch
import torch.nn as nn


class HalfStartNorm(nn.Module):
    def __init__(self, hidden_size: int = 64, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.full((hidden_size,), 0.5))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
"""
# A sum written with a 0.0 that torch's deprecated size_average=0.0 would also express: named by its reduction.
SUMMED_CE = """
import torch.nn.functional as F


def summed_ce(logits, target):
    return F.cross_entropy(logits, target, reduction="sum", label_smoothing=0.0)
"""
# A loss per row: its output's shape is not the default reduction's.
PER_ROW_CE = """
import torch


def per_row_ce(logits, target):
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
"""
# A class ignored by a number written in the call: the probe draws that class, which random targets rarely hit.
IGNORED_SEVEN_CE = """
import torch.nn.functional as F


def ignored_seven_ce(logits, target):
    return F.cross_entropy(logits, target, ignore_index=7)
"""
# A causal LM's loss that flattens [B, T, V] logits itself: the host's cross entropy takes [rows, classes] only.
FLATTENING_CE = """
import torch.nn.functional as F


def flattening_ce(logits, labels, ignore_index: int = -100):
    return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), labels.view(-1), ignore_index=ignore_index)
"""
# Negatives: each differs from an existing kernel at every option value.
EPS_OUTSIDE_NORM = """
import torch
import torch.nn as nn


class EpsOutsideNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        return self.weight * x / (x.pow(2).mean(-1, keepdim=True).sqrt() + self.eps)
"""
OTHER_SMOOTHING_CE = """
import torch


def other_smoothing_ce(logits, target, smoothing: float = 0.1):
    logp = torch.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    others = -(logp.sum(-1) - picked) / (logits.shape[-1] - 1)
    return ((1 - smoothing) * -picked + smoothing * others).mean()
"""
# F.cross_entropy's default ignore_index, written nowhere: divided by the batch, not by the rows that count, it is
# the kernel's mean only while no row is ignored (the probe draws ignored rows from the traced math).
PER_BATCH_CE = """
import torch.nn.functional as F


def per_batch_ce(x, y):
    return F.cross_entropy(x, y, reduction="sum") / x.shape[0]
"""
GELU_GATE = """
import torch.nn.functional as F


def gelu_gate(a, b):
    return F.gelu(a) * b
"""
# One argument split into its halves: the call names the halves, and the line says where they come from.
CHUNKED_SWIGLU = """
import torch.nn.functional as F


def chunked_swiglu(x):
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up
"""
SWAPPED_SWIGLU = """
import torch


def up_times_silu(up, gate):
    return up * gate * torch.sigmoid(gate)
"""


def _file(folder, name: str, source: str) -> str:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(source).lstrip())
    return str(path)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    return copy_checkout(tmp_path_factory.mktemp("variants") / "liger")


@pytest.mark.parametrize(
    "name, source, call",
    [
        (
            "offset_norm",
            OFFSET_NORM,
            'rms_norm\' computes it: liger_rms_norm(X, W, eps=epsilon, offset=1.0, casting_mode="gemma") / '
            'LigerRMSNorm(hidden_size, eps=epsilon, offset=1.0, casting_mode="gemma", init_fn="zeros")',
        ),
        (
            "offset_function",
            OFFSET_FUNCTION,
            'liger_rms_norm(X, W, eps, offset=offset, casting_mode="gemma") / '
            'LigerRMSNorm(hidden_size, eps=eps, offset=offset, casting_mode="gemma")',
        ),
        (
            "smoothed_ce",
            SMOOTHED_CE,
            "cross_entropy' computes it: liger_cross_entropy(input, target, label_smoothing=0.1) / "
            "LigerCrossEntropyLoss(label_smoothing=0.1)",
        ),
        (
            "hand_smoothed_ce",
            HAND_SMOOTHED_CE,
            "liger_cross_entropy(input, target, label_smoothing=smoothing) / "
            "LigerCrossEntropyLoss(label_smoothing=smoothing)",
        ),
        ("up_times_silu", SWAPPED_SWIGLU, "swiglu' computes it: liger_swiglu(a=gate, b=up)"),
        (
            "chunked_swiglu",
            CHUNKED_SWIGLU,
            "liger_swiglu(a=gate, b=up) / LigerSwiGLUMLP(config), where gate, up = x.chunk(2",
        ),
        (
            "llama_offset_norm",
            LLAMA_OFFSET_NORM,
            'liger_rms_norm(X, W, eps, offset=1.0) / LigerRMSNorm(hidden_size, eps=eps, offset=1.0, init_fn="zeros")',
        ),
        (
            "summed_ce",
            SUMMED_CE,
            'computes it: liger_cross_entropy(input, target, reduction="sum") / LigerCrossEntropyLoss(reduction="sum")',
        ),
        (
            "ignored_seven_ce",
            IGNORED_SEVEN_CE,
            "liger_cross_entropy(input, target, ignore_index=7) / LigerCrossEntropyLoss(ignore_index=7)",
        ),
        (
            "half_start_norm",
            HALF_START_NORM,
            "liger_rms_norm(X, W, eps) / LigerRMSNorm(hidden_size, eps=eps) (the reference starts its parameters at "
            "0.5: set them after building it)",
        ),
        (
            "per_row_ce",
            PER_ROW_CE,
            'liger_cross_entropy(input, target, reduction="none") / LigerCrossEntropyLoss(reduction="none")',
        ),
    ],
)
def test_a_variant_is_refused_naming_the_kernel_and_its_options_and_force_new_generates_it(
    checkout, tmp_path, name, source, call
):
    reference = _file(tmp_path, name, source)
    before = snapshot(checkout)
    line = one_line_error(run_kernelgen("new", name, "--reference", reference, "--repo", str(checkout)))
    assert f"'{name}' is a variant: the existing kernel '" in line and call in line, line
    assert "--force-new" in line and line.endswith("nothing written")
    assert snapshot(checkout) == before
    dry = run_kernelgen("new", name, "--reference", reference, "--repo", str(checkout), "--force-new", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"+++ b/{kernel_paths(name)['ops']}" in dry.stdout


def test_a_kernel_of_rows_is_called_on_the_rows_of_a_reference_that_flattens_them_itself(checkout, tmp_path):
    """The reference takes a model's [B, T, V] logits; liger_cross_entropy refuses them: the line says to flatten
    them first. A reference of rows only (F.cross_entropy of [B, T, V] is another loss) is told nothing of it."""
    reference = _file(tmp_path, "flattening_ce", FLATTENING_CE)
    line = one_line_error(run_kernelgen("new", "flattening_ce", "--reference", reference, "--repo", str(checkout)))
    assert (
        "computes it: liger_cross_entropy(input, target, ignore_index=ignore_index) / "
        "LigerCrossEntropyLoss(ignore_index=ignore_index), on [rows, classes]: flatten 3-d inputs first, as the "
        "reference does: liger_cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), "
        "ignore_index=ignore_index);"
    ) in line, line
    reference = _file(tmp_path, "smoothed_ce", SMOOTHED_CE)
    line = one_line_error(run_kernelgen("new", "smoothed_ce", "--reference", reference, "--repo", str(checkout)))
    assert "is a variant" in line and "flatten" not in line, line


def test_torchs_deprecated_spellings_of_the_reduction_are_no_options_beside_it(tmp_path):
    profile = analyze(_file(tmp_path, "summed_ce", SUMMED_CE), name="summed_ce")
    plan = next(plan for plan in call_plans(LigerRepo.open(None), profile) if plan.name == "cross_entropy")
    names = [option.name for option in plan.options]
    assert "reduction" in names and "size_average" not in names and "reduce" not in names


def test_the_builtin_gemma_rms_norm_is_the_hosts_rms_norm_and_force_new_writes_it(tmp_path):
    root = copy_checkout(tmp_path / "liger")
    line = one_line_error(run_kernelgen("new", "gemma_rms_norm", "--repo", str(root)))
    assert 'liger_rms_norm(X, W, eps, offset=1.0, casting_mode="gemma")' in line
    # Gemma's (1 + w) starts w at zeros: the module is told to, where its weight starts at ones by default.
    assert 'LigerRMSNorm(hidden_size, eps=eps, offset=1.0, casting_mode="gemma", init_fn="zeros")' in line
    written = run_kernelgen("new", "gemma_rms_norm", "--repo", str(root), "--force-new")
    assert written.returncode == 0, written.stderr
    assert (root / kernel_paths("gemma_rms_norm")["ops"]).is_file()


WEIGHTLESS_RMS_NORM = """
import torch


def weightless_rms(x, eps: float = 1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
"""


def test_a_reference_without_a_tensor_the_kernel_may_go_without_is_the_kernel_at_none(checkout, tmp_path):
    """An RMSNorm without weight is upstream's with ``W=None`` (its ops test ``W is not None``): the line passes None
    by name, and what follows it by name too (``liger_rms_norm(X, eps, W=None)`` would put eps in W's place)."""
    reference = _file(tmp_path, "weightless_rms", WEIGHTLESS_RMS_NORM)
    line = one_line_error(run_kernelgen("new", "weightless_rms", "--reference", reference, "--repo", str(checkout)))
    assert "the existing kernel 'rms_norm' computes it: liger_rms_norm(X, W=None, eps=eps);" in line, line


CAPPED_AND_CLAMPED = """
import torch
import torch.nn.functional as F


def swiglu_capped(a, b):
    return torch.where(a > 6.0, torch.zeros_like(a), F.silu(a) * b)


def clamped_rms(x, eps: float = 1e-6):
    return x * x.pow(2).mean(-1, keepdim=True).clamp(min=eps).rsqrt()
"""


@pytest.mark.parametrize("entry", ["swiglu_capped", "clamped_rms"])
def test_a_cap_or_clamp_that_parts_only_beyond_values_of_order_one_is_no_variant(checkout, tmp_path, entry):
    """SwiGLU capped above 6 and an RMSNorm whose mean square is clamped at eps agree with the plain kernels on
    values of order one: the checks draw large and tiny values too, where they part."""
    reference = _file(tmp_path, "capped", CAPPED_AND_CLAMPED) + f":{entry}"
    dry = run_kernelgen("new", entry, "--reference", reference, "--repo", str(checkout), "--dry-run")
    assert dry.returncode == 0, dry.stderr


# Every negative label left out (``labels >= 0``), where cross_entropy leaves out -100 alone: the probe draws a label
# of -1 beside the bound, on which the two differ (cross_entropy was named, and raises on it).
NONNEGATIVE_LABELS_NLL = """import torch


def nonnegative_labels_nll(logits, labels):
    valid = labels >= 0
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked * valid).sum() / valid.sum()
"""


@pytest.mark.parametrize(
    "name, source, existing",
    [
        ("eps_outside_norm", EPS_OUTSIDE_NORM, "rms_norm"),
        ("other_smoothing_ce", OTHER_SMOOTHING_CE, "cross_entropy"),
        ("per_batch_ce", PER_BATCH_CE, "cross_entropy"),
        ("gelu_gate", GELU_GATE, "swiglu"),
        ("nonnegative_labels_nll", NONNEGATIVE_LABELS_NLL, "cross_entropy"),
    ],
)
def test_a_reference_that_is_no_variant_is_checked_against_the_kernel_like_it_and_not_refused(
    tmp_path, name, source, existing
):
    profile = analyze(_file(tmp_path, name, source), name=name)
    repo = LigerRepo.open(None)
    assert existing in {plan.name for plan in call_plans(repo, profile)}  # it was run, not filtered out
    assert find_variant(repo, profile) is None


INF_LIMIT = """import torch.nn.functional as F


def inf_clamp_swiglu(gate, up, limit: float = float("inf")):
    return F.silu(gate.clamp(max=limit)) * up.clamp(-limit, limit)
"""


def test_a_hyper_parameter_defaulting_to_inf_is_probed_at_a_bound_the_inputs_reach(checkout, tmp_path):
    """A clamp whose limit defaults to inf is swiglu at the default only: it was named a variant,
    ``liger_swiglu(a, b)``, wrong at limit=7 (inf moved as 2 * inf + 0.25 stayed inf). A profile cannot hold an inf
    default: the refusal names the reference's file."""
    path = tmp_path / "inf_clamp_swiglu.py"
    path.write_text(INF_LIMIT)
    line = one_line_error(run_kernelgen("new", "inf_clamp_swiglu", "--reference", str(path), "--repo", str(checkout)))
    assert "variant" not in line and f"the profile analysed from {path}" in line and "inf is not a float" in line


def test_the_readme_geglu_is_no_variant_of_swiglu_and_generates_without_the_flag(checkout, tmp_path):
    result = run_kernelgen("new", "geglu", "--repo", str(checkout), "--dry-run")
    assert result.returncode == 0, result.stderr


def test_force_new_does_not_go_with_modify(checkout):
    line = one_line_error(
        run_kernelgen("new", "swiglu", "--modify", "--force-new", "--reference", "swiglu", "--repo", str(checkout))
    )
    assert "--force-new" in line and "--modify" in line


def test_the_numbers_of_a_reference_are_candidates_but_not_its_dimensions_indices_or_hints():
    source = textwrap.dedent(
        """
        import torch


        def f(x, w):
            y = x.float().pow(2).mean(-1, keepdim=True) + 1e-6
            return (x[..., 0:1] * torch.rsqrt(y) * (1.0 + w)).sum(dim=-1) - 0.5


        KERNELGEN = {"init_args": {"hidden_size": 8}}
        """
    )
    assert sorted(reference_literals(source)) == [1e-06, 0.5, 1.0, 2]  # no -1 (dim), 0:1 (index) or 8 (hint)


def test_looking_for_variants_leaves_this_process_as_it_was(checkout, tmp_path):
    import os
    import sys

    before = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "liger_kernel"}
    path, interpret = list(sys.path), os.environ.get("TRITON_INTERPRET")
    profile = analyze(_file(tmp_path, "smoothed_ce", SMOOTHED_CE), name="smoothed_ce")
    assert find_variant(LigerRepo.open(checkout), profile) is not None
    after = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "liger_kernel"}
    assert after == before and sys.path == path and os.environ.get("TRITON_INTERPRET") == interpret


def test_a_kernel_without_functional_is_named_by_its_function_apply_with_positions():
    forward = Signature(
        "LigerRMSNormFunction.apply",
        "liger_kernel.ops.rms_norm",
        [Param("X"), Param("W"), Param("eps"), Param("offset", "0.0"), Param("casting_mode", '"llama"')],
    )
    options = [Option("offset", 0.0, [1.0]), Option("casting_mode", "llama", ["gemma"])]
    plan = CallPlan(
        KernelApi("rms_norm", "LigerRMSNormFunction", forward),
        {"x": "X", "weight": "W"},
        {"eps": Bound("eps")},
        options,
        {"offset": 0.0, "casting_mode": "llama"},
        {},
    )
    assert call_text(plan, {"offset": 1.0, "casting_mode": "llama"}) == "LigerRMSNormFunction.apply(X, W, eps, 1.0)"
    gemma = call_text(plan, {"offset": 0.0, "casting_mode": "gemma"})
    assert gemma == 'LigerRMSNormFunction.apply(X, W, eps, 0.0, "gemma")'


def test_a_kernel_kernelgen_generated_is_found_as_well(tmp_path):
    root = generated_geglu(tmp_path)
    written_out = """
    import math

    import torch


    def tanh_gelu_gate(gate, up):
        inner = math.sqrt(2.0 / math.pi) * (gate + 0.044715 * gate**3)
        return 0.5 * gate * (1.0 + torch.tanh(inner)) * up
    """
    reference = _file(tmp_path, "tanh_gelu_gate", written_out)
    line = one_line_error(run_kernelgen("new", "tanh_gelu_gate", "--reference", reference, "--repo", str(root)))
    assert "the existing kernel 'geglu' computes it: liger_geglu(a, b) / LigerGEGLUMLP(config)" in line, line


def test_a_reference_of_many_inputs_is_matched_in_a_bounded_number_of_orders(tmp_path):
    """Twelve float inputs have 12! orders; the search tries the written order first and a bounded number in all."""
    names = [f"x{i}" for i in range(12)]
    source = f"import torch\n\n\ndef many({', '.join(names)}):\n    return {' + '.join(f'torch.sigmoid({n})' for n in names)}\n"
    profile = analyze(_file(tmp_path, "many", source), name="many")
    mappings = _map_tensors(profile, [Param(f"p{i}") for i in range(12)], set())
    assert 1 <= len(mappings) <= MAX_TENSOR_ORDERS
    assert mappings[0] == {name: f"p{i}" for i, name in enumerate(names)}


CLAMPED_WEIGHTED_CE = """
import torch.nn.functional as F


def clamped_weighted_ce(logits, target, weight):
    per_token = F.cross_entropy(logits, target, reduction="none")
    return (per_token * weight).sum() / weight.sum().clamp(min=1)
"""

WEIGHTED_CE = """
import torch.nn.functional as F


def weighted_ce(scores, labels, token_weight):
    return (F.cross_entropy(scores, labels, reduction="none") * token_weight).sum() / token_weight.sum()
"""


def test_a_clamped_mean_is_no_variant_of_the_plain_one_but_of_itself(tmp_path):
    """Per-row weights summing to more than 1 hide the clamp: the probe also draws weights summing below it."""
    from tools.kernelgen.generate import plan_new
    from tools.kernelgen.writer import write_all

    root = copy_checkout(tmp_path / "liger")
    clamped = analyze(_file(tmp_path, "clamped_weighted_ce", CLAMPED_WEIGHTED_CE), name="clamped_weighted_ce")
    write_all(root, plan_new(LigerRepo.open(root), clamped).changes)
    repo = LigerRepo.open(root)
    assert find_variant(repo, analyze(_file(tmp_path, "weighted_ce", WEIGHTED_CE), name="weighted_ce")) is None
    again = analyze(_file(tmp_path, "clamped_again", CLAMPED_WEIGHTED_CE), name="clamped_again")
    found = find_variant(repo, again)
    assert found is not None and "clamped_weighted_ce" in str(found)


# Two hand-written kernels in plain PyTorch (the search runs them as it runs Triton ones): a LayerNorm whose functional
# requires its eps, and a KL divergence that takes its target as data (no gradient), as Liger's own kl_div does.
ROW_NORM_OPS = """
import torch


class LigerRowNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, W, B, eps):
        ctx.save_for_backward(X, W, B)
        ctx.eps = eps
        return torch.nn.functional.layer_norm(X, (X.shape[-1],), W, B, eps)

    @staticmethod
    def backward(ctx, dY):
        inputs = [t.detach().requires_grad_() for t in ctx.saved_tensors]
        with torch.enable_grad():
            Y = torch.nn.functional.layer_norm(inputs[0], (inputs[0].shape[-1],), inputs[1], inputs[2], ctx.eps)
        return (*torch.autograd.grad(Y, inputs, dY), None)
"""
KL_LOSS_OPS = """
import torch


class LigerKLLossFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y_pred, y_true, reduction):
        ctx.save_for_backward(y_pred, y_true)
        ctx.reduction = reduction
        loss = y_true * (y_true.clamp(min=1e-10).log() - y_pred)
        return loss.sum() / (y_pred.shape[0] if reduction == "batchmean" else y_pred.numel())

    @staticmethod
    def backward(ctx, grad):
        y_pred, y_true = ctx.saved_tensors
        scale = y_pred.shape[0] if ctx.reduction == "batchmean" else y_pred.numel()
        return -y_true * grad / scale, None, None
"""
# Forward only on the CPU, as upstream's dyt (its backward sizes buffers by the GPU's multiprocessors).
GPU_BACKWARD_OPS = """
import torch


class LigerScaledTanhFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        return scale * torch.tanh(x)

    @staticmethod
    def backward(ctx, dy):
        raise RuntimeError("the backward launches on a GPU")
"""
# A vector parameter read element by element (PolyNorm's weight) by a row kernel: one argument of three values.
MEAN_MIX_OPS = """
import torch


def _mix(X, W):
    return W[0] * X + W[1] * X.mean(-1, keepdim=True) + W[2]


class LigerMeanMixFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, W):
        ctx.save_for_backward(X, W)
        return _mix(X, W)

    @staticmethod
    def backward(ctx, dY):
        inputs = [t.detach().requires_grad_() for t in ctx.saved_tensors]
        with torch.enable_grad():
            return torch.autograd.grad(_mix(*inputs), inputs, dY)
"""
TORCH_FUNCTIONALS = """

def liger_mean_mix(X, W):
    return LigerMeanMixFunction.apply(X, W)

def liger_scaled_tanh(x, scale: float = 1.0):
    return LigerScaledTanhFunction.apply(x, scale)

def liger_row_norm(X, W, B, eps):
    return LigerRowNormFunction.apply(X, W, B, eps)


def liger_kl_loss(input, target, reduction: str = "mean"):
    assert reduction in ("mean", "batchmean")
    return LigerKLLossFunction.apply(input, target, reduction)
"""
LAYER_NORM_WRITTEN_EPS = """
import torch.nn.functional as F


def no_eps_argument(x):
    return x * 2.0


def plain_layer_norm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)
"""
KL_BATCHMEAN = """
import torch.nn.functional as F


def kl_batchmean(log_q, p):
    return F.kl_div(log_q, p, reduction="batchmean")
"""


@pytest.fixture(scope="module")
def torch_kernels(tmp_path_factory):
    root = copy_checkout(tmp_path_factory.mktemp("torch_kernels") / "liger")
    ops = root / kernel_paths("row_norm")["ops"]
    ops.write_text(ROW_NORM_OPS.lstrip())
    ops.with_name("kl_loss.py").write_text(KL_LOSS_OPS.lstrip())
    ops.with_name("scaled_tanh.py").write_text(GPU_BACKWARD_OPS.lstrip())
    ops.with_name("mean_mix.py").write_text(MEAN_MIX_OPS.lstrip())
    functional = root / FUNCTIONAL
    imports = "from liger_kernel.ops.kl_loss import LigerKLLossFunction\n"
    imports += "from liger_kernel.ops.mean_mix import LigerMeanMixFunction\n"
    imports += "from liger_kernel.ops.row_norm import LigerRowNormFunction\n"
    imports += "from liger_kernel.ops.scaled_tanh import LigerScaledTanhFunction\n"
    functional.write_text(imports + functional.read_text() + TORCH_FUNCTIONALS)
    return root


def test_a_number_written_in_the_reference_fills_a_required_option(torch_kernels, tmp_path):
    """``F.layer_norm(..., eps=1e-5)`` against ``liger_row_norm(X, W, B, eps)``: the written eps (the entry's own
    number before the file's others) fills the option no hyper-parameter names; the weight and bias broadcast."""
    reference = _file(tmp_path, "plain_layer_norm", LAYER_NORM_WRITTEN_EPS) + ":plain_layer_norm"
    line = one_line_error(
        run_kernelgen("new", "plain_layer_norm", "--reference", reference, "--repo", str(torch_kernels))
    )
    assert "the existing kernel 'row_norm' computes it: liger_row_norm(X, W, B, eps=1e-05);" in line, line


def test_a_soft_target_the_kernel_takes_as_data_is_said_in_the_line(torch_kernels, tmp_path):
    """A loss between two distributions goes onto a kernel's ``target``; that the kernel gives it no gradient (a
    teacher's distribution is data) is the one difference, and the line says it."""
    reference = _file(tmp_path, "kl_batchmean", KL_BATCHMEAN)
    line = one_line_error(run_kernelgen("new", "kl_batchmean", "--reference", reference, "--repo", str(torch_kernels)))
    assert (
        "the existing kernel 'kl_loss' computes it: "
        'liger_kl_loss(input, target, reduction="batchmean"), with no gradient for target (p);' in line
    ), line


def test_the_entrys_own_numbers_come_first():
    assert reference_literals(LAYER_NORM_WRITTEN_EPS, "plain_layer_norm") == [1e-5, 2.0]
    assert reference_literals(LAYER_NORM_WRITTEN_EPS) == [2.0, 1e-5]


def test_a_kernel_whose_backward_cannot_run_here_is_named_from_its_forward(torch_kernels, tmp_path):
    """A function equal to the reference's has its gradient: the forward decides, and the line says the backward
    went unchecked."""
    reference = _file(
        tmp_path, "tanh_times_three", "import torch\n\n\ndef tanh_times_three(x):\n    return torch.tanh(x) * 3.0\n"
    )
    line = one_line_error(
        run_kernelgen("new", "tanh_times_three", "--reference", reference, "--repo", str(torch_kernels))
    )
    assert (
        "the existing kernel 'scaled_tanh' computes it: liger_scaled_tanh(x, scale=3.0) (forward compared; its backward "
        "does not run on this machine);" in line
    ), line


POWER_MIX = """
import torch
import torch.nn as nn


class PowerMix(nn.Module):
    def __init__(self):
        super().__init__()
        self.coefficients = nn.Parameter(torch.ones(3) / 3)

    def forward(self, h):
        c = self.coefficients
        return c[0] * h + c[1] * h.mean(dim=-1, keepdim=True) + c[2]
"""


def test_a_vector_parameter_read_by_element_is_one_argument(torch_kernels, tmp_path):
    """The profile holds ``coefficients[0..2]`` as three scalars; a row kernel takes the vector whole."""
    reference = _file(tmp_path, "power_mix", POWER_MIX)
    line = one_line_error(run_kernelgen("new", "power_mix", "--reference", reference, "--repo", str(torch_kernels)))
    assert "the existing kernel 'mean_mix' computes it: liger_mean_mix(X, W);" in line, line


TOKEN_WEIGHTED_NLL = """
import torch


def token_weighted_nll(logits, target, token_weight):
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return (nll * token_weight).sum() / token_weight.sum()
"""


def test_a_variant_asked_with_its_fused_linear_form_says_whether_the_kernel_has_one(tmp_path):
    root = copy_checkout(tmp_path / "liger")
    smoothed = _file(tmp_path, "smoothed_ce", SMOOTHED_CE)
    line = one_line_error(
        run_kernelgen("new", "smoothed", "--reference", smoothed, "--fused-linear", "--repo", str(root))
    )
    assert "computes it: liger_cross_entropy(" in line and "but 'cross_entropy' has no fused linear form" in line
    assert line.endswith("nothing written")
    weighted = _file(tmp_path, "token_weighted_nll", TOKEN_WEIGHTED_NLL)
    made = run_kernelgen("new", "tw_nll", "--reference", weighted, "--fused-linear", "--repo", str(root))
    assert made.returncode == 0, made.stderr
    # A copy without the fused linear form, named to come first: the kernel with one is named all the same.
    copy = run_kernelgen("new", "a_tw_copy", "--reference", weighted, "--force-new", "--repo", str(root))
    assert copy.returncode == 0, copy.stderr
    line = one_line_error(
        run_kernelgen("new", "tw_again", "--reference", weighted, "--fused-linear", "--repo", str(root))
    )
    assert (
        "the existing kernel 'tw_nll' computes it" in line and "its fused linear form is 'fused_linear_tw_nll'" in line
    )


FUSED_LINEAR_OPS = """import torch


class LigerFusedLinearDistillFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, _input, weight, target, ignore_index=-100):
        return (_input @ weight.t()).logsumexp(-1).mean()
"""

DISTILLATION = """import torch.nn.functional as F


def distill(student_logits, teacher_logits, labels, ignore_index: int = -100):
    ce = F.cross_entropy(student_logits, labels, ignore_index=ignore_index, reduction="sum")
    kl = F.kl_div(F.log_softmax(student_logits, -1), F.log_softmax(teacher_logits, -1), reduction="sum", log_target=True)
    return (ce + kl) / student_logits.shape[0]
"""


def test_a_fused_linear_kernel_is_no_variant_of_a_loss_of_logits(tmp_path):
    """A fused linear kernel takes hidden states and a weight, never the reference's logits: fed a teacher's logits as
    its weight, upstream's fused_linear_cross_entropy read out of bounds under the Triton interpreter and killed
    `new` of a Hinton distillation in upstream Liger-Kernel with a segmentation fault."""
    root = copy_checkout(tmp_path / "liger")
    (root / kernel_paths("fused_linear_distill")["ops"]).write_text(FUSED_LINEAR_OPS)
    (tmp_path / "distill.py").write_text(DISTILLATION)
    profile = analyze(f"{tmp_path / 'distill.py'}:distill")
    names = {plan.name for plan in call_plans(LigerRepo.open(root), profile)}
    assert not any(name.startswith("fused_linear_") for name in names), names
