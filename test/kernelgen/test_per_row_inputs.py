"""Per-row float inputs of a loss (tier 3): a tensor of one value per row (``[rows]`` / ``[B, T]``: a per-token
weight, GRPO's old log-probabilities and advantages, a reference model's log-probabilities) is found from how the
reference broadcasts it, recorded as ``per_row`` in the profile, read once per row by the kernel and given no
gradient; the derivation matches autograd in float64 (test_loss_kernels.py runs the generated tests of two of these
references under the interpreter)."""

import copy
import functools
import textwrap

import pytest
import torch

from test.kernelgen.test_losses import check_against_autograd
from tools.kernelgen.analyze import AnalyzeError
from tools.kernelgen.analyze import analyze
from tools.kernelgen.profile import validate_profile

# Kernels test_loss_kernels.py generates from REFERENCES: (entry, kernel name).
GENERATED = [("grpo_token_loss", "grpo_token"), ("KLPenalizedNLL", "kl_penalized_nll")]

REFERENCES = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    def token_weighted_nll(logits, target, token_weight):
        logp = torch.log_softmax(logits, dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
        return -(logp * token_weight).mean()


    def grpo_token_loss(logits, target, old_logp, advantages, epsilon: float = 0.2):
        logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
        ratio = torch.exp(logp - old_logp)
        clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon)
        return -torch.min(ratio * advantages, clipped * advantages).mean()


    class KLPenalizedNLL(nn.Module):
        # NLL plus the k3 estimate of the per-token KL to a reference model, masked mean over the tokens
        def __init__(self, beta: float = 0.04):
            super().__init__()
            self.beta = beta

        def forward(self, logits, labels, ref_logp, token_mask):
            logp = F.log_softmax(logits, dim=-1).gather(1, labels[:, None])[:, 0]
            kl = torch.exp(ref_logp - logp) - (ref_logp - logp) - 1
            return ((self.beta * kl - logp) * token_mask).sum() / token_mask.sum()


    def weighted_soft_ce(logits, soft, w):
        # soft is a distribution over each row: per element, as the reference runs with it
        return -(F.log_softmax(logits, -1) * soft).sum(-1).mul(w).mean()


    def mean_soft_ce(logits, soft):
        return -(F.log_softmax(logits, -1) * soft).mean()


    def hinted_weight(logits, target, w):
        return -(F.log_softmax(logits, -1).gather(-1, target[:, None]).squeeze(-1) * w).sum()


    def row_weight_by_hand(logits, w):
        # w is [rows]: made [rows, 1] to scale every class of its row
        return (logits.logsumexp(-1, keepdim=True) * w.unsqueeze(-1)).mean()


    def trl_grpo(logits, input_ids, old_per_token_logps, advantages, completion_mask, epsilon: float = 0.2):
        # TRL's layout: logits [B, T, V], the rest [B, T]; the gather names dim 2
        per_token_logps = torch.gather(logits.log_softmax(-1), dim=2, index=input_ids.unsqueeze(-1)).squeeze(-1)
        coef_1 = torch.exp(per_token_logps - old_per_token_logps)
        coef_2 = torch.clamp(coef_1, 1 - epsilon, 1 + epsilon)
        per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages)
        return (per_token_loss * completion_mask).sum() / completion_mask.sum()
    """
)


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    path = tmp_path_factory.mktemp("per_row") / "per_row_refs.py"
    path.write_text(REFERENCES)
    return path


@functools.lru_cache(maxsize=None)
def _analyzed(reference: str):
    return analyze(reference)


def _profile(references, entry):
    """The profile of ``entry`` (analysed once per session: the sympy derivation is the slow part), a copy."""
    return copy.deepcopy(_analyzed(f"{references}:{entry}"))


def _per_row(profile):
    return [t.name for t in profile.inputs if t.per_row]


@pytest.mark.parametrize(
    "entry, per_row",
    [
        ("token_weighted_nll", ["token_weight"]),
        ("grpo_token_loss", ["old_logp", "advantages"]),
        ("KLPenalizedNLL", ["ref_logp", "token_mask"]),
        ("weighted_soft_ce", ["w"]),  # soft stays [rows, classes]: the reference runs with it so
        ("row_weight_by_hand", ["w"]),
    ],
)
def test_per_row_inputs_are_found_from_how_the_reference_broadcasts(references, entry, per_row):
    profile = _profile(references, entry)
    assert profile.tier == 3 and validate_profile(profile) == []
    assert _per_row(profile) == per_row
    assert not any(t.requires_grad for t in profile.inputs if t.per_row)
    assert any("no gradient is derived for them" in remark for remark in profile.notes.remarks)


@pytest.mark.parametrize(
    "entry, log_probabilities", [("grpo_token_loss", ["old_logp"]), ("KLPenalizedNLL", ["ref_logp"])]
)
def test_a_per_row_log_probability_is_drawn_near_the_picked_one(references, entry, log_probabilities):
    """Subtracted from the picked log-probability (a ratio of probabilities): tests draw it as a log-probability,
    near the picked one, so a clipped ratio reaches every branch; a weight or an advantage stays real."""
    profile = _profile(references, entry)
    domains = {t.name: t.domain for t in profile.inputs if t.per_row}
    assert [name for name, domain in domains.items() if domain == "log_probabilities"] == log_probabilities


def test_the_hint_per_row_decides_and_names_only_inputs(references, tmp_path):
    hinted = tmp_path / "hinted.py"
    hinted.write_text(REFERENCES + '\nKERNELGEN = {"entry": "hinted_weight", "per_row": ["w"]}\n')
    assert _per_row(analyze(str(hinted))) == ["w"]
    wrong = tmp_path / "wrong.py"
    wrong.write_text(REFERENCES + '\nKERNELGEN = {"entry": "hinted_weight", "per_row": ["weights"]}\n')
    with pytest.raises(AnalyzeError, match=r"hint 'per_row' names \['weights'\]"):
        analyze(str(wrong))


def test_a_per_row_input_is_checked_in_the_profile(references):
    profile = _profile(references, "token_weighted_nll")
    profile.inputs[2].requires_grad = True
    profile.fused_linear.enabled = True
    problems = " ".join(validate_profile(profile))
    assert "inputs[2].requires_grad: a per-row input takes no gradient" in problems
    assert "fused_linear" not in problems  # a fused linear loss slices per-row inputs with its chunks
    profile.inputs[2].per_row = "yes"
    assert "inputs[2].per_row: 'yes' is not true or false" in " ".join(validate_profile(profile))


def _near_the_picked_log_probability(values):
    """old_logp around the picked log-probability, so the ratio falls below, inside and above the clip range."""
    logp = values["logits"].log_softmax(-1).gather(-1, values["target"][:, None])[:, 0]
    values["old_logp"] = logp + torch.linspace(-0.5, 0.5, logp.shape[0], dtype=torch.float64)


@pytest.mark.parametrize(
    "entry, adjust",
    [
        ("token_weighted_nll", None),
        ("grpo_token_loss", _near_the_picked_log_probability),
        ("KLPenalizedNLL", lambda values: values["token_mask"].copy_((values["token_mask"] > 0).double())),
        ("row_weight_by_hand", None),
    ],
)
def test_per_row_losses_match_autograd(references, entry, adjust):
    check_against_autograd(_profile(references, entry), adjust=adjust)


def test_a_mean_of_every_dim_reduces_the_rows_even_when_shapes_are_unknown(references, monkeypatch):
    """A reference that does not run on the examples (its shapes unknown): ``v.mean()`` still averages over rows
    and columns, not along each row as a per-row output (which a wrong per-element guess used to give)."""
    from tools.kernelgen.analyze import trace

    monkeypatch.setattr(trace, "_propagate_shapes", lambda *args, **kwargs: False)
    profile = analyze(f"{references}:mean_soft_ce")
    assert profile.math.loss.reduction == "mean" and profile.math.loss.denominator == "n_cols"
    check_against_autograd(profile)


def test_a_loss_written_for_b_t_v_logits_is_traced_and_tested_so(references):
    """TRL gathers the picked log-probabilities along dim 2 of [B, T, V] logits: the analysis traces it on 3-d
    examples (on [rows, V] ones dim 2 does not exist), its per-token inputs are [B, T], and the generated tests
    draw [B, T, V] logits (a kernel's [B, T, V] logits with [B, T] per-row inputs: test_loss_kernels'
    test_per_row_inputs_follow_the_leading_dims_of_the_logits)."""
    profile = _profile(references, "trl_grpo")
    assert profile.tier == 3 and validate_profile(profile) == []
    assert _per_row(profile) == ["old_per_token_logps", "advantages", "completion_mask"]
    assert {len(shape) for shape in profile.test.cpu_shapes + profile.test.gpu_shapes} == {3}


def test_a_per_row_input_whose_name_is_part_of_the_denominators_code_renders_clean(tmp_path):
    """The split-mean test reads the inputs its denominator names, by whole name: ``w`` is no part of ``n_rows``."""
    from tools.kernelgen.generate import render_formatted
    from tools.kernelgen.repo import LigerRepo

    source = tmp_path / "short_names.py"
    source.write_text(
        "import torch.nn.functional as F\n\n\n"
        "def weighted_mean_ce(logits, target, w):\n"
        '    return (F.cross_entropy(logits, target, reduction="none") * w).mean()\n'
    )
    files, _ = render_formatted(LigerRepo.open(None), analyze(f"{source}:weighted_mean_ce", name="weighted_mean_ce"))
    test = files["test/transformers/test_weighted_mean_ce.py"]
    assert "denominator = n_rows * 1.0" in test and "w = flat[" not in test


MASKING_LABELS = """
import torch
import torch.nn.functional as F


def kd_masked(student_logits, teacher_logits, labels, temperature: float = 2.0, ignore_index: int = -100):
    t_p = F.softmax(teacher_logits / temperature, dim=-1)
    per = -(t_p * F.log_softmax(student_logits / temperature, dim=-1)).sum(dim=-1)
    valid = labels.ne(ignore_index)
    return per.masked_fill(~valid, 0.0).sum() / valid.sum()
"""


def test_labels_that_only_mask_rows_are_integers_and_their_ignored_index_a_run_time_value(tmp_path):
    """``labels.ne(ignore_index)`` marks rows without picking a class: labels are class indices all the same (the
    tests draw integers with ignored rows), and ignore_index is read at run time, not frozen at -100."""
    path = tmp_path / "kd_masked.py"
    path.write_text(MASKING_LABELS)
    profile = analyze(str(path))
    labels = next(t for t in profile.inputs if t.name == "labels")
    assert (labels.dtype, labels.per_row) == ("int64", False)
    (ignore_index,) = [hp for hp in profile.hyperparameters if hp.name == "ignore_index"]
    assert ignore_index.choices is None and "ignore_index" not in profile.notes.specialized
    assert "ignore_index != labels" in profile.math.loss.denominator
    check_against_autograd(profile)


FLATTENING_STYLES = """
import torch
import torch.nn.functional as F


def flattened_ce(logits, labels, ignore_index: int = -100, reduction: str = "mean"):
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=ignore_index, reduction=reduction)


def viewed_ce(logits, labels, reduction: str = "mean"):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction=reduction)


def length_named_ce(logits, labels, reduction: str = "mean"):
    V = logits.shape[-1]
    return F.cross_entropy(logits.view(-1, V), labels.view(-1), reduction=reduction)
"""


@pytest.mark.parametrize("entry", ["flattened_ce", "viewed_ce", "length_named_ce"])
def test_a_loss_that_makes_rows_of_b_t_v_logits_itself_is_traced_on_them_and_gives_flat_values(tmp_path, entry):
    """``logits.flatten(0, 1)`` and ``logits.reshape(-1, logits.shape[-1])`` take [B, T, V] logits: traced on 2-d
    ones the first fails (it flattens the classes too), and both return [B*T] values under reduction none."""
    path = tmp_path / "flattening.py"
    path.write_text(FLATTENING_STYLES)
    profile = analyze(f"{path}:{entry}")
    assert profile.tier == 3 and validate_profile(profile) == []
    assert profile.math.loss.flat_rows
    assert {len(shape) for shape in profile.test.cpu_shapes} == {3}
    if entry != "flattened_ce":  # the check draws [rows, V] logits, which flatten(0, 1) does not take
        check_against_autograd(profile)


MASK_BY_ZERO = """
import torch.nn.functional as F


def masked_ce(logits, target, mask, ignore_index: int = -100, first: int = 0):
    per = F.cross_entropy(logits, target, ignore_index=ignore_index, reduction="none")
    return (per * (mask != first)).sum()
"""


def test_a_float_mask_compared_with_an_int_hyper_parameter_of_0_stays_a_float_per_row_input(tmp_path):
    """Only an ignore-like (negative) int marks a compared input as labels: a mask != 0 stays its float values."""
    path = tmp_path / "masked_ce.py"
    path.write_text(MASK_BY_ZERO)
    profile = analyze(str(path))
    mask = next(t for t in profile.inputs if t.name == "mask")
    assert (mask.dtype, mask.per_row) == ("same", True)
