"""The benchmark harness: results CSV, timing and memory helpers, the command line, the visualizer, the scripts."""

import csv
import io
import json
import math
import os
import weakref

from pathlib import Path

import pytest
import torch

from benchmark import benchmarks_visualizer
from benchmark.scripts import benchmark_model_configs
from benchmark.scripts import utils as harness
from benchmark.scripts.benchmark_model_configs import DEFAULT_MODEL_CONFIG
from benchmark.scripts.benchmark_model_configs import MODEL_CONFIGS
from benchmark.scripts.benchmark_model_configs import compute_hidden_size_sweep_config
from benchmark.scripts.benchmark_model_configs import compute_seq_len_sweep_config
from benchmark.scripts.benchmark_model_configs import get_benchmark_model_config
from benchmark.scripts.memory_stats import measure_peak_bytes
from benchmark.scripts.results_csv import CSV_COLUMNS
from benchmark.scripts.results_csv import CSV_PATH_ENV_VAR
from benchmark.scripts.results_csv import DEFAULT_CSV_PATH
from benchmark.scripts.results_csv import config_string
from benchmark.scripts.results_csv import read_benchmark_rows
from benchmark.scripts.results_csv import resolve_csv_path
from benchmark.scripts.results_csv import update_benchmark_csv
from benchmark.scripts.utils import SingleBenchmarkRunInput
from benchmark.scripts.utils import SingleBenchmarkRunOutput
from benchmark.scripts.utils import by_model_index
from benchmark.scripts.utils import model_config_sweep
from benchmark.scripts.utils import parse_benchmark_script_args
from benchmark.scripts.utils import run_benchmarks
from benchmark.scripts.utils import run_memory_benchmark
from benchmark.scripts.utils import run_speed_benchmark
from tools.kernelgen.pyrun import run_python

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = REPO_ROOT / "benchmark" / "scripts"
ON_CPU = not torch.cuda.is_available()


def _row(provider="liger", x=1024, y=1.0, **overrides):
    row = {
        "kernel_name": "swiglu",
        "kernel_provider": provider,
        "kernel_operation_mode": "full",
        "metric_name": "speed",
        "metric_unit": "ms",
        "x_name": "BT",
        "x_label": "B * T",
        "x_value": x,
        "y_value_50": y,
        "y_value_20": y * 0.9,
        "y_value_80": y * 1.1,
        "extra_benchmark_config_str": '{"dtype": "bfloat16"}',
        "gpu_name": "test-gpu",
        "timestamp": "2025-01-01 00:00:00",
        "liger_version": "0.0.0",
    }
    row.update(overrides)
    return row


# ----------------------------------------------------------------------------------------------- results CSV


def test_csv_appends_new_experiments_with_exact_columns(tmp_path):
    path = tmp_path / "data.csv"
    assert update_benchmark_csv([_row(x=1024), _row(x=2048)], path) == (2, 0)
    assert update_benchmark_csv([_row(provider="torch", x=1024)], path) == (1, 0)
    with path.open(newline="") as handle:
        assert next(csv.reader(handle)) == CSV_COLUMNS
    rows = read_benchmark_rows(path)
    assert [(row["kernel_provider"], row["x_value"]) for row in rows] == [
        ("liger", "1024"),
        ("liger", "2048"),
        ("torch", "1024"),
    ]


def test_csv_keeps_existing_experiment_without_overwrite(tmp_path):
    path = tmp_path / "data.csv"
    update_benchmark_csv([_row(y=1.0)], path)
    assert update_benchmark_csv([_row(y=5.0)], path, overwrite=False) == (0, 1)
    rows = read_benchmark_rows(path)
    assert len(rows) == 1 and float(rows[0]["y_value_50"]) == 1.0


def test_csv_replaces_existing_experiment_in_place_with_overwrite(tmp_path):
    path = tmp_path / "data.csv"
    update_benchmark_csv([_row(x=1024, y=1.0), _row(x=2048, y=2.0)], path)
    assert update_benchmark_csv([_row(x=1024, y=7.0)], path, overwrite=True) == (1, 0)
    rows = read_benchmark_rows(path)
    assert [(row["x_value"], float(row["y_value_50"])) for row in rows] == [("1024", 7.0), ("2048", 2.0)]


def test_csv_rows_differing_in_config_or_gpu_are_distinct_experiments(tmp_path):
    path = tmp_path / "data.csv"
    update_benchmark_csv([_row()], path)
    written, skipped = update_benchmark_csv(
        [_row(gpu_name="other-gpu"), _row(extra_benchmark_config_str='{"dtype": "float16"}')], path
    )
    assert (written, skipped) == (2, 0)
    assert len(read_benchmark_rows(path)) == 3


def test_csv_path_resolution_order(tmp_path, monkeypatch):
    monkeypatch.delenv(CSV_PATH_ENV_VAR, raising=False)
    assert resolve_csv_path() == DEFAULT_CSV_PATH
    monkeypatch.setenv(CSV_PATH_ENV_VAR, str(tmp_path / "env.csv"))
    assert resolve_csv_path() == tmp_path / "env.csv"
    assert resolve_csv_path(tmp_path / "explicit.csv") == tmp_path / "explicit.csv"


# ------------------------------------------------------------------------------------------------ run_benchmarks


class _FakeBench:
    """Records the runs it is asked for and answers y = x * (provider index + 1)."""

    def __init__(self, providers):
        self.providers = providers
        self.calls = []

    def __call__(self, run_input: SingleBenchmarkRunInput) -> SingleBenchmarkRunOutput:
        self.calls.append((run_input.kernel_operation_mode, run_input.kernel_provider, run_input.x))
        y = run_input.x * (self.providers.index(run_input.kernel_provider) + 1)
        return SingleBenchmarkRunOutput(y_20=y - 1, y_50=y, y_80=y + 1)


def _run_fake(bench, csv_path, overwrite=False, stream=None):
    return run_benchmarks(
        bench_test_fn=bench,
        kernel_name="fake",
        metric_name="speed",
        metric_unit="ms",
        x_name="BT",
        x_label="B * T",
        x_values=[2, 4],
        kernel_providers=bench.providers,
        kernel_operation_modes=["forward", "full"],
        extra_benchmark_configs=[{"dtype": "float32", "H": 64}],
        overwrite=overwrite,
        csv_path=csv_path,
        stream=stream or io.StringIO(),
    )


def test_run_benchmarks_runs_every_combination_and_records_it(tmp_path):
    bench = _FakeBench(["liger", "torch"])
    stream = io.StringIO()
    _run_fake(bench, tmp_path / "out.csv", stream=stream)
    assert len(bench.calls) == 2 * 2 * 2
    rows = read_benchmark_rows(tmp_path / "out.csv")
    assert len(rows) == 8
    by_key = {(r["kernel_operation_mode"], r["kernel_provider"], r["x_value"]): r for r in rows}
    torch_row = by_key[("full", "torch", "4")]
    assert float(torch_row["y_value_50"]) == 8.0
    assert (float(torch_row["y_value_20"]), float(torch_row["y_value_80"])) == (7.0, 9.0)
    assert torch_row["extra_benchmark_config_str"] == '{"H": 64, "dtype": "float32"}'
    assert torch_row["gpu_name"] == (torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")
    assert torch_row["liger_version"] and torch_row["timestamp"]
    # Not a terminal: one line per finished run, no carriage-return redraws.
    lines = stream.getvalue().splitlines()
    assert len(lines) == 8 and "\r" not in stream.getvalue()
    assert lines[-1].startswith("[8/8]")


def test_run_benchmarks_skips_recorded_experiments_unless_overwrite(tmp_path):
    path = tmp_path / "out.csv"
    _run_fake(_FakeBench(["liger"]), path)
    again = _FakeBench(["liger"])
    assert _run_fake(again, path) == []
    assert again.calls == []
    assert len(read_benchmark_rows(path)) == 4

    widened = _FakeBench(["liger", "torch"])  # only the new provider's experiments run
    _run_fake(widened, path)
    assert {provider for _, provider, _ in widened.calls} == {"torch"}

    forced = _FakeBench(["torch", "liger"])  # a different answer per provider proves the rows were replaced
    assert len(_run_fake(forced, path, overwrite=True)) == 8
    rows = read_benchmark_rows(path)
    assert len(rows) == 8
    liger_full_4 = next(
        r for r in rows if (r["kernel_provider"], r["kernel_operation_mode"], r["x_value"]) == ("liger", "full", "4")
    )
    assert float(liger_full_4["y_value_50"]) == 8.0


def test_run_benchmarks_redraws_one_line_on_a_terminal(tmp_path):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    _run_fake(_FakeBench(["liger"]), tmp_path / "out.csv", stream=stream)
    text = stream.getvalue()
    assert text.count("\r") == 4 and text.count("\n") == 1 and text.endswith("\n")


# ------------------------------------------------------------------------------------------- speed and memory


@pytest.mark.parametrize("mode", ["forward", "backward", "full"])
def test_speed_benchmark_returns_ordered_quantiles(mode):
    a = torch.randn(8, 16, requires_grad=True)
    b = torch.randn(8, 16, requires_grad=True)
    result = run_speed_benchmark(lambda: torch.sigmoid(a) * b, mode, [a, b], rep=1, warmup=1)
    assert 0 < result.y_20 <= result.y_50 <= result.y_80
    assert (a.grad is None) == (mode == "forward")


def test_speed_rounds_take_turns_and_summarize_each_providers_round_medians(monkeypatch):
    """Providers alternate within every round, the first place rotating, so a drifting host slows them alike; each
    provider's figures are the quantiles of its rounds' medians."""
    script = {"a": [3.0, 1.0, 2.0], "b": [9.0, 7.0, 8.0]}
    calls = []

    def scripted(fwd_fn, mode, inputs):
        name = fwd_fn()
        calls.append(name)
        value = script[name][calls.count(name) - 1]
        return SingleBenchmarkRunOutput(y_20=value - 1, y_50=value, y_80=value + 1)

    monkeypatch.setattr(harness, "run_speed_benchmark", scripted)
    results = harness.run_speed_rounds({"a": (lambda: "a", []), "b": (lambda: "b", [])}, "full", 3)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert (results["a"].y_50, results["b"].y_50) == (2.0, 8.0)
    assert 1.0 < results["a"].y_20 < 2.0 < results["a"].y_80 < 3.0


def test_paired_rounds_compare_each_round_with_the_baselines_same_round(monkeypatch):
    """Each round is compared with the baseline's same round: "a" is slower than "b" in round 2 only (3 of 4 rounds no
    slower); the ratios 0.909, 1.05, 0.909, 0.9 have the median 1 / 1.1."""
    script = {"a": [1.0, 2.1, 3.0, 0.9], "b": [1.1, 2.0, 3.3, 1.0]}
    calls = []

    def scripted(fwd_fn, mode, inputs):
        name = fwd_fn()
        calls.append(name)
        return SingleBenchmarkRunOutput(y_20=0.0, y_50=script[name][calls.count(name) - 1], y_80=0.0)

    monkeypatch.setattr(harness, "run_speed_benchmark", scripted)
    per_round = {}
    harness.run_speed_rounds({"a": (lambda: "a", []), "b": (lambda: "b", [])}, "full", 4, per_round)
    assert per_round == script
    wins, ratio = harness.paired_rounds(per_round["a"], per_round["b"])
    assert wins == 3
    assert ratio == pytest.approx(1.0 / 1.1)


@pytest.mark.parametrize("mode", ["backward", "full"])
def test_speed_benchmark_resets_grads_between_calls(mode):
    a = torch.randn(8, 16, requires_grad=True)
    b = torch.randn(8, 16, requires_grad=True)
    # Several calls run (warm-up and timed); had the gradients accumulated they would be a multiple of one pass.
    run_speed_benchmark(lambda: (torch.sigmoid(a) * b).sum(), mode, [a, b], rep=1, warmup=1)
    sig = torch.sigmoid(a.detach())
    torch.testing.assert_close(a.grad, b.detach() * sig * (1 - sig))
    torch.testing.assert_close(b.grad, sig)


class _WritesGradOverSavedInput(torch.autograd.Function):
    """Like Liger's SwiGLU: backward stores the gradient in the saved input's memory and returns a view of it."""

    @staticmethod
    def forward(ctx, a):
        rows = a.view(-1, a.shape[-1])
        ctx.shape = a.shape
        ctx.save_for_backward(rows)
        return rows * 2

    @staticmethod
    def backward(ctx, dy):
        (rows,) = ctx.saved_tensors
        rows.data.copy_(dy * 2)  # untracked by autograd's version counter, like a Triton kernel's store
        return rows.view(*ctx.shape)


@pytest.mark.parametrize("mode", ["backward", "full"])
def test_speed_benchmark_on_gpu_path_survives_do_bench_warmup(monkeypatch, mode):
    """do_bench resets gradients only before its timed calls; its warm-up calls must not accumulate them."""
    import triton.testing

    from benchmark.scripts import utils

    seen = {}

    def fake_do_bench(fn, warmup, rep, grad_to_none, quantiles):
        for _ in range(3):  # warm-up calls: no reset here, as in Triton
            fn()
        seen.update(grad_to_none=grad_to_none, quantiles=quantiles, rep=rep, warmup=warmup)
        return [2.0, 1.0, 3.0]

    monkeypatch.setattr(utils, "accelerator_module", lambda: torch.cuda)
    monkeypatch.setattr(triton.testing, "do_bench", fake_do_bench)
    a = torch.randn(4, 8, requires_grad=True)
    result = run_speed_benchmark(lambda: _WritesGradOverSavedInput.apply(a), mode, [a], rep=7, warmup=3)
    assert (result.y_20, result.y_50, result.y_80) == (1.0, 2.0, 3.0)
    assert seen == {"grad_to_none": [a], "quantiles": [0.5, 0.2, 0.8], "rep": 7, "warmup": 3}


def test_speed_benchmark_uses_first_element_of_tuple_and_scalar_backward():
    x = torch.randn(4, 8, requires_grad=True)

    def loss_and_aux():
        return (x**2).sum(), torch.zeros(())

    run_speed_benchmark(loss_and_aux, "full", [x], rep=1, warmup=1)
    torch.testing.assert_close(x.grad, 2 * x.detach())  # implicit dy = 1 for a scalar loss


def test_speed_benchmark_rejects_unknown_mode():
    x = torch.randn(2, requires_grad=True)
    with pytest.raises(ValueError, match="kernel_operation_mode"):
        run_speed_benchmark(lambda: x * 2, "sideways", [x])


@pytest.mark.skipif(not ON_CPU, reason="the CPU fallback measures produced bytes; a GPU reports allocator peaks")
def test_memory_benchmark_on_cpu_counts_produced_tensor_bytes():
    a = torch.randn(16, 32, requires_grad=True)
    b = torch.randn(16, 32, requires_grad=True)
    fwd = lambda: a * b
    mb = 16 * 32 * 4 / 2**20
    assert run_memory_benchmark(fwd, "forward", [a, b]).y_50 == pytest.approx(mb)
    assert run_memory_benchmark(fwd, "backward", [a, b]).y_50 == pytest.approx(2 * mb)
    full = run_memory_benchmark(fwd, "full", [a, b])
    assert full.y_20 == full.y_50 == full.y_80 == pytest.approx(3 * mb)
    assert math.isnan(run_memory_benchmark(fwd, "backward").y_50)


@pytest.mark.skipif(ON_CPU, reason="allocator statistics need a GPU")
def test_memory_benchmark_on_gpu_measures_allocator_peak():
    a = torch.randn(1024, 1024, device="cuda", requires_grad=True)
    b = torch.randn(1024, 1024, device="cuda", requires_grad=True)
    out_mb = 1024 * 1024 * 4 / 2**20
    forward = run_memory_benchmark(lambda: a * b, "forward", [a, b])
    assert forward.y_50 == pytest.approx(out_mb, rel=0.05)
    full = run_memory_benchmark(lambda: a * b, "full", [a, b])
    assert full.y_50 >= 2 * out_mb  # at least the output and both gradients, minus dy already allocated


# ------------------------------------------------------------------------------------------------ command line


def test_parse_benchmark_script_args_defaults():
    args = parse_benchmark_script_args([])
    assert args.model == DEFAULT_MODEL_CONFIG.name == "llama_3_8b"
    assert (args.overwrite, args.smoke, args.csv, args.providers) == (False, False, None, None)


def test_parse_benchmark_script_args_all_flags():
    args = parse_benchmark_script_args(
        ["--model", "qwen2_5_7b", "--overwrite", "--smoke", "--csv", "x.csv", "--providers", "liger, torch"]
    )
    assert args.model == "qwen2_5_7b"
    assert args.overwrite and args.smoke and args.csv == "x.csv"
    assert args.providers == ["liger", "torch"]


def test_parse_benchmark_script_args_sweep_mode_and_bt():
    assert (parse_benchmark_script_args([]).sweep_mode, parse_benchmark_script_args([]).bt) == ("token_length", None)
    args = parse_benchmark_script_args(["--sweep-mode", "model_config", "--bt", "2048"])
    assert (args.sweep_mode, args.bt) == ("model_config", 2048)
    with pytest.raises(SystemExit):
        parse_benchmark_script_args(["--sweep-mode", "vocab"])


def test_model_config_sweep_runs_each_model_at_its_own_size_and_the_given_bt():
    sweep = model_config_sweep("intermediate_size", 2048, "cuda")
    assert sweep["x_values"] == list(range(len(MODEL_CONFIGS)))
    seen = []
    bench = by_model_index(lambda run: seen.append(run) or SingleBenchmarkRunOutput(1, 1, 1), "intermediate_size")
    for x in sweep["x_values"]:
        bench(SingleBenchmarkRunInput(x, "liger", "backward", sweep["extra_benchmark_configs"][0]))
    for run, model in zip(seen, MODEL_CONFIGS.values()):
        assert (run.x, run.kernel_provider, run.kernel_operation_mode) == (2048, "liger", "backward")
        config = run.extra_benchmark_config
        assert (config["model"], config["intermediate_size"], config["BT"]) == (
            model.name,
            model.intermediate_size,
            2048,
        )
        assert config["dtype"] == str(model.dtype).removeprefix("torch.") and "model_configs" not in config


def test_parse_benchmark_script_args_rejects_unknown_model(capsys):
    with pytest.raises(SystemExit):
        parse_benchmark_script_args(["--model", "gpt_17"])
    assert "llama_3_8b" in capsys.readouterr().err


# -------------------------------------------------------------------------------------------------- model configs


def test_get_benchmark_model_config_known_shapes():
    assert get_benchmark_model_config() is DEFAULT_MODEL_CONFIG
    llama2 = get_benchmark_model_config("llama_2_7b")
    assert (llama2.hidden_size, llama2.intermediate_size, llama2.vocab_size) == (4096, 11008, 32000)
    assert llama2.dtype == torch.bfloat16
    llama3 = get_benchmark_model_config("llama_3_8b")
    assert (llama3.hidden_size, llama3.intermediate_size, llama3.vocab_size) == (4096, 14336, 128256)
    qwen = get_benchmark_model_config("qwen2_5_7b")
    assert (qwen.hidden_size, qwen.intermediate_size, qwen.vocab_size) == (3584, 18944, 152064)
    mistral = get_benchmark_model_config("mistral_7b")
    assert (mistral.hidden_size, mistral.intermediate_size, mistral.vocab_size) == (4096, 14336, 32768)


def test_get_benchmark_model_config_unknown_name_lists_valid_ones():
    with pytest.raises(ValueError) as error:
        get_benchmark_model_config("llama_9000")
    for name in MODEL_CONFIGS:
        assert name in str(error.value)


def test_sweeps_fit_free_memory(monkeypatch):
    model = get_benchmark_model_config("llama_3_8b")
    monkeypatch.setattr(benchmark_model_configs, "free_accelerator_bytes", lambda: 10 * 2**30)
    # 10 GiB * 0.4 / 1 MiB per token = 4096 tokens.
    assert compute_seq_len_sweep_config(model, 2**20) == [1024, 2048, 4096]
    assert compute_seq_len_sweep_config(model, 2**20, max_seq_len=2048) == [1024, 2048]
    # 1 KiB per token would fit 4M tokens: the model's 8192-token context caps the sweep.
    capped = compute_seq_len_sweep_config(model, 2**10)
    assert capped == [1024, 2048, 4096, 8192]
    # 10 GiB * 0.5 / (4096 tokens * 64 bytes) = 20480, under the default cap of 2 * 14336 = 28672.
    hidden = compute_hidden_size_sweep_config(model, 64, num_tokens=4096, memory_utilization=0.5)
    assert hidden == [1024, 2048, 4096, 8192, 16384]
    # Nothing fits: the smallest size alone, rather than an empty sweep.
    assert compute_seq_len_sweep_config(model, 2**40) == [1024]


def test_sweeps_fall_back_to_tiny_values_without_gpu(monkeypatch):
    monkeypatch.setattr(benchmark_model_configs, "free_accelerator_bytes", lambda: None)
    model = DEFAULT_MODEL_CONFIG
    assert compute_seq_len_sweep_config(model, 1000) == benchmark_model_configs.CPU_SEQ_LEN_SWEEP
    assert compute_hidden_size_sweep_config(model, 10, num_tokens=8) == benchmark_model_configs.CPU_HIDDEN_SIZE_SWEEP


def test_measure_peak_bytes_grows_with_the_probe_shape():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    small = measure_peak_bytes(lambda: torch.ones(256, 256, device=device) * 2)
    large = measure_peak_bytes(lambda: torch.ones(1024, 256, device=device) * 2)
    assert small >= 256 * 256 * 4
    assert large >= 4 * 256 * 256 * 4 and large > small


# ------------------------------------------------------------------------------------------------ headline report


def test_benchmark_report_table_shows_kept_and_new_csv_rows(tmp_path, monkeypatch):
    """Without --overwrite the experiments already in the CSV are not re-run: the table must still show them."""
    from benchmark.scripts import benchmark_report
    from benchmark.scripts import benchmark_swiglu

    bt, device_name = 16384, "Fake GPU"
    size_key, sizes = benchmark_report.HEADLINES["swiglu"]
    missing = (sizes[-1], "torch_compile", "speed")  # the one experiment this run measures
    kept = []
    expected = {}
    for i, size in enumerate(sizes):
        config_str = config_string(benchmark_report.headline_config(size_key, size, bt))
        for j, provider in enumerate(benchmark_report.PROVIDERS):
            speed, memory = i + 1 + j / 10, 100 * (i + 1) + j
            expected[(size, provider)] = (9.5 if (size, provider, "speed") == missing else speed, memory)
            for metric, unit, y in (("speed", "ms", speed), ("memory", "MB", memory)):
                if (size, provider, metric) != missing:
                    kept.append(
                        _row(
                            kernel_name="swiglu",
                            provider=provider,
                            x=bt,
                            y=y,
                            metric_name=metric,
                            metric_unit=unit,
                            extra_benchmark_config_str=config_str,
                            gpu_name=device_name,
                        )
                    )
    csv_path = tmp_path / "headline.csv"
    update_benchmark_csv(kept, csv_path)

    calls = []

    def fake_speed(run_input):
        calls.append((run_input.extra_benchmark_config[size_key], run_input.kernel_provider))
        return SingleBenchmarkRunOutput(y_20=9.0, y_50=9.5, y_80=10.0)

    def no_memory_run(run_input):
        raise AssertionError(f"kept experiment re-run: {run_input}")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: device_name)
    monkeypatch.setattr(benchmark_report, "copy_bandwidth_gbps", lambda: 1000.0)
    monkeypatch.setattr(benchmark_swiglu, "bench_speed_swiglu", fake_speed)
    monkeypatch.setattr(benchmark_swiglu, "bench_memory_swiglu", no_memory_run)
    markdown = tmp_path / "headline.md"
    code = benchmark_report.main(["--kernels", "swiglu", "--csv", str(csv_path), "--markdown", str(markdown)])

    assert code == 0
    assert calls == [missing[:2]]
    assert len(read_benchmark_rows(csv_path)) == len(kept) + 1
    lines = markdown.read_text().splitlines()
    assert lines[0] == f"GPU: {device_name}; device-to-device copy: 1000 GB/s (read + write)"
    table_rows = [line for line in lines if line.startswith("| swiglu |")]
    assert table_rows == [
        f"| swiglu | {size_key}={size} | {provider} | {speed:.3f} | {memory:.0f} |"
        for (size, provider), (speed, memory) in expected.items()
    ]


# --------------------------------------------------------------------------------------------------- visualizer


def test_visualizer_renders_png(tmp_path):
    csv_path = tmp_path / "data.csv"
    update_benchmark_csv(
        [_row(provider=p, x=x, y=x * k) for k, p in ((1, "liger"), (2, "torch")) for x in (1024, 2048, 4096)]
        + [_row(provider="liger", x=1024, kernel_operation_mode="forward")],
        csv_path,
    )
    code = benchmarks_visualizer.main(
        [
            "--kernel-name",
            "swiglu",
            "--metric-name",
            "speed",
            "--kernel-operation-mode",
            "full",
            "forward",
            "--csv",
            str(csv_path),
            "--output-dir",
            str(tmp_path / "viz"),
        ]
    )
    assert code == 0
    for mode in ("full", "forward"):
        png = tmp_path / "viz" / f"swiglu_speed_{mode}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000


def _configured(provider, x, config):
    return _row(provider=provider, x=x, extra_benchmark_config_str=json.dumps(config, sort_keys=True))


def test_visualizer_draws_one_plot_per_model_configuration_with_readable_legends(tmp_path):
    sweep = {"dtype": "bfloat16", "intermediate_size": 14336, "model": "llama_3_8b"}
    rows = [_configured(p, x, sweep) for p in ("liger", "torch") for x in (1024, 2048)]
    # one-point runs of another model at two sizes; the swept variable in the config too, as such runs record it
    rows += [
        _configured(p, 16384, {"BT": 16384, "dtype": "bfloat16", "intermediate_size": size, "model": "headline"})
        for p in ("liger", "torch")
        for size in (4096, 14336)
    ]
    groups = benchmarks_visualizer.plot_groups(rows)
    assert [(parts, len(group), varying) for parts, group, varying in groups] == [
        (["headline"], 4, "intermediate_size"),
        (["llama_3_8b"], 4, None),
    ]
    headline, llama = groups
    labels = sorted({benchmarks_visualizer.line_identity(r, headline[2], False)[-1] for r in headline[1]})
    assert labels == [
        "liger (intermediate_size=14336)",
        "liger (intermediate_size=4096)",
        "torch (intermediate_size=14336)",
        "torch (intermediate_size=4096)",
    ]
    assert {benchmarks_visualizer.line_identity(r, None, True)[-1] for r in llama[1]} == {
        "liger [test-gpu]",
        "torch [test-gpu]",
    }
    assert benchmarks_visualizer._fixed_config(llama[1], None) == "llama_3_8b: dtype=bfloat16, intermediate_size=14336"
    assert benchmarks_visualizer._fixed_config(headline[1], "intermediate_size") == "headline: dtype=bfloat16"

    csv_path = tmp_path / "data.csv"
    update_benchmark_csv(rows, csv_path)
    paths = benchmarks_visualizer.render("swiglu", "speed", ["full"], csv_path, tmp_path / "viz")
    assert [p.name for p in paths] == ["swiglu_speed_full_headline.png", "swiglu_speed_full_llama_3_8b.png"]


def test_visualizer_splits_a_model_whose_rows_vary_in_two_config_values():
    rows = [
        _configured("liger", 1024, {"model": "m", "hidden_size": h, "dtype": d})
        for h in (4096, 8192)
        for d in ("bfloat16", "float32")
    ]
    groups = benchmarks_visualizer.plot_groups(rows)
    assert [parts for parts, _, _ in groups] == [
        ["m", "dtype_bfloat16", "hidden_size_4096"],
        ["m", "dtype_bfloat16", "hidden_size_8192"],
        ["m", "dtype_float32", "hidden_size_4096"],
        ["m", "dtype_float32", "hidden_size_8192"],
    ]
    assert all(varying is None and len(group) == 1 for _, group, varying in groups)


def test_visualizer_reports_no_matching_rows(tmp_path, capsys):
    csv_path = tmp_path / "data.csv"
    update_benchmark_csv([_row()], csv_path)
    code = benchmarks_visualizer.main(
        ["--kernel-name", "rope", "--metric-name", "speed", "--csv", str(csv_path), "--output-dir", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert code == 1 and "no rows" in err and "rope" in err and "swiglu" in err
    assert not list(tmp_path.glob("*.png"))


# ------------------------------------------------------------------------------------------------------ scripts


def _script_env(**overrides):
    env = dict(os.environ)
    # The scripts must set TRITON_INTERPRET themselves when they need it; do not hand it down from conftest.
    env.pop("TRITON_INTERPRET", None)
    env.pop("LIGER_BENCHMARK_CSV", None)
    env.update(overrides)
    return env


# For runs that check something else than the scripts' own TRITON_INTERPRET (the smoke runs check that): given, it
# lets the run fork from the suite's server (test/forkserver.py) instead of starting an interpreter.
INTERPRETED = {"TRITON_INTERPRET": "1"}


def _run_script(name, *args, **env):
    return run_python(
        [str(SCRIPTS_DIR / f"benchmark_{name}.py"), *args], cwd=REPO_ROOT, env=_script_env(**env), timeout=300
    )


@pytest.mark.parametrize(
    "kernel, x_names",
    [
        ("swiglu", {"BT", "intermediate_size"}),
        ("rms_norm", {"BT", "hidden_size"}),
        ("cross_entropy", {"BT"}),
    ],
)
def test_script_smoke_run_writes_rows(tmp_path, kernel, x_names):
    csv_path = tmp_path / "x.csv"
    result = _run_script(kernel, "--smoke", "--csv", str(csv_path))
    assert result.returncode == 0, result.stderr[-4000:]
    rows = read_benchmark_rows(csv_path)
    per_sweep = 2 * 3 * 2 * 2  # metrics x modes x providers (no torch_compile in smoke) x BT values
    assert len(rows) == per_sweep * len(x_names)
    assert {row["kernel_name"] for row in rows} == {kernel}
    assert {row["x_name"] for row in rows} == x_names
    assert {row["kernel_provider"] for row in rows} == {"liger", "torch"}
    assert {row["kernel_operation_mode"] for row in rows} == {"forward", "backward", "full"}
    assert {(row["metric_name"], row["metric_unit"]) for row in rows} == {("speed", "ms"), ("memory", "MB")}
    for row in rows:
        y20, y50, y80 = (float(row[c]) for c in ("y_value_20", "y_value_50", "y_value_80"))
        assert 0 <= y20 <= y50 <= y80, row
        # Time is never zero; memory can be: Liger's SwiGLU backward writes its gradients over its inputs.
        assert y50 > 0 or row["metric_name"] == "memory", row


def test_script_smoke_respects_providers_filter(tmp_path):
    csv_path = tmp_path / "x.csv"
    result = _run_script("cross_entropy", "--smoke", "--csv", str(csv_path), "--providers", "torch", **INTERPRETED)
    assert result.returncode == 0, result.stderr[-4000:]
    assert {row["kernel_provider"] for row in read_benchmark_rows(csv_path)} == {"torch"}


def test_script_rejects_unknown_provider_in_one_line():
    result = _run_script("swiglu", "--smoke", "--providers", "liger,jax", **INTERPRETED)
    assert result.returncode == 2
    assert result.stderr.strip() == "benchmark_swiglu: unknown provider(s) jax; choose from liger, torch"


@pytest.mark.parametrize("kernel", ["swiglu", "rms_norm", "cross_entropy"])
def test_script_without_gpu_or_smoke_exits_2_with_one_line(kernel):
    result = _run_script(kernel, CUDA_VISIBLE_DEVICES="", **INTERPRETED)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"benchmark_{kernel}: no GPU found; run on a CUDA device or pass --smoke for a CPU smoke run"
    )
    assert "Traceback" not in result.stdout + result.stderr


def test_memory_handed_over_drops_the_output_and_gives_the_kernel_autograd_s_gradient():
    """compare_with_upstream --memory-dy autograd: by the kernel's backward its output is freed and the gradient it
    gets is one only autograd holds (which a generated row kernel may write d(x) over); a loss is its own step."""
    from benchmark.scripts.compare_with_upstream import handed_over
    from liger_kernel.ops.row_utils import reusable_gradient

    seen = {}

    class Doubled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            seen["output"] = y.untyped_storage().data_ptr()
            weakref.finalize(y.untyped_storage(), seen.__setitem__, "freed", True)
            return y

        @staticmethod
        def backward(ctx, grad):
            seen["reusable"], seen["freed by then"] = reusable_gradient(grad, grad.dtype), seen.get("freed", False)
            return grad * 2

    x = torch.randn(4, 8, requires_grad=True)
    step = handed_over(lambda: Doubled.apply(x))
    seen.clear()
    step().backward()
    assert seen["reusable"] and seen["freed by then"]
    assert x.grad.shape == x.shape
    loss = lambda: (x * x).sum()  # noqa: E731
    assert handed_over(loss) is loss
