"""The validate harness's reference runs (the smoke run of ``new``, the variant probe, ``validate``'s stages): the
reference is called with the kernel's inputs as the kernel is, and its gradients are the ones the kernel derives."""

import textwrap

import pytest
import torch
import torch.nn.functional as F

from test.kernelgen.test_class_weights import WEIGHTED_STYLES
from tools.kernelgen.analyze import analyze
from tools.kernelgen.validate.harness import Case
from tools.kernelgen.validate.harness import ReferenceRunner

TWO_OUTPUTS = textwrap.dedent(
    """
    import torch.nn.functional as F


    def ce_and_kl(x, y, t):
        ce = F.cross_entropy(x, t, reduction="sum") / x.shape[0]
        kl = F.kl_div(F.log_softmax(x, -1), F.log_softmax(y, -1), reduction="batchmean", log_target=True)
        return ce + kl, ce
    """
)


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runner")
    (folder / "weighted.py").write_text(WEIGHTED_STYLES)
    (folder / "two_outputs.py").write_text(TWO_OUTPUTS)
    return folder


@pytest.mark.parametrize(
    "entry, smoothing", [("WeightedCrossEntropy", 0.0), ("ClassBalancedNLL", 0.0), ("UsesTorchLoss", 0.1)]
)
def test_a_module_gets_the_class_weights_it_holds_set_on_it(references, entry, smoothing):
    """A module holding an input itself (a buffer, ``self.loss.weight``) gets it set on it and the others as forward's
    arguments (``new`` of each of these failed its smoke run: forward() takes 3 positional arguments but 4 were
    given)."""
    runner = ReferenceRunner(analyze(f"{references / 'weighted.py'}:{entry}"), "cpu")
    torch.manual_seed(0)
    logits, target = torch.randn(6, 8, dtype=torch.float64), torch.randint(0, 8, (6,))
    weight = torch.rand(8, dtype=torch.float64) + 0.5
    case = Case([logits, target, weight], [], dict(runner.defaults), seed=0, label="held weights")
    loss = runner.run_reference(case, torch.float64, backward=False).outputs[0]
    torch.testing.assert_close(loss, F.cross_entropy(logits, target, weight=weight, label_smoothing=smoothing))


def test_a_losss_other_outputs_are_reported_values_without_gradients(references):
    """The generated Function derives the gradient of a loss's first output alone (as upstream's z_loss): the reference's
    gradients the harness compares are the loss's alone (``new`` failed its smoke run: the gradient of x differed by
    up to 0.358, the reference's second output's gradient included)."""
    runner = ReferenceRunner(analyze(f"{references / 'two_outputs.py'}:ce_and_kl"), "cpu")
    torch.manual_seed(0)
    x, y, t = torch.randn(4, 7, dtype=torch.float64), torch.randn(4, 7, dtype=torch.float64), torch.randint(0, 7, (4,))
    got = runner.run_reference(Case([x, y, t], [], dict(runner.defaults), seed=0, label="two outputs"), torch.float64)
    leaf = x.clone().requires_grad_(True)
    loss = F.cross_entropy(leaf, t, reduction="sum") / 4 + F.kl_div(
        F.log_softmax(leaf, -1), F.log_softmax(y, -1), reduction="batchmean", log_target=True
    )
    loss.backward(runner.grad_outputs([loss.detach()], 0)[0])
    torch.testing.assert_close(got.grads["x"], leaf.grad)


def test_the_stages_draw_every_input_of_a_loss_as_it_is_read(references):
    """validate's stages drew a loss's logits and class indices alone: a loss of two logits (a KL's teacher), one
    value per row or class weights failed every stage on its reference's arguments. Each input is drawn as its spec
    says: a second [rows, classes] tensor, a class index with every third row ignored, class weights of one value
    per class."""
    runner = ReferenceRunner(analyze(f"{references / 'two_outputs.py'}:ce_and_kl"), "cpu")
    x, y, t = runner.make_case(6, 7, seed=0).inputs
    assert x.shape == y.shape == (6, 7) and not torch.equal(x, y) and t.shape == (6,) and t.dtype == torch.int64
    runner.run_reference(runner.make_case(6, 7, seed=0), torch.float64)  # the reference runs on them
    weighted = ReferenceRunner(analyze(f"{references / 'weighted.py'}:weighted_cross_entropy"), "cpu")
    logits, target, weight = weighted.make_case(6, 7, seed=0).inputs
    assert weight.shape == (7,) and (weight > 0).all() and (target[1::3] == -100).all()
