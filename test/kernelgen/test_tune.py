"""``tune``: the loop's bookkeeping (accept/reject/crash, the best, why it stopped) with injected timings, the
iterations.tsv rows and the summary it writes, the candidates it renders for a real kernel, and its one-line
answers without a GPU or for a kernel it cannot re-tile."""

import pytest
import torch

import tools.kernelgen.tune as tune

from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import snapshot
from tools.kernelgen.record import read_record
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.tune.candidates import CandidateRunner
from tools.kernelgen.tune.loop import ALL_TRIED
from tools.kernelgen.tune.loop import BUDGET_SPENT
from tools.kernelgen.tune.loop import NO_IMPROVEMENT
from tools.kernelgen.tune.loop import START_FAILED
from tools.kernelgen.tune.loop import Outcome
from tools.kernelgen.tune.loop import TuneLoop
from tools.kernelgen.tune.space import SearchSpace
from tools.kernelgen.tune.space import search_space
from tools.kernelgen.tune.summary import write_summary
from tools.kernelgen.validate.workspace import COLUMNS
from tools.kernelgen.validate.workspace import STATUSES
from tools.kernelgen.validate.workspace import read_rows

OPS = "src/liger_kernel/ops/geglu.py"
START = {"tile": 4096, "warps": None, "unused": 2}
SPACE = SearchSpace(("tile", "warps", "unused"), {"tile": (8192, 2048), "warps": (8, 4, 16), "unused": (1, 4)})


def render(configuration: dict) -> str:
    """A fake ops file: ``unused`` does not change the code (as programs_per_sm without parameter gradients)."""
    if configuration["tile"] == 2048 and configuration["warps"] == 16:
        raise ValueError("BLOCK_ROWS would be 0")
    return f"tile={configuration['tile']} warps={configuration['warps']}"


class FakeGPU:
    """Timings (ms) by configuration: 'wrong' fails correctness, 'crash' crashes; everything else 0.2 ms."""

    def __init__(self, table: dict):
        self.table = table
        self.calls = []

    def __call__(self, configuration: dict, source: str, first: bool) -> Outcome:
        self.calls.append((dict(configuration), first))
        value = self.table.get((configuration["tile"], configuration["warps"]), 0.2)
        if value == "crash":
            return Outcome("-", "PASSED", crashed=True, detail="the correctness run crashed: CompilationError")
        if value == "wrong":
            return Outcome("FAILED", "PASSED", detail="smoke: [grad b]: 3 of 132 elements off")
        return Outcome("PASSED", "PASSED", ms=value, eager_ms=0.4 if first else None, detail="4096x11008 bfloat16")


def _loop(tmp_path, table, budget=20, patience=10, min_gain=0.02):
    gpu = FakeGPU(table)
    loop = TuneLoop(SPACE, render, gpu, tmp_path, budget=budget, patience=patience, min_gain=min_gain)
    return loop.run(START), gpu


def test_the_loop_accepts_faster_correct_candidates_and_stops_when_every_neighbour_was_tried(tmp_path):
    result, gpu = _loop(
        tmp_path, {(4096, None): 0.20, (8192, None): 0.19, (2048, None): "wrong", (8192, 8): 0.17, (8192, 4): "crash"}
    )
    assert result.reason == ALL_TRIED
    assert result.best.configuration == {"tile": 8192, "warps": 8, "unused": 2} and result.best.iteration == 3
    statuses = [(t.focus, t.configuration["tile"], t.configuration["warps"], t.status) for t in result.trials]
    # breadth first: each field's nearest value, then the next ones, always one field away from the best so far
    assert statuses == [
        ("baseline", 4096, None, "accept"),
        ("tile", 8192, None, "accept"),
        ("warps", 8192, 8, "accept"),
        ("tile", 2048, 8, "reject"),  # 0.2 ms: not faster than 0.17
        ("warps", 8192, 4, "crash"),
        ("warps", 8192, 16, "reject"),
    ]
    # 'unused' renders the same code as the best: never run, listed as skipped
    assert all(t.focus != "unused" for t in result.trials) and result.skipped == {"unused": [1, 4]}
    assert [first for _, first in gpu.calls] == [True] + [False] * (len(gpu.calls) - 1)  # eager timed once

    rows = read_rows(tmp_path)
    assert (tmp_path / "iterations.tsv").read_text().splitlines()[0].split("\t") == list(COLUMNS)
    assert [row["iter"] for row in rows] == [str(t.iteration) for t in result.trials]
    assert {row["status"] for row in rows} <= set(STATUSES)
    assert rows[0]["focus"] == "baseline" and rows[1]["focus"] == "tiling.tile"
    assert rows[0]["speedup"] == "2.000" and rows[2]["speedup"] == f"{0.4 / 0.17:.3f}"  # eager ms / candidate ms
    crashed = next(row for row in rows if row["status"] == "crash")
    assert crashed["speedup"] == "-" and crashed["correctness"] == "-"
    assert crashed["description"] == "warps 8 -> 4: crashed: the correctness run crashed: CompilationError"


def test_an_incorrect_candidate_is_rejected_before_it_is_timed_and_a_render_failure_is_a_crash(tmp_path):
    result, _ = _loop(tmp_path, {(8192, None): "wrong", (2048, None): 0.1, (2048, 16): 0.05})
    by_config = {(t.configuration["tile"], t.configuration["warps"]): t for t in result.trials}
    wrong = by_config[(8192, None)]
    assert wrong.status == "reject" and wrong.outcome.ms is None
    assert (
        wrong.description == "tile 4096 -> 8192: incorrect (correctness FAILED): smoke: [grad b]: 3 of 132 elements off"
    )
    unrenderable = by_config[(2048, 16)]
    assert (
        unrenderable.status == "crash"
        and "does not render: ValueError: BLOCK_ROWS would be 0" in unrenderable.description
    )
    assert result.best.configuration["tile"] == 2048


def test_the_budget_counts_every_candidate_the_start_included(tmp_path):
    result, gpu = _loop(tmp_path, {}, budget=3)
    assert result.reason == BUDGET_SPENT and result.detail == "budget spent (3 candidates)"
    assert len(result.trials) == 3 == len(gpu.calls) == len(read_rows(tmp_path))


def test_patience_stops_after_k_candidates_in_a_row_without_an_improvement(tmp_path):
    result, _ = _loop(tmp_path, {(8192, None): 0.5, (2048, None): 0.3}, patience=2)
    assert result.reason == NO_IMPROVEMENT and result.detail == "no improvement in 2 candidates in a row"
    assert [t.status for t in result.trials] == ["accept", "reject", "reject"]
    assert result.best is result.start


def test_a_gain_within_the_noise_margin_is_not_an_improvement(tmp_path):
    result, _ = _loop(tmp_path, {(4096, None): 0.200, (8192, None): 0.197, (2048, None): 0.150}, min_gain=0.02)
    by_config = {(t.configuration["tile"], t.configuration["warps"]): t for t in result.trials}
    close, clear = by_config[(8192, None)], by_config[(2048, None)]
    assert close.status == "reject" and "an accept needs 2% less" in close.description
    assert clear.status == "accept" and result.best is clear


@pytest.mark.parametrize("start", ["wrong", "crash"])
def test_a_starting_kernel_that_fails_stops_the_loop_with_nothing_to_keep(tmp_path, start):
    result, gpu = _loop(tmp_path, {(4096, None): start})
    assert result.reason == START_FAILED and result.best is None and len(gpu.calls) == 1
    assert result.detail.startswith("the starting kernel is not a correct, running kernel (starting configuration ")
    assert read_rows(tmp_path)[0]["status"] == ("reject" if start == "wrong" else "crash")


def test_the_summary_names_the_accepted_iteration_the_rejected_directions_and_the_convergence(tmp_path):
    result, _ = _loop(tmp_path, {(4096, None): 0.20, (8192, None): 0.19, (2048, 8): "wrong", (8192, 8): 0.17})
    path = write_summary(
        tmp_path, result, name="geglu", headline=["- kernel: test"], profile_change=["- tiling: tile 4096 -> 8192"]
    )
    text = path.read_text()
    assert path.name == "phase_4_summary.md"
    assert text.startswith(f"# tune geglu: best at iteration 3 ({0.20 / 0.17:.3f}x the starting kernel)\n")
    assert "- accepted iteration: 3 (tile=8192, warps=8, unused=2): 0.1700 ms, 2.35x eager PyTorch;" in text
    assert "- convergence: all candidates tried (every one-field change of the best configuration);" in text
    assert "## Profile change\n\n- tiling: tile 4096 -> 8192\n" in text
    rejected = text.split("## Rejected directions\n\n")[1].splitlines()
    assert rejected[0].startswith("- tile: 2048 (incorrect: smoke: [grad b]: 3 of 132 elements off; iteration ")
    assert rejected[1].startswith("- warps: 4 (not faster: 0.2000 ms vs 0.1700; iteration ")
    assert rejected[2].startswith("- unused: 1, 4 not run: the same ops file as a candidate already tried")
    table = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(table) == len(result.trials) and table[0].startswith("| 1 | baseline | tile=4096, warps=auto")


def test_the_space_is_the_tiling_the_template_reads_nearest_values_first():
    from tools.kernelgen.analyze import analyze

    # geglu is launched by blocks of max_block_cols elements of a row (contiguous tensors: one row), swept first; it
    # has no 2-D tile and no parameter-gradient partial sums to size.
    geglu = search_space(analyze("geglu"))
    math = ("backward_math", "forward_math")
    assert geglu.fields == ("max_block_cols", "num_warps", "backward_num_warps", *math)
    assert geglu.values["max_block_cols"] == (4096, 1024, 8192, 512)  # around the 2048 default
    # dyt reads per-channel parameters by column: it walks rows of block_elements-element tiles, swept first.
    dyt = search_space(analyze("dyt"))
    assert dyt.fields == (
        "block_elements",
        "num_warps",
        "backward_num_warps",
        *math,
        "max_block_cols",
        "programs_per_sm",
    )
    assert dyt.values["max_block_cols"] == (4096, 1024, 512)
    # Each pass's tanh and log1p, where the pass computes one: core formulas or libdevice's, less the one the default
    # prints (geglu's forward: libdevice's tanh; its backward: core formulas).
    assert geglu.values["backward_math"] == ("libdevice",) and geglu.values["forward_math"] == ("core",)
    explicit = analyze("geglu")
    explicit.tiling.backward_math = "libdevice"
    assert search_space(explicit).values["backward_math"] == (None,)  # back to the default, which is core
    logsigmoid = search_space(analyze("logsigmoid"))  # its backward is grad_y * sigmoid(-x): nothing to choose
    assert "forward_math" in logsigmoid.fields and "backward_math" not in logsigmoid.fields
    assert not set(math) & set(search_space(analyze("swiglu")).fields)
    assert geglu.values["num_warps"][0] == 8 and None not in geglu.values["num_warps"]  # the start is auto
    assert geglu.values["backward_num_warps"][0] == 16  # a compute-bound backward wants more warps first
    loss = search_space(analyze("cross_entropy"))
    assert loss.fields == ("block_elements", "num_warps")


# A real kernel -------------------------------------------------------------------------------------------------
@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU answer")
def test_without_a_gpu_tune_is_one_skip_line_and_writes_nothing(geglu_copy):
    before = snapshot(geglu_copy)
    result = run_kernelgen("tune", "geglu", "--repo", str(geglu_copy), "--ncu")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == "tune geglu: SKIP (no GPU: tune times every candidate on a CUDA device; nothing written)\n"
    assert snapshot(geglu_copy) == before


def test_a_hand_written_kernel_is_refused_in_one_line(geglu_copy):
    line = one_line_error(run_kernelgen("tune", "swiglu", "--repo", str(geglu_copy)))
    assert "'swiglu' has no generation record (" in line
    assert "tune re-tiles generated kernels only" in line


def test_an_edited_ops_file_is_refused_in_one_line(geglu_copy):
    before = snapshot(geglu_copy)
    (geglu_copy / OPS).write_text((geglu_copy / OPS).read_text() + "\n# tuned by hand\n")
    line = one_line_error(run_kernelgen("tune", "geglu", "--repo", str(geglu_copy)))
    assert f"{OPS} was edited since kernelgen generated it" in line
    assert set(snapshot(geglu_copy)) == set(before)


@pytest.mark.parametrize(
    "args, message",
    [(["--budget", "0"], "--budget and --patience take a positive number"), (["--min-gain", "1.5"], "--min-gain is a")],
)
def test_bad_settings_are_refused_in_one_line(geglu_copy, args, message):
    assert message in one_line_error(run_kernelgen("tune", "geglu", "--repo", str(geglu_copy), *args))


def test_tune_renders_real_candidates_keeps_the_best_and_regenerates_the_kernel_from_its_profile(
    geglu_copy, monkeypatch
):
    """The whole command with the GPU's two answers (correct? how fast?) faked: rendering, the rows, the files."""
    ops_before = (geglu_copy / OPS).read_text()
    tiling = read_record(geglu_copy, "geglu").tiling.__dict__
    start = tuple(sorted((k, v) for k, v in tiling.items() if k not in ("block_elements", "programs_per_sm")))
    sources = {}

    def evaluate(self, configuration, source, first):
        sources[tuple(sorted(configuration.items(), key=str))] = source
        fast = configuration["num_warps"] == 8 and configuration["max_block_cols"] == 2048
        return Outcome("PASSED", "PASSED", ms=0.15 if fast else 0.2, eager_ms=0.3 if first else None, detail="fake")

    monkeypatch.setattr(tune, "cuda_available", lambda: True)
    monkeypatch.setattr(CandidateRunner, "evaluate", evaluate)
    result = run_kernelgen("tune", "geglu", "--repo", str(geglu_copy), "--budget", "30", "--patience", "30")
    assert result.returncode == 0, result.stdout + result.stderr
    workspace = geglu_copy / ".kernelgen-work" / "geglu"
    rows = read_rows(workspace)
    assert [row["status"] for row in rows].count("accept") == 2 and len(rows) < 30
    assert rows[0]["description"].startswith("starting configuration (max_block_cols=2048, num_warps=auto,")
    assert "tune geglu: all candidates tried (every one-field change of the best configuration)" in result.stdout
    # Each candidate is the generator's rendering of the record with that tiling.
    assert sources[start] == ops_before
    best = (workspace / "kernel_function_best.py").read_text()
    assert "num_warps = 8  # the profile's tiling.num_warps" in best and best != ops_before  # it reaches the launch
    # The tuned profile was applied through modify: the ops file is the best candidate, the record holds the tiling.
    assert (geglu_copy / OPS).read_text() == best
    assert read_record(geglu_copy, "geglu").tiling.num_warps == 8
    profile_file = (workspace / "tuned_profile.yaml").read_text()
    assert profile_file.startswith(
        "# tune geglu: iteration 3 (num_warps auto -> 8); apply with: python -m tools.kernelgen modify geglu "
        "--profile .kernelgen-work/geglu/tuned_profile.yaml\n"
    )
    summary = (workspace / "phase_4_summary.md").read_text()
    assert (
        "- accepted iteration: 3 (max_block_cols=2048, num_warps=8, backward_num_warps=auto, backward_math=auto, "
        "forward_math=auto)" in summary
    )
    assert "the ops file is kernel_function_best.py" in summary
    # geglu's blocks of a row have no 2-D tile and no parameter gradients: neither field is in its space
    assert all(row["focus"] not in ("tiling.block_elements", "tiling.programs_per_sm") for row in rows)
    assert "- forward_math: core (not faster" in summary and "- backward_math: libdevice (not faster" in summary


def test_a_tune_stopped_from_outside_leaves_the_summary_so_far(geglu_copy, monkeypatch):
    """A step's timeout kills tune between candidates: the summary written after each candidate is there, with the
    best so far and the rows tried (on the H200 a budget-6 tune outlived a 110 s step and left only the tsv)."""
    calls = []

    def evaluate(self, configuration, source, first):
        calls.append(configuration)
        if len(calls) == 3:
            raise KeyboardInterrupt  # what a timeout's signal does between two candidates
        fast = configuration["max_block_cols"] == 4096
        return Outcome("PASSED", "PASSED", ms=0.15 if fast else 0.2, eager_ms=0.3 if first else None, detail="fake")

    monkeypatch.setattr(tune, "cuda_available", lambda: True)
    monkeypatch.setattr(CandidateRunner, "evaluate", evaluate)
    with pytest.raises(KeyboardInterrupt):
        tune.run("geglu", repo=str(geglu_copy), budget=10)
    workspace = geglu_copy / ".kernelgen-work" / "geglu"
    summary = (workspace / "phase_4_summary.md").read_text()
    assert summary.startswith("# tune geglu: best so far at iteration 2 (1.333x the starting kernel)\n")
    assert "- convergence: in progress: 2 candidate(s) so far (rewritten after each, and at the end)" in summary
    assert [row["status"] for row in read_rows(workspace)] == ["accept", "accept"]


def test_a_candidate_is_checked_in_the_scratch_copy_before_it_is_timed(geglu_checkout, tmp_path):
    """The real evaluation on the CPU: the correctness stages run on the candidate (interpreter); the timing then
    finds no GPU, which is a crash; a candidate with a wrong gradient is rejected at correctness."""
    profile = read_record(geglu_checkout, "geglu")
    original = (geglu_checkout / OPS).read_text()
    with CandidateRunner(LigerRepo.open(geglu_checkout), "geglu", profile, tmp_path) as runner:
        source = runner.render({"num_warps": 4})
        assert source.count("num_warps = 4  # the profile's tiling.num_warps") == 2  # the forward's and the backward's
        good = runner.evaluate({"num_warps": 4}, source, first=True)
        assert (good.correctness, good.purity, good.crashed) == ("PASSED", "PASSED", True)
        assert good.detail == "the timing run found no GPU"
        wrong = source.replace("    grad_b = grad_y * ", "    grad_b = 2.0 * grad_y * ", 1)
        assert wrong != source
        bad = runner.evaluate({"num_warps": 4}, wrong, first=False)
        assert (bad.correctness, bad.crashed) == ("FAILED", False) and "[grad b]" in bad.detail
        scratch = runner.folder
    assert not scratch.exists()  # the scratch copy goes with the runner
    assert (geglu_checkout / OPS).read_text() == original  # candidates are rendered in the scratch copy only
    # with the template's warps, the backward doubles the forward's (a profile's num_warps sets both)
    assert (
        "tiling.num_warps" not in original and "    num_warps = 8\n" in original and "    num_warps = 4\n" in original
    )
    assert "    num_warps = 8\n" not in source
