"""Input roles the code alone does not fix (analyze/roles.py): F.cross_entropy's target is class indices or a
probability distribution per row, decided from the hint, the annotation, how the target is made, the argument's name,
else class indices; the decision is a remark of the profile and a line of new's and analyze's output. A probability
target generates a kernel that passes its generated tests."""

import pytest

from test.kernelgen.conftest import WITHOUT_DTENSOR
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import run_pytest
from tools.kernelgen.analyze import analyze
from tools.kernelgen.layout import kernel_paths

CASES = [
    ("logits, labels", "labels", {}, "class indices", "its name says labels"),
    ("logits, target_probs", "target_probs", {}, "probabilities", "its name says probs"),
    ("logits, target: torch.LongTensor", "target", {}, "class indices", "annotated torch.LongTensor"),
    ("logits, target: 'torch.FloatTensor'", "target", {}, "probabilities", "annotated torch.FloatTensor"),
    ("logits, scores", "scores.softmax(-1)", {}, "probabilities", "makes it with softmax"),
    ("logits, soft_targets", "soft_targets", {"soft_targets": "class indices"}, "class indices", "hint 'roles'"),
    ("logits, target", "target", {}, "class indices", "nothing says otherwise"),
]


@pytest.mark.parametrize("arguments, target, hint, role, evidence", CASES)
def test_the_target_role_is_decided_from_the_evidence_and_said(tmp_path, arguments, target, hint, role, evidence):
    source = f"import torch\nimport torch.nn.functional as F\n\n\ndef loss({arguments}):\n"
    source += f"    return F.cross_entropy(logits, {target})\n"
    if hint:
        source += f"\n\nKERNELGEN = {{'roles': {hint!r}}}\n"
    path = tmp_path / "loss.py"
    path.write_text(source)
    profile = analyze(str(path))
    name = arguments.split(", ")[1].split(":")[0]
    spec = next(tensor for tensor in profile.inputs if tensor.name == name)
    assert (spec.dtype == "int64") == (role == "class indices")
    if target == name:  # drawn as what it is (a target made from it, scores.softmax(-1), draws it as scores)
        assert spec.domain == ("probabilities" if role == "probabilities" else "")
    remarks = [remark for remark in profile.notes.remarks if remark.startswith("role: ")]
    kind = "a probability target" if role == "probabilities" else "a class-index target"
    assert len(remarks) == 1 and remarks[0].startswith(f"role: {name} is {kind} of F.cross_entropy (")
    assert evidence in remarks[0]


def test_an_unknown_role_in_the_hint_is_one_line(tmp_path):
    path = tmp_path / "loss.py"
    path.write_text(
        "import torch.nn.functional as F\n\n\ndef loss(logits, target):\n    return F.cross_entropy(logits, target)\n"
        "\n\nKERNELGEN = {'roles': {'target': 'soft'}}\n"
    )
    result = run_kernelgen("analyze", str(path))
    assert result.returncode == 2 and "'soft' is not one of 'class indices', 'probabilities'" in result.stderr


PROBABILITY_CE = """\
import torch
import torch.nn.functional as F


def ce_soft_weighted(logits, soft_targets, class_weight, label_smoothing: float = 0.1):
    return F.cross_entropy(logits, soft_targets, weight=class_weight, label_smoothing=label_smoothing)
"""


def test_a_probability_target_cross_entropy_generates_and_passes_its_tests(tmp_path):
    root = copy_checkout(tmp_path / "liger")
    path = tmp_path / "ce_soft_weighted.py"
    path.write_text(PROBABILITY_CE)
    result = run_kernelgen("new", "ce_soft_weighted", "--reference", str(path), "--repo", str(root))
    assert result.returncode == 0, result.stderr
    assert "  role: soft_targets is a probability target of F.cross_entropy (its name says soft)" in result.stdout
    tests = run_pytest(root, kernel_paths("ce_soft_weighted")["test"], *WITHOUT_DTENSOR)
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert " passed" in tests.stdout and " failed" not in tests.stdout
