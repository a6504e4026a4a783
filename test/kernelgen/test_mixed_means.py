"""Losses adding means over different counts (``math.loss.scales``): Hinton's knowledge distillation, a cross entropy
averaged over the rows whose label is kept plus a KL averaged over the batch (``reduction="batchmean"``).

Each mean becomes a sum over rows scaled by 1 / its count (``inv_n_kept``, ``inv_batch_size``, ``inv_n_rows``), a
number known on the host once the class indices are; the kernel sums the rows. The derivation is checked against
torch.autograd here, the generated kernels (plain and ``--fused-linear``) by their own tests, which draw ignored
rows, split the rows in two with the whole batch's counts and ignore every row of a count.
"""

import textwrap

import pytest

from test.kernelgen.conftest import assert_generated_tests_pass
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.test_losses import check_against_autograd
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import LossScale
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

MIXED_MEANS = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F


    class HintonDistill(torch.nn.Module):
        def __init__(self, temperature: float = 2.0, alpha: float = 0.5, ignore_index: int = -100):
            super().__init__()
            self.temperature = temperature
            self.alpha = alpha
            self.ignore_index = ignore_index

        def forward(self, student_logits, teacher_logits, labels):
            ce = F.cross_entropy(student_logits, labels, ignore_index=self.ignore_index)
            t = self.temperature
            s = F.log_softmax(student_logits / t, dim=-1)
            kl = F.kl_div(s, F.log_softmax(teacher_logits / t, dim=-1), reduction="batchmean", log_target=True)
            return self.alpha * ce + (1 - self.alpha) * kl * (t * t)


    def hinton_function(student_logits, teacher_logits, labels, alpha: float = 0.3, ignore_index: int = -100):
        ce = F.cross_entropy(student_logits, labels, ignore_index=ignore_index, reduction="mean")
        kl = F.kl_div(F.log_softmax(student_logits, dim=-1), F.softmax(teacher_logits, dim=-1), reduction="batchmean")
        return alpha * ce + (1.0 - alpha) * kl


    def hinton_by_hand(student_logits, teacher_logits, labels, temperature: float = 3.0, ignore_index: int = -100):
        log_probs = torch.log_softmax(student_logits, dim=-1)
        kept = labels.ne(ignore_index)
        picked = log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        ce = -(picked * kept).sum() / labels.ne(ignore_index).sum()
        student = torch.log_softmax(student_logits / temperature, dim=-1)
        teacher = torch.softmax(teacher_logits / temperature, dim=-1)
        kl = (teacher * (teacher.log() - student)).sum() / student_logits.shape[0]
        return 0.5 * ce + 0.5 * temperature**2 * kl


    class ClampedThreeCounts(torch.nn.Module):
        # The kept rows' count clamped at 1 (a loss even when every row is ignored), the batch, every row.
        def __init__(self, ignore_index: int = -100, z_weight: float = 1e-3):
            super().__init__()
            self.ignore_index = ignore_index
            self.z_weight = z_weight

        def forward(self, student_logits, teacher_logits, labels):
            kept = (labels != self.ignore_index).float()
            nll = F.cross_entropy(student_logits, labels, ignore_index=self.ignore_index, reduction="none")
            ce = nll.sum() / kept.sum().clamp(min=1.0)
            s, t = F.log_softmax(student_logits, -1), F.log_softmax(teacher_logits, -1)
            kl = F.kl_div(s, t, reduction="batchmean", log_target=True)
            return ce + kl + self.z_weight * torch.logsumexp(student_logits, dim=-1).pow(2).mean()


    def masked_kl_distill(student_logits, teacher_logits, labels, ignore_index: int = -100):
        # The KL over the kept rows too: one count, a plain mean.
        mask = (labels != ignore_index).float()
        ce = F.cross_entropy(student_logits, labels, ignore_index=ignore_index)
        log_p, log_q = F.log_softmax(student_logits, -1), F.log_softmax(teacher_logits, -1)
        kl = ((log_q.exp() * (log_q - log_p)).sum(-1) * mask).sum() / mask.sum()
        return ce + kl
    """
)
KEPT = ("inv_n_kept", "where(ignore_index != labels, 1, 0)")
BATCH = ("inv_batch_size", "batch_share")
# Each reference with its counts: (name of 1 / the count, the count's per-row formula).
COUNTS = {
    "HintonDistill": [KEPT, BATCH],
    "hinton_function": [KEPT, BATCH],
    "hinton_by_hand": [KEPT, BATCH],
    "ClampedThreeCounts": [KEPT, BATCH, ("inv_n_rows", "1")],
}


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    path = tmp_path_factory.mktemp("mixed") / "mixed_means.py"
    path.write_text(MIXED_MEANS)
    return path


@pytest.mark.parametrize("entry", list(COUNTS))
def test_means_over_different_counts_sum_rows_scaled_by_each_count(references, entry):
    profile = analyze(f"{references}:{entry}")
    loss = profile.math.loss
    assert validate_profile(profile) == []
    assert loss.reduction == "sum"
    assert [(scale.name, scale.denominator) for scale in loss.scales] == COUNTS[entry]
    assert all(scale.name in profile.math.outputs["loss"] for scale in loss.scales)
    # Every third label ignored: the kept rows' count is not the batch's.
    check_against_autograd(profile)


def test_a_clamped_count_keeps_its_floor_among_other_counts(references):
    (kept,) = [s for s in analyze(f"{references}:ClampedThreeCounts").math.loss.scales if s.name == "inv_n_kept"]
    assert kept.denominator_min == 1.0


def test_means_over_one_count_stay_a_mean(references):
    loss = analyze(f"{references}:masked_kl_distill").math.loss
    assert (loss.reduction, loss.denominator, loss.scales) == ("mean", "where(ignore_index != labels, 1, 0)", [])


def test_a_profile_s_scales_are_checked(references):
    profile = analyze(f"{references}:HintonDistill")
    assert validate_profile(profile) == []
    # A count of one value per row: a [rows, classes] input is none.
    profile.math.loss.scales.append(LossScale(name="alpha", denominator="student_logits"))
    profile.math.loss.reduction = "mean"
    problems = "\n".join(validate_profile(profile))
    assert "math.loss.scales: means over different counts are summed over rows" in problems
    assert "math.loss.scales[2].name: 'alpha' names another value of the profile" in problems
    assert "math.loss.scales[2].denominator: 'student_logits' reads student_logits, which is not" in problems
    profile.math.loss.scales = []  # the outputs read names nothing defines then
    assert any("reads inv_batch_size, inv_n_kept" in p for p in validate_profile(profile))


@pytest.fixture(scope="module")
def generated(tmp_path_factory, references):
    """Hinton's loss with its fused linear form, and the three-count loss (a clamped count), generated."""
    root = copy_checkout(tmp_path_factory.mktemp("mixed_kernels") / "liger")
    profiles = [analyze(f"{references}:HintonDistill"), analyze(f"{references}:ClampedThreeCounts")]
    profiles[0].fused_linear.enabled = True
    for profile in profiles:
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    return root, [profiles[0].operation_name, profiles[0].fused_linear_name, profiles[1].operation_name]


def test_generated_kernels_of_means_over_different_counts_match_the_reference(generated):
    root, names = generated
    assert_generated_tests_pass(root, names, at_least_per_kernel=9)


def test_the_generated_tests_ignore_rows_and_every_row_of_a_count(generated):
    root, (loss, fused, clamped) = generated
    for name in (loss, clamped):
        test = (root / kernel_paths(name)["test"]).read_text()
        assert 'labels.view(-1)[::3] = hyper[IGNORED_BY["labels"]]' in test
        assert f"def test_{name}_means_over_rows_split_in_two_with_given_denominators():" in test
        assert f"def test_{name}_when_no_row_counts_for_a_mean():" in test
        assert "is_zero_when_no_row_counts" not in test  # the batch's KL counts every row
    fused_test = (root / kernel_paths(fused)["test"]).read_text()
    assert 'labels[::3] = hyper[IGNORED_BY["labels"]]' in fused_test
    fused_ops = (root / kernel_paths(fused)["ops"]).read_text()
    assert "denominators=denominators," in fused_ops
