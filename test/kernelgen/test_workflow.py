"""The skill's workflow commands: ``validate --samples/--report``, ``samples``, ``workspace``, ``knowledge`` and
``audit``, on one workflow run made once per module (a hand-written reference, not a built-in), and planted defects
the audit must catch on copies of it."""

import hashlib
import json
import re
import shutil

from pathlib import Path

import pytest
import torch

from test.kernelgen.conftest import REPO_ROOT
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from tools.kernelgen.knowledge import archive
from tools.kernelgen.record import record_key
from tools.kernelgen.validate.samples import SamplerError
from tools.kernelgen.validate.samples import draw_samples
from tools.kernelgen.validate.workspace import COLUMNS
from tools.kernelgen.workflow import artifacts
from tools.kernelgen.workflow.runtime import compare
from tools.kernelgen.workflow.static_checks import STATIC_CHECKS

SKILL = Path(__file__).resolve().parents[2] / ".claude" / "skills" / "liger-kernel-gen"
NAME = "tanh_gate"
OPS = f"src/liger_kernel/ops/{NAME}.py"
TEST = f"test/transformers/test_{NAME}.py"
REFERENCE = """import torch


def tanh_gate(a, b, alpha: float = 0.5):
    return torch.tanh(alpha * a) * b
"""
SAMPLER = """import torch


def sample_inputs(device, dtype):
    def rows(*shape, scale=1.0):
        return torch.randn(*shape, device=device, dtype=dtype) * scale

    return [
        {"label": "one long row", "inputs": {"a": rows(1, 4099), "b": rows(1, 4099)}},
        {"label": "3-d batch", "inputs": {"a": rows(2, 3, 33), "b": rows(2, 3, 33)}},
        {"label": "saturated gate", "inputs": {"a": rows(3, 17, scale=50.0), "b": rows(3, 17)}},
        {"label": "alpha 2", "inputs": {"a": rows(4, 9), "b": rows(4, 9)}, "hyper": {"alpha": 2.0}},
        {"label": "transposed", "inputs": {"a": rows(8, 5).t(), "b": rows(8, 5).t()}},
    ]
"""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ok(result) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _complete_run(root: Path) -> Path:
    """What the orchestrator leaves after phases 0-6 (the approval recorded as the supervisor does): the workspace."""
    reference = root / "refs" / f"{NAME}.py"
    reference.parent.mkdir()
    reference.write_text(REFERENCE)
    repo = ("--repo", str(root))
    _ok(run_kernelgen("workspace", NAME, "--reference", str(reference), *repo))
    ws = root / ".kernelgen-work" / NAME
    (ws / artifacts.KNOWLEDGE).write_text(_ok(run_kernelgen("knowledge", str(reference), "--name", NAME, *repo)))
    _ok(run_kernelgen("analyze", str(reference), "--name", NAME, "-o", str(ws / artifacts.PROFILE)))
    (ws / artifacts.APPROVALS).write_text(f"{_sha256(ws / artifacts.PROFILE)}  {ws / artifacts.PROFILE}\n")
    (ws / artifacts.SAMPLER).write_text(SAMPLER)
    _ok(run_kernelgen("samples", str(ws / artifacts.SAMPLER), "--profile", str(ws / artifacts.PROFILE)))
    _ok(run_kernelgen("new", NAME, "--profile", str(ws / artifacts.PROFILE), *repo))
    report = ws / artifacts.VALIDATE_REPORT
    validate = ("--workspace", str(ws), "--samples", str(ws / artifacts.SAMPLER), "--report", str(report))
    _ok(run_kernelgen("validate", NAME, *repo, *validate))
    shutil.copyfile(root / OPS, ws / artifacts.BEST)
    (ws / artifacts.PHASE_4_SUMMARY).write_text(
        f"# phase 4 {NAME}: accepted iteration 1 (validate; tune did not run)\n\n- accepted iteration: 1\n"
        "- speedup: -\n- correctness: PASSED\n- samples_passed: 5\n- samples_failed: 0\n"
        "- convergence: tune did not run (no GPU)\n"
    )
    archive(root, NAME, ws / artifacts.SUMMARY)
    (ws / artifacts.RESULTS).write_text(
        f"# {NAME}\n\n```python\nfrom liger_kernel.transformers import liger_{NAME}\n```\n"
    )
    template = (SKILL / "agents" / "orchestrator.md").read_text()
    block = template.split("```\nORCHESTRATOR_REPORT\n")[1].split("```")[0]
    block = block.replace("/absolute/path/to/ref.py", str(reference)).replace("NAME", NAME)
    block = block.replace("samples_passed: 6", "samples_passed: 5")
    (ws / artifacts.ORCHESTRATOR_REPORT).write_text("ORCHESTRATOR_REPORT\n" + block)
    return ws


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = copy_checkout(tmp_path_factory.mktemp("workflow") / "liger")
    return _complete_run(root)


@pytest.fixture
def copy(run, tmp_path) -> Path:
    """A copy of the run's checkout and workspace, its request pointing at the copy's reference."""
    root = tmp_path / "liger"
    shutil.copytree(run.parents[1], root, ignore=shutil.ignore_patterns("__pycache__", "audit"))
    ws = root / ".kernelgen-work" / NAME
    request = json.loads((ws / "request.json").read_text())
    request["reference"] = request["reference_file"] = str(root / "refs" / f"{NAME}.py")
    (ws / "request.json").write_text(json.dumps(request))
    return ws


def _audit(ws: Path, *extra: str):
    root = ws.parents[1]
    return run_kernelgen(
        "audit",
        NAME,
        "--repo",
        str(root),
        "--workspace",
        str(ws),
        "--report",
        str(ws / "ORCHESTRATOR_REPORT.md"),
        *extra,
    )


def _checks(output: str) -> dict[str, str]:
    return {m.group(2): m.group(1) for m in re.finditer(r"^\[(PASS|FAIL|SKIP)\] (\w+) ", output, re.MULTILINE)}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


# The complete run --------------------------------------------------------------------------------------------
def test_a_complete_run_passes_the_audit_with_the_runtime_recheck(run):
    result = _audit(run)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = _checks(result.stdout)
    assert set(checks.values()) == {"PASS"}, checks
    assert set(checks) == {*(name for name, _, _ in STATIC_CHECKS), "runtime_validate"}
    assert result.stdout.rstrip().endswith("AUDIT_PASSED")
    assert "samples 5 passed / 0 failed" in result.stdout
    rerun = json.loads((run / "audit" / "validate_report.json").read_text())
    assert rerun["options"]["focus"] == "audit" and rerun["samples_passed"] == 5
    rows = (run / "iterations.tsv").read_text().splitlines()
    assert len(rows) == 2, "the audit's re-run must not add to the workspace's iterations.tsv (header + 1 row)"


def test_the_validate_report_has_the_documented_fields(run):
    report = json.loads((run / artifacts.VALIDATE_REPORT).read_text())
    documented = (SKILL / "agents" / "validator.md").read_text().split("## The report")[1].split("\n## ")[0]
    for key in report:
        if key != "report_version":
            assert f"`{key}`" in documented, key
    assert report["kernel"] == NAME and report["passed"] is True and report["iteration"] == 1
    assert [s["stage"] for s in report["stages"]] == [
        "checkstyle",
        "purity",
        "unit tests",
        "correctness",
        "performance",
    ]
    assert report["samples_passed"] == 5 and report["samples_failed"] == 0 and report["sample_failures"] == []
    assert report["correctness"]["stages"][-1]["stage"] == "samples"
    assert report["unit_tests"]["passed"] > 0
    assert report["options"]["samples"] == str(run / artifacts.SAMPLER) and report["options"]["skip_tests"] is False
    assert set(report["files"]) == {OPS, TEST, f"src/liger_kernel/transformers/{NAME}.py",
                                    f"benchmark/scripts/benchmark_{NAME}.py", record_key(run.parents[1], NAME)}  # fmt: skip
    assert Path(report["artifacts"]["iterations_tsv"]) == run / "iterations.tsv"
    for key in ("speedup", "speedup_target", "delta_vs_target", "next_action", "liger_ms"):
        assert key in report
    if not torch.cuda.is_available():
        assert report["performance"]["verdict"] == "SKIP" and report["speedup"] is None


def test_iterations_tsv_schema_and_the_orchestrator_report_fields(run):
    rows = artifacts.read_iterations(run / "iterations.tsv")
    assert (run / "iterations.tsv").read_text().splitlines()[0].split("\t") == list(COLUMNS)
    assert [row.number for row in rows] == [1] and rows[0].accepted and rows[0].speedup_value is None
    fields = artifacts.parse_orchestrator_report((run / artifacts.ORCHESTRATOR_REPORT).read_text(), "report")
    assert tuple(fields) == artifacts.REPORT_FIELDS, "orchestrator.md's template and the audited fields differ"


def test_a_malformed_tsv_is_named_with_its_line(tmp_path):
    path = tmp_path / "iterations.tsv"
    header = "\t".join(COLUMNS)
    for body, problem in [
        (
            "1\t-\tPASSED\tPASSED\tvalidate\taccept\tok\n3\t-\tPASSED\tPASSED\tx\taccept\tok",
            "iterations.tsv:3: iteration '3'",
        ),
        ("1\t-\tPASSED\tPASSED\tvalidate\tgreat\tok", "status 'great'"),
        ("1\t-\tPASSED\tPASSED\tvalidate\tpass\tok", "status 'pass' is not accept, reject, crash"),
        ("1\t-\tPASSED", "iterations.tsv:2: 3 cells"),
    ]:
        path.write_text(f"{header}\n{body}\n")
        with pytest.raises(artifacts.ArtifactError, match=re.escape(problem)):
            artifacts.read_iterations(path)
    path.write_text("iter\tspeedup\n")
    with pytest.raises(artifacts.ArtifactError, match="header"):
        artifacts.read_iterations(path)


# --samples -----------------------------------------------------------------------------------------------------
def test_a_good_sampler_is_a_passing_correctness_stage(run):
    correctness = json.loads((run / "correctness.json").read_text())
    stage = correctness["stages"][-1]
    assert stage["stage"] == "samples" and stage["verdict"] == "PASSED"
    assert stage["details"] == "5 input set(s): 5 passed, 0 failed"
    assert correctness["samples"]["passed"] == 5


def test_inputs_that_break_the_kernel_are_counted_in_samples_failed(tmp_path):
    # The host swiglu holds a whole row in one block: a row past 65536 columns makes it raise, not the reference.
    root = copy_checkout(tmp_path / "liger")
    shutil.copy2(REPO_ROOT / "test/transformers/test_swiglu.py", root / "test/transformers/test_swiglu.py")
    sampler = tmp_path / "sample_inputs.py"
    sampler.write_text(
        "import torch\n\n\ndef sample_inputs(device, dtype):\n"
        "    def rows(*shape):\n        return torch.randn(*shape, device=device, dtype=dtype)\n\n"
        '    return [{"label": "small", "inputs": {"a": rows(3, 8), "b": rows(3, 8)}},\n'
        '            {"label": "row of 70000", "inputs": {"a": rows(1, 70000), "b": rows(1, 70000)}}]\n'
    )
    report = tmp_path / "report.json"
    result = run_kernelgen(
        "validate", "swiglu", "--repo", str(root), "--skip-tests", "--samples", str(sampler), "--report", str(report)
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 passed, 1 failed; first: row of 70000: RuntimeError: Cannot launch Triton kernel" in result.stdout
    data = json.loads(report.read_text())
    assert (data["samples_passed"], data["samples_failed"], data["passed"]) == (1, 1, False)
    assert data["sample_failures"][0]["label"] == "row of 70000"
    assert [s["verdict"] for s in data["correctness"]["stages"][:-1]] == ["PASSED"] * 5  # the others still pass


MALFORMED = {
    "does not import": ("import torch\nfrom nowhere import thing\n", "does not import: ModuleNotFoundError"),
    "syntax error": ("def sample_inputs(device, dtype)\n    return []\n", "does not import: SyntaxError: "),
    "no function": ("import torch\n", "defines no function sample_inputs(device, dtype)"),
    "not a list": ("def sample_inputs(device, dtype):\n    return {}\n", "returned dict, expected a non-empty list"),
    "missing input": (
        "import torch\n\ndef sample_inputs(device, dtype):\n    return [{'inputs': {'a': torch.ones(2, 3)}}]\n",
        "input set 1 (sample 1): 'inputs' has no 'b'",
    ),
    "wrong dtype": (
        "import torch\n\ndef sample_inputs(device, dtype):\n    x = torch.ones(2, 3, dtype=torch.float64)\n"
        "    return [{'label': 'f64', 'inputs': {'a': x, 'b': x}}]\n",
        "input set 1 (f64): input 'a' is torch.float64, expected torch.float32",
    ),
    "shapes differ": (
        "import torch\n\ndef sample_inputs(device, dtype):\n"
        "    return [{'inputs': {'a': torch.ones(2, 3), 'b': torch.ones(2, 4)}}]\n",
        "input 'b' has shape (2, 4), expected (2, 3)",
    ),
    "unknown hyper-parameter": (
        "import torch\n\ndef sample_inputs(device, dtype):\n    x = torch.ones(2, 3)\n"
        "    return [{'inputs': {'a': x, 'b': x}, 'hyper': {'beta': 1.0}}]\n",
        "hyper-parameter 'beta' is not one of the kernel's (alpha)",
    ),
    "raises": (
        "def sample_inputs(device, dtype):\n    return 1 / 0\n",
        "raised ZeroDivisionError: division by zero (line 2)",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_sampler_is_one_line_from_samples_and_from_validate(run, tmp_path, case):
    source, expected = MALFORMED[case]
    sampler = tmp_path / "sample_inputs.py"
    sampler.write_text(source)
    line = one_line_error(run_kernelgen("samples", str(sampler), "--profile", str(run / artifacts.PROFILE)))
    assert expected in line and str(sampler) in line, line
    root = run.parents[1]
    result = run_kernelgen(
        "validate", NAME, "--repo", str(root), "--workspace", str(tmp_path), "--samples", str(sampler)
    )
    assert expected in one_line_error(result) and result.stdout == ""
    assert not (tmp_path / "iterations.tsv").exists(), "bad input runs nothing"


def test_sampler_tensors_must_be_on_the_device_validate_asks_for(run, tmp_path):
    from tools.kernelgen.profile import load_profile

    profile = load_profile(str(run / artifacts.PROFILE))
    assert len(draw_samples(run / artifacts.SAMPLER, profile, "meta")) == 5  # it honours the device it is given
    ignoring = tmp_path / "sample_inputs.py"
    ignoring.write_text("import torch\n\n\ndef sample_inputs(device, dtype):\n    x = torch.ones(2, 3)\n"
                        "    return [{'label': 'host', 'inputs': {'a': x, 'b': x}}]\n")  # fmt: skip
    with pytest.raises(SamplerError, match=r"input set 1 \(host\): input 'a' is on cpu, expected meta"):
        draw_samples(ignoring, profile, "meta")


# workspace / knowledge ------------------------------------------------------------------------------------------
def test_the_workspace_request_is_kept_and_another_reference_refused(run, tmp_path):
    root = run.parents[1]
    request = json.loads((run / "request.json").read_text())
    assert request["reference_sha256"] == _sha256(root / "refs" / f"{NAME}.py")
    assert (request["backward"], request["backend"], request["framework"]) == (True, "triton", "pytorch")
    again = run_kernelgen("workspace", NAME, "--reference", request["reference"], "--repo", str(root))
    assert "(unchanged)" in _ok(again)
    other = tmp_path / "other.py"
    other.write_text(REFERENCE.replace("0.5", "0.25"))
    line = one_line_error(run_kernelgen("workspace", NAME, "--reference", str(other), "--repo", str(root)))
    assert "holds another request" in line and "--force" in line
    assert "--backend cuda: this kernelgen generates triton, tilelang" in one_line_error(
        run_kernelgen("workspace", NAME, "--reference", str(other), "--backend", "cuda", "--repo", str(root))
    )
    folder = tmp_path / "tl_work"
    tilelang = ("--backend", "tilelang", "--workspace", str(folder), "--repo", str(root))
    _ok(run_kernelgen("workspace", "other_gate", "--reference", str(other), *tilelang))
    assert json.loads((folder / "request.json").read_text())["backend"] == "tilelang"


def test_knowledge_names_the_closest_archived_kernel(run, tmp_path):
    root = run.parents[1]
    gate = tmp_path / "sigmoid_tanh.py"
    gate.write_text("import torch\n\n\ndef sigmoid_tanh(x, y):\n    return torch.tanh(x) * torch.sigmoid(y)\n")
    out = _ok(run_kernelgen("knowledge", str(gate), "--repo", str(root)))
    assert f"archived kernels (.claude/skills/liger-kernel-gen/knowledge/): {NAME}" in out
    assert f"closest archived kernel: {NAME} (score" in out and "shared ops: tanh" in out
    assert "closest library kernel: swiglu" in (run / artifacts.KNOWLEDGE).read_text()  # before the archive had it


# The audit's planted defects (static checks, on copies of the run) ---------------------------------------------
def _failed(ws: Path, check: str) -> str:
    result = _audit(ws, "--static")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "AUDIT_FAILURE" in result.stdout and "AUDIT_PASSED" not in result.stdout
    assert _checks(result.stdout)[check] == "FAIL", result.stdout
    evidence = re.search(rf"^- {check} \(phase (\S+)\): (.*)$", result.stdout, re.MULTILINE)
    assert evidence, result.stdout
    return evidence.group(2)


def test_an_untouched_copy_passes_the_static_audit(copy):
    result = _audit(copy, "--static")
    assert result.returncode == 0, result.stdout
    assert "AUDIT_PASSED (static checks only" in result.stdout


def test_audit_catches_a_stub_backward(copy):
    ops = copy.parents[1] / OPS
    text = ops.read_text()
    body = text[text.index("    def backward(ctx, grad_y):\n") :]
    ops.write_text(text.replace(body, "    def backward(ctx, grad_y):\n        return grad_y, None, None\n"))
    assert "returns its incoming gradient grad_y unchanged (a stub)" in _failed(copy, "backward_not_stub")


def test_audit_catches_a_backward_that_purity_accepts_but_launches_no_kernel(copy):
    ops = copy.parents[1] / OPS
    text = ops.read_text()
    body = text[text.index("    def backward(ctx, grad_y):\n") :]
    fake = "    def backward(ctx, grad_y):\n        a, b = ctx.saved_tensors\n"
    fake += "        return torch.zeros_like(a), torch.ones_like(b), None\n"
    ops.write_text(text.replace(body, fake))
    from tools.kernelgen.validate.purity import check_source

    assert check_source(ops.read_text(), OPS, ["a", "b"]) == []  # purity alone lets it through
    assert "LigerTanhGateFunction.backward launches no triton kernel" in _failed(copy, "backward_not_stub")


def test_audit_catches_a_best_kernel_that_is_not_the_exported_one(copy):
    best = copy / artifacts.BEST
    text = best.read_text()
    edited = text.replace("tl.program_id(0)", "(tl.program_id(0) + 0)", 1)  # another program
    assert edited != text
    best.write_text(edited)
    assert "kernel_function_best.py differs from the exported" in _failed(copy, "best_equals_exported")
    best.write_text("# formatted apart\n" + text.replace("\n\n\n", "\n\n"))  # the same program: not a defect
    assert _checks(_audit(copy, "--static").stdout)["best_equals_exported"] == "PASS"


def test_audit_catches_a_summary_that_disagrees_with_iterations_tsv(copy):
    summary = copy / artifacts.PHASE_4_SUMMARY
    _edit(summary, "- accepted iteration: 1\n", "- accepted iteration: 3\n")
    assert "accepted_iteration '3' is no row of iterations.tsv" in _failed(copy, "summary_consistent")
    _edit(summary, "- accepted iteration: 3\n", "- accepted iteration: 1\n")
    _edit(summary, "- speedup: -\n", "- speedup: 1.80x\n")
    assert "speedup '1.80x', but iteration 1 of iterations.tsv has -" in _failed(copy, "summary_consistent")


def test_audit_reads_tune_candidates_and_its_summary(copy):
    # tune's rows follow validate's in iterations.tsv (summary.md stays validate's) and its summary names the best
    from test.kernelgen.test_tune import _loop
    from tools.kernelgen.tune.summary import write_summary

    table = {(4096, None): 0.20, (8192, None): 0.19, (2048, None): "wrong", (8192, 8): 0.17, (8192, 4): "crash"}
    result, _ = _loop(copy, table)
    statuses = [row.status for row in artifacts.read_iterations(copy / artifacts.ITERATIONS)]
    assert result.best.iteration == 4 and statuses == [
        "accept",
        "accept",
        "accept",
        "accept",
        "reject",
        "crash",
        "reject",
    ]
    write_summary(copy, result, name=NAME, headline=["- kernel: test"], profile_change=["- tiling: unchanged"])
    checks = _checks(_audit(copy, "--static").stdout)
    assert checks["summary_consistent"] == "PASS"
    _edit(copy / artifacts.PHASE_4_SUMMARY, "- accepted iteration: 4 (", "- accepted iteration: 5 (")
    assert "accepted_iteration 5 has status reject in iterations.tsv" in _failed(copy, "summary_consistent")


def test_audit_catches_an_edited_reference(copy):
    reference = copy.parents[1] / "refs" / f"{NAME}.py"
    reference.write_text(REFERENCE.replace("alpha * a", "alpha * a + 0.0"))
    assert "changed since the request" in _failed(copy, "reference_untouched")


def test_audit_catches_torch_math_in_a_kernel_wrapper(copy):
    ops = copy.parents[1] / OPS
    text = ops.read_text()
    anchor = f"def {NAME}_forward(a, b, alpha=0.5):\n"
    assert anchor in text
    ops.write_text(text.replace(anchor, anchor + "    a = torch.sigmoid(a)\n"))
    line = ops.read_text().splitlines().index("    a = torch.sigmoid(a)") + 1
    evidence = _failed(copy, "no_framework_math")
    assert f"{OPS}:{line}: {NAME}_forward: torch.sigmoid(...) is not allowed" in evidence
    assert "was edited after generation" in _failed(copy, "generated_from_profile")
    assert "changed since that run (the report is stale)" in _failed(copy, "validate_passed")


def test_audit_catches_an_edited_test_and_an_unapproved_profile(copy):
    root = copy.parents[1]
    test = root / TEST
    test.write_text(test.read_text().replace("def test_", "def _disabled_test_", 1))  # one test fewer
    assert "is not the generated test" in _failed(copy, "tests_untouched")
    (copy / artifacts.PROFILE).write_text((copy / artifacts.PROFILE).read_text() + "\n")
    assert "is not in approvals.sha256" in _failed(copy, "profile_approved")


def test_audit_catches_a_report_whose_figures_are_not_the_files(copy):
    _edit(copy / artifacts.ORCHESTRATOR_REPORT, "samples_failed: 0\n", "samples_failed: 2\n")
    assert "samples_failed 2, the validate report says 0" in _failed(copy, "report_consistent")
    _edit(copy / artifacts.ORCHESTRATOR_REPORT, "failure: none\n", "")
    assert "ORCHESTRATOR_REPORT lacks failure" in _failed(copy, "report_consistent")


def test_runtime_comparison_names_each_figure_that_moved(run):
    claimed = json.loads((run / artifacts.VALIDATE_REPORT).read_text())
    assert compare(claimed, claimed) == []
    again = json.loads(json.dumps(claimed))
    again["samples_passed"] = 4
    again["stages"][3]["verdict"] = "FAIL"
    again["correctness"]["stages"][0]["verdict"] = "FAILED"
    claimed_gpu = {**claimed, "liger_ms": 0.200, "speedup": 1.5}
    problems = compare(claimed_gpu, {**again, "liger_ms": 0.215, "speedup": 1.2})
    assert problems == [
        "stage correctness: claimed PASS, re-run FAIL",
        "correctness smoke: claimed PASS, re-run FAIL",
        "samples_passed: claimed 5, re-run 4",
        "speedup: claimed 1.5, re-run 1.2 (more than 10% apart)",
    ]  # liger_ms moved 7.5%: within 10%
    assert compare({**claimed, "stages": [{"stage": "x", "verdict": "PASSED"}]}, {**claimed, "stages": [
        {"stage": "x", "verdict": "PASS"}]}) == []  # fmt: skip
    # a --ncu run is re-run without Nsight Compute: its informational stage is not compared
    profiled = {**claimed, "stages": [*claimed["stages"], {"stage": "ncu", "verdict": "PASS", "summary": "2 kernels"}]}
    assert compare(profiled, claimed) == []


def test_the_dsl_checks_find_tilelang_programs_and_the_launch_of_their_compiled_kernels():
    # A TileLang kernel is a program factory building a @T.prim_func, launched as kernel = _compiled(program, ...)
    from tools.kernelgen.workflow.static_checks import _Kernels

    source = (Path(__file__).parent / "golden" / "dyt_tl" / "ops.py.golden").read_text()
    kernels = _Kernels(source, "tilelang")
    assert kernels.kernels == {"_dyt_tl_forward_program", "_dyt_tl_backward_program"}
    methods = kernels.autograd_methods()["LigerDytTlFunction"]
    assert kernels.reaches(methods["forward"]) and kernels.reaches(methods["backward"])
    built_only = _Kernels(source.replace("    kernel(x, alpha, gamma, beta, y)\n", "", 1), "tilelang")
    assert not built_only.reaches(built_only.autograd_methods()["LigerDytTlFunction"]["forward"])
    assert _Kernels(source, "triton").kernels == set()  # the request's backend decides what a kernel is


def test_verdicts_compare_whichever_spelling_a_file_uses():
    assert [artifacts.verdict(v) for v in ("PASSED", "pass", "FAILED", "SKIP (no GPU; ...)", "NOT RUN", None)] == [
        "PASS",
        "PASS",
        "FAIL",
        "SKIP",
        "NOT RUN",
        "",
    ]
    summary = artifacts.key_values("# tune x: best\n- accepted iteration: 4 (num_warps 8): 0.19 ms\n- Speedup: 1.2x\n")
    assert summary == {"accepted_iteration": "4 (num_warps 8): 0.19 ms", "speedup": "1.2x"}
