"""A loss that returns more than one value (OLMo's ``(ce_loss, z_loss)``, TRL's ``(loss, margin)``): what a gradient
reaching an output after the first does. A one-kernel loss forms its gradient in the forward, for the first output
only, so the backward refuses a gradient reaching another output (it was dropped without a word before: OLMo's
trainer adds the two and trains on both). A loss in two stages sends every used output back through its sequence
stage, so their gradients are right."""

import textwrap

import pytest
import torch
import torch.nn.functional as F

from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import run_kernelgen
from tools.kernelgen.scratch import library_imports_from

SEPARATE_Z_LOSS = """
import torch.nn.functional as F


def ce_and_z(logits, labels, ignore_index: int = -100, z_loss_multiplier: float = 1e-4):
    loss = F.cross_entropy(logits, labels, ignore_index=ignore_index)
    valid = labels != ignore_index
    z_loss = z_loss_multiplier * (logits.logsumexp(-1).pow(2) * valid).sum() / valid.sum()
    return loss, z_loss
"""
DPO_WITH_MARGIN = """
import torch
import torch.nn.functional as F


def dpo_and_margin(logits, labels, beta: float = 0.1):
    logp = torch.gather(F.log_softmax(logits, -1), 2, labels.unsqueeze(-1)).squeeze(-1).sum(-1)
    chosen, rejected = logp.chunk(2)
    margin = (chosen - rejected).mean()
    return -F.logsigmoid(beta * (chosen - rejected)).mean(), margin
"""


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = copy_checkout(tmp_path_factory.mktemp("reported") / "liger")
    references = root.parent / "references.py"
    references.write_text(textwrap.dedent(SEPARATE_Z_LOSS) + textwrap.dedent(DPO_WITH_MARGIN))
    for name, entry, extra in (("ce_and_z", "ce_and_z", ["--fused-linear"]), ("dpo_margin", "dpo_and_margin", [])):
        result = run_kernelgen("new", name, "--reference", f"{references}:{entry}", "--repo", str(root), *extra)
        assert result.returncode == 0, result.stderr
    return root


def test_a_gradient_reaching_a_reported_output_is_refused_not_dropped(checkout):
    torch.manual_seed(0)
    logits, labels = torch.randn(6, 33, dtype=torch.float64), torch.randint(0, 33, (6,))
    labels[2] = -100
    with library_imports_from(checkout / "src"):
        from liger_kernel.transformers.functional import liger_ce_and_z
        from liger_kernel.transformers.functional import liger_fused_linear_ce_and_z

        leaf = logits.clone().requires_grad_(True)
        loss, z_loss = liger_ce_and_z(leaf, labels, z_loss_multiplier=0.5)
        assert z_loss.requires_grad  # not marked non-differentiable: a gradient reaching it is seen
        loss.backward(retain_graph=True)
        expected = logits.clone().requires_grad_(True)
        F.cross_entropy(expected, labels).backward()
        torch.testing.assert_close(leaf.grad, expected.grad)
        for used in (lambda: loss + z_loss, lambda: z_loss):
            with pytest.raises(RuntimeError, match="a gradient reached its output 'z_loss'"):
                used().backward(retain_graph=True)
        hidden = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
        weight = torch.randn(33, 8, dtype=torch.float64, requires_grad=True)
        loss, z_loss = liger_fused_linear_ce_and_z(hidden, weight, labels)
        with pytest.raises(RuntimeError, match="a gradient reached its output 'z_loss'"):
            (loss + z_loss).backward()


def test_a_two_stage_loss_differentiates_every_output_it_returns(checkout):
    torch.manual_seed(0)
    logits, labels = torch.randn(4, 5, 11, dtype=torch.float64), torch.randint(0, 11, (4, 5))
    namespace = {}
    exec(textwrap.dedent(DPO_WITH_MARGIN), namespace)
    expected = logits.clone().requires_grad_(True)
    loss, margin = namespace["dpo_and_margin"](expected, labels)
    (loss + 0.3 * margin).backward()
    with library_imports_from(checkout / "src"):
        from liger_kernel.transformers.functional import liger_dpo_margin

        leaf = logits.clone().requires_grad_(True)
        got_loss, got_margin = liger_dpo_margin(leaf, labels)
        # The statistics are fp32 whatever the input's dtype: fp32's tolerance.
        close = {"rtol": 1e-5, "atol": 1e-6}
        torch.testing.assert_close((got_loss, got_margin), (loss.detach(), margin.detach()), **close)
        (got_loss + 0.3 * got_margin).backward()
    torch.testing.assert_close(leaf.grad, expected.grad, **close)
    # The margin's share is no rounding: the loss's gradient alone is off by far more than the tolerance.
    loss_only = logits.clone().requires_grad_(True)
    namespace["dpo_and_margin"](loss_only, labels)[0].backward()
    assert (loss_only.grad - expected.grad).abs().max() > 100 * close["atol"]


COUNT_BESIDE_THE_LOSS = """
import torch.nn.functional as F


def ce_and_count(logits, labels, ignore_index: int = -100):
    valid = labels != ignore_index
    n = valid.sum()
    return F.cross_entropy(logits, labels, ignore_index=ignore_index, reduction="sum") / n, n
"""


def test_a_count_of_rows_returned_beside_the_loss_is_one_line_naming_it(tmp_path):
    """``valid.sum()`` returned as a second output (named y2 where the return names no variable) reads the labels
    alone: refused at its line, saying so (it was reported as an output ``= 1`` that "depends on no row")."""
    from tools.kernelgen.analyze import AnalyzeError
    from tools.kernelgen.analyze import analyze

    path = tmp_path / "ce_and_count.py"
    path.write_text(COUNT_BESIDE_THE_LOSS)
    with pytest.raises(AnalyzeError, match=r"ce_and_count.py:7: output '(n|y2)' counts rows from the labels alone"):
        analyze(str(path))
