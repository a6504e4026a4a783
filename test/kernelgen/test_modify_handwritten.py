"""``--modify`` on hand-written kernels: a new reference's hyper-parameters are threaded into the host swiglu and
rms_norm and into a small kernel of another style by targeted edits; every existing test keeps passing and the
appended cases pass; anything that cannot be done safely is one line, exit 2, nothing written."""

import ast
import shutil
import subprocess

from pathlib import Path

import pytest

from test.kernelgen.conftest import REPO_ROOT
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import run_pytest
from test.kernelgen.conftest import snapshot
from test.kernelgen.handwritten import OPS as MULSIG_OPS
from test.kernelgen.handwritten import install as install_mulsig
from tools.kernelgen.analyze import analyze_for_checkout
from tools.kernelgen.modify import plan_modify
from tools.kernelgen.modify import profile_for_modify
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

FUNCTIONAL = "src/liger_kernel/transformers/functional.py"
# The host swiglu has gate_multiplier and down_multiplier: a gate and a scale are options it has already.
SWIGLU_SCALED = """\
import torch.nn.functional as F


def swiglu(a, b, gate=1.0, scale=1.0):
    return F.silu(a * gate) * b * scale
"""
SWIGLU_SHIFTED = """\
import torch.nn.functional as F


def swiglu(a, b, shift=0.0, bias=0.0):
    return F.silu(a + shift) * (b + bias)
"""
RMS_NORM_SCALED = """\
import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6, scale=1.0):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps
        self.scale = scale

    def forward(self, x):
        input_dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(input_dtype) * self.scale
"""
MULSIG_ALPHA = "import torch\n\n\ndef mulsig(x, gate, alpha=1.0):\n    return x * torch.sigmoid(alpha * gate)\n"
# Right at its default (beta = 0: silu(a) * b), but beta enters as a product with an input: not an affine map.
SWIGLU_NOT_AFFINE = (
    "import torch.nn.functional as F\n\n\ndef swiglu(a, b, beta=0.0):\n    return F.silu(a) * b * (1 + beta * a)\n"
)
SWIGLU_TANH = "import torch\n\n\ndef swiglu(a, b):\n    return torch.tanh(a) * b\n"


def _checkout(tmp_path: Path, *tests: str) -> Path:
    checkout = copy_checkout(tmp_path / "liger")
    for name in tests:
        shutil.copy2(REPO_ROOT / "test" / "transformers" / name, checkout / "test" / "transformers" / name)
    return checkout


def _reference(tmp_path: Path, source: str, name: str = "reference.py") -> str:
    path = tmp_path / name
    path.write_text(source)
    return str(path)


def _function_source(text: str, name: str) -> str:
    tree = ast.parse(text)
    return next(ast.get_source_segment(text, node) for node in ast.walk(tree) if getattr(node, "name", None) == name)


# The host kernels ---------------------------------------------------------------------------------------------
def test_host_swiglu_gains_two_shifts_and_every_existing_test_still_passes(tmp_path):
    checkout = _checkout(tmp_path, "test_swiglu.py", "test_monkey_patch.py")
    ops, module, test = (
        "src/liger_kernel/ops/swiglu.py",
        "src/liger_kernel/transformers/swiglu.py",
        "test/transformers/test_swiglu.py",
    )
    repo = LigerRepo.open(checkout)
    before = {path: repo.read(path) for path in (ops, module, FUNCTIONAL, test)}
    profile = analyze_for_checkout(_reference(tmp_path, SWIGLU_SHIFTED), name="swiglu", repo_root=checkout)
    plan = plan_modify(repo, "swiglu", profile)
    statuses = {report.path: report.status for report in plan.reports}
    assert [statuses[p] for p in (ops, module, FUNCTIONAL, test)] == ["threaded", "threaded", "threaded", "appended"]
    assert "math added to the hand-written kernels: a -> a + shift, b -> b + bias" in plan.notes
    write_all(checkout, plan.changes.changes)

    after = repo.read(ops)
    # Targeted: the helpers and every comment of the hand-written file are as they were.
    assert _function_source(after, "_is_scaled") == _function_source(before[ops], "_is_scaled")
    comments = [line.strip() for line in before[ops].splitlines() if line.strip().startswith("#")]
    assert all(comment in after for comment in comments)
    assert len(after.splitlines()) - len(before[ops].splitlines()) < 50
    # Each map on every load of its input, forward and backward (a shift leaves the gradients' chain rule as is).
    assert after.count("    a = (a + shift).to(a.dtype)\n") == 2
    assert after.count("    b = (b + bias).to(b.dtype)\n") == 2
    for expected in ("        ctx.shift = shift\n", "        ctx.bias = bias\n", "    shift: float = 0.0,\n"):
        assert expected in after, expected
    assert "def liger_swiglu(a, b, gate_multiplier=1.0, down_multiplier=1.0, shift=0.0, bias=0.0):" in repo.read(
        FUNCTIONAL
    )
    module_text = repo.read(module)
    assert "shift=0.0" in module_text and "bias=0.0" in module_text
    assert "shift={self.shift}, bias={self.bias}" in module_text
    assert repo.read(test).startswith(before[test])  # the existing tests are not touched

    result = run_pytest(checkout, test, "test/transformers/test_monkey_patch.py")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "passed" in result.stdout and " failed" not in result.stdout


def test_an_option_the_kernel_has_under_another_name_is_refused_naming_the_call(tmp_path):
    """The host swiglu scales its gate and its output already (gate_multiplier, down_multiplier): a gate and a scale
    would be the same options twice."""
    checkout = _checkout(tmp_path, "test_swiglu.py")
    before = snapshot(checkout)
    line = one_line_error(
        run_kernelgen("modify", "swiglu", "--reference", _reference(tmp_path, SWIGLU_SCALED), "--repo", str(checkout))
    )
    assert "'swiglu' already computes it through options it has: " in line, line
    assert "liger_swiglu(a, b, gate_multiplier=gate, down_multiplier=scale)" in line, line
    assert line.endswith("gate, scale would duplicate them: nothing written")
    assert snapshot(checkout) == before


def test_host_rms_norm_gains_a_scale_and_every_existing_test_still_passes(tmp_path):
    checkout = _checkout(tmp_path, "test_rms_norm.py", "test_monkey_patch.py")
    ops, module, test = (
        "src/liger_kernel/ops/rms_norm.py",
        "src/liger_kernel/transformers/rms_norm.py",
        "test/transformers/test_rms_norm.py",
    )
    repo = LigerRepo.open(checkout)
    before = repo.read(ops)
    profile = analyze_for_checkout(_reference(tmp_path, RMS_NORM_SCALED), name="rms_norm", repo_root=checkout)
    plan = plan_modify(repo, "rms_norm", profile)
    write_all(checkout, plan.changes.changes)

    after = repo.read(ops)
    assert _function_source(after, "_casting_mode_id") == _function_source(before, "_casting_mode_id")
    assert "    y_scale = scale * y\n" in after
    # The backward kernel already has a local named scale (offset + w): its new parameter takes another name.
    assert "        dy = (dy * scale_param).to(dy.dtype)\n" in after
    # The launch passes its runtime arguments by position: the new one joins them, before the keyword constexprs.
    assert "        offset,\n        scale,\n        casting_mode=casting_mode,\n" in after
    assert "    row_mode: bool | None = None,\n    scale: float = 1.0,\n):" in after  # annotated like its neighbours
    assert "        ctx.scale = scale\n" in after
    assert "row_mode={self.row_mode}, scale={self.scale}" in repo.read(module)
    assert "in_place=True, row_mode=None, scale=1.0):" in repo.read(FUNCTIONAL)

    result = run_pytest(checkout, test, "test/transformers/test_monkey_patch.py")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "passed" in result.stdout and " failed" not in result.stdout


# A kernel in another style, end to end through the command -----------------------------------------------------
def test_a_hand_written_kernel_of_another_style_gains_a_hyper_parameter(tmp_path):
    checkout = copy_checkout(tmp_path / "liger")
    install_mulsig(checkout)
    ops_path = checkout / "src/liger_kernel/ops/mulsig.py"
    result = run_kernelgen(
        "modify", "mulsig", "--reference", _reference(tmp_path, MULSIG_ALPHA), "--repo", str(checkout)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "threaded   src/liger_kernel/ops/mulsig.py" in result.stdout
    assert "note: math added to the hand-written kernels: gate -> alpha*gate" in result.stdout

    ops = ops_path.read_text()
    assert "meta['BLOCK']" in ops  # a file ruff would reformat is edited, not reformatted
    assert "def _mulsig_fwd(X, G, OUT, N, alpha, BLOCK: tl.constexpr):" in ops
    assert "_mulsig_fwd[grid](x, gate, out, n, alpha, BLOCK=256)" in ops  # joins the positional run
    # The backward launch passes BLOCK by position: the new argument goes in before it.
    assert "_mulsig_bwd[(triton.cdiv(n, 256),)](dout, x, gate, dx, dg, n, ctx.alpha, 256)" in ops
    # A stored expression is bound to a name first.
    assert "    dg_alpha = alpha * (dout * x * s * (1 - s))\n    tl.store(DG + offs, dg_alpha, mask=m)" in ops
    assert "tl.store(DX + offs, dout * s, mask=m)" in ops  # x's gradient does not change
    assert "        return dx, dg, None\n" in ops
    module = (checkout / "src/liger_kernel/transformers/mulsig.py").read_text()
    # Nothing converts MulSigmoid in place (``module.__class__ = ...``): no class default beside __init__'s.
    assert "    alpha = 1.0\n" not in module
    assert "def __init__(self, alpha=1.0):" in module and 'return f"alpha={self.alpha}"' in module
    assert "_MulSigFn" not in (checkout / "src/liger_kernel/ops/__init__.py").read_text()  # private: not exported
    # The appended cases quote the reference, outside the checkout, by its file name: no path of this machine.
    test_text = (checkout / "test/transformers/test_mulsig.py").read_text()
    assert "cases from the profile (reference.py)" in test_text and str(tmp_path) not in test_text

    tests = run_pytest(checkout, "test/transformers/test_mulsig.py")
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert "10 passed" in tests.stdout  # 4 hand-written + 3 shapes x 2 alpha values in float32

    # The same reference again: the kernel has alpha now and its cases are there; nothing to change.
    repo = LigerRepo.open(checkout)
    again = plan_modify(repo, "mulsig", analyze_for_checkout(_reference(tmp_path, MULSIG_ALPHA), name="mulsig"))
    assert again.changes.changes == {} and again.verify is None


# Refusals ------------------------------------------------------------------------------------------------------
def test_math_that_is_not_derivable_is_refused_then_tests_only_appends_failing_cases(tmp_path):
    checkout = _checkout(tmp_path, "test_swiglu.py")
    reference = _reference(tmp_path, SWIGLU_NOT_AFFINE)
    before = snapshot(checkout)
    line = one_line_error(run_kernelgen("modify", "swiglu", "--reference", reference, "--repo", str(checkout)))
    assert "cannot give hand-written 'swiglu' beta: the math is not derivable" in line
    assert "nothing written" in line and "--tests-only" in line
    assert snapshot(checkout) == before

    result = run_kernelgen("modify", "swiglu", "--reference", reference, "--repo", str(checkout), "--tests-only")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" in result.stderr and "FAIL until the kernel implements it" in result.stderr
    changed = {path for path, data in snapshot(checkout).items() if before.get(path) != data}
    assert changed == {"test/transformers/test_swiglu.py"}
    cases = run_pytest(checkout, "test/transformers/test_swiglu.py", "-k", "kernelgen_cases")
    assert cases.returncode == 1
    assert "3 failed, 3 passed" in cases.stdout  # beta=0.5 fails on every shape; the defaults pass


def test_a_hand_written_kernel_is_changed_only_by_a_reference_or_profile_passed(tmp_path):
    """``modify swiglu`` alone: the built-in reference of that name is not what the hand-written kernel was made
    from, so nothing is taken from it (it appended a redundant test before)."""
    checkout = _checkout(tmp_path, "test_swiglu.py")
    before = snapshot(checkout)
    line = one_line_error(run_kernelgen("modify", "swiglu", "--repo", str(checkout)))
    assert line == "kernelgen: error: nothing to modify 'swiglu' with: pass --profile FILE or --reference REF"
    assert snapshot(checkout) == before


def test_a_reference_that_is_not_the_kernels_math_is_refused(tmp_path):
    checkout = _checkout(tmp_path, "test_swiglu.py")
    before = snapshot(checkout)
    reference = _reference(tmp_path, SWIGLU_TANH)
    line = one_line_error(run_kernelgen("modify", "swiglu", "--reference", reference, "--repo", str(checkout)))
    assert "the reference at its defaults is not what 'swiglu' computes now" in line
    assert "[forward]" in line and "nothing written" in line
    assert snapshot(checkout) == before


def test_a_kernel_whose_shape_is_not_understood_is_refused(tmp_path):
    checkout = copy_checkout(tmp_path / "liger")
    # The output written by an atomic add: kernelgen follows tl.load and tl.store only.
    ops = MULSIG_OPS.replace(
        "tl.store(OUT + offs, x * tl.sigmoid(g), mask=m)", "tl.atomic_add(OUT + offs, x * tl.sigmoid(g), mask=m)"
    )
    install_mulsig(checkout, ops)
    before = snapshot(checkout)
    reference = _reference(
        tmp_path, "import torch\n\n\ndef mulsig(x, gate, scale=1.0):\n    return x * torch.sigmoid(gate) * scale\n"
    )
    line = one_line_error(run_kernelgen("modify", "mulsig", "--reference", reference, "--repo", str(checkout)))
    line_number = ops.splitlines().index("    tl.atomic_add(OUT + offs, x * tl.sigmoid(g), mask=m)") + 1
    assert f"the kernel's shape is not understood: src/liger_kernel/ops/mulsig.py:{line_number}:" in line
    assert "tl.atomic_add(...)" in line
    assert snapshot(checkout) == before


def test_a_reference_with_other_argument_names_is_one_line_with_both_signatures(tmp_path):
    checkout = copy_checkout(tmp_path / "liger")
    reference = _reference(
        tmp_path, "import torch.nn.functional as F\n\n\ndef swiglu(x, y):\n    return F.silu(x) * y\n"
    )
    line = one_line_error(run_kernelgen("modify", "swiglu", "--reference", reference, "--repo", str(checkout)))
    assert "the reference swiglu(x, y) does not match the kernel's liger_swiglu(a, b, gate_multiplier=1.0" in line


def test_a_moved_default_of_a_hand_written_kernel_is_refused_unless_tests_only(checkout, tmp_path):
    """The profile's eps default moved (1e-6 to 1e-5): the hand-written files keep their own default, so appending
    cases that pass the new value would leave every caller at the old one; refused in one line naming both, nothing
    written; --tests-only appends the cases alone."""
    profile = tmp_path / "rms.yaml"
    assert run_kernelgen("analyze", "rms_norm", "-o", str(profile)).returncode == 0
    # The hyper-parameter's default and the module constructor's, which the profile keeps equal.
    profile.write_text(profile.read_text().replace("default: 1.0e-06", "default: 1.0e-05"))
    before = snapshot(checkout)
    line = one_line_error(run_kernelgen("modify", "rms_norm", "--profile", str(profile), "--repo", str(checkout)))
    assert "cannot move the default of hand-written 'rms_norm' (eps 1e-06 -> 1e-05)" in line and "--tests-only" in line
    assert snapshot(checkout) == before
    tests_only = ["modify", "rms_norm", "--profile", str(profile), "--tests-only", "--dry-run", "--repo", str(checkout)]
    assert run_kernelgen(*tests_only).returncode == 0


def test_the_built_in_reference_s_cases_are_appended_calling_the_real_functional(checkout):
    shutil.copy2(REPO_ROOT / "test/transformers/test_swiglu.py", checkout / "test/transformers/test_swiglu.py")
    repo = LigerRepo.open(checkout)
    plan = plan_modify(repo, "swiglu", profile_for_modify(repo, "swiglu", reference="swiglu"))
    text = plan.changes.changes["test/transformers/test_swiglu.py"]
    compile(text, "test_swiglu.py", "exec")
    block = text[text.index("# --- kernelgen --modify") :]
    assert "liger_swiglu(a=liger_inputs[0], b=liger_inputs[1], **kwargs)" in block
    assert "LigerSwigluFunction" not in text  # a name the kernel does not have
    assert plan.verify is not None and plan.verify.test_name in block


@pytest.mark.parametrize("flag", ["--tests-only", "--ours"])
def test_modify_only_flags_need_modify(checkout, flag):
    line = one_line_error(run_kernelgen("new", "geglu", flag, "--repo", str(checkout)))
    assert "go with --modify" in line


def test_a_loss_kernel_is_refused_with_why_its_cases_cannot_be_appended_either(checkout, tmp_path):
    reference = _reference(
        tmp_path,
        "import torch.nn.functional as F\n\n\n"
        "def cross_entropy(logits, target, ignore_index=-100, scale=1.0):\n"
        "    return F.cross_entropy(logits, target, ignore_index=ignore_index) * scale\n",
    )
    before = snapshot(checkout)
    line = one_line_error(run_kernelgen("modify", "cross_entropy", "--reference", reference, "--repo", str(checkout)))
    assert "cannot give hand-written 'cross_entropy' scale: the math is not derivable: tier 3 kernels" in line
    assert "its cases cannot be appended either" in line
    assert snapshot(checkout) == before


# A clean clone --------------------------------------------------------------------------------------------------
SWIGLU_WITH_SHIFT = """\
import torch.nn.functional as F


def swiglu_shifted(a, b, shift: float = 0.0):
    return F.silu(a + shift) * b
"""


def test_modify_swiglu_on_a_clean_clone_of_this_repository_and_its_tests_pass(tmp_path):
    """The README's example on a ``git clone`` of this very repository (its conftest imports the fork server, its
    tests import whatever they like): the scratch check stages what the checkout holds, not a list of parts."""
    clone = tmp_path / "clone"
    cloned = subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], capture_output=True, text=True)
    assert cloned.returncode == 0, cloned.stderr
    reference = _reference(tmp_path, SWIGLU_WITH_SHIFT, "swiglu_shifted.py")
    result = run_kernelgen("modify", "swiglu", "--reference", reference, "--repo", str(clone))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kernelgen: wrote 4 file(s)" in result.stdout
    assert "shift=0.0" in (clone / FUNCTIONAL).read_text()
    # The appended cases move shift off its default; the hand-written ones keep it (float32: the CPU's dtype).
    selected = "kernelgen_cases and float32 or matches_hf_llama_mlp_forward_and_backward"
    tests = run_pytest(clone, "test/transformers/test_swiglu.py", "-rA", "-k", selected)
    assert tests.returncode == 0, tests.stdout[-3000:]
    passed = [line for line in tests.stdout.splitlines() if line.startswith("PASSED ")]
    assert any("-shift=" in line for line in passed), tests.stdout[-3000:]
    assert any("forward_and_backward_fp32[" in line for line in passed), tests.stdout[-3000:]
