"""Losses in two stages (issue 44): a reference whose math after the per-token statistics reduces over sequences or
pairs them (DPO, GRPO with a KL penalty, ...) is split from its traced graph into a vocabulary stage (a tier-3
kernel of the statistics) and a sequence stage (the rest of the reference, PyTorch). test_loss_kernels.py generates
``GENERATED`` into its checkout and runs their generated tests under the interpreter; .ci/make_gpu_checkout.py
carries them to the GPU."""

import ast
import copy
import functools
import re
import textwrap

import pytest
import torch

from torch.overrides import TorchFunctionMode

from test.kernelgen.test_per_row_inputs import _analyzed
from tools.kernelgen.analyze import AnalyzeError
from tools.kernelgen.analyze import analyze
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import hyper_cases
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.render import render_kernel
from tools.kernelgen.render.staged import sequence_parameters
from tools.kernelgen.render.staged import staged_loss_ops
from tools.kernelgen.render.views import build_views

# Kernels test_loss_kernels.py generates from REFERENCES: (entry, kernel name).
GENERATED = [
    ("dpo_sigmoid", "dpo_sigmoid"),
    ("GRPOLoss", "grpo_kl"),
    ("orpo", "orpo_odds_ratio"),
    ("SimPOLoss", "simpo_margin"),
    ("kto_sigmoid", "kto_sigmoid"),
    ("listwise_ranking", "listwise_ranking"),
    ("tempered_dpo", "tempered_dpo"),
    ("entropy_regularized_nll", "entropy_regularized_nll"),
    ("DAPOLoss", "dapo_token_mean"),
    ("dpo_flattened", "dpo_flattened"),
]
# Of those, the ones whose fused linear kernel (fused_linear_NAME) the CPU suite generates too (each costs seconds of
# the interpreter); the GPU checkout fuses all of them.
# The kernels the CPU suite generates and tests (the GPU checkout: all of them): DPO, ORPO, SimPO and KTO stream the
# same statistic as the tempered DPO at temperature 1 (their sequence stages are checked against their references
# below, without kernels). A tempered DPO's fused chunks hold whole pairs and form d(logits) in the forward (its temperature a kernel argument, its
# unmasked sums adjoints that autograd expands); a ranking over the batch recomputes the logits in the backward; an
# entropy-regularized NLL has two statistics a token and no hyper-parameter.
# A DPO that flattens the logits to rows itself streams them as [B, T, V] (its fused form: chunks of whole pairs).
ON_CPU = ["grpo_kl", "listwise_ranking", "tempered_dpo", "entropy_regularized_nll", "dapo_token_mean", "dpo_flattened"]
FUSED_ON_CPU = ["tempered_dpo", "listwise_ranking", "entropy_regularized_nll", "dpo_flattened"]

REFERENCES = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    def dpo_sigmoid(logits, labels, ref_chosen_logps, ref_rejected_logps, beta: float = 0.1):
        # Rafailov et al.: the first half of the batch is chosen, the second rejected; -100 marks a prompt's token
        loss_mask = labels != -100
        index = torch.where(loss_mask, labels, 0)
        per_token_logps = torch.gather(logits.log_softmax(-1), dim=2, index=index.unsqueeze(2)).squeeze(2)
        all_logps = (per_token_logps * loss_mask).sum(-1)
        chosen_logps = all_logps[: logits.shape[0] // 2]
        rejected_logps = all_logps[logits.shape[0] // 2 :]
        chosen_logratios = chosen_logps - ref_chosen_logps
        rejected_logratios = rejected_logps - ref_rejected_logps
        return -F.logsigmoid(beta * (chosen_logratios - rejected_logratios)).mean()


    class GRPOLoss(nn.Module):
        # TRL's default objective: clipped ratio, k3 KL to a reference model, masked mean per sequence, then mean
        def __init__(self, epsilon: float = 0.2, beta: float = 0.04):
            super().__init__()
            self.epsilon = epsilon
            self.beta = beta

        def forward(self, logits, input_ids, old_per_token_logps, ref_per_token_logps, advantages, completion_mask):
            logps = logits.log_softmax(dim=-1)
            per_token_logps = logps.gather(-1, input_ids[..., None])[..., 0]
            coef_1 = torch.exp(per_token_logps - old_per_token_logps)
            coef_2 = torch.clamp(coef_1, 1 - self.epsilon, 1 + self.epsilon)
            per_token_loss = -torch.min(coef_1 * advantages[:, None], coef_2 * advantages[:, None])
            delta = ref_per_token_logps - per_token_logps
            per_token_loss = per_token_loss + self.beta * (torch.exp(delta) - delta - 1)
            per_sequence = (per_token_loss * completion_mask).sum(dim=1) / completion_mask.sum(dim=1).clamp(min=1.0)
            return per_sequence.mean()


    def orpo(logits, labels, beta: float = 0.1):
        # Hong et al.: NLL of the chosen half plus the odds ratio of the length-averaged log-probabilities
        keep = labels.ne(-100)
        logp = F.log_softmax(logits, dim=-1).gather(2, labels.masked_fill(~keep, 0).unsqueeze(-1)).squeeze(-1)
        average = (logp * keep).sum(dim=1) / keep.sum(dim=1)
        half = labels.shape[0] // 2
        chosen, rejected = average[:half], average[half:]
        log_odds = (chosen - rejected) - (torch.log1p(-chosen.exp()) - torch.log1p(-rejected.exp()))
        nll = -(logp[:half] * keep[:half]).sum() / keep[:half].sum()
        return nll - beta * F.logsigmoid(log_odds).mean()


    class SimPOLoss(nn.Module):
        # Meng et al.: length-normalized log-probabilities, a target reward margin gamma
        def __init__(self, beta: float = 2.0, gamma: float = 0.5):
            super().__init__()
            self.beta, self.gamma = beta, gamma

        def forward(self, logits, labels):
            mask = (labels != -100).float()
            token_logps = torch.gather(logits.log_softmax(-1), 2, labels.clamp(min=0)[..., None])[..., 0]
            average = (token_logps * mask).sum(-1) / mask.sum(-1)
            chosen, rejected = average.chunk(2)
            return -F.logsigmoid(self.beta * (chosen - rejected) - self.gamma).mean()


    def kto_sigmoid(logits, labels, reference_logps, kl, desirable, beta: float = 0.1):
        # Ethayarajh et al.: per-sequence log-ratio against the reference model, compared with a KL baseline
        mask = labels != -100
        token_logps = torch.gather(logits.log_softmax(-1), 2, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        logratios = (token_logps * mask).sum(-1) - reference_logps
        chosen_losses = 1 - torch.sigmoid(beta * (logratios - kl))
        rejected_losses = 1 - torch.sigmoid(beta * (kl - logratios))
        return torch.where(desirable, chosen_losses, rejected_losses).mean()


    def kto_batch_baseline(logits, labels, ref_logps, ref_kl_logps, desirable, beta: float = 0.1):
        # TRL's KTO: the first half completions, the second mismatched ones whose mean log-ratio, clamped at 0 and
        # detached, is every completion's baseline
        mask = labels != -100
        seq = (logits.log_softmax(-1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1) * mask).sum(-1)
        policy_logps, policy_kl_logps = seq.chunk(2)
        kl = (policy_kl_logps - ref_kl_logps).mean().clamp(min=0).detach()
        logratios = policy_logps - ref_logps
        chosen = 1 - torch.sigmoid(beta * (logratios - kl))
        return torch.where(desirable, chosen, 1 - torch.sigmoid(beta * (kl - logratios))).mean()


    def listwise_ranking(logits, labels, rewards, temperature: float = 1.0):
        # B sampled completions of one prompt: the softmax of their length-normalized log-likelihoods against the
        # softmax of their rewards (every sequence's gradient reads the whole batch)
        mask = labels != -100
        logp = logits.log_softmax(-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
        scores = (logp * mask).sum(-1) / mask.sum(-1) / temperature
        return -(F.softmax(rewards, dim=0) * F.log_softmax(scores, dim=0)).sum()


    def tempered_dpo(logits, labels, ref_chosen, ref_rejected, beta: float = 0.1, temperature: float = 0.7):
        # DPO on logits sampled at a temperature, every token a completion's
        logp = (logits / temperature).log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1).sum(-1)
        chosen, rejected = logp.chunk(2)
        return -F.logsigmoid(beta * ((chosen - ref_chosen) - (rejected - ref_rejected))).mean()


    class DAPOLoss(nn.Module):
        # TRL's loss_type="dapo": clip-higher, a token-level mean over the whole batch; nothing names the token dim,
        # only advantages.unsqueeze(1) shows the rows are [B, T]
        def __init__(self, epsilon_low: float = 0.2, epsilon_high: float = 0.28):
            super().__init__()
            self.epsilon_low, self.epsilon_high = epsilon_low, epsilon_high

        def forward(self, logits, completion_ids, old_per_token_logps, advantages, completion_mask):
            picked = torch.gather(logits, dim=-1, index=completion_ids.unsqueeze(-1)).squeeze(-1)
            per_token_logps = picked - torch.logsumexp(logits, dim=-1)
            coef_1 = torch.exp(per_token_logps - old_per_token_logps)
            coef_2 = torch.clamp(coef_1, 1 - self.epsilon_low, 1 + self.epsilon_high)
            per_token_loss = -torch.min(coef_1 * advantages.unsqueeze(1), coef_2 * advantages.unsqueeze(1))
            return (per_token_loss * completion_mask).sum() / completion_mask.sum().clamp(min=1.0)


    def entropy_regularized_nll(logits, labels):
        # Two statistics a token (the label's log-probability, the entropy), no hyper-parameter: NLL less an entropy
        # bonus, a masked mean per sequence
        logp = logits.log_softmax(-1)
        nll = -logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        entropy = -(logp.exp() * logp).sum(-1)
        mask = (labels != -100).float()
        return (((nll - 0.01 * entropy) * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()


    def dpo_flattened(logits, labels, ref_logps, beta: float = 0.1):
        # The logits flattened to rows before the statistic, the per-token log-probabilities viewed back to [B, T]
        B, T, V = logits.shape
        logp = logits.reshape(B * T, V).log_softmax(-1).gather(-1, labels.reshape(B * T, 1).clamp(min=0)).view(B, T)
        seq = logp.sum(-1)
        chosen, rejected = seq[: B // 2], seq[B // 2 :]
        return -F.logsigmoid(beta * ((chosen - ref_logps[: B // 2]) - (rejected - ref_logps[B // 2 :]))).mean()


    def masked_dpo_flattened(logits, labels, ref_logps, beta: float = 0.1):
        # TRL-style: flattened by logits.size(-1), a loss mask of the flattened labels, viewed back by view_as
        flat_labels = labels.view(-1)
        loss_mask = flat_labels != -100
        flat = logits.view(-1, logits.size(-1))
        per_token = flat.log_softmax(-1).gather(1, torch.where(loss_mask, flat_labels, 0)[:, None])[:, 0]
        seq = (per_token * loss_mask).view_as(labels).sum(-1)
        chosen, rejected = seq.chunk(2)
        ref_chosen, ref_rejected = ref_logps.chunk(2)
        return -F.logsigmoid(beta * ((chosen - ref_chosen) - (rejected - ref_rejected))).mean()


    class FlattenedSimPO(nn.Module):
        # The per-token NLL of F.cross_entropy, which takes the classes at dim 1: of the rows, unflattened to [B, T]
        def __init__(self, beta: float = 2.0, gamma: float = 0.5):
            super().__init__()
            self.beta, self.gamma = beta, gamma

        def forward(self, logits, labels):
            batch, length, vocab = logits.shape
            nll = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none")
            token_logps = -nll.unflatten(0, (batch, length))
            mask = (labels != -100).float()
            average = (token_logps * mask).sum(-1) / mask.sum(-1)
            chosen, rejected = average.chunk(2)
            return -F.logsigmoid(self.beta * (chosen - rejected) - self.gamma).mean()


    def dpo_ignoring(logits, labels, ref_logps, beta: float = 0.1, ignore_index: int = -100):
        # DPO with the token marker an argument: fx traces the int at its default
        mask = labels != ignore_index
        logp = logits.float().log_softmax(-1).gather(-1, torch.where(mask, labels, 0).unsqueeze(-1)).squeeze(-1)
        seq = (logp * mask).sum(-1)
        n = seq.shape[0] // 2
        return -F.logsigmoid(beta * ((seq[:n] - seq[n:]) - (ref_logps[:n] - ref_logps[n:]))).mean()


    class DPOIgnoring(nn.Module):
        # The same with the marker held by the module, read in the sequence stage only
        def __init__(self, beta: float = 0.1, ignore_index: int = -100):
            super().__init__()
            self.beta, self.ignore_index = beta, ignore_index

        def forward(self, logits, labels, ref_logps):
            logp = logits.log_softmax(-1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
            seq = (logp * (labels != self.ignore_index)).sum(-1)
            chosen, rejected = seq.chunk(2)
            ref_chosen, ref_rejected = ref_logps.chunk(2)
            return -F.logsigmoid(self.beta * ((chosen - rejected) - (ref_chosen - ref_rejected))).mean()


    def dpo_ignoring_next(logits, labels, ref_logps, ignore_index: int = -100):
        # A value computed from the int: the graph holds -99, not the argument
        mask = labels != ignore_index + 1
        logp = logits.log_softmax(-1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        seq = (logp * mask).sum(-1)
        n = seq.shape[0] // 2
        return -F.logsigmoid((seq[:n] - seq[n:]) - (ref_logps[:n] - ref_logps[n:])).mean()


    def reduces_tokens_and_classes_at_once(logits, labels, w):
        logp = logits.log_softmax(-1).gather(-1, labels[..., None])[..., 0]
        return -(logp.sum(-1) * w).mean() + logits.log_softmax(-1).mean(dim=(1, 2)).sum()


    def dpo_of_two_tensors(chosen_logits, rejected_logits, chosen_labels, rejected_labels, ref_chosen, ref_rejected):
        chosen = chosen_logits.log_softmax(-1).gather(-1, chosen_labels[..., None])[..., 0].sum(-1)
        rejected = rejected_logits.log_softmax(-1).gather(-1, rejected_labels[..., None])[..., 0].sum(-1)
        return -F.logsigmoid(0.1 * ((chosen - ref_chosen) - (rejected - ref_rejected))).mean()


    def reads_the_vocabulary_size(logits, labels):
        logp = logits.log_softmax(-1).gather(-1, labels[..., None])[..., 0]
        return -(logp.sum(-1) / logits.shape[-1]).mean()


    def flattens_the_tokens_time_major(logits, labels):
        B, T, V = logits.shape
        flat = logits.transpose(0, 1).reshape(T * B, V)
        logp = flat.log_softmax(-1).gather(-1, labels.t().reshape(T * B, 1)).squeeze(-1)
        return -logp.view(T, B).sum(0).mean()


    def reads_the_vocabulary_size_of_the_rows(logits, labels):
        flat = logits.view(-1, logits.size(-1))
        logp = flat.log_softmax(-1).gather(-1, labels.view(-1, 1)).view_as(labels)
        return -(logp.sum(-1) / flat.shape[1]).mean()


    def shifts_the_logits(logits, labels, ref_logps):
        # torchtune's get_batch_log_probs: logits[:, :-1] holds T - 1 tokens, which the probe's B equals
        logits = logits[:, :-1, :]
        logp = torch.gather(logits.log_softmax(-1), dim=2, index=labels[:, 1:].unsqueeze(2)).squeeze(2)
        chosen, rejected = (logp.sum(-1) - ref_logps).chunk(2)
        return -F.logsigmoid(chosen - rejected).mean()


    def flattens_shifted_logits(logits, labels):
        B, T, V = logits.shape
        logp = logits[:, :-1].reshape(-1, V).log_softmax(-1).gather(-1, labels[:, 1:].reshape(-1, 1))
        return -logp.view(B, -1).sum(-1).mean()


    def orpo_from_nll(logits, labels, beta: float = 0.1):
        # TRL's ORPO on F.cross_entropy's per-token NLL: the statistic is positive, and log1p(-exp(mean log-prob))
        # is NaN wherever it is drawn as a log-probability
        B, T, V = logits.shape
        nll = F.cross_entropy(logits.view(B * T, V), labels.view(B * T), reduction="none").view(B, T)
        chosen, rejected = (-nll.mean(-1)).chunk(2)
        log_odds = chosen - rejected - (torch.log1p(-torch.exp(chosen)) - torch.log1p(-torch.exp(rejected)))
        return nll[: B // 2].mean() - beta * F.logsigmoid(log_odds).mean()
    """
)


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    path = tmp_path_factory.mktemp("stages") / "stage_refs.py"
    path.write_text(REFERENCES)
    return path


def _profile(references, entry):
    return copy.deepcopy(_analyzed(f"{references}:{entry}"))  # analysed once per session


@pytest.mark.parametrize(
    "entry, statistics, shapes",
    [
        ("dpo_sigmoid", ["per_token_logps"], {"ref_chosen_logps": "B // 2", "ref_rejected_logps": "B // 2"}),
        (
            "GRPOLoss",
            ["per_token_logps"],
            {
                "old_per_token_logps": "B, T",
                "ref_per_token_logps": "B, T",
                "advantages": "B",
                "completion_mask": "B, T",
            },
        ),
        ("orpo", ["logp"], {}),
        ("SimPOLoss", ["token_logps"], {}),
        ("kto_sigmoid", ["token_logps"], {"reference_logps": "B", "kl": "B", "desirable": "B"}),
        ("listwise_ranking", ["logp"], {"rewards": "B"}),
        (
            "DAPOLoss",
            ["picked", "per_token_logps_logsumexp"],
            {"old_per_token_logps": "B, T", "advantages": "B", "completion_mask": "B, T"},
        ),
        ("dpo_flattened", ["logp"], {"ref_logps": "B"}),
        ("masked_dpo_flattened", ["per_token"], {"ref_logps": "B"}),
        ("FlattenedSimPO", ["nll"], {}),
    ],
)
def test_the_split_finds_the_statistics_and_the_shapes_of_the_sequence_inputs(references, entry, statistics, shapes):
    profile = _profile(references, entry)
    assert profile.tier == 3 and validate_profile(profile) == []
    assert [output.name for output in profile.outputs] == statistics
    assert {t.name: t.sequence_shape for t in profile.inputs if t.sequence_shape} == shapes
    assert [t.name for t in profile.inputs if t.requires_grad] == ["logits"]
    assert profile.math.loss.reduction == "none" and "def sequence_stage(" in profile.math.loss.sequence
    # The vocabulary stage streams the logits for the picked log-probability alone: a maximum, a sum and the pick.
    assert sorted(s.reduce for s in profile.math.statistics) == ["max", "sum", "sum"]
    assert "logits" not in profile.math.loss.sequence  # nothing over the vocabulary is left to PyTorch


def test_log_probabilities_beside_a_statistic_and_token_masks_are_drawn_as_such(references):
    """A mask weights per-token values and is counted (``(loss * mask).sum() / mask.sum()``): drawn as 0 or 1; the
    advantages, a weight never counted, stay a standard normal."""
    profile = _profile(references, "GRPOLoss")
    domains = {t.name: t.domain for t in profile.inputs if t.sequence_shape}
    assert domains == {
        "old_per_token_logps": "log_probabilities",
        "ref_per_token_logps": "log_probabilities",
        "advantages": "real",
        "completion_mask": "mask",
    }
    draws = staged_loss_ops(profile, lambda ops: [], lambda formulas: []).sequence_draws
    # Three tokens in four kept, and each sequence's first and last: no sequence's mean divides by zero kept tokens.
    kept = "(torch.rand(B, T, device=device) > 0.25).index_fill(-1, torch.tensor([0, T - 1], device=device), True)"
    assert draws["completion_mask"] == f"({kept}).float()"
    drawn = eval(draws["completion_mask"], {"torch": torch, "B": 64, "T": 2, "device": "cpu"})
    assert (drawn.sum(-1) > 0).all()
    assert draws["advantages"].startswith("torch.randn(")


# Their statistic is the picked log-probability of the logits as they are (tempered_dpo's: of logits / temperature;
# entropy_regularized_nll has an entropy beside it, DAPOLoss the pick and the logsumexp apart).
@pytest.mark.parametrize(
    "entry",
    [entry for entry, _ in GENERATED if entry not in ("tempered_dpo", "entropy_regularized_nll", "DAPOLoss")]
    + ["masked_dpo_flattened"],
)
def test_the_sequence_stage_on_the_statistics_is_the_reference(references, entry):
    """On other shapes than the analysis probed (B 6, T 7), in float64: the profile's sequence stage applied to
    torch's own per-token log-probabilities gives the reference's loss and, through autograd, its gradient."""
    profile = _profile(references, entry)
    namespace = {}
    exec(compile(REFERENCES, "<references>", "exec"), namespace)
    exec(compile("import torch\n" + profile.math.loss.sequence, "<sequence>", "exec"), namespace)
    torch.manual_seed(0)
    B, T, V = 6, 7, 13
    logits = torch.randn(B, T, V, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, V, (B, T))
    inputs = {"logits": logits, "labels": labels, "input_ids": labels}
    for tensor in profile.inputs:
        if tensor.sequence_shape:
            shape = eval(f"({tensor.sequence_shape},)", {}, {"B": B, "T": T})
            drawn = torch.randn(shape, dtype=torch.float64) - 2
            inputs[tensor.name] = drawn > -2 if tensor.dtype == "bool" else drawn
    arguments = [inputs[t.name] for t in profile.inputs]
    reference = namespace[entry]
    expected = (reference() if isinstance(reference, type) else reference)(*arguments)
    (expected_grad,) = torch.autograd.grad(expected, logits)
    picked = logits.log_softmax(-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    hypers = {hp.name: hp.default for hp in profile.hyperparameters}
    known = {profile.outputs[0].name: picked, **inputs, **hypers}
    parameters = namespace["sequence_stage"].__code__.co_varnames[: namespace["sequence_stage"].__code__.co_argcount]
    got = namespace["sequence_stage"](*(known[name] for name in parameters))
    (got_grad,) = torch.autograd.grad(got, logits)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got_grad, expected_grad)


@pytest.mark.parametrize(
    "entry, twin, written",
    [
        ("dpo_flattened", "kto_sigmoid", "    seq = logp.sum(-1)\n"),
        (
            "masked_dpo_flattened",
            "dpo_sigmoid",
            "    seq = (per_token.reshape(-1) * loss_mask).view_as(labels).sum(-1)\n",
        ),
        ("FlattenedSimPO", "", "    token_logps = -nll\n"),
    ],
)
def test_logits_flattened_to_rows_give_the_statistic_per_token(references, entry, twin, written):
    """``logits.reshape(B * T, V)`` (``view(-1, V)``, ``flatten(0, 1)``) only regroups the tokens: the kernel streams
    the [B, T, V] logits as it does those of a reference that does not flatten them (``twin``), and the sequence stage
    takes the [B, T] statistic, viewed back where the reference views it back (``logp.view(B, T)`` is the statistic
    itself) and flattened where the reference computes on the flattened tokens (a mask of the flattened labels). It
    was refused as a reduction of the logits to [20, V], the probe's sizes."""
    profile = _profile(references, entry)
    assert written in profile.math.loss.sequence, profile.math.loss.sequence
    if twin:
        unflattened = _profile(references, twin).math
        assert [(s.reduce, s.of) for s in profile.math.statistics] == [(s.reduce, s.of) for s in unflattened.statistics]
        assert list(profile.math.outputs.values()) == list(unflattened.outputs.values())


@pytest.mark.parametrize("entry", ["dpo_ignoring", "DPOIgnoring"])
def test_an_int_hyper_parameter_is_a_value_of_the_sequence_stage(references, entry):
    """fx traces an int argument at its default: the sequence stage had ``labels != -100`` written in, under fx's
    ``torch._assert`` that failed at any other ignore_index (a module's ``self.ignore_index`` was not even passed:
    -100 whatever it held). It reads the argument, computes the reference at another value, and the generated tests
    sweep one (tokens marked by the case's value)."""
    profile = _profile(references, entry)
    source = profile.math.loss.sequence
    assert "labels != ignore_index" in source and "-100" not in source and "_assert" not in source, source
    ignore_index = next(hp for hp in profile.hyperparameters if hp.name == "ignore_index")
    assert ignore_index.choices is None and "ignore_index" not in profile.notes.specialized
    assert [case["ignore_index"] for case in hyper_cases(profile)][-1] == 1
    assert build_views(profile).ops.ignore_markers == [("labels", 'hyper["ignore_index"]')]
    namespace = {}
    exec(compile(REFERENCES, "<references>", "exec"), namespace)
    exec(compile("import torch\n" + source, "<sequence>", "exec"), namespace)
    torch.manual_seed(0)
    B, T, V = 6, 7, 13
    logits = torch.randn(B, T, V, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, V, (B, T))
    labels[:, :2] = 3
    ref_logps = torch.randn(B, dtype=torch.float64)
    hypers = {"beta": 0.5, "ignore_index": 3}
    reference = namespace[entry]
    forward = reference(**hypers) if isinstance(reference, type) else functools.partial(reference, **hypers)
    expected = forward(logits, labels, ref_logps)
    (expected_grad,) = torch.autograd.grad(expected, logits)
    picked = logits.log_softmax(-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    known = {profile.outputs[0].name: picked, "labels": labels, "ref_logps": ref_logps, **hypers}
    got = namespace["sequence_stage"](*(known[name] for name in sequence_parameters(source)))
    (got_grad,) = torch.autograd.grad(got, logits)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got_grad, expected_grad)


@pytest.mark.parametrize(
    "mask, marker",
    [
        ("labels.ne(ignore_index)", 'hyper["ignore_index"]'),
        ("torch.ne(labels, ignore_index)", 'hyper["ignore_index"]'),
        ("~(labels == ignore_index)", 'hyper["ignore_index"]'),
        ("labels.eq(ignore_index).logical_not()", 'hyper["ignore_index"]'),
        ("ignore_index != labels", 'hyper["ignore_index"]'),
        ("torch.not_equal(labels, -100)", "-100"),
        ("~labels.eq(-100)", "-100"),
    ],
)
def test_the_tests_mark_the_skipped_tokens_however_the_mask_is_spelled(references, mask, marker):
    """The generated tests set a token of each sequence to what the sequence stage compares the labels with: found
    as the eq or ne op of its fx trace, not only where the text reads ``labels != X``."""
    profile = _profile(references, "dpo_ignoring")
    assert "labels != ignore_index" in profile.math.loss.sequence
    profile.math.loss.sequence = profile.math.loss.sequence.replace("labels != ignore_index", mask)
    assert build_views(profile).ops.ignore_markers == [("labels", marker)]


def test_an_int_the_reference_computes_a_value_from_keeps_its_traced_default(references):
    """``labels != ignore_index + 1``: the graph holds -99, which no argument is; the sequence stage keeps it and
    fx's guard, and the Function refuses another ignore_index in one line (its choices)."""
    profile = _profile(references, "dpo_ignoring_next")
    assert "labels != -99" in profile.math.loss.sequence
    assert next(hp.choices for hp in profile.hyperparameters if hp.name == "ignore_index") == [-100]
    assert all(case["ignore_index"] == -100 for case in hyper_cases(profile))


@pytest.mark.parametrize(
    "entry, groups",
    [("dpo_sigmoid", "pair"), ("GRPOLoss", "sequence"), ("orpo", "pair"), ("kto_sigmoid", "sequence")]
    + [("listwise_ranking", ""), ("tempered_dpo", "pair"), ("kto_batch_baseline", ""), ("orpo_from_nll", "pair")],
)
def test_which_sequences_adjoints_read_each_other_is_found(references, entry, groups):
    """A pair's adjoints read the pair's statistics alone (DPO, ORPO: i with i + B // 2; ORPO's token count is an
    input's), a GRPO or KTO sequence's its own; a softmax over the batch's sequences reads all of them, and so does
    KTO's baseline of the batch: ``.clamp(min=0)`` is flat at the probe's first draw (reference log-probabilities
    near 1, above the policy's), where it was taken for one sequence's and the fused form's chunks, of whole
    sequences, computed it from the statistics of the chunks before them and zeros (d(hidden) 90% off). An ORPO on
    the NLL is NaN where the statistics are drawn as log-probabilities; such draws say nothing (they said 'sequence',
    and the fused form split each pair over chunks: d(hidden) 14% off)."""
    assert _profile(references, entry).math.loss.sequence_groups == groups


def test_what_a_loss_selects_by_is_a_boolean(references):
    """KTO's desirable/undesirable labels are the condition of a torch.where: drawn (and declared) as booleans."""
    dtypes = {t.name: t.dtype for t in _profile(references, "kto_sigmoid").inputs}
    assert dtypes == {"logits": "same", "labels": "int64", "reference_logps": "same", "kl": "same", "desirable": "bool"}


UNUSED_VOCABULARY_SIZE = """import torch


def per_sequence_nll(logits, labels, ignore_index: int = -100):
    B, T, V = logits.shape
    mask = labels != ignore_index
    logp = logits.log_softmax(-1).gather(-1, torch.where(mask, labels, 0).unsqueeze(-1)).squeeze(-1)
    return -((logp * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()
"""


def test_a_vocabulary_size_unpacked_but_never_read_is_no_size_the_sequence_stage_reads(tmp_path):
    """``B, T, V = logits.shape`` with none of them used after: it was refused as reading the vocabulary's size."""
    path = tmp_path / "unused_size.py"
    path.write_text(UNUSED_VOCABULARY_SIZE)
    profile = analyze(f"{path}:per_sequence_nll")
    assert profile.tier == 3 and profile.math.loss.sequence


@pytest.mark.parametrize(
    "entry, written, problem",
    [
        (
            "reads_the_vocabulary_size",
            "return -(logp.sum(-1) / logits.shape[-1]).mean()",
            "reads a size of logits beyond its leading dims [B, T]",
        ),
        (
            "reduces_tokens_and_classes_at_once",
            "return -(logp.sum(-1) * w).mean() + logits.log_softmax(-1).mean(dim=(1, 2)).sum()",
            "reduces the [B, T, V] logits to [B]; a statistic of the vocabulary holds one value per token",
        ),
        (
            "dpo_of_two_tensors",
            "rejected = rejected_logits.log_softmax(-1).gather(-1, rejected_labels[..., None])[..., 0].sum(-1)",
            "",  # the line is quoted after the input's name
        ),
        (
            "flattens_the_tokens_time_major",
            "flat = logits.transpose(0, 1).reshape(T * B, V)",
            "flattens [T, B, V] into rows: a loss in two stages takes its per-token statistics in the order of the "
            "[B, T] tokens",
        ),
        (
            "reads_the_vocabulary_size_of_the_rows",
            "return -(logp.sum(-1) / flat.shape[1]).mean()",
            "reads a size of logits beyond its leading dim [B*T] (its tokens flattened)",
        ),
        (
            "flattens_shifted_logits",
            "logp = logits[:, :-1].reshape(-1, V).log_softmax(-1).gather(-1, labels[:, 1:].reshape(-1, 1))",
            "slices the tokens of the [B, T, V] logits (a causal LM's shift logits[:, :-1, :]), whose rows a loss in "
            "two stages streams all of: slice before the kernel",
        ),
        (
            "shifts_the_logits",
            "logits = logits[:, :-1, :]",
            # it was refused at the gather as reducing the logits to [B, B, ?]
            "slices the tokens of the [B, T, V] logits (a causal LM's shift logits[:, :-1, :]), whose rows a loss in "
            "two stages streams all of: slice before the kernel and pass it the sliced logits and labels, or shift "
            "the labels alone",
        ),
    ],
)
def test_what_the_split_cannot_take_is_refused_with_its_line(references, entry, written, problem):
    line = next(i for i, text in enumerate(REFERENCES.splitlines(), 1) if written in text)
    with pytest.raises(AnalyzeError) as caught:
        analyze(f"{references}:{entry}")
    message = str(caught.value)
    # In the words of the logits' dims, never the sizes the split probed them at (B 4, T 5, V 11).
    assert not re.search(r"\b(4|5|11|16|20)\b", message.split(": ", 1)[1].replace(written, "")), message
    if problem:
        assert message.startswith(f"{references}:{line}: `{written}` {problem}"), message
    else:
        expected = (
            f"{references}:{line}: rejected_logits is a second [B, T, V] input beside chosen_logits (`{written}`)"
        )
        assert message.startswith(expected) and "chosen and rejected as one batch" in message, message


def test_the_generated_tests_float64_truth_keeps_the_references_float32_casts_at_float64(references):
    """``dpo_ignoring`` widens the logits with ``.float()``: in the generated test's float64 run that cast must keep
    float64, or the truth is eager fp32 exactly and the fp32 cases' tolerance floor (eager's own error against the
    truth) is nil, while the per-sequence sums of the kernel's fp32 log-probabilities differ from eager's by their
    rounding (an H200 run failed a DPO's model-sized case by a relative 6.4e-5 so)."""
    profile = _profile(references, "dpo_ignoring")
    text = render_kernel(profile).files[kernel_paths(profile.operation_name)["test"]]
    wanted = {"dpo_ignoring", "_KeepFloat64", "_reference_forward", "_reference_run"}
    tree = ast.parse(text)
    tree.body = [node for node in tree.body if getattr(node, "name", "") in wanted]
    assert {node.name for node in tree.body} == wanted
    namespace = {"torch": torch, "F": torch.nn.functional, "TorchFunctionMode": TorchFunctionMode}
    exec(compile(tree, "<generated test>", "exec"), namespace)
    torch.manual_seed(0)
    logits = torch.randn(4, 3, 11, dtype=torch.float64)
    labels = torch.randint(0, 11, (4, 3))
    labels[0, 0] = -100
    inputs = [logits, labels, torch.randn(4, dtype=torch.float64)]
    hyper = {"beta": 0.1, "ignore_index": -100}
    ref_inputs, outputs, _ = namespace["_reference_run"](inputs, hyper, torch.float64, grad_scale=torch.ones_like)
    # The same reference without its cast, in float64 throughout.
    widened = logits.clone().requires_grad_(True)
    source = ast.unparse(next(n for n in ast.parse(text).body if getattr(n, "name", "") == "dpo_ignoring"))
    uncast = {"torch": torch, "F": torch.nn.functional}
    exec(source.replace("logits.float()", "logits"), uncast)
    loss = uncast["dpo_ignoring"](widened, labels, inputs[2], **hyper)
    loss.backward()
    assert outputs[0].dtype == torch.float64
    assert torch.equal(outputs[0], loss.detach())
    assert torch.equal(ref_inputs[0].grad, widened.grad)


def test_a_second_logits_tensor_is_named_where_the_sequence_math_is_refused(tmp_path):
    """A full-vocabulary KL to a reference model's logits, averaged per sequence: the one kernel refuses the
    per-sequence mean, and the line says why no sequence stage takes it (the probe tried the second logits as [B, T,
    V] before one value, which a log-softmax over the last dim also took, and the refusal named a line of no
    consequence)."""
    path = tmp_path / "full_kl.py"
    path.write_text(
        "import torch.nn.functional as F\n\n\n"
        "def full_kl(logits, ref_logits, mask, kl_coef: float = 0.1):\n"
        "    logp = F.log_softmax(logits, dim=-1)\n"
        "    ref_logp = F.log_softmax(ref_logits, dim=-1)\n"
        "    kl = (logp.exp() * (logp - ref_logp)).sum(-1)\n"
        "    return kl_coef * ((kl * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()\n"
    )
    with pytest.raises(AnalyzeError) as raised:
        analyze(f"{path}:full_kl")
    message = str(raised.value)
    assert message.startswith(f"{path}:8: `.mean()`"), message
    assert message.endswith("ref_logits is a second one that meets logits element by element"), message


SWITCHES = """import torch
import torch.nn as nn
import torch.nn.functional as F


class PreferenceLoss(nn.Module):
    def __init__(self, loss_type: str = "ipo"):
        super().__init__()
        self.loss_type = loss_type

    def forward(self, logits, labels, ref_chosen, ref_rejected, beta: float = 0.5):
        mask = labels != -100
        logp = torch.log_softmax(logits, -1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        chosen, rejected = ((logp * mask).sum(-1) / mask.sum(-1).clamp(min=1)).chunk(2)
        h = (chosen - ref_chosen) - (rejected - ref_rejected)
        if self.loss_type == "ipo":
            return ((h - 1 / (2 * beta)) ** 2).mean()
        return -F.logsigmoid(beta * h).mean()


def averaged_dpo(logits, labels, ref_chosen, ref_rejected, beta: float = 0.1, average_log_prob: bool = False):
    mask = labels != -100
    logp = torch.gather(logits.log_softmax(-1), 2, labels.clamp(min=0).unsqueeze(2)).squeeze(2)
    seq = (logp * mask).sum(-1) / mask.sum(-1) if average_log_prob else (logp * mask).sum(-1)
    chosen, rejected = seq.chunk(2)
    return -F.logsigmoid(beta * ((chosen - ref_chosen) - (rejected - ref_rejected))).mean()
"""


@pytest.mark.parametrize(
    "entry, switch, other", [("PreferenceLoss", "loss_type", "hinge"), ("averaged_dpo", "average_log_prob", True)]
)
def test_a_switch_of_a_two_stage_loss_is_refused_at_values_it_was_not_derived_for(tmp_path, entry, switch, other):
    """A str or bool the sequence stage was traced at (a module's loss_type, a function's average_log_prob): the
    Function and its fused form refuse other values in one line; before, a module computed the traced branch for any
    value, and a bool's guard (``average_log_prob == False``) failed ruff."""
    import inspect

    from test.kernelgen.conftest import copy_checkout
    from test.kernelgen.conftest import import_generated_ops
    from tools.kernelgen.generate import plan_new
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.writer import write_all

    root = copy_checkout(tmp_path / "liger")
    (root / "switches.py").write_text(SWITCHES)
    profile = analyze(f"{root / 'switches.py'}:{entry}", name="switched")
    profile.fused_linear.enabled = True
    write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    function = import_generated_ops(root, "switched").LigerSwitchedFunction
    names = list(inspect.signature(function.forward).parameters)[1:]
    with pytest.raises(ValueError, match=f"switched: generated for {switch} in "):
        function.apply(*[other if name == switch else torch.zeros(2, 1, 3) for name in names])
    # The fused form imports the loss's ops from the checkout's package: its check is read, not run, here.
    fused = (root / kernel_paths("fused_linear_switched")["ops"]).read_text()
    assert f'f"fused_linear_switched: generated for {switch} in ' in fused
