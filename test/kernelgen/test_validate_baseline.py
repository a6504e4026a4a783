"""``validate NAME --baseline REV|PATH`` and ``export-baseline``: the kernel of the working tree against the same
kernel at a git revision (temporary worktree) or in another checkout, in one process. Without a GPU the stage is a
one-line SKIP; ``--smoke`` runs the plumbing at the benchmark's CPU shapes, which is what these tests check."""

import json
import shutil
import subprocess

from pathlib import Path

import pytest

from test.kernelgen.conftest import REPO_ROOT
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import run_kernelgen
from tools.kernelgen.cli import main
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.validate.baseline import Baseline
from tools.kernelgen.validate.baseline import block
from tools.kernelgen.validate.baseline import run_stage
from tools.kernelgen.validate.baseline import summarize

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
OPS = "src/liger_kernel/ops/swiglu.py"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """A git checkout whose working tree changed swiglu since HEAD (one more comment in its ops file)."""
    root = copy_checkout(tmp_path_factory.mktemp("baseline") / "liger")
    shutil.copy2(REPO_ROOT / "test/transformers/test_swiglu.py", root / "test/transformers/test_swiglu.py")
    _git(root, "init", "-q")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "baseline")
    ops = root / OPS
    ops.write_text(ops.read_text().replace("import torch\n", "import torch  # the working tree's copy\n", 1))
    return root


def test_validate_against_a_revision_compares_both_libraries_and_removes_the_worktree(history):
    result = run_kernelgen(
        "validate", "swiglu", "--repo", str(history), "--skip-tests", "--baseline", "HEAD", "--smoke"
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    out = result.stdout
    head = _git(history, "rev-parse", "HEAD").strip()[:10]
    assert f"; baseline: HEAD ({head})" in out and "== [6/6] baseline " in out
    assert "BASELINE_COMPARISON" in out and f"working tree vs HEAD ({head})" in out
    for mode in ("forward", "backward", "full"):
        assert f"\n{mode}: working tree " in out and "(geometric mean of 2 shapes)" in out
    assert "\nbaseline: PASS (forward+backward: working tree " in out
    report = json.loads((history / ".kernelgen-work" / "swiglu" / "baseline.json").read_text())
    assert len(report["rows"]) == 6  # the smoke sweep's two BT values x forward, backward, full
    assert report["current_ops"] == str(history / OPS)
    assert "kernelgen-baseline-" in report["baseline_ops"] and report["baseline_ops"].endswith(OPS)
    assert _git(history, "worktree", "list").count("\n") == 1  # the temporary worktree is gone
    assert "| baseline | PASS |" in (history / ".kernelgen-work" / "swiglu" / "summary.md").read_text()
    row = (history / ".kernelgen-work" / "swiglu" / "iterations.tsv").read_text().splitlines()[-1].split("\t")
    assert row[2:4] == ["PASSED", "PASSED"] and row[5] == "accept" and "baseline PASS" in row[6]


def test_an_exported_baseline_is_compared_in_the_same_process(history, tmp_path):
    export = tmp_path / "baseline"
    assert main(["export-baseline", "HEAD", str(export), "--repo", str(history), "--kernel", "swiglu"]) == 0
    assert (export / "src/liger_kernel/ops/swiglu.py").read_text() == _git(history, "show", f"HEAD:{OPS}")
    assert (export / "BASELINE").read_text().startswith("HEAD = ")
    out = tmp_path / "baseline.json"
    worker = ["-m", "tools.kernelgen.validate.baseline_worker", str(history), "swiglu", str(out)]
    result = run_python([*worker, str(export / "src"), "--smoke"], cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["baseline_ops"] == str(export / "src" / "liger_kernel/ops/swiglu.py")
    assert report["current_ops"] == str(history / OPS)
    assert {row["mode"] for row in report["rows"]} == {"forward", "backward", "full"}
    assert all(row["current_ms"] > 0 and row["baseline_ms"] > 0 for row in report["rows"])


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--baseline", "no-such-rev"], "--baseline no-such-rev: not a folder, and not a git revision of "),
        (["--baseline", "{tmp}"], "a folder without src/liger_kernel (a checkout or an export)"),
        (["--smoke"], "--smoke runs the --baseline comparison at the benchmark's smoke shapes: give --baseline"),
    ],
)
def test_a_baseline_that_cannot_be_used_is_one_line(history, tmp_path, capsys, argv, expected):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["validate", "swiglu", "--repo", str(history), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0]


def test_a_kernel_missing_at_the_revision_is_one_line(history, capsys):
    install = history / "src/liger_kernel/ops/newer.py"
    install.write_text("")
    try:
        assert main(["export-baseline", "HEAD", str(history / "x"), "--repo", str(history), "--kernel", "newer"]) == 2
    finally:
        install.unlink()
    assert "kernel 'newer' does not exist there (src/liger_kernel/ops/newer.py is missing)" in capsys.readouterr().err
    assert not (history / "x").exists()


def test_export_into_a_folder_with_files_writes_nothing(history, tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["export-baseline", "HEAD", str(tmp_path), "--repo", str(history)]) == 2
    assert "exists and is not an empty folder; nothing written" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_without_a_gpu_the_comparison_is_a_one_line_skip(tmp_path):
    result = run_stage(None, Baseline("HEAD~2 (abc)", tmp_path), cuda=False, smoke=False)
    assert (result.verdict, result.summary) == ("SKIP", "no GPU; run validate on a CUDA device (baseline HEAD~2 (abc))")


def test_the_comparison_says_which_is_faster_by_how_much():
    rows = [
        {"BT": bt, "mode": mode, "current_ms": c, "baseline_ms": b, "current_mb": 100.0, "baseline_mb": 125.0}
        for bt, mode, c, b in [(1024, "forward", 1.0, 2.0), (2048, "forward", 2.0, 2.0), (1024, "full", 4.0, 3.0)]
    ]
    report = {
        "rows": rows,
        "device": "H200",
        "dtype": "bfloat16",
        "size_key": "hidden_size",
        "size": 4096,
        "smoke": False,
    }
    summary = summarize(report)
    assert summary["forward"]["speedup"] == pytest.approx(2**0.5) and summary["forward"]["memory"] == pytest.approx(0.8)
    assert summary["backward"] == {"speedup": None, "memory": None, "shapes": 0}
    text = block(report, "HEAD~3 (abc)", "swiglu")
    assert (
        "forward: working tree 1.41x faster than HEAD~3 (abc) (geometric mean of 2 shapes), 0.80x of its peak" in text
    )
    assert "full: working tree 1.33x slower than HEAD~3 (abc) (geometric mean of 1 shapes)" in text
    assert "forward     1024     1.0000     2.0000    2.00x" in text
