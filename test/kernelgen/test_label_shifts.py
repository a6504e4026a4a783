"""Labels shifted one token left, as a causal LM's loss reads them (Transformers' ``ForCausalLMLoss``: ``F.pad(labels,
(0, 1), value=ignore_index)`` then ``labels[..., 1:]``; ``analyze/shifts.py``): the analysis reads the labels
unshifted and records the pad value (``TensorSpec.shift``), the generated Function shifts them on the host before the
kernel, so token t is scored against label t + 1 and the last token of each sequence counts as ignored."""

import textwrap

import pytest
import torch

from test.kernelgen.conftest import assert_generated_tests_pass
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import import_generated_ops
from tools.kernelgen.analyze import AnalyzeError
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"

HF_STYLE = """
def causal_lm_loss(logits, labels, ignore_index: int = -100):
    logits = logits.float()
    labels = F.pad(labels, (0, 1), value=ignore_index)
    shift_labels = labels[..., 1:].contiguous()
    logits = logits.view(-1, logits.size(-1))
    shift_labels = shift_labels.view(-1)
    return F.cross_entropy(logits, shift_labels, ignore_index=ignore_index, reduction="mean")
"""

MODULE_STYLE = """
class CausalLMLoss(nn.Module):
    def __init__(self, ignore_index: int = -100, label_smoothing: float = 0.0):
        super().__init__()
        self.ignore_index = ignore_index
        self.ce = nn.CrossEntropyLoss(ignore_index=ignore_index, label_smoothing=label_smoothing)

    def forward(self, logits, labels):
        labels = torch.nn.functional.pad(labels, [0, 1], "constant", self.ignore_index)[:, 1:]
        return self.ce(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1).to(logits.device))
"""

STAGED_STYLE = """
def dpo_shifted(policy_logits, labels, ref_logps, beta: float = 0.1, ignore_index: int = -100):
    labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
    mask = labels != ignore_index
    logp = policy_logits.log_softmax(-1).gather(-1, torch.where(mask, labels, 0).unsqueeze(-1)).squeeze(-1)
    seq = (logp * mask).sum(-1)
    n = seq.shape[0] // 2
    return -F.logsigmoid(beta * ((seq[:n] - ref_logps[:n]) - (seq[n:] - ref_logps[n:]))).mean()
"""


def _analyzed(tmp_path, source: str, entry: str):
    path = tmp_path / "reference.py"
    path.write_text(HEADER + textwrap.dedent(source))
    return analyze(f"{path}:{entry}")


@pytest.mark.parametrize(
    "shift, pad",
    [
        ("F.pad(labels, (0, 1), value=ignore_index)[..., 1:]", "ignore_index"),
        ("torch.nn.functional.pad(labels, (0, 1), value=-100)[:, 1:].contiguous()", "-100"),
        ("F.pad(labels[..., 1:], (0, 1), value=ignore_index)", "ignore_index"),
        ("torch.cat([labels[:, 1:], labels.new_full((labels.shape[0], 1), ignore_index)], dim=1)", "ignore_index"),
        ("torch.cat((labels[..., 1:], torch.full_like(labels[..., :1], -100)), dim=-1)", "-100"),
        ("F.pad(labels.to(logits.device), (0, 1), value=ignore_index)[..., 1:]", "ignore_index"),
    ],
)
def test_a_shift_of_the_labels_is_read_as_the_labels_and_their_pad_value(tmp_path, shift, pad):
    source = f"""
    def shifted(logits, labels, ignore_index: int = -100):
        target = {shift}
        return F.cross_entropy(logits.flatten(0, -2), target.flatten(), ignore_index=ignore_index)
    """
    profile = _analyzed(tmp_path, source, "shifted")
    assert [(t.name, t.dtype, t.shift) for t in profile.inputs] == [("logits", "same", ""), ("labels", "int64", pad)]
    # Tests of several sequences of at least two tokens: the last token of each reads the pad value.
    assert all(len(shape) == 3 and shape[1] >= 2 for shape in profile.test.cpu_shapes[1:])
    assert "ignore_index" not in profile.notes.specialized


@pytest.mark.parametrize(
    "body, message, line",
    [
        ("t = F.pad(labels, (0, 2), value=-100)[..., 2:]", r"`F.pad` \(line 8\) pads 'labels' otherwise than", 8),
        ("t = F.pad(labels, (0, 1), value=-100)", r"`F.pad` \(line 8\) pads 'labels' otherwise than", 8),
        (
            "t = torch.where(labels > 0, F.pad(labels, (0, 1), value=-100)[..., 1:], labels)",
            r"'labels' is read shifted one token \(line 8\) and as passed \(line 8\)",
            8,
        ),
        (
            "t = F.pad(labels.view(-1), (0, 1), value=-100)[..., 1:]",
            r"shifts a value computed from the inputs; kernelgen shifts a target as it is passed",
            8,
        ),
        (
            "t = labels; logits = F.pad(logits, (0, 1), value=0)[..., 1:]",
            r"'logits' is shifted one token left as a causal LM's labels are, but it is no class-index target",
            8,
        ),
    ],
)
def test_a_shift_the_kernel_cannot_take_is_refused_with_its_line(tmp_path, body, message, line):
    source = f"""
    def shifted(logits, labels):
        {body}
        return F.cross_entropy(logits.flatten(0, -2), t.flatten())
    """
    with pytest.raises(AnalyzeError, match=message) as caught:
        _analyzed(tmp_path, source, "shifted")
    assert f"reference.py:{line}:" in str(caught.value) and "\n" not in str(caught.value)


def test_num_items_in_batch_is_refused_saying_what_to_write_instead(tmp_path):
    """Transformers divides the sum by ``num_items_in_batch`` when it is given and takes the mean otherwise: two
    reductions, of which the trace would see one."""
    source = """
    def causal_lm_loss(logits, labels, num_items_in_batch=None, ignore_index: int = -100):
        labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
        reduction = "sum" if num_items_in_batch is not None else "mean"
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=ignore_index, reduction=reduction)
        if reduction == "sum":
            loss = loss / num_items_in_batch
        return loss
    """
    with pytest.raises(
        AnalyzeError, match=r"'num_items_in_batch' defaults to None and is divided by when it is given"
    ) as caught:
        _analyzed(tmp_path, source, "causal_lm_loss")
    assert "reference.py:12:" in str(caught.value) and "reduction='sum' loss by num_items_in_batch" in str(caught.value)


@pytest.fixture(scope="module")
def shifted_checkout(tmp_path_factory):
    """A checkout with the kernels of the three styles generated in it."""
    tmp_path = tmp_path_factory.mktemp("shifts")
    root = copy_checkout(tmp_path / "liger")
    path = tmp_path / "references.py"
    path.write_text(HEADER + textwrap.dedent(HF_STYLE) + textwrap.dedent(MODULE_STYLE) + textwrap.dedent(STAGED_STYLE))
    for entry, name in [("causal_lm_loss", "hf_shifted"), ("CausalLMLoss", "module_shifted"), ("dpo_shifted", None)]:
        profile = analyze(f"{path}:{entry}", name=name)
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    return root


def test_the_function_scores_each_token_against_the_next_label(shifted_checkout):
    """The last token of each sequence is ignored, whatever its own label, and its logits get no gradient."""
    function = import_generated_ops(shifted_checkout, "hf_shifted").LigerHfShiftedFunction
    torch.manual_seed(0)
    B, T, V = 3, 5, 40
    logits = torch.randn(B, T, V, dtype=torch.float64)
    labels = torch.randint(0, V, (B, T))
    labels[0, 2] = -100
    kernel_logits = logits.float().requires_grad_()
    loss = function.apply(kernel_logits, labels, -100)
    loss.backward()
    reference_logits = logits.clone().requires_grad_()
    kept = labels[:, 1:] != -100
    expected = (
        torch.nn.functional.cross_entropy(reference_logits[:, :-1][kept], labels[:, 1:][kept], reduction="sum")
        / kept.sum()
    )
    expected.backward()
    torch.testing.assert_close(loss.double(), expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(kernel_logits.grad.double(), reference_logits.grad, atol=1e-6, rtol=1e-5)
    assert torch.count_nonzero(kernel_logits.grad[:, -1]) == 0


def test_the_generated_tests_of_shifted_labels_pass(shifted_checkout):
    assert_generated_tests_pass(
        shifted_checkout, ["hf_shifted", "module_shifted", "dpo_shifted"], at_least_per_kernel=6
    )
