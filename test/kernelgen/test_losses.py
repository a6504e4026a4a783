"""Tier-3 synthesis: losses lowered from references and derived as chunked row programs, checked on float64 torch.

The derived statements run on torch (``torch_tl.TorchTL``) the way the tier-3 template runs them: one row at a
time, each pass over the row in chunks (masked past the row's end), then the outputs, the adjoints and the gradient
pass (or the gradient inside the last pass). Loss and gradients must match torch.autograd on the reference, through
the reduction the profile records. The generated Triton kernels are tested by their own generated tests
(test_loss_kernels.py runs them).
"""

import functools
import re
import textwrap

import pytest
import sympy
import torch

from test.kernelgen.torch_tl import run_statements
from tools.kernelgen.analyze import AnalyzeError
from tools.kernelgen.analyze import analyze
from tools.kernelgen.derivation import loss_math
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.render.reference_hypers import reference_hypers
from tools.kernelgen.synth import parse_formula
from tools.kernelgen.synth.losses import _one_column_indicator
from tools.kernelgen.synth.losses import synthesize_loss
from tools.kernelgen.synth.printer import print_torch

TIER3_BUILTINS = ["cross_entropy", "kl_div", "jsd", "tvd", "cross_entropy_entropy_bonus"]

# Losses in the styles people write them: library calls and the same math by hand, functions and modules, masks
# and ignore indices, label smoothing by one-hot, softcapping, distillation from two sets of logits, extra outputs.
STYLES = textwrap.dedent(
    """
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    def gathered_nll(logits, target, ignore_index: int = -100):
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        picked = log_probs.gather(dim=-1, index=target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        mask = (target != ignore_index).float()
        return -(picked * mask).sum() / mask.sum().clamp(min=1.0)


    def nll_of_log_softmax(logits, target, ignore_index: int = -100):
        return F.nll_loss(F.log_softmax(logits, dim=-1), target, ignore_index=ignore_index)


    def one_hot_smoothing(logits, target, smoothing: float = 0.1):
        n_classes = logits.shape[-1]
        soft = F.one_hot(target, n_classes).to(logits.dtype) * (1 - smoothing) + smoothing / n_classes
        return -(soft * torch.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


    def softcapped_cross_entropy(logits, target, softcap: float = 30.0):
        capped = softcap * torch.tanh(logits / softcap)
        return F.cross_entropy(capped, target, reduction="sum")


    def kl_by_hand(log_q, p):
        return (torch.xlogy(p, p) - p * log_q).sum() / log_q.size(0)


    def kl_log_target(log_q, log_p, reduction: str = "batchmean"):
        return F.kl_div(log_q, log_p, reduction=reduction, log_target=True)


    class DistillationLoss(nn.Module):
        def __init__(self, temperature=2.0):
            super().__init__()
            self.temperature = temperature

        def forward(self, student_logits, teacher_logits):
            t = self.temperature
            teacher = torch.softmax(teacher_logits / t, dim=-1)
            student = torch.log_softmax(student_logits / t, dim=-1)
            return (teacher * (teacher.log() - student)).sum(-1).mean() * t * t


    class HintonDistillation(nn.Module):
        # F.kl_div of temperature-softened distributions: near uniform at T 8, the KL is small against log(V)
        def __init__(self, T: float = 4.0):
            super().__init__()
            self.T = T

        def forward(self, y_s, y_t):
            p_s = F.log_softmax(y_s / self.T, dim=1)
            p_t = F.softmax(y_t / self.T, dim=1)
            return F.kl_div(p_s, p_t, reduction="batchmean") * (self.T**2)


    def cross_entropy_and_z_loss(logits, target, z_weight: float = 1e-4):
        lse = torch.logsumexp(logits, dim=-1)
        picked = logits.gather(-1, target[:, None])[:, 0]
        loss = (lse - picked).mean()
        z_loss = z_weight * (lse**2).mean()
        return loss + z_loss, z_loss


    class ReducedCrossEntropy(nn.Module):
        def __init__(self, reduction="mean", label_smoothing=0.0):
            super().__init__()
            self.reduction = reduction
            self.label_smoothing = label_smoothing

        def forward(self, logits, target):
            return F.cross_entropy(logits, target, label_smoothing=self.label_smoothing, reduction=self.reduction)


    def tvd_sum(p, q):
        return 0.5 * (p - q).abs().sum()


    def squared_error_of_softmax(logits, target):
        probs = torch.softmax(logits, dim=-1)
        hit = F.one_hot(target, logits.shape[-1]).to(probs.dtype)
        return ((probs - hit) ** 2).sum(-1).mean()


    def masked_nll(logits, labels, ignore_index: int = -100):
        logp = torch.log_softmax(logits.float(), dim=-1)
        mask = labels != ignore_index
        safe = labels.masked_fill(~mask, 0)
        nll = -logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
        return (nll * mask).sum() / mask.sum()


    def focal_loss(logits, target, gamma: float = 2.0):
        logpt = F.log_softmax(logits, dim=-1).gather(1, target.unsqueeze(1)).squeeze(1)
        return (-((1 - logpt.exp()) ** gamma) * logpt).mean()


    class SwitchedCrossEntropy(nn.Module):
        # two switches: the int one is a hyper-parameter when the reduction's values are traced too
        def __init__(self, ignore_index: int = -100, reduction: str = "mean"):
            super().__init__()
            self.ignore_index = ignore_index
            self.reduction = reduction

        def forward(self, logits, target):
            return F.cross_entropy(logits.float(), target, ignore_index=self.ignore_index, reduction=self.reduction)


    class TemperedSmoothedNLL(nn.Module):
        # smoothing set without a constructor argument, temperature a hyper-parameter of forward's own
        def __init__(self, reduction: str = "mean"):
            super().__init__()
            self.reduction = reduction
            self.smoothing = 0.1

        def forward(self, logits, target, temperature: float = 2.0):
            logp = (logits / temperature).log_softmax(-1)
            nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
            loss = (1 - self.smoothing) * nll - self.smoothing * logp.mean(-1)
            if self.reduction == "mean":
                return loss.mean()
            return loss.sum()


    def jsd_from_logits(p_logits, q_logits):
        # the mixture inside the logs: its softmaxes' shifts cancel only over the shared m
        p = F.softmax(p_logits, -1)
        q = F.softmax(q_logits, -1)
        m = 0.5 * (p + q)
        return 0.5 * (F.kl_div(m.log(), p, reduction="batchmean") + F.kl_div(m.log(), q, reduction="batchmean"))


    def jsd_logaddexp(log_q, log_p):
        # the mixture's log by logaddexp of the two log-probabilities
        m = torch.logaddexp(log_p, log_q) - math.log(2)
        kl_p = (log_p.exp() * (log_p - m)).sum(-1)
        kl_q = (log_q.exp() * (log_q - m)).sum(-1)
        return (0.5 * (kl_p + kl_q)).mean()


    def jsd_logaddexp_of_logits(student_logits, teacher_logits):
        # the same mixture over log-softmaxes of logits: logaddexp's derivative sigmoid(s - t) is the ratio over the
        # mixture that the row sums merge over
        s = torch.log_softmax(student_logits, -1)
        t = torch.log_softmax(teacher_logits, -1)
        m = torch.logaddexp(s, t) - math.log(2)
        return (0.5 * (t.exp() * (t - m)).sum(-1) + 0.5 * (s.exp() * (s - m)).sum(-1)).mean()


    def generalized_jsd_distillation(student_logits, teacher_logits, beta: float = 0.5, temperature: float = 2.0):
        # a distillation JSD over logits, its mixture weight a run-time value: the row sums over the mixture are
        # known only together, under coefficients in beta that cancel
        log_q = F.log_softmax(student_logits / temperature, dim=-1)
        log_p = F.log_softmax(teacher_logits / temperature, dim=-1)
        log_m = (beta * log_p.exp() + (1 - beta) * log_q.exp()).log()
        to_teacher = F.kl_div(log_m, log_p, reduction="none", log_target=True).sum(-1)
        to_student = F.kl_div(log_m, log_q, reduction="none", log_target=True).sum(-1)
        return (beta * to_teacher + (1 - beta) * to_student).mean()


    def clipped_ratio_loss(logits, target, advantage: float = 0.5, epsilon: float = 0.2):
        # a PPO-style clipped objective of the picked probability: its max shift cancels only through the clipping
        logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
        ratio = torch.exp(logp)
        clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon)
        return -torch.min(ratio * advantage, clipped * advantage).mean()


    def capped_nll(logits, target, cap: float = 5.0):
        logp = F.log_softmax(logits, -1).gather(1, target[:, None])[:, 0]
        return torch.clamp(-logp, max=cap).mean()


    def arange_picked_nll(logits, target):
        # the picked log-probability by advanced indexing, rows by torch.arange
        logp = F.log_softmax(logits, dim=1)
        return -logp[torch.arange(logits.shape[0]), target].mean()


    def megatron_arange_ce(logits, target):
        # Megatron's spelling: a detached max subtracted by hand, rows by torch.arange(start=0, end=...), per row
        shifted = logits - torch.max(logits, dim=-1)[0].detach().unsqueeze(dim=-1)
        rows = torch.arange(start=0, end=shifted.size()[0], device=shifted.device)
        return torch.log(shifted.exp().sum(dim=-1)) - shifted[rows, target]


    def detached_reverse_kl(student, teacher):
        # KL(student || teacher) with the teacher's log-softmax detached (MiniLLM): the split of the sum reads
        # the detached teacher's shift and log-sum as coefficients
        log_q = torch.log_softmax(student.float(), dim=-1)
        log_p = torch.log_softmax(teacher.float(), dim=-1).detach()
        return (log_q.exp() * (log_q - log_p)).sum(dim=-1).mean()


    def arange_from_zero_nll(logits, target):
        return -logits.log_softmax(-1)[torch.arange(0, logits.size(0), 1), target].mean()


    def scattered_smoothing(logits, target, eps: float = 0.1):
        # the smoothed target row written into a full_like in place
        logp = logits.log_softmax(dim=-1)
        soft = torch.full_like(logp, eps / (logits.size(-1) - 1))
        soft.scatter_(1, target.unsqueeze(1), 1.0 - eps)
        return torch.sum(-soft * logp, dim=-1).mean()


    def kl_div_module_inline(student_logits, teacher_probs):
        # a loss module built inside the function; the gradient needs the row sum of the teacher's probabilities
        return nn.KLDivLoss(reduction="batchmean")(F.log_softmax(student_logits, -1), teacher_probs)


    def entr_bonus(logits, target, beta: float = 0.01):
        ce = F.cross_entropy(logits, target, reduction="none")
        return (ce - beta * torch.special.entr(logits.softmax(-1)).sum(-1)).mean()


    def detached_focal(logits, target, gamma: float = 2.0):
        # the focal weight through no gradient, and a detached extra output
        logp = F.log_softmax(logits, -1).gather(-1, target[:, None]).squeeze(-1)
        weight = (1 - logp.exp()).pow(gamma).detach()
        return -(weight * logp).mean(), torch.logsumexp(logits, -1).detach().mean()


    def detached_teacher_kl(student_logits, teacher_logits, temperature: float = 2.0):
        # the teacher read through .detach() only: it takes no gradient, as torch gives it none
        teacher = F.softmax(teacher_logits.detach() / temperature, -1)
        student = F.log_softmax(student_logits / temperature, -1)
        return F.kl_div(student, teacher, reduction="batchmean") * temperature * temperature


    def smoothed_kl(logits, target, eps: float = 0.1):
        # KL to a smoothed one-hot row: xlogy's zero test of a target chosen per column is a choice of conditions
        logp = F.log_softmax(logits, -1)
        soft = torch.full_like(logp, eps / logits.size(-1)).scatter(1, target[:, None], 1 - eps + eps / logits.size(-1))
        return F.kl_div(logp, soft, reduction="batchmean")


    def sum_over_len(logits, target):
        # len() of a traced tensor: its size(0)
        return F.cross_entropy(logits, target, reduction="sum") / len(target)


    def soft_kl_with_eps(logits, target_probs):
        # the target under a log kept off 0 by a constant: drawn positive, as under a plain log
        logp = F.log_softmax(logits, -1)
        return torch.sum(target_probs * (torch.log(target_probs + 1e-9) - logp), dim=-1).mean()


    class HeldSwitchedCE(nn.Module):
        # the switches given to a held torch loss module, not kept by the module itself
        def __init__(self, ignore_index: int = -1, reduction: str = "mean"):
            super().__init__()
            self.loss_fn = nn.CrossEntropyLoss(ignore_index=ignore_index, reduction=reduction)

        def forward(self, logits, target):
            return self.loss_fn(logits, target)


    def masked_where_cross_entropy(logits, target, keep):
        # keep: a boolean mask of the rows that count, selected by torch.where
        per_row = F.cross_entropy(logits, target, reduction="none")
        return torch.where(keep, per_row, 0.0).sum() / keep.sum()


    def whole_tensor_bce(logits, labels):
        # torch's mean over every element of a multi-label binary cross entropy
        return F.binary_cross_entropy_with_logits(logits, labels)


    def mse_of_softmaxes(student, teacher):
        return F.mse_loss(F.softmax(student, -1), F.softmax(teacher, -1))


    def l1_sum(x, y):
        return F.l1_loss(x, y, reduction="sum")


    def padded_cross_entropy(logits, target, pad):
        # pad: a boolean mask of the rows that do not count, negated
        per_row = F.cross_entropy(logits, target, reduction="none")
        keep = ~pad
        return (per_row * keep).sum() / keep.sum()


    def poly1_cross_entropy(logits, target, epsilon: float = 1.0):
        # the probability at the target class: a softmax picked at one column, online beside the softmax's sum
        ce = F.cross_entropy(logits, target, reduction="none")
        pt = torch.softmax(logits.float(), dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
        return (ce + epsilon * (1.0 - pt)).mean()


    # Written for [B, T, V] logits, their shape unpacked (B, T: sizes, no values of an index or a count apart).
    def unpacked_cross_entropy(logits, labels):
        B, T, V = logits.shape
        loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), reduction="none")
        return loss.view(B, T)


    def unpacked_focal(logits, labels, gamma: float = 2.0):
        B, T, V = logits.shape
        logp = F.log_softmax(logits.view(B * T, V).float(), dim=-1)
        logpt = logp.gather(1, labels.view(B * T, 1)).squeeze(1)
        return (-((1.0 - logpt.exp()) ** gamma) * logpt).view(B, T).mean()


    def unpacked_kl_per_token(student_logits, teacher_logits, temperature: float = 1.0):
        B, T, V = student_logits.shape
        s = F.log_softmax(student_logits.view(-1, V) / temperature, dim=-1)
        t = F.log_softmax(teacher_logits.view(-1, V) / temperature, dim=-1)
        return F.kl_div(s, t, reduction="sum", log_target=True) / (B * T)


    def unpacked_with_reduction(logits, labels, ignore_index: int = -100, reduction: str = "mean"):
        # Hugging Face's causal LM loss: reduction none gives the flattened tokens' [B * T] values
        B, T, V = logits.shape
        return F.cross_entropy(
            logits.view(B * T, V).float(), labels.view(B * T), ignore_index=ignore_index, reduction=reduction
        )


    def unpacked_kl_per_sequence(student_logits, teacher_logits):
        B, T, V = student_logits.shape
        s = F.log_softmax(student_logits.reshape(B * T, V), dim=-1)
        t = F.log_softmax(teacher_logits.reshape(B * T, V), dim=-1)
        return (t.exp() * (t - s)).sum() / B
    """
)
# Written for [B, T, V] logits (``B, T, V = logits.shape``): checked by their generated tests, which draw them so
# (test_loss_kernels.py); the derivation check here draws [rows, classes].
UNPACKED_SHAPE_STYLES = [
    "unpacked_cross_entropy",
    "unpacked_focal",
    "unpacked_kl_per_token",
    "unpacked_kl_per_sequence",
    "unpacked_with_reduction",
]
STYLE_ENTRIES = [
    "poly1_cross_entropy",
    "gathered_nll",
    "nll_of_log_softmax",
    "one_hot_smoothing",
    "softcapped_cross_entropy",
    "kl_by_hand",
    "kl_log_target",
    "DistillationLoss",
    "cross_entropy_and_z_loss",
    "ReducedCrossEntropy",
    "tvd_sum",
    "squared_error_of_softmax",
    "masked_nll",
    "focal_loss",
    "TemperedSmoothedNLL",
    "SwitchedCrossEntropy",
    "jsd_from_logits",
    "jsd_logaddexp",
    "jsd_logaddexp_of_logits",
    "clipped_ratio_loss",
    "capped_nll",
    "arange_picked_nll",
    "megatron_arange_ce",
    "arange_from_zero_nll",
    "detached_reverse_kl",
    "scattered_smoothing",
    "kl_div_module_inline",
    "entr_bonus",
    "detached_focal",
    "detached_teacher_kl",
    "smoothed_kl",
    "sum_over_len",
    "soft_kl_with_eps",
    "HeldSwitchedCE",
    "whole_tensor_bce",
    "mse_of_softmaxes",
    "l1_sum",
]


@pytest.fixture(scope="module")
def styles_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("refs") / "styles.py"
    path.write_text(STYLES)
    return path


def _inputs(profile, rows, cols, generator):
    values = {}
    for tensor in profile.inputs:
        if tensor.dtype == "int64":
            values[tensor.name] = torch.randint(0, cols, (rows,), generator=generator)
            continue
        if tensor.per_class:  # class weights, [cols]
            values[tensor.name] = torch.rand(cols, generator=generator, dtype=torch.float64) + 0.1
            continue
        if tensor.per_row:  # a per-token weight, [rows]
            values[tensor.name] = torch.randn(rows, generator=generator, dtype=torch.float64)
            if (tensor.domain or profile.test.input_domain) == "positive":
                values[tensor.name] = values[tensor.name].abs() + 0.1
            continue
        x = torch.randn(rows, cols, generator=generator, dtype=torch.float64) * 3
        domain = tensor.domain or profile.test.input_domain
        if domain == "probabilities":
            x = torch.softmax(x, -1)
        elif domain == "log_probabilities":
            x = torch.log_softmax(x, -1)
        elif domain == "positive":
            x = x.abs() + 0.1
        values[tensor.name] = x
    return values


def run_loss(math, inputs: dict, row_inputs: dict, hypers: dict, cols: int, block: int, grad_loss: float) -> dict:
    """The tier-3 template's schedule in Python: per row, the per-class values at class indices, the passes over
    ``block``-sized chunks, the outputs, the adjoints and the gradient. ``inputs``: [rows, cols] tensors and [cols]
    per-class ones. Returns per-row outputs and full gradients (float64)."""
    rows = next(x for x in inputs.values() if x.dim() == 2).shape[0]
    results = {name: torch.zeros(rows, dtype=torch.float64) for name in math.outputs}
    results.update({name: torch.zeros(rows, cols, dtype=torch.float64) for name in math.gradients})
    chunks = range(0, cols, block)

    def chunk_values(row, start):
        col = torch.arange(start, start + block).view(1, -1)
        mask = col < cols
        values = {"col": col, "mask": mask}
        for name, x in inputs.items():
            padded = torch.zeros(1, block, dtype=torch.float64)
            width = min(block, cols - start)
            padded[0, :width] = (x[row] if x.dim() == 2 else x)[start : start + width]
            values[name] = padded
        return values

    def store_gradient(scope, row, start):
        width = min(block, cols - start)
        for name in math.gradients:
            results[name][row, start : start + width] = scope[name].reshape(-1)[:width]

    for row in range(rows):
        scope = {"n_cols": cols, "BLOCK_SIZE": block, **hypers, **{k: v[row] for k, v in row_inputs.items()}}
        scope[f"grad_{math.outputs[0]}"] = torch.tensor(grad_loss, dtype=torch.float64)
        for name, values, index in math.picks:  # as the kernel's masked load: 0 outside the classes
            at = int(eval(index.replace("tl.", "torch."), {"torch": torch}, scope))
            scope[name] = inputs[values][at] if 0 <= at < cols else torch.tensor(0.0, dtype=torch.float64)
        if math.gate is not None and not bool(eval(math.gate.replace("tl.", "torch."), {"torch": torch}, scope)):
            continue  # every output and gradient of the row is 0
        scope = run_statements(math.init, scope)
        for index, statements in enumerate(math.passes):
            if index == math.gradient_pass:
                scope = run_statements(math.adjoints, scope)
            for start in chunks:
                scope = run_statements(statements, {**scope, **chunk_values(row, start)})
                if index == math.gradient_pass:
                    store_gradient(scope, row, start)
        scope = run_statements(math.outputs_block, scope)
        for name in math.outputs:
            results[name][row] = scope[name].reshape(())
        if math.gradient_pass is None:
            scope = run_statements(math.adjoints, scope)
            for start in chunks:
                scope = run_statements(math.gradient, {**scope, **chunk_values(row, start)})
                store_gradient(scope, row, start)
    return results


def _take(values, index):
    """take(values, index) of a denominator in float64 (the generated wrapper's helper rounds to fp32): 0 for an
    index outside the classes."""
    inside = (index >= 0) & (index < values.shape[0])
    return torch.where(inside, values[torch.where(inside, index, 0)], 0.0)


def _reference_call(profile):
    namespace = {}
    exec(compile(profile.reference.source, "<reference>", "exec"), namespace)
    entry = namespace[profile.reference.entry]
    hypers = {h.name: h.default for h in profile.hyperparameters}
    if profile.reference.kind == "module":
        # At the defaults: the constructor's own arguments only (forward's and held ones default themselves).
        module = entry(**{name: hypers[name] for name in reference_hypers(profile).constructor})
        held = {index: t.attribute for index, t in enumerate(profile.inputs) if t.attribute}

        def call(*args, **_):
            for index, attribute in held.items():  # an input the module holds itself (self.weight)
                *path, last = attribute.split(".")
                setattr(functools.reduce(getattr, path, module), last, args[index])
            return module(*[arg for index, arg in enumerate(args) if index not in held])

        return call
    return lambda *args, **kw: entry(*args, **{**hypers, **kw})


def check_against_autograd(profile, rows=6, cols=300, block=64, seed=0, ignore_rows=True, adjust=None):
    """Loss and gradients of the derived chunked program vs torch.autograd on the reference (float64); ``adjust``
    changes the drawn inputs (a dict by name) in place first."""
    math = loss_math(profile)
    generator = torch.Generator().manual_seed(seed)
    values = _inputs(profile, rows, cols, generator)
    if adjust is not None:
        adjust(values)
    hypers = {h.name: h.default for h in profile.hyperparameters if h.type in ("int", "float")}
    loss = profile.math.loss
    counted = [*(math.gate_reads or []), *(name for s in loss.scales for name in re.findall(r"\w+", s.denominator))]
    ignore = [h.name for h in profile.hyperparameters if h.type == "int" and h.name in counted]
    row_inputs = {t.name: values[t.name] for t in profile.inputs if t.dtype == "int64" or t.per_row}
    if ignore and ignore_rows:
        for target in (values[t.name] for t in profile.inputs if t.dtype == "int64"):
            target[::3] = hypers[ignore[0]]
    leaves = {
        t.name: values[t.name].clone().requires_grad_(t.requires_grad) if t.dtype != "int64" else values[t.name]
        for t in profile.inputs
    }
    expected = _reference_call(profile)(*[leaves[t.name] for t in profile.inputs])
    expected = expected if isinstance(expected, tuple) else (expected,)

    choice = {c.value: c for c in loss.choices}
    reduction, denominator = loss.reduction, loss.denominator
    if reduction not in ("mean", "sum", "none"):
        chosen = next(h.default for h in profile.hyperparameters if h.name == reduction)
        reduction, denominator = (
            (choice[chosen].reduction, choice[chosen].denominator) if chosen in choice else (chosen, denominator)
        )
    per_class = {t.name: values[t.name] for t in profile.inputs if t.per_class}
    names = [*row_inputs, *per_class, *hypers, "n_cols", "batch_share"]
    # [rows, classes] inputs: size(0) is the rows, a batch's share of a row 1
    scope = {"torch": torch, "n_cols": cols, "batch_share": 1.0, "_take": _take, **hypers, **row_inputs, **per_class}

    def inverse_count(formula, floor):
        """1 / the sum over rows of a per-row denominator, at least ``floor`` (0 for a count of nothing)."""
        per_row = eval(print_torch(sympy.sympify(parse_formula(formula, names))), scope)
        total = max(float(per_row.sum() if torch.is_tensor(per_row) else per_row * rows), floor or 0.0)
        return 1.0 / total if total > 0 else 0.0

    weight = inverse_count(denominator, loss.denominator_min) if reduction == "mean" else 1.0
    # Means over different counts: each count's scale is a number of every row, as a hyper-parameter.
    scales = {scale.name: inverse_count(scale.denominator, scale.denominator_min) for scale in loss.scales}
    element = {t.name: values[t.name] for t in profile.inputs if t.dtype != "int64" and not t.per_row}
    got = run_loss(math, element, row_inputs, {**hypers, **scales}, cols, block, weight)

    # A reference that casts to float32 on purpose computes in fp32 even on float64 inputs.
    rtol, atol = (1e-5, 1e-6) if profile.notes.casts else (1e-9, 1e-10)
    for spec, want in zip(profile.outputs, expected):
        rows_value = got[spec.name]
        value = rows_value if reduction == "none" else rows_value.sum() * (weight if reduction == "mean" else 1.0)
        torch.testing.assert_close(value, want.detach().to(torch.float64), rtol=rtol, atol=atol, msg=spec.name)
    targets = [leaves[t.name] for t in profile.inputs if t.requires_grad]
    wanted = torch.autograd.grad(expected[0].sum(), targets)
    for tensor, want in zip([t for t in profile.inputs if t.requires_grad], wanted):
        want = want.to(torch.float64)
        torch.testing.assert_close(
            got[f"grad_{tensor.name}"], want, rtol=rtol * 10, atol=atol / 100, msg=f"grad_{tensor.name}"
        )
    return math


@pytest.mark.parametrize("name", TIER3_BUILTINS)
def test_builtin_losses_match_autograd(name):
    profile = analyze(name, name=f"{name}_gen")
    assert profile.tier == 3 and validate_profile(profile) == []
    check_against_autograd(profile)


@pytest.mark.parametrize("entry", STYLE_ENTRIES)
def test_losses_in_other_styles_match_autograd(styles_path, entry):
    profile = analyze(f"{styles_path}:{entry}")
    assert profile.tier == 3, profile.notes.tier_reason
    assert validate_profile(profile) == []
    check_against_autograd(profile)


def test_every_builtin_hyper_parameter_case_matches_autograd():
    """Label smoothing and the z-loss on, a sum and per-row values instead of the mean."""
    for changes in ({"label_smoothing": 0.2, "lse_square_scale": 1e-2}, {"reduction": "sum"}, {"reduction": "none"}):
        profile = analyze("cross_entropy")
        for hp in profile.hyperparameters:
            if hp.name in changes:
                hp.default = changes[hp.name]
        check_against_autograd(profile)


@pytest.mark.parametrize(
    "reference, passes, fused",
    [
        # logsumexp, the picked logit and the smoothing sum in one sweep; the gradient needs the final sum.
        ("cross_entropy", 1, False),
        # log_softmax + gather by hand: the picked log-probability splits into a picked logit and a hit count.
        ("gathered_nll", 1, False),
        # KL, JSD, TVD: the gradient reads no statistic, so it is written in the only sweep.
        ("kl_div", 1, True),
        ("jsd", 1, True),
        ("tvd", 1, True),
        # The entropy term sum(softmax * log_softmax) is online too: still one sweep before the gradient.
        ("cross_entropy_entropy_bonus", 1, False),
        # The softmax at the target follows the maximum online, rescaled as it grows: no sweep after the sum.
        ("poly1_cross_entropy", 1, False),
        # A reverse KL to a detached teacher splits as the undetached one: one sweep, the gradient in the next.
        ("detached_reverse_kl", 1, False),
    ],
)
def test_schedules_read_each_row_as_few_times_as_the_math_allows(styles_path, reference, passes, fused):
    source = reference if reference in TIER3_BUILTINS else f"{styles_path}:{reference}"
    math = loss_math(analyze(source))
    assert len(math.passes) == passes
    assert (math.gradient_pass is not None) == fused


@pytest.mark.parametrize("entry", ["jsd_from_logits", "jsd_logaddexp_of_logits"])
def test_a_row_sum_the_gradient_adds_is_shifted_by_the_maximum(styles_path, entry):
    """The row sums a JSD's gradient adds (sum(a * exp(a)) and one over the mixture's log) are summed as exp(a - max):
    logits 800 above 0, where exp overflows even float64, give the reference's gradients (the softmaxes do not
    change)."""

    def lifted(values):
        for name, value in values.items():
            if value.is_floating_point():
                value.add_(800.0)

    check_against_autograd(analyze(f"{styles_path}:{entry}"), adjust=lifted)


def test_a_row_sum_only_the_gradient_reads_becomes_a_statistic(styles_path):
    """KL to probabilities from logits: the gradient reads the row sum of the target probabilities, which the loss
    never sums; it is summed beside the softmax's statistics, and the gradient written in the pass after."""
    math = loss_math(analyze(f"{styles_path}:kl_div_module_inline"))
    assert len(math.passes) == 2 and math.gradient_pass == 1
    assert "gradient_sum = gradient_sum + gradient_sum_chunk" in math.passes[0]


def test_switches_given_to_a_held_loss_module_are_hyper_parameters(styles_path):
    hypers = {hp.name: hp.default for hp in analyze(f"{styles_path}:HeldSwitchedCE").hyperparameters}
    assert hypers == {"reduction": "mean", "ignore_index": -1}


def test_a_chunk_of_minus_infinity_adds_nothing_to_the_online_softmax():
    """A row whose first chunks are all -inf (masked vocabulary): the running max stays -inf there, and the shift
    that replaces it by 0 keeps exp(-inf - -inf) = nan out of the running sum."""
    names = ["x", "target", "col", "n_cols"]
    statistics = [("m", "max", parse_formula("x", names)), ("s", "sum", parse_formula("exp(x - m)", names + ["m"]))]
    statistics.append(("hit", "sum", parse_formula("where(col == target, x, 0)", names)))
    outputs = {"loss": parse_formula("m + log(s) - hit", names + ["m", "s", "hit"])}
    math = synthesize_loss(statistics, outputs, ["x"], row_inputs=["target"])
    x = torch.randn(2, 40, dtype=torch.float64)
    x[:, :24] = float("-inf")
    target = torch.tensor([30, 39])
    got = run_loss(math, {"x": x}, {"target": target}, {}, 40, 8, 1.0)
    leaf = x.clone().requires_grad_()
    expected = torch.nn.functional.cross_entropy(leaf, target, reduction="none")
    expected.sum().backward()
    torch.testing.assert_close(got["loss"], expected.detach())
    torch.testing.assert_close(got["grad_x"], leaf.grad)


def test_ignored_rows_are_a_gate_the_kernel_skips():
    math = loss_math(analyze("cross_entropy"))
    assert math.gate is not None and "ignore_index" in math.gate_reads and "target" in math.gate_reads


def test_the_reduction_hyper_parameter_offers_what_the_reference_does(styles_path):
    kl = analyze("kl_div")
    choices = {c.value: (c.reduction, c.denominator) for c in kl.math.loss.choices}
    assert kl.math.loss.reduction == "reduction"
    assert next(h.choices for h in kl.hyperparameters if h.name == "reduction") == ["batchmean", "mean", "sum"]
    assert choices == {"batchmean": ("mean", "batch_share")} and kl.math.loss.denominator == "n_cols"
    # An unknown word falls through to the reference's "none" branch: it is not offered as a choice of its own.
    ce = analyze("cross_entropy")
    assert next(h.choices for h in ce.hyperparameters if h.name == "reduction") == ["mean", "sum", "none"]
    module = analyze(f"{styles_path}:ReducedCrossEntropy")
    assert next(h.choices for h in module.hyperparameters if h.name == "reduction") == ["mean", "sum", "none"]
    switched = analyze(f"{styles_path}:SwitchedCrossEntropy")
    assert next(h.choices for h in switched.hyperparameters if h.name == "reduction") == ["mean", "sum", "none"]


def test_every_input_gets_a_gradient_unless_the_reference_narrows_it(tmp_path):
    """As autograd gives one to each input that asks (a distillation's teacher, a soft target); the kernel writes a
    gradient only where its input requires grad when it runs."""
    path = tmp_path / "both.py"
    path.write_text("import torch\n\n\ndef both(a, b):\n    return ((a - b) ** 2).sum(-1).mean()\n")
    profile = analyze(str(path))
    assert [t.requires_grad for t in profile.inputs] == [True, True]
    check_against_autograd(profile)
    assert [t.requires_grad for t in analyze("kl_div").inputs] == [True, True]
    path.write_text(path.read_text() + "\n\nKERNELGEN = {'grad_inputs': ['a']}\n")
    assert [t.requires_grad for t in analyze(str(path)).inputs] == [True, False]


def test_an_input_whose_gradient_cannot_be_derived_takes_none_and_says_why(tmp_path):
    """A soft target read through its row maximum: d/db needs the count of the maximum's ties per row, which is no
    statistic. The loss and the first input's gradient are still generated; the profile says why b has none."""
    path = tmp_path / "soft.py"
    path.write_text(
        "import torch\n\n\ndef soft_ce(a, b):\n"
        "    return -(a.log_softmax(-1) * (b - b.amax(-1, keepdim=True)).exp()).sum(-1).mean()\n"
    )
    profile = analyze(str(path))
    assert [t.requires_grad for t in profile.inputs] == [True, False]
    assert profile.notes.remarks[-1].startswith("no gradient derived for b: ")
    check_against_autograd(profile)


@pytest.mark.parametrize(
    "body, message, line",
    [
        # A weight per row, not per class (w[t] picks one per row): torch would refuse it too.
        ("return F.cross_entropy(x, t, weight=w[t])", r"`F\.cross_entropy`: its weight must be one value per class", 6),
        ("return F.cross_entropy(x @ w, t)", r"matrix product|matmul", 6),
        # A causal LM's shift slices the rows: the kernel reads rows aligned with their targets.
        ("return F.cross_entropy(x[:-1, :], t[1:])", r"`x\[:-1, :\]` slices the rows \(the sequence", 6),
        ("return F.cross_entropy(x, t, reduction='none').max()", r"over rows: a loss sums or averages", 6),
        # torch.arange read otherwise than as the rows of x[torch.arange(rows), t]
        ("return (x * torch.arange(x.shape[-1])).sum()", r"`torch\.arange` makes indices", 6),
        # rows counted from 1 are no rows of x[torch.arange(rows), t]
        ("return -x.log_softmax(-1)[torch.arange(1, x.size(0) + 1) - 1, t].mean()", r"`torch\.arange`", 6),
        ("return F.cross_entropy(x.scatter(1, t[:, None], x), t)", r"`\.scatter\(\)` scatters a \[rows, classes\]", 6),
        # Means over different counts add (each row scaled by 1 / each count), but what adds them is no count: it
        # is neither clamped nor divided by.
        (
            "return (F.cross_entropy(x, t) - 0.1 * x.logsumexp(-1).mean()).clamp(min=1.0)",
            r"`\.clamp\(\)` clamps or divides by a loss that adds means over different counts",
            6,
        ),
        (
            "return F.cross_entropy(x, t, reduction='sum') / (F.cross_entropy(x, t) + x.logsumexp(-1).mean())",
            r"divides by a loss that adds means over different counts; only a count",
            6,
        ),
    ],
)
def test_losses_kernelgen_cannot_write_name_the_op_and_line(tmp_path, body, message, line):
    path = tmp_path / "ref.py"
    path.write_text(f"import torch\nimport torch.nn.functional as F\n\n\ndef ref(x, t, w):\n    {body}\n")
    with pytest.raises(AnalyzeError, match=message) as caught:
        analyze(str(path))
    assert f"ref.py:{line}:" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_classes_moved_to_dim_1_for_cross_entropy_say_to_flatten_the_tokens(tmp_path):
    """lucidrains' ``F.cross_entropy(logits.transpose(1, 2), labels)`` of [B, T, V] logits: refused in one line that
    says what to write instead, not as an element-wise kernel's reordering."""
    path = tmp_path / "ref.py"
    path.write_text(
        "import torch.nn.functional as F\n\n\ndef ref(logits, labels):\n"
        "    return F.cross_entropy(logits.transpose(1, 2), labels)\n"
    )
    with pytest.raises(AnalyzeError) as caught:
        analyze(str(path))
    message = str(caught.value)
    assert "ref.py:5: `.transpose()` (transpose) moves the classes to dim 1 for `F.cross_entropy`" in message
    assert "flatten the tokens instead (logits.reshape(-1, logits.size(-1)), labels.reshape(-1))" in message
    # A pair loss after it (chosen and rejected halves by .chunk()): the transpose is still what the line names.
    path.write_text(
        "import torch.nn.functional as F\n\n\ndef ref(logits, labels):\n"
        "    seq = -F.cross_entropy(logits.transpose(1, 2), labels, reduction='none').sum(-1)\n"
        "    chosen, rejected = seq.chunk(2)\n"
        "    return -F.logsigmoid(chosen - rejected).mean()\n"
    )
    with pytest.raises(AnalyzeError) as caught:
        analyze(str(path))
    assert "ref.py:5: `.transpose()` (transpose) moves the classes to dim 1" in str(caught.value), caught.value


def test_a_clamped_denominator_keeps_its_floor(tmp_path):
    """``(loss * w).sum() / w.sum().clamp(min=m)``: a sum of fractional per-row weights below m divides by m (the
    six weights here sum to about 4 < 6); a clamp's max, or a clamped sum as the loss itself, is refused."""
    path = tmp_path / "weighted.py"
    source = "import torch\nimport torch.nn.functional as F\n\n\ndef weighted(x, t, w):\n"
    path.write_text(
        source + "    return (F.cross_entropy(x, t, reduction='none') * w).sum() / w.sum().clamp(min=6.0)\n"
    )
    profile = analyze(str(path))
    assert profile.math.loss.denominator_min == 6.0
    check_against_autograd(profile, adjust=lambda values: values["w"].clamp_(max=1.0))
    for body in (
        "w.sum().clamp(min=1.0, max=9.0)",
        "w.sum()) * 0 + F.cross_entropy(x, t, reduction='sum').clamp(min=0.0",
    ):
        path.write_text(source + f"    return (F.cross_entropy(x, t, reduction='none') * w).sum() / ({body})\n")
        with pytest.raises(AnalyzeError, match=r"clamp") as caught:
            analyze(str(path))
        assert "weighted.py:6:" in str(caught.value)


@pytest.mark.parametrize("reference", ["gathered_nll", "cross_entropy_entropy_bonus"])
def test_a_picked_class_counts_once_instead_of_summing_an_indicator(styles_path, reference):
    """gather(log_softmax(x), t) splits into the picked logit minus the log-sum-exp times the number of columns
    equal to t, which is 1: no row sum of constants (LLVM took minutes to compile one for the H200)."""
    source = reference if reference in TIER3_BUILTINS else f"{styles_path}:{reference}"
    statements = [line for chunk in loss_math(analyze(source)).passes for line in chunk]
    sums = [line for line in statements if "tl.sum(" in line]
    assert sums and not [line for line in sums if ", 1.0, 0.0)" in line], sums


def test_only_an_indicator_true_at_exactly_one_column_counts_as_one():
    x, target, col = sympy.symbols("x target col", real=True)
    elements = {"x", "col"}

    def indicator(condition):
        return sympy.Piecewise((1, condition), (0, True))

    clamped = sympy.Or(
        sympy.And(sympy.Eq(col, 0), target < 0), sympy.And(sympy.Eq(col, target), target >= 0)
    )  # target.clamp(min=0)
    assert _one_column_indicator(indicator(sympy.Eq(col, target)), elements)
    assert _one_column_indicator(indicator(clamped), elements)
    # No column when the target is negative: not exhaustive. Two columns when both cases hold: not exclusive.
    assert not _one_column_indicator(indicator(sympy.And(sympy.Eq(col, target), target >= 0)), elements)
    overlapping = sympy.Or(sympy.And(sympy.Eq(col, 0), target < 1), sympy.And(sympy.Eq(col, target), target >= 0))
    assert not _one_column_indicator(indicator(overlapping), elements)
    # A per-element condition counts elements, any number of them.
    assert not _one_column_indicator(indicator(x > 0), elements)
    assert not _one_column_indicator(indicator(sympy.Eq(col, x)), elements)


def test_what_kl_div_takes_as_it_is_is_drawn_as_a_distribution(styles_path):
    """F.kl_div's input is log-probabilities and its target log-probabilities (log_target) or probabilities: tests
    draw such inputs so (real rows would sum exponentials of up to e^4 and lose the loss to fp32 rounding)."""
    domains = {t.name: t.domain for t in analyze(f"{styles_path}:kl_log_target").inputs}
    assert domains == {"log_q": "log_probabilities", "log_p": "log_probabilities"}
    assert {t.name: t.domain for t in analyze("kl_div").inputs} == {
        "input": "log_probabilities",
        "target": "probabilities",
    }
