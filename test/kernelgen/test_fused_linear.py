"""Fused linear + loss (``new NAME --fused-linear``): a loss kernelgen synthesizes, also generated as the loss of
``hidden @ weight.T + bias`` over chunks of rows.

The generated test of the fused kernel compares the loss and the gradients of the hidden states, the weight and the
bias with torch.autograd of the embedded reference on the whole logits (float64), over chunks of three rows and the
default chunk rule, with and without a bias, every reduction that reduces rows and ignored rows. Five losses: cross
entropy (one weight), a distillation loss of student and teacher logits (two hidden states and two weights,
only the student differentiated), and cross entropies of rows weighted per token and selected by a boolean mask
(inputs of one value per row, sliced with the chunk's rows; the per-token ``weight`` is ``row_weight`` beside the
lm_head's), and TRL's GRPO written for [B, T, V] logits (its tests call the reference on one sequence of the rows).
"""

import ast
import os
import textwrap

import pytest
import torch

from test.kernelgen.conftest import assert_generated_tests_pass
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import generated_functions
from test.kernelgen.conftest import import_generated_ops
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.test_per_row_inputs import REFERENCES as PER_ROW_REFERENCES
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import GenerateError
from tools.kernelgen.generate import plan_new
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.render import render_fused_linear
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

DISTILLATION = textwrap.dedent(
    """
    import torch


    def distillation(student_logits, teacher_logits, temperature: float = 2.0):
        teacher = torch.softmax(teacher_logits / temperature, dim=-1)
        student = torch.log_softmax(student_logits / temperature, dim=-1)
        return (teacher * (teacher.log() - student)).sum(-1).mean() * temperature**2
    """
)


PER_ROW = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F


    def token_weighted_ce(logits, target, weight):
        per_token = F.cross_entropy(logits, target, reduction="none")
        return (per_token * weight).sum() / weight.sum()


    def kept_ce(logits, target, keep):
        per_token = F.cross_entropy(logits, target, reduction="none")
        return torch.where(keep, per_token, 0.0).sum() / keep.sum()
    """
)


# Divides by the batch (F.kl_div's batchmean: size(0) of the logits it is given), the teacher differentiated too.
KL_BATCHMEAN = textwrap.dedent(
    """
    import torch.nn.functional as F


    def kl_batchmean(student_logits, teacher_logits, temperature: float = 2.0):
        s = F.log_softmax(student_logits / temperature, dim=-1)
        t = F.log_softmax(teacher_logits / temperature, dim=-1)
        return F.kl_div(s, t, reduction="batchmean", log_target=True) * temperature**2
    """
)


@pytest.fixture(scope="module")
def fused_checkout(tmp_path_factory):
    root = copy_checkout(tmp_path_factory.mktemp("fused") / "liger")
    (root / "distillation.py").write_text(DISTILLATION)
    (root / "per_row.py").write_text(PER_ROW)
    profiles = [analyze("cross_entropy", name="cross_entropy_gen"), analyze(f"{root / 'distillation.py'}")]
    (root / "per_row_references.py").write_text(PER_ROW_REFERENCES)  # TRL's GRPO, written for [B, T, V] logits
    profiles += [analyze(f"{root / 'per_row.py'}:{name}") for name in ("token_weighted_ce", "kept_ce")]
    profiles.append(analyze(f"{root / 'per_row_references.py'}:trl_grpo"))
    for profile in profiles:
        profile.fused_linear.enabled = True
        assert validate_profile(profile) == []
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    return root, [profile.fused_linear_name for profile in profiles]


def test_the_fused_kernels_match_the_reference_loss_of_the_whole_logits(fused_checkout):
    root, names = fused_checkout
    assert names == [
        "fused_linear_cross_entropy_gen",
        "fused_linear_distillation",
        "fused_linear_token_weighted_ce",
        "fused_linear_kept_ce",
        "fused_linear_trl_grpo",
    ]
    assert_generated_tests_pass(root, names, at_least_per_kernel=9)


def test_a_per_row_input_is_sliced_with_the_chunk_and_named_apart_from_the_lm_head(fused_checkout):
    root, _ = fused_checkout
    functional = (root / "src/liger_kernel/transformers/functional.py").read_text()
    assert "def liger_fused_linear_token_weighted_ce(hidden, weight, target, row_weight, bias=None" in functional
    assert "* row_weight" in functional.split("def liger_fused_linear_token_weighted_ce")[1].split("def ")[0]
    assert "def liger_fused_linear_kept_ce(hidden, weight, target, keep, bias=None" in functional
    ops = (root / "src/liger_kernel/ops/fused_linear_kept_ce.py").read_text()
    assert "keep = keep.reshape(-1)" in ops and "keep[rows]," in ops


def test_the_fused_kernel_is_registered_beside_its_loss(fused_checkout):
    root, _ = fused_checkout
    ops_init = (root / "src/liger_kernel/ops/__init__.py").read_text()
    transformers_init = (root / "src/liger_kernel/transformers/__init__.py").read_text()
    functional = (root / "src/liger_kernel/transformers/functional.py").read_text()
    assert "LigerFusedLinearCrossEntropyGenFunction" in ops_init and "LigerCrossEntropyGenFunction" in ops_init
    assert "LigerFusedLinearCrossEntropyGenLoss" in transformers_init
    assert "def liger_fused_linear_cross_entropy_gen(" in functional
    # Student and teacher: one hidden state, weight and bias each; the teacher's take gradients only when they
    # require them (a frozen teacher costs nothing more).
    source = (root / "src/liger_kernel/ops/fused_linear_distillation.py").read_text()
    forward = next(
        node for node in ast.parse(source).body if getattr(node, "name", "") == "fused_linear_distillation_forward"
    )
    assert [arg.arg for arg in forward.args.args][:6] == [
        "student_logits_hidden",
        "student_logits_weight",
        "teacher_logits_hidden",
        "teacher_logits_weight",
        "student_logits_bias",
        "teacher_logits_bias",
    ]
    assert "if teacher_logits_weight.requires_grad:" in source
    assert "if teacher_logits_hidden.requires_grad else None" in source


def test_a_distillation_chunk_holds_d_weight_s_size_of_logits(fused_checkout):
    root, _ = fused_checkout
    (single,) = generated_functions(root, "fused_linear_cross_entropy_gen", "_chunk_rows")
    (distillation,) = generated_functions(root, "fused_linear_distillation", "_chunk_rows")
    # Llama-3-8B's head over 8192 rows: upstream's 256 rows widened to 717 by a tenth of upstream's peak (1002 MiB of
    # d(weight), 64 of d(hidden), 63 of logits), cut into 12 even chunks; a student's and a teacher's logits of
    # hidden / 2 rows each (d(weight)'s bytes in all).
    assert single(8192, 4096, 128256) == 683
    assert distillation(8192, 4096, 128256) == 2048
    assert distillation(8192, 8192, 128256) == 4096
    # A small vocabulary makes the single rule's chunk the wider one: it stands (8192 rows widened to 10259, 7 chunks).
    assert distillation(65536, 4096, 32000) == single(65536, 4096, 32000) == 9363
    # Even chunks: the last is short of the others by fewer rows than there are chunks. 718 rows widen upstream's 32
    # to 447 (2 chunks), 10000 rows its 512 to 1004 (10 chunks); no rows still make a chunk of one row.
    for n_rows in (1, 5, 700, 718, 8191, 10000):
        chunk = single(n_rows, 4096, 128256)
        count = -(-n_rows // chunk)
        assert chunk * count - n_rows < count
    assert single(718, 4096, 128256) == 359 and single(10000, 4096, 128256) == 1000
    assert single(0, 4096, 128256) == 1


def test_a_fused_distillation_writes_the_logits_gradients_over_its_chunk_s_logits(fused_checkout):
    root, _ = fused_checkout
    loss = import_generated_ops(root, "distillation")
    torch.manual_seed(0)
    student, teacher = torch.randn(3, 300, dtype=torch.float64), torch.randn(3, 300, dtype=torch.float64)
    kept = student.clone(), teacher.clone()
    expected = loss.distillation_forward(student, teacher)
    # Called as a user calls it, the loss leaves its inputs alone.
    torch.testing.assert_close((student, teacher), kept, rtol=0, atol=0)
    assert all(grad.data_ptr() not in (student.data_ptr(), teacher.data_ptr()) for grad in expected[1:])
    # The fused kernel's chunk of logits is its own product, dead after the loss: the gradients take its buffers.
    value, grad_student, grad_teacher = loss.distillation_forward(student, teacher, overwrite_inputs=True)
    assert grad_student.data_ptr() == student.data_ptr() and grad_teacher.data_ptr() == teacher.data_ptr()
    torch.testing.assert_close((value, grad_student, grad_teacher), expected)
    fused = (root / "src/liger_kernel/ops/fused_linear_distillation.py").read_text()
    assert "overwrite_inputs=True," in fused
    # A loss of class indices writes over the logits already (as Liger's cross entropy): it takes no keyword.
    assert "overwrite_inputs" not in (root / "src/liger_kernel/ops/cross_entropy_gen.py").read_text()


def test_the_names_follow_the_loss_module(tmp_path):
    assert analyze("cross_entropy").fused_linear_classes == (
        "LigerFusedLinearCrossEntropyFunction",
        "LigerFusedLinearCrossEntropyLoss",
        "liger_fused_linear_cross_entropy",
    )
    assert analyze("jsd").fused_linear_classes[1] == "LigerFusedLinearJSD"


def test_losses_without_a_fused_linear_form_are_refused():
    kl = analyze("kl_div")  # its inputs are log-probabilities and probabilities, not logits
    kl.fused_linear.enabled = True
    assert any(
        "input holds log-probabilities only; generate the loss without --fused-linear" in problem
        for problem in validate_profile(kl)
    )
    per_row = analyze("cross_entropy")
    per_row.fused_linear.enabled = True
    per_row.math.loss.reduction = "none"
    per_row.hyperparameters = [hp for hp in per_row.hyperparameters if hp.name != "reduction"]
    assert any("reduced per row" in problem for problem in validate_profile(per_row))


def test_fused_linear_of_an_elementwise_kernel_is_one_line_and_writes_nothing(checkout):
    result = run_kernelgen("new", "geglu_x", "--reference", "geglu", "--fused-linear", "--repo", str(checkout))
    assert result.returncode == 2
    assert "--fused-linear: 'geglu_x' is tier 1; only a loss (tier 3) has a fused linear form" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (checkout / "src/liger_kernel/ops/geglu_x.py").exists()


def test_force_regenerates_the_fused_kernel_under_its_loss_record_unless_edited(fused_checkout):
    root, _ = fused_checkout
    profile = analyze("cross_entropy", name="cross_entropy_gen")
    profile.fused_linear.enabled = True
    repo = LigerRepo.open(root)
    changes = plan_new(repo, profile, force=True)  # nothing edited: the record's digests cover the fused files
    assert "src/liger_kernel/ops/fused_linear_cross_entropy_gen.py" in changes.changes
    fused_ops = root / "src/liger_kernel/ops/fused_linear_cross_entropy_gen.py"
    original = fused_ops.read_text()
    try:
        fused_ops.write_text(original + "# a hand edit\n")
        with pytest.raises(GenerateError, match="fused_linear_cross_entropy_gen.py \\(edited since kernelgen"):
            plan_new(repo, profile, force=True)
    finally:
        fused_ops.write_text(original)


def test_the_smoke_run_draws_a_loss_written_for_b_t_v_logits_in_that_shape(fused_checkout):
    from tools.kernelgen.smoke import LOSS_COLS
    from tools.kernelgen.smoke import ROWS
    from tools.kernelgen.smoke import _inputs

    root, _ = fused_checkout
    profile = analyze(f"{root / 'per_row_references.py'}:trl_grpo")
    inputs, _ = _inputs(profile, torch.Generator().manual_seed(0))
    assert [tuple(x.shape) for x in inputs] == [(2, ROWS, LOSS_COLS)] + [(2, ROWS)] * 4


@pytest.fixture(scope="module")
def batchmean_checkout(fused_checkout):
    """``fused_checkout`` with ``fused_linear_kl_batchmean`` besides (the fixture's kernels' tests do not run it)."""
    root, _ = fused_checkout
    (root / "kl_batchmean.py").write_text(KL_BATCHMEAN)
    profile = analyze(f"{root / 'kl_batchmean.py'}")
    profile.fused_linear.enabled = True
    assert validate_profile(profile) == []
    write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    return root


def _run_in(root, code: str) -> str:
    """``code`` run by a Python of its own on ``root``'s library (the fused kernels import their checkout's losses);
    its output, after asserting it ran through."""
    result = run_python(["-c", textwrap.dedent(code)], cwd=root, env={**os.environ, "PYTHONPATH": str(root / "src")})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# The reference's loss and gradients of the whole logits in float64, against the fused kernel's (which computes in
# fp32: its tolerance).
COMPARE = """
import torch
import kl_batchmean as reference
from liger_kernel.transformers.functional import liger_fused_linear_kl_batchmean

def compare(student_hidden, teacher_hidden, n_classes=37):
    torch.manual_seed(0)
    inputs = [
        student_hidden, torch.randn(n_classes, student_hidden.shape[-1], dtype=torch.float64),
        teacher_hidden, torch.randn(n_classes, teacher_hidden.shape[-1], dtype=torch.float64),
    ]
    ours = [x.clone().requires_grad_() for x in inputs]
    theirs = [x.clone().requires_grad_() for x in inputs]
    loss = liger_fused_linear_kl_batchmean(*ours, temperature=1.5)
    want = reference.kl_batchmean(theirs[0] @ theirs[1].t(), theirs[2] @ theirs[3].t(), 1.5)
    loss.backward()
    want.backward()
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-5)
    for got, expected in zip(ours, theirs):
        assert got.grad.shape == expected.grad.shape
        torch.testing.assert_close(got.grad, expected.grad, rtol=1e-5, atol=1e-5)
    print(f"{loss.item():.6f}")
"""


def test_a_fused_batchmean_of_b_t_h_hidden_states_divides_by_b(batchmean_checkout):
    """[B, T, H] hidden states give the reference [B, T, V] logits, which batchmean divides by B: the fused kernel
    divided by the B * T rows it flattens them to (loss and gradients T times too small)."""
    batch, tokens = 2, 3
    out = _run_in(
        batchmean_checkout,
        COMPARE
        + f"""
student, teacher = (torch.randn({batch}, {tokens}, 8, dtype=torch.float64) for _ in range(2))
compare(student, teacher)
# The same rows as [rows, hidden]: the reference divides by all {batch * tokens} of them, and so does the kernel.
compare(student.reshape(-1, 8), teacher.reshape(-1, 8))
""",
    )
    per_batch, per_row = map(float, out.split())
    assert per_batch == pytest.approx(per_row * tokens)


def test_a_fused_teacher_of_another_hidden_size_takes_its_own_gradient_shape(batchmean_checkout):
    """Student and teacher hidden sizes differ (each with its own lm_head): the teacher's d(hidden) was viewed as
    the student's shape (a RuntimeError in the forward)."""
    _run_in(
        batchmean_checkout,
        COMPARE
        + """
compare(torch.randn(5, 11, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64))
compare(torch.randn(2, 3, 11, dtype=torch.float64), torch.randn(2, 3, 4, dtype=torch.float64))
""",
    )


def test_a_fused_input_whose_gradient_the_loss_does_not_derive_is_refused_requiring_grad(fused_checkout):
    """A per-token weight of a loss that derives no gradient for it requires grad: the fused Function raises what
    the loss's own does, instead of leaving its ``.grad`` None after ``backward``."""
    root, _ = fused_checkout
    out = _run_in(
        root,
        """
        import torch
        from liger_kernel.transformers.functional import liger_fused_linear_token_weighted_ce
        from liger_kernel.transformers.functional import liger_token_weighted_ce

        hidden, weight = torch.randn(6, 8, requires_grad=True), torch.randn(37, 8, requires_grad=True)
        target, row_weight = torch.randint(0, 37, (6,)), torch.rand(6) + 0.1
        for call in (
            lambda: liger_token_weighted_ce(hidden @ weight.t(), target, row_weight.requires_grad_()),
            lambda: liger_fused_linear_token_weighted_ce(hidden, weight, target, row_weight.requires_grad_()),
        ):
            try:
                call()
            except ValueError as error:
                print(error)
        # Detached, it runs and differentiates the hidden states and the weight.
        liger_fused_linear_token_weighted_ce(hidden, weight, target, row_weight.detach()).backward()
        print(hidden.grad is not None and weight.grad is not None)
        """,
    )
    assert out.splitlines() == [
        "LigerTokenWeightedCeFunction derives no gradient for 'weight', which requires grad: pass it detached",
        "LigerFusedLinearTokenWeightedCeFunction derives no gradient for 'row_weight', which requires grad: pass it "
        "detached",
        "True",
    ]


JSD = textwrap.dedent(
    """
    import torch


    def jsd(student_logits, teacher_logits, beta: float = 0.5):
        log_s = torch.log_softmax(student_logits, dim=-1)
        log_t = torch.log_softmax(teacher_logits, dim=-1)
        log_m = (beta * log_t.exp() + (1 - beta) * log_s.exp()).log()
        kl_t = (log_t.exp() * (log_t - log_m)).sum(-1)
        kl_s = (log_s.exp() * (log_s - log_m)).sum(-1)
        return (beta * kl_t + (1 - beta) * kl_s).sum() / student_logits.shape[0]
    """
)


def test_a_fused_teacher_the_loss_does_not_differentiate_is_refused_requiring_grad(tmp_path):
    """A JSD derives the student's gradient alone: the teacher's hidden state, weight and bias requiring grad are
    refused, as the loss's own Function refuses its logits (their ``.grad`` stayed None)."""
    (tmp_path / "jsd.py").write_text(JSD)
    profile = analyze(f"{tmp_path / 'jsd.py'}")
    assert [t.name for t in profile.inputs if not t.requires_grad] == ["teacher_logits"]
    profile.fused_linear.enabled = True
    source = render_fused_linear(profile).files["src/liger_kernel/ops/fused_linear_jsd.py"]
    forward = source.split("def forward(ctx")[1].split("jsd_forward(")[0]
    refused = [line.strip() for line in forward.splitlines() if "needs_input_grad" in line or "raise" in line]
    assert refused == [
        line
        for index, name in [(2, "hidden"), (3, "weight"), (5, "bias")]
        for line in (
            f"if ctx.needs_input_grad[{index}]:",
            f"raise ValueError(\"LigerFusedLinearJsdFunction derives no gradient for 'teacher_logits_{name}', which "
            'requires grad: pass it detached")',
        )
    ]
