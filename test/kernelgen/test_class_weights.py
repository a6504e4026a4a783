"""Class weights in tier-3 losses: a per-class input (``[classes]``, no gradient) read along the row at each column
and at a class index (``take(weight, target)``, loaded once per row), torch's weighted mean (divided by the kept rows'
``w[t]``) and its label smoothing with weights.

The derived chunked programs are checked against torch.autograd on each reference in float64 (the tier-3 schedule
run on torch, ``test_losses.run_loss``), references written as ``F.cross_entropy(weight=)``, ``F.nll_loss(log_softmax,
weight=)``, hand-written gathers of ``-log_softmax`` times ``w[t]`` with a weighted mean, ``torch.take``,
``index_select``, one-hot row sums and module buffers; then kernels generated from some of them run their generated
tests (fp32 vs float64 under the Triton interpreter, a vocabulary longer than one chunk), the fused linear form
included, and a generated weighted cross entropy computes what the host's hand-written one does.
"""

import textwrap

import pytest

from test.kernelgen.conftest import assert_generated_tests_pass
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import run_pytest
from test.kernelgen.test_losses import check_against_autograd
from tools.kernelgen.analyze import AnalyzeError
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.render import render_kernel
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

WEIGHTED_STYLES = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    def weighted_cross_entropy(
        logits, target, weight, ignore_index: int = -100, label_smoothing: float = 0.1, reduction: str = "mean"
    ):
        return F.cross_entropy(
            logits, target, weight=weight, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction
        )


    def weighted_nll_of_log_softmax(logits, target, weight, ignore_index: int = -100, reduction: str = "mean"):
        return F.nll_loss(F.log_softmax(logits, dim=-1), target, weight=weight, ignore_index=ignore_index, reduction=reduction)


    def gathered_weighted_nll(logits, target, class_weight, ignore_index: int = -100):
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        kept = target != ignore_index
        safe = target.clamp(min=0)
        nll = -log_probs.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
        w = torch.where(kept, class_weight[safe], 0.0)
        return (nll * w).sum() / w.sum()


    def smoothed_by_hand(logits, target, w, ignore_index: int = -100, smoothing: float = 0.1):
        logp = torch.log_softmax(logits, dim=-1)
        kept = target != ignore_index
        safe = target.masked_fill(~kept, 0)
        nll = -logp.gather(-1, safe[:, None])[:, 0]
        row = (1 - smoothing) * w[safe] * nll - smoothing / logits.shape[-1] * (logp * w).sum(-1)
        return torch.where(kept, row, 0.0).sum() / torch.where(kept, w[safe], 0.0).sum()


    def taken(logits, labels, class_weight, ignore_index: int = -100):
        mask = labels != ignore_index
        safe = labels.masked_fill(~mask, 0)
        nll = -torch.log_softmax(logits.float(), dim=-1).gather(-1, safe.unsqueeze(-1)).squeeze(-1)
        w = torch.take(class_weight.float(), safe) * mask
        return (nll * w).sum() / w.sum().clamp(min=1e-6)


    def index_selected(logits, target, weight):
        w = weight.index_select(0, target)
        return (F.cross_entropy(logits, target, reduction="none") * w).sum() / w.sum()


    def normalized_weights(logits, target, w):
        nll = -torch.log_softmax(logits, -1).gather(-1, target[:, None])[:, 0]
        return (nll * w.gather(0, target)).sum() / w.sum()


    class WeightedCrossEntropy(nn.Module):
        def __init__(self, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
            super().__init__()
            self.register_buffer("weight", weight)
            self.ignore_index = ignore_index
            self.label_smoothing = label_smoothing
            self.reduction = reduction

        def forward(self, logits, target):
            return F.cross_entropy(
                logits,
                target,
                weight=self.weight,
                ignore_index=self.ignore_index,
                label_smoothing=self.label_smoothing,
                reduction=self.reduction,
            )


    class ClassBalancedNLL(nn.Module):
        def __init__(self, num_classes=8):
            super().__init__()
            self.register_buffer("class_weight", torch.linspace(0.5, 1.5, num_classes))

        def forward(self, logits, target):
            logp = torch.log_softmax(logits, dim=-1)
            w = self.class_weight[target]
            return -(logp.gather(-1, target[:, None])[:, 0] * w).sum() / w.sum()


    class UsesTorchLoss(nn.Module):
        def __init__(self, num_classes=8):
            super().__init__()
            self.loss = nn.CrossEntropyLoss(weight=torch.linspace(0.5, 1.5, num_classes), label_smoothing=0.1)

        def forward(self, logits, target):
            return self.loss(logits, target)


    class SharedBufferTorchLoss(nn.Module):
        # the buffer handed to a held torch loss, which keeps it as its own weight: forward reads that one
        def __init__(self, num_classes=8, smoothing=0.1):
            super().__init__()
            self.register_buffer("class_weight", torch.linspace(0.5, 1.5, num_classes))
            self.crit = nn.CrossEntropyLoss(weight=self.class_weight, label_smoothing=smoothing)

        def forward(self, logits, target):
            return self.crit(logits, target)
    """
)
WEIGHTED_ENTRIES = [
    "weighted_cross_entropy",
    "weighted_nll_of_log_softmax",
    "gathered_weighted_nll",
    "smoothed_by_hand",
    "taken",
    "index_selected",
    "normalized_weights",
    "WeightedCrossEntropy",
    "ClassBalancedNLL",
    "UsesTorchLoss",
    "SharedBufferTorchLoss",
]
# Only multiplied into rows, a per-class input's shape is not in the code: the hint says it.
ONE_HOT = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F


    def one_hot_weighted(logits, target, w, smoothing: float = 0.1):
        n = logits.shape[-1]
        hit = F.one_hot(target, n).to(logits.dtype)
        soft = hit * (1 - smoothing) + smoothing / n
        loss = -(soft * torch.log_softmax(logits, dim=-1) * w).sum(-1)
        return loss.sum() / (hit * w).sum()


    KERNELGEN = {"per_class": ["w"]}
    """
)
# Generated and run here: a hand-written gather (and its fused linear form) and a module buffer with every reduction
# and label smoothing. test_loss_kernels.py runs F.cross_entropy(weight=) against the host kernel.
KERNELS = {"gathered_weighted_nll": "gathered_weighted_nll", "WeightedCrossEntropy": "held_weighted_cross_entropy"}


@pytest.fixture(scope="module")
def styles(tmp_path_factory):
    folder = tmp_path_factory.mktemp("weighted")
    (folder / "weighted.py").write_text(WEIGHTED_STYLES)
    (folder / "one_hot.py").write_text(ONE_HOT)
    return folder


@pytest.mark.parametrize("entry", WEIGHTED_ENTRIES)
def test_weighted_losses_in_every_style_match_autograd(styles, entry):
    profile = analyze(f"{styles / 'weighted.py'}:{entry}")
    assert validate_profile(profile) == []
    weights = [t for t in profile.inputs if t.per_class]
    assert len(weights) == 1 and not weights[0].requires_grad
    math = check_against_autograd(profile)
    # w[t] is loaded once per row, not summed out of a row of indicators.
    assert [values for _, values, _ in math.picks] == [weights[0].name]


def test_a_one_hot_row_of_hinted_class_weights_matches_autograd(styles):
    profile = analyze(f"{styles / 'one_hot.py'}")
    assert [t.name for t in profile.inputs if t.per_class] == ["w"]
    check_against_autograd(profile)
    assert profile.math.loss.denominator == "take(w, target)"  # (hit * w).sum(): the picked weights, summed


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_cross_entropy_is_torchs_for_every_reduction_and_smoothing(styles, reduction, label_smoothing):
    """torch: (1 - s) * w[t] * (lse - x[t]) + s / n * sum_c w[c] * (lse - x[c]), 0 for ignored rows; the mean divides
    by the kept rows' w[t]."""
    profile = analyze(f"{styles / 'weighted.py'}:weighted_cross_entropy")
    for hp in profile.hyperparameters:
        hp.default = {"reduction": reduction, "label_smoothing": label_smoothing}.get(hp.name, hp.default)
    check_against_autograd(profile)
    assert profile.math.loss.denominator == "where(ignore_index != target, take(weight, target), 0)"


def test_a_module_holding_its_class_weights_passes_them_as_an_input(styles):
    held = analyze(f"{styles / 'weighted.py'}:WeightedCrossEntropy")
    assert [(t.name, t.per_class, t.attribute, t.init_expr) for t in held.inputs][2] == ("weight", True, "weight", "")
    # Built from the constructor's arguments: the module builds them so where none are given (the reference's
    # weights by default, at any number of classes).
    built = analyze(f"{styles / 'weighted.py'}:ClassBalancedNLL")
    linspace = "torch.linspace(0.5, 1.5, num_classes)"
    assert [(t.name, t.attribute, t.init_expr) for t in built.inputs][2] == ("class_weight", "class_weight", linspace)
    assert built.module.fixed == []  # num_classes sizes the weights the module builds: any value is taken
    module = render_kernel(built).files[kernel_paths(built.operation_name)["module"]]
    assert f'self.register_buffer("class_weight", {linspace} if class_weight is None else class_weight)' in module
    assert (
        "def __init__(self, num_classes=8, class_weight=None):" in module
    )  # the reference's arguments keep their places
    torch_loss = analyze(f"{styles / 'weighted.py'}:UsesTorchLoss")  # nn.CrossEntropyLoss(weight=...)'s buffer
    loss_weight = torch_loss.inputs[2]
    assert (loss_weight.name, loss_weight.attribute, loss_weight.init_expr) == ("loss_weight", "loss.weight", linspace)
    # Named after the module's buffer, set where forward reads it (the tests replace the held loss's copy).
    shared = analyze(f"{styles / 'weighted.py'}:SharedBufferTorchLoss")
    assert [(t.name, t.attribute) for t in shared.inputs][2] == ("class_weight", "crit.weight")


def test_class_weights_take_no_gradient(tmp_path):
    source = "import torch.nn.functional as F\n\n\ndef ref(x, t, w):\n    return F.cross_entropy(x, t, weight=w)\n"
    path = tmp_path / "ref.py"
    path.write_text(source + "\n\nKERNELGEN = {'grad_inputs': ['x', 'w']}\n")
    with pytest.raises(AnalyzeError, match="'grad_inputs' names \\['w'\\], one value per class") as caught:
        analyze(str(path))
    assert "\n" not in str(caught.value)
    path.write_text(source)
    profile = analyze(str(path))
    profile.inputs[2].requires_grad = True
    assert any("per-class input takes no gradient" in problem for problem in validate_profile(profile))


def test_a_denominator_reads_class_weights_at_a_class_index_only(styles):
    profile = analyze(f"{styles / 'weighted.py'}:weighted_nll_of_log_softmax")
    profile.math.loss.denominator = "where(ignore_index != target, weight, 0)"
    assert any("outside take(weight, index)" in problem for problem in validate_profile(profile))


def test_the_per_class_hint_names_real_inputs(tmp_path):
    path = tmp_path / "ref.py"
    path.write_text(ONE_HOT.replace('["w"]', '["target"]'))
    with pytest.raises(AnalyzeError, match="hint 'per_class' names \\['target'\\]"):
        analyze(str(path))


# Generated kernels ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """One checkout with a kernel per weighted reference of ``KERNELS`` and the fused linear form of one."""
    root = copy_checkout(tmp_path_factory.mktemp("weighted_kernels") / "liger")
    (root / "weighted.py").write_text(WEIGHTED_STYLES)
    profiles = [analyze(f"{root / 'weighted.py'}:{entry}", name=name) for entry, name in KERNELS.items()]
    profiles[0].fused_linear.enabled = True
    for profile in profiles:
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    return root, profiles


def test_generated_weighted_losses_match_torch_autograd(generated):
    root, profiles = generated
    names = [profile.operation_name for profile in profiles] + [profiles[0].fused_linear_name]
    assert_generated_tests_pass(root, names, at_least_per_kernel=8)


def test_the_weight_is_an_argument_as_liger_takes_it(generated):
    """Function and functional: ``weight=None`` after the tensors (every class weighs 1); the module: in its
    constructor, kept as a buffer as torch's losses keep theirs; the fused form: ``class_weight`` after the bias."""
    root, profiles = generated
    functional = " ".join((root / "src/liger_kernel/transformers/functional.py").read_text().split())
    assert "def liger_held_weighted_cross_entropy( logits, target, weight=None, label_smoothing=0.0," in functional
    assert "def liger_gathered_weighted_nll(logits, target, class_weight=None, ignore_index=-100)" in functional
    module = (root / kernel_paths("held_weighted_cross_entropy")["module"]).read_text()
    assert "def __init__(self, weight=None, ignore_index=-100," in module
    assert 'self.register_buffer("weight", weight)' in module and "def forward(self, logits, target):" in module
    fused = (root / kernel_paths(profiles[0].fused_linear_name)["ops"]).read_text()
    assert "hidden, weight, target, bias=None, class_weight=None, ignore_index=-100" in " ".join(fused.split())
    # The weighted mean's denominator is summed on the device (no host sync), from the same class weights.
    ops = (root / kernel_paths("held_weighted_cross_entropy")["ops"]).read_text()
    assert "denominator = (torch.where(ignore_index != target, _take(weight, target), 0.0)).sum()" in ops
    assert ".item()" not in ops and "HAS_WEIGHT: tl.constexpr" in ops


NO_WEIGHT_CHECK = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F

    from liger_kernel.transformers.functional import liger_held_weighted_cross_entropy


    def test_without_class_weights_the_loss_is_torchs_unweighted_one():
        torch.manual_seed(0)
        logits = torch.randn(6, 37, dtype=torch.float64)
        target = torch.randint(0, 37, (6,))
        target[2] = -100
        ours, theirs = logits.clone().requires_grad_(True), logits.clone().requires_grad_(True)
        loss = liger_held_weighted_cross_entropy(ours, target, None, label_smoothing=0.1)
        expected = F.cross_entropy(theirs, target, label_smoothing=0.1)
        loss.backward()
        expected.backward()
        torch.testing.assert_close(loss, expected)
        torch.testing.assert_close(ours.grad, theirs.grad)
    """
)


def test_without_class_weights_label_smoothing_weighs_every_class_one(generated):
    """``weight=None`` with label smoothing: every class weighs 1 in the smoothing's sum over the row too."""
    root, _ = generated
    (root / "test" / "test_no_weight_check.py").write_text(NO_WEIGHT_CHECK)
    result = run_pytest(root, "test/test_no_weight_check.py")
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout[-3000:]


PARAMETER_WEIGHTS = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class ParameterWeights(nn.Module):
        def __init__(self, num_classes=8):
            super().__init__()
            self.weight = nn.Parameter(torch.linspace(0.5, 1.5, num_classes), requires_grad=False)

        def forward(self, logits, target):
            return F.cross_entropy(logits, target, weight=self.weight)
    """
)


def test_class_weights_kernelgen_cannot_take_are_one_line_naming_the_line_and_nothing_is_written(checkout):
    reference = checkout / "parameter_weights.py"
    reference.write_text(PARAMETER_WEIGHTS)
    result = run_kernelgen("new", "parameter_weights", "--reference", str(reference), "--repo", str(checkout))
    line = one_line_error(result)
    assert "parameter_weights.py:13:" in line and "`self.weight` is an nn.Parameter read as class weights" in line
    assert not (checkout / kernel_paths("parameter_weights")["ops"]).exists()


LOGIT_ADJUSTED = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class LogitAdjustedCE(nn.Module):
    def __init__(self, num_classes: int = 37, tau: float = 1.0):
        super().__init__()
        prior = torch.arange(1, num_classes + 1, dtype=torch.float32)
        prior = prior / prior.sum()
        self.register_buffer("log_prior", prior.log())
        self.tau = tau

    def forward(self, logits, target):
        return F.cross_entropy(logits + self.tau * self.log_prior, target)
"""


def test_a_vector_buffer_a_loss_adds_to_its_logits_is_one_value_per_class(tmp_path):
    """A logit adjustment's log prior, held in a buffer and added to the logits: a per-class input read at each
    column (no gradient), which the module builds as the reference does, its locals written out in order."""
    path = tmp_path / "logit_adjusted.py"
    path.write_text(LOGIT_ADJUSTED)
    profile = analyze(f"{path}:LogitAdjustedCE")
    (prior,) = [t for t in profile.inputs if t.per_class]
    assert (prior.name, prior.attribute, prior.requires_grad) == ("log_prior", "log_prior", False)
    assert prior.init_expr == (
        "(torch.arange(1, num_classes + 1, dtype=torch.float32) / "
        "torch.arange(1, num_classes + 1, dtype=torch.float32).sum()).log()"
    )
    assert profile.module.fixed == []
    check_against_autograd(profile)
