"""The ``validate`` command: a generated kernel passes every stage; broken ones fail the right stage, with where."""

import subprocess

from pathlib import Path

import pytest
import torch

from test.kernelgen.conftest import run_kernelgen
from tools.kernelgen.analyze import analyze
from tools.kernelgen.analyze import list_builtin_references
from tools.kernelgen.cli import COMMANDS
from tools.kernelgen.cli import build_parser
from tools.kernelgen.cli import cmd_validate
from tools.kernelgen.render import render_kernel
from tools.kernelgen.validate import knowledge_kernels
from tools.kernelgen.validate.purity import check_source
from tools.kernelgen.validate.unittests import counts
from tools.kernelgen.validate.workspace import COLUMNS
from tools.kernelgen.validate.workspace import create_workspace
from tools.kernelgen.validate.workspace import default_workspace

OPS = "src/liger_kernel/ops/geglu.py"
# The derived d(b) line of the generated geglu backward (per-op rounding: gelu(a) is rounded as eager rounds it).
GRAD_B = "    grad_b = grad_y * (half_a * (tanh_inner + 1.0)).to(input_dtype).to(tl.float32)\n"
SKIP_LINE = "performance: SKIP (no GPU; run validate on a CUDA device)"
NCU_SKIP_LINE = "ncu: SKIP (no GPU (Nsight Compute profiles CUDA kernels))"
CORRECTNESS_STAGES = ("smoke", "shape_sweep", "numerical_stability", "determinism", "edge_cases")


def _edit(checkout: Path, old: str, new: str) -> int:
    """Replace ``old`` (present once) in the generated ops file; return the 1-based line where ``new`` starts."""
    path = checkout / OPS
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    return text[: text.index(old)].count("\n") + 1


# End to end ---------------------------------------------------------------------------------------------------
def test_generated_geglu_passes_every_stage_and_is_archived(geglu_checkout):
    result = run_kernelgen("validate", "geglu", "--repo", str(geglu_checkout), "--archive", "--ncu")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    stages = ["checkstyle", "purity", "unit tests", "correctness", "ncu", "performance"]
    for index, stage in enumerate(stages, start=1):
        assert f"== [{index}/6] {stage} " in out
    for stage in ("checkstyle", "purity", "unit tests", "correctness"):
        assert f"\n{stage}: PASS (" in out
    assert "CORRECTNESS_VALIDATION" in out
    for stage in CORRECTNESS_STAGES:
        assert f"stage: {stage:<19} verdict: PASSED details: " in out
    assert "overall: PASSED" in out
    # The generated test file's fp32 cases (bf16 ones skip on the CPU): 6 against the reference, the strided-rows
    # case, the DTensor case (two gloo processes) and 5 of the Gemma 4 variant.
    assert "16 passed" in out  # test_geglu.py in float32 (bf16 skips on the CPU)
    if torch.cuda.is_available():
        assert "PERFORMANCE_VALIDATION" in out and "\nnext_action: " in out and "\nspeedup_target: " in out
    else:
        assert SKIP_LINE in out and NCU_SKIP_LINE in out
        assert f"\n{NCU_SKIP_LINE}\n" in out  # one line: the reason, nothing else

    workspace = geglu_checkout / ".kernelgen-work" / "geglu"
    rows = [line.split("\t") for line in (workspace / "iterations.tsv").read_text().splitlines()]
    assert rows[0] == list(COLUMNS)
    assert rows[1][0] == "1" and rows[1][2:4] == ["PASSED", "PASSED"] and rows[1][5] == "accept"
    summary = (workspace / "summary.md").read_text()
    assert summary.startswith("# validate geglu: accept\n")
    assert "| correctness | PASS |" in summary and "| unit tests | PASS |" in summary
    assert "Correctness stages: " + ", ".join(f"{stage} PASSED" for stage in CORRECTNESS_STAGES) in summary
    assert "validate geglu: PASS (iteration 1: accept; summary: " in out

    archived = geglu_checkout / ".claude" / "skills" / "liger-kernel-gen" / "knowledge" / "geglu"
    assert sorted(p.name for p in archived.iterdir()) == ["geglu.py", "profile.yaml", "summary.md"]
    assert (archived / "geglu.py").read_text() == (geglu_checkout / OPS).read_text()
    assert knowledge_kernels(geglu_checkout) == ["geglu"]


def test_wrong_gradient_fails_correctness_naming_the_gradient(geglu_copy):
    _edit(geglu_copy, GRAD_B, GRAD_B.replace("grad_b = ", "grad_b = 1.5 * "))
    result = run_kernelgen("validate", "geglu", "--repo", str(geglu_copy), "--skip-tests")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "purity: PASS" in out and "unit tests: SKIP" in out
    assert f"stage: {'smoke':<19} verdict: FAILED details: 4x33 no hyper-parameters: [grad b]" in out
    assert "overall: FAILED" in out and "correctness: FAIL" in out
    assert "validate geglu: FAIL at correctness (iteration 1: reject; summary: " in out
    assert "== [5/5] performance" not in out  # stops at the first hard failure
    assert "[forward y]" not in out  # the forward is still right


def test_wrong_gradient_fails_the_unit_tests_first(geglu_copy):
    _edit(geglu_copy, GRAD_B, GRAD_B.replace("grad_b = ", "grad_b = 1.5 * "))
    result = run_kernelgen("validate", "geglu", "--repo", str(geglu_copy))
    assert result.returncode == 1
    assert "unit tests: FAIL (test/transformers/test_geglu.py:" in result.stdout
    assert "failed" in result.stdout and "CORRECTNESS_VALIDATION" not in result.stdout


def test_torch_math_in_the_forward_wrapper_fails_purity_with_file_and_line(geglu_copy, tmp_path):
    anchor = "    a = _rows(a, n_cols)\n"
    line = _edit(geglu_copy, anchor, anchor + "    a = torch.sigmoid(a)\n") + 1
    workspace = tmp_path / "work"
    result = run_kernelgen(
        "validate", "geglu", "--repo", str(geglu_copy), "--workspace", str(workspace), "--focus", "wrapper",
        "--description", "sigmoid in the wrapper",
    )  # fmt: skip
    assert result.returncode == 1
    assert "checkstyle: PASS" in result.stdout
    assert f"{OPS}:{line}: geglu_forward: torch.sigmoid(...) is not allowed" in result.stdout
    assert "purity: FAIL" in result.stdout and "== [3/5] unit tests" not in result.stdout
    rows = (workspace / "iterations.tsv").read_text().splitlines()
    row = rows[1].split("\t")
    assert row[:6] == ["1", "-", "-", "FAILED", "wrapper", "reject"]
    assert row[6].startswith("failed at purity: 1 violation(s); first: ")
    assert row[6].endswith(" (sigmoid in the wrapper)")
    assert "| unit tests | NOT RUN |" in (workspace / "summary.md").read_text()


def test_stub_backward_fails_purity(geglu_copy):
    old = (
        "        a, b = ctx.saved_tensors\n"
        "        if ctx.layout is not None:\n"
        "            (grad_y,) = ctx.layout.local_grads(grad_y)\n"
        "        grad_a, grad_b = geglu_backward(a, b, grad_y)\n"
        "        if ctx.layout is not None:\n"
        "            grad_a, grad_b = ctx.layout.wrap_grads((grad_a, grad_b), ())\n"
        "        return grad_a, grad_b\n"
    )
    _edit(geglu_copy, old, "        return grad_y, None\n")
    text = (geglu_copy / OPS).read_text()
    line = text.splitlines().index("    def backward(ctx, grad_y):") + 1
    result = run_kernelgen("validate", "geglu", "--repo", str(geglu_copy), "--skip-tests")
    assert result.returncode == 1
    assert f"{OPS}:{line}: LigerGELUMulFunction.backward: returns its incoming gradient grad_y unchanged" in (
        result.stdout
    )


def test_lint_problem_fails_checkstyle_with_file_and_line(geglu_copy):
    line = _edit(geglu_copy, "import torch\n", "import os\nimport torch\n")
    result = run_kernelgen("validate", "geglu", "--repo", str(geglu_copy), "--skip-tests")
    assert result.returncode == 1
    assert f"{OPS}:{line}:" in result.stdout and "F401" in result.stdout
    assert "checkstyle: FAIL" in result.stdout and "== [2/5] purity" not in result.stdout


def test_without_ruff_checkstyle_is_one_skip_line_and_the_stages_after_it_run(geglu_copy, monkeypatch, capsys):
    """A GPU machine may lack the generator's tools: its validate says so once instead of failing every file."""
    from tools.kernelgen.validate import checkstyle

    monkeypatch.setattr(checkstyle, "ruff_available", lambda: False)
    cmd_validate(build_parser().parse_args(["validate", "geglu", "--repo", str(geglu_copy), "--skip-tests"]))
    out = capsys.readouterr().out
    assert "checkstyle: SKIP (ruff is not installed here (pip install ruff): the files were not linted)" in out
    assert "No module named ruff" not in out and "purity: PASS" in out


# Bad input -----------------------------------------------------------------------------------------------------
def test_unknown_kernel_is_a_one_line_usage_error(geglu_checkout):
    result = run_kernelgen("validate", "no_such_kernel", "--repo", str(geglu_checkout))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no kernel 'no_such_kernel'" in lines[0]


def test_not_a_checkout_is_a_one_line_usage_error(tmp_path):
    result = run_kernelgen("validate", "geglu", "--repo", str(tmp_path))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "not a Liger-Kernel checkout" in result.stderr


def test_archive_with_skipped_tests_is_refused(geglu_checkout):
    result = run_kernelgen("validate", "geglu", "--repo", str(geglu_checkout), "--archive", "--skip-tests")
    assert result.returncode == 2 and "--archive needs every stage" in result.stderr


def test_cli_parses_validate_and_routes_to_the_validate_package():
    args = build_parser().parse_args(["validate", "geglu", "--workspace", "w", "--skip-tests", "--archive"])
    assert (args.name, args.workspace, args.skip_tests, args.archive) == ("geglu", "w", True, True)
    assert args.command == "validate" and COMMANDS[args.command] is cmd_validate


# Purity checker on small sources --------------------------------------------------------------------------------
HEADER = """\
import math

import numpy as np
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from liger_kernel.ops.utils import tanh
"""

CLEAN_KERNEL = """
@triton.jit
def _helper(x):
    return x * tl.sigmoid(x)


@triton.jit
def _kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
    y = _helper(x) + tanh(x)
    for start in range(0, n_cols, BLOCK):
        y += 1.0
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)
"""

CLEAN_WRAPPERS = """
def op_forward(x, eps=1e-6):
    shape = x.shape
    x = x.view(-1, shape[-1])
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    partial = torch.zeros((4, n_cols), dtype=torch.float32, device=x.device)
    _kernel[(triton.cdiv(n_rows * 2, 2),)](x, y, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    total = partial.sum(dim=0).to(x.dtype)
    return y.view(*shape), x, total


def op_count(target, ignore_index):
    return (target != ignore_index).sum().clamp_(min=1).to(torch.float32)


def op_backward(grad_y, x):
    if grad_y.numel() == 1 and torch.equal(grad_y, torch.ones_like(grad_y)):
        return grad_y
    grad_x = torch.empty_like(x)
    _kernel[(x.shape[0],)](grad_y, grad_x, x.shape[-1], BLOCK=64)
    return grad_x


class OpFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, eps=1e-6):
        y, x, total = op_forward(x, eps)
        ctx.save_for_backward(x)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, grad_y):
        (x,) = ctx.saved_tensors
        grad_x = op_backward(grad_y, x)
        return grad_x, None
"""


def _check(body: str, grad_names=("x",)) -> list[str]:
    return [str(f) for f in check_source(HEADER + body, "ops.py", grad_names)]


def _line_of(body: str, needle: str) -> int:
    return (HEADER + body).splitlines().index(needle) + 1


def test_purity_accepts_clean_kernels_and_wrappers():
    assert _check(CLEAN_KERNEL + CLEAN_WRAPPERS) == []


@pytest.mark.parametrize(
    "statement, expected",
    [
        ("    y = torch.exp(x)", "calls torch.exp(...)"),
        ("    y = math.sqrt(2.0) * x", "calls math.sqrt(...)"),
        ("    y = np.maximum(x, 0.0)", "calls numpy.maximum(...)"),
        ("    y = F.relu(x)", "calls torch.nn.functional.relu(...)"),
        ("    y = _not_jit(x)", "calls _not_jit(...), which is not a @triton.jit function"),
        ("    y = x.to(torch.float32)", "uses torch.float32 (not Triton language)"),
    ],
)
def test_purity_rejects_non_triton_code_inside_jit(statement, expected):
    body = (
        "\n\ndef _not_jit(v):\n    return v\n\n\n@triton.jit\ndef _bad(x_ptr):\n"
        "    x = tl.load(x_ptr)\n" + statement + "\n    tl.store(x_ptr, y)\n"
    )
    findings = _check(body)
    assert len(findings) == 1, findings
    assert findings[0].startswith(f"ops.py:{_line_of(body, statement)}: @triton.jit _bad: {expected}")


@pytest.mark.parametrize(
    "statement, expected",
    [
        ("    y = torch.sigmoid(x)", "torch.sigmoid(...) is not allowed"),
        ("    y = F.silu(x)", "torch.nn.functional.silu(...) is not allowed"),
        ("    y = x * 2.0", "tensor arithmetic `x * 2.0`"),
        ("    y = -x", "tensor arithmetic `-x`"),
        ("    y = x.exp()", "tensor method .exp() in `x.exp()` is not allowed"),
        ("    y = x[0]", "tensor indexing `x[0]`"),
        ("    y = x > 0", "tensor comparison `x > 0`"),
        ("    y = x.sum(dim=-1)", "`x.sum(dim=-1)`: only .sum() / .sum(dim=0 or 1) of a partial-sum buffer"),
        ("    y = np.asarray(x)", "numpy.asarray(...) is not allowed"),
    ],
)
def test_purity_rejects_math_in_wrappers(statement, expected):
    body = (
        "\n\n@triton.jit\ndef _k(x_ptr):\n    tl.store(x_ptr, tl.load(x_ptr))\n\n\n"
        "def op_forward(x):\n    x = x.view(-1)\n" + statement + "\n    _k[(1,)](x)\n    return y\n"
    )
    findings = _check(body)
    assert len(findings) == 1, findings
    assert findings[0].startswith(f"ops.py:{_line_of(body, statement)}: op_forward: {expected}")


def test_purity_accepts_a_causal_lm_s_label_shift_and_no_other_pad():
    """``F.pad(labels, (0, 1), value=...)[..., 1:]`` copies the targets one token left, as Liger's
    LigerForCausalLMLoss does on the host: no math. Another pad or slice of it is math in the wrapper still."""
    body = (
        "\n\n@triton.jit\ndef _k(x_ptr):\n    tl.store(x_ptr, tl.load(x_ptr))\n\n\n"
        "def op_forward(x, labels, ignore_index=-100):\n    {}\n    _k[(1,)](x, labels)\n    return x\n"
    )
    assert _check(body.format("labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]")) == []
    assert _check(body.format("labels = F.pad(labels, (0, 1), value=-100)[..., 1:]")) == []
    for other in (
        "labels = F.pad(labels, (0, 2), value=ignore_index)[..., 1:]",
        "labels = F.pad(labels, (0, 1), value=ignore_index)[..., :-1]",
        "labels = F.pad(labels, (1, 0), value=ignore_index)",
        "labels = F.pad(x, (0, 1), mode='reflect', value=0.0)[..., 1:]",
    ):
        assert _check(body.format(other)), other


def test_purity_takes_a_two_stage_loss_s_sequence_stage_as_the_reference_s_math_and_nothing_else():
    """``_NAME_sequence`` is the reference's PyTorch math after the per-token statistics, by design, and its
    Function runs it under enable_grad and takes its adjoints with autograd.grad; a wrapper doing the same without a
    sequence stage, or math outside it, is still refused."""
    staged = (
        "\n\n@triton.jit\ndef _k(x_ptr):\n    tl.store(x_ptr, tl.load(x_ptr))\n\n\n"
        "def _op_sequence(tok, mask):\n    return ((tok * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()\n\n\n"
        "def op_forward(x, mask):\n    _k[(1,)](x)\n    with torch.enable_grad():\n"
        "        loss = _op_sequence(x.requires_grad_(), mask)\n"
        "    (adjoint,) = torch.autograd.grad(loss, [x])\n    return loss.detach(), adjoint\n"
    )
    assert _check(staged) == []
    assert any(
        "torch.autograd.grad(...) is not allowed" in f for f in _check(staged.replace("_op_sequence", "_helper"))
    )
    assert any(
        "tensor arithmetic `x * 2.0`" in f
        for f in _check(staged.replace("    _k[(1,)](x)\n", "    _k[(1,)](x)\n    y = x * 2.0\n"))
    )


def test_purity_takes_the_weighted_count_of_kept_rows_and_no_other_where():
    """A class-weighted mean divides by its kept rows' class weights, gathered on the host by the generated
    ``_take`` as upstream's cross entropy gathers them; another ``torch.where`` or a sum of it is math still."""
    body = (
        "\n\n@triton.jit\ndef _k(x_ptr):\n    tl.store(x_ptr, tl.load(x_ptr))\n\n\n"
        "def _take(values, index):\n    inside = (index >= 0) & (index < values.shape[0])\n"
        "    return torch.where(inside, values[torch.where(inside, index, 0)].float(), 0.0)\n\n\n"
        "def op_forward(x, target, weight):\n    _k[(1,)](x)\n"
        "    denominator = torch.where(target != -100, _take(weight, target), 0.0).sum()\n    return x, denominator\n"
    )
    assert _check(body) == []
    assert any("torch.where(...) is not allowed" in f for f in _check(body.replace("_take(weight, target)", "x")))
    assert any("_helper" in f for f in _check(body.replace("_take", "_helper")))


def test_purity_follows_tensors_through_calls_and_saved_tensors():
    body = CLEAN_KERNEL + CLEAN_WRAPPERS.replace(
        "        grad_x = op_backward(grad_y, x)\n", "        grad_x = op_backward(grad_y, x) * 2\n"
    )
    findings = _check(body)
    assert len(findings) == 1 and "OpFunction.backward: tensor arithmetic `op_backward(grad_y, x) * 2`" in findings[0]


@pytest.mark.parametrize(
    "backward_body, expected",
    [
        ("        pass\n", "is a stub (its body does nothing)"),
        ('        """Not written yet."""\n        ...\n', "is a stub (its body does nothing)"),
        ("        raise NotImplementedError\n", "raises NotImplementedError (a stub)"),
        ("        (x,) = ctx.saved_tensors\n        return grad_y, None\n", "returns its incoming gradient grad_y"),
        ("        return grad_y\n", "returns its incoming gradient grad_y unchanged"),
        ("        return None, None\n", "returns only None (a stub: no input gets a gradient)"),
        ("        ctx.eps = 1\n", "returns nothing (a stub)"),
        (
            "        (x,) = ctx.saved_tensors\n        return None, op_backward(grad_y, x)\n",
            "returns None for 'x', which requires a gradient",
        ),
    ],
)
def test_purity_rejects_stub_backwards(backward_body, expected):
    start = CLEAN_WRAPPERS.index("    @staticmethod\n    def backward")
    body = CLEAN_KERNEL + CLEAN_WRAPPERS[:start] + "    @staticmethod\n    def backward(ctx, grad_y):\n" + backward_body
    findings = _check(body)
    line = _line_of(body, "    def backward(ctx, grad_y):")
    assert len(findings) == 1 and findings[0].startswith(f"ops.py:{line}: OpFunction.backward: {expected}"), findings


def test_purity_without_profile_accepts_none_for_inputs_it_cannot_know_about():
    start = CLEAN_WRAPPERS.index("        return grad_x, None")
    body = CLEAN_KERNEL + CLEAN_WRAPPERS[:start] + "        return None, grad_x\n"
    assert _check(body, grad_names=()) == []
    assert "returns None for 'x'" in _check(body, grad_names=("x",))[0]


def test_purity_reports_a_syntax_error_with_its_line():
    assert str(check_source("x = 1\ndef f(:\n", "ops.py")[0]).startswith("ops.py:2: does not parse")


def test_purity_accepts_the_generated_row_kernels_ctx_attributes_and_sizes():
    # ctx.shape = x.shape stores a size on ctx (neither is a tensor), and the backward's shape.numel() is a
    # torch.Size's: the derived tier-2 template's wrappers did not pass before.
    golden = Path(__file__).parent / "golden" / "layer_norm" / "ops.py.golden"
    assert check_source(golden.read_text(), "layer_norm.py", ["x", "weight", "bias"]) == []
    body = CLEAN_KERNEL + CLEAN_WRAPPERS.replace("        ctx.eps = eps\n", "        ctx.shape = x.shape\n")
    assert _check(body) == []
    # A real tensor is still one: arithmetic on what forward saved is found.
    assert "tensor arithmetic" in _check(body.replace("op_backward(grad_y, x)\n", "op_backward(grad_y, x * 2)\n"))[0]


@pytest.mark.parametrize("name", list_builtin_references())
def test_purity_accepts_every_built_in_kernel_as_generated(name):
    """What kernelgen writes passes its own audit: softmax's long-row pieces (a ``torch.Size`` shape, a scalar
    parameter's gradient shared out over them) failed it, so the skill's validate could never pass there."""
    profile = analyze(name)
    rendered = render_kernel(profile).files
    grad_names = [t.name for t in profile.inputs if t.requires_grad] + [p.name for p in profile.parameters]
    for path, source in rendered.items():
        if path.startswith("src/liger_kernel/ops/"):
            assert [str(f) for f in check_source(source, path, grad_names)] == []


# Small helpers ----------------------------------------------------------------------------------------------------
def test_pytest_counts_come_from_the_summary_line():
    output = "....s\nSKIPPED [1] x\n3 failed, 6 passed, 6 skipped, 1 error in 4.27s\n"
    assert counts(output) == {"failed": 3, "passed": 6, "skipped": 6, "errors": 1}
    assert counts("no tests ran") == {}


def test_knowledge_kernels_lists_archived_kernels_with_a_profile(tmp_path):
    assert knowledge_kernels(tmp_path) == []
    base = tmp_path / ".claude" / "skills" / "liger-kernel-gen" / "knowledge"
    for name, files in {"swish": ["profile.yaml"], "geglu": ["profile.yaml", "geglu.py"], "junk": ["notes.md"]}.items():
        (base / name).mkdir(parents=True)
        for file in files:
            (base / name / file).write_text("x")
    assert knowledge_kernels(tmp_path) == ["geglu", "swish"]


def test_a_workspace_leaves_git_status_clean_in_a_checkout_that_does_not_ignore_it(tmp_path):
    # Upstream Liger-Kernel's .gitignore does not name .kernelgen-work/: `validate --repo` left it untracked there.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "README.md").write_text("checkout\n")
    folder = create_workspace(default_workspace(tmp_path, "snake"))
    (folder / "summary.md").write_text("# validate snake\n")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path, capture_output=True, text=True
    )
    assert status.stdout.splitlines() == ["?? README.md"]
    # A .gitignore someone wrote there stays as it is.
    (tmp_path / ".kernelgen-work" / ".gitignore").write_text("*.tsv\n")
    create_workspace(default_workspace(tmp_path, "other"))
    assert (tmp_path / ".kernelgen-work" / ".gitignore").read_text() == "*.tsv\n"
