"""Generating into a checkout laid out like upstream Liger-Kernel: its registration conventions and its benchmark
harness are read from its files, the generated tests pass there, and the generated benchmarks run on its harness.

The checkout is this repository's library with upstream's layout where kernelgen reads conventions:
``functional.py`` imports every Function from ``liger_kernel.ops``, ``transformers/__init__.py`` re-exports no
functional helper and resolves lazy names with sets in ``__getattr__``, ``ops/utils.py`` has none of the helpers
generated kernels import (``get_num_sms``, ``tanh``, ``pow``: kernelgen adds those a kernel needs), and
``benchmark/scripts`` holds a harness with upstream's interface (``run_benchmarks``, ``SingleBenchmarkRunInput``,
``parse_benchmark_script_args``, ...) that measures on the CPU.
"""

import csv
import json
import os
import re
import shutil

from pathlib import Path

import pytest

from test.kernelgen.conftest import REPO_ROOT
from test.kernelgen.conftest import WITHOUT_DTENSOR
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import run_pytest
from tools.kernelgen.analyze import analyze
from tools.kernelgen.formatting import lint_findings
from tools.kernelgen.generate import GenerateError
from tools.kernelgen.generate import plan_new
from tools.kernelgen.harness import BENCHMARK_UTILS
from tools.kernelgen.harness import MODEL_CONFIGS
from tools.kernelgen.harness import HarnessError
from tools.kernelgen.harness import read_harness
from tools.kernelgen.kernel_helpers import CORE_SOURCES
from tools.kernelgen.kernel_helpers import HOST_SOURCES
from tools.kernelgen.kernel_helpers import JIT_MATH
from tools.kernelgen.kernel_helpers import defined_names
from tools.kernelgen.kernel_helpers import jit_math_block
from tools.kernelgen.layout import DTENSOR_UTILS
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import LAYOUT_UTILS
from tools.kernelgen.layout import OPS_UTILS
from tools.kernelgen.layout import TRANSFORMERS_INIT
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.repo import LigerRepo

UPSTREAM_LAYOUT = REPO_ROOT / "test" / "kernelgen" / "fixtures" / "upstream_layout"
CSV = "benchmark/data/all_benchmark_data.csv"
# geglu: an MLP module (the benchmark runs the whole MLP); dyt: a module with scalar, per-channel and optional
# parameters (the benchmark runs the Function with the reference module's parameters).
KERNELS = ("geglu", "dyt")
# This repository's launch replay for its own host code; upstream has none, and generated kernels do not need it.
NATIVE_LAUNCH = "src/liger_kernel/ops/native_launch.py"


def without_kernel_helpers(utils: str) -> str:
    """This host's ``ops/utils.py`` without the helpers kernelgen adds to a target that lacks them and the host's own
    kernels do not import (``get_num_sms``, ``tanh_from_exp``, the host integer helpers; ``calculate_settings`` calls
    ``triton.next_power_of_2`` again, as upstream's does; ``scale_by_grad_output_kernel``); its jit math block stays (cross entropy's softcap reads
    its ``tanh``)."""
    num_sms = re.search(r"\n\n\ndef get_num_sms\(.*?(?=\n\n\n)", utils, flags=re.S).group(0)
    tanh_from_exp = "\n\n\n" + CORE_SOURCES["tanh_from_exp"].strip("\n")
    scale_kernel = "\n\n\n" + CORE_SOURCES["scale_by_grad_output_kernel"].strip("\n")
    host = ["\n\n\n" + HOST_SOURCES[name].strip("\n") for name in sorted(HOST_SOURCES)]
    assert jit_math_block(list(JIT_MATH), "is_triton_interpreter()") in utils and tanh_from_exp in utils
    assert scale_kernel in utils
    assert all(text in utils for text in host) and "block_size = next_power_of_2(n)" in utils
    stripped = utils.replace(num_sms, "").replace(tanh_from_exp, "").replace(scale_kernel, "")
    for text in host:
        stripped = stripped.replace(text, "")
    stripped = stripped.replace("block_size = next_power_of_2(n)", "block_size = triton.next_power_of_2(n)")
    names = "|".join(["get_num_sms", "tanh_from_exp", "scale_by_grad_output_kernel", *HOST_SOURCES])
    return re.sub(rf'    "({names})",\n', "", stripped)


def upstream_layout_checkout(destination: Path) -> Path:
    root = copy_checkout(destination)
    (root / OPS_UTILS).write_text(without_kernel_helpers((root / OPS_UTILS).read_text()))
    (root / NATIVE_LAUNCH).unlink()  # upstream has no launch replay
    (root / LAYOUT_UTILS).unlink()  # nor the shared layout helpers of generated kernels
    (root / DTENSOR_UTILS).unlink()  # nor their DTensor helpers
    functional = (root / FUNCTIONAL).read_text()
    (root / FUNCTIONAL).write_text(
        re.sub(r"^from liger_kernel\.ops\.\w+ import", "from liger_kernel.ops import", functional, flags=re.M)
    )
    (root / TRANSFORMERS_INIT).write_text((UPSTREAM_LAYOUT / "transformers_init.py.txt").read_text())
    scripts = root / "benchmark" / "scripts"
    shutil.rmtree(scripts)
    scripts.mkdir()
    (scripts / "utils.py").write_text((UPSTREAM_LAYOUT / "benchmark_utils.py.txt").read_text())
    data = root / "benchmark" / "data"
    data.mkdir(exist_ok=True)
    (data / "all_benchmark_data.csv").write_text(
        "kernel_name,kernel_provider,kernel_operation_mode,metric_name,metric_unit,x_name,x_label,x_value,"
        "y_value_50,y_value_20,y_value_80,extra_benchmark_config_str,gpu_name,timestamp,liger_version\n"
        "swiglu,liger,full,speed,ms,T,sequence length,1024,1.0,1.0,1.0,{},H200,2026-01-01 00:00:00,0.6.0\n"
    )
    return root


@pytest.fixture(scope="module")
def upstream_checkout(tmp_path_factory) -> Path:
    root = upstream_layout_checkout(tmp_path_factory.mktemp("upstream") / "liger")
    for name in KERNELS:
        result = run_kernelgen("new", name, "--repo", str(root))
        assert result.returncode == 0, result.stderr
    return root


def test_registration_follows_the_checkout(upstream_checkout):
    functional = (upstream_checkout / FUNCTIONAL).read_text()
    assert (
        "from liger_kernel.ops import LigerDyTFunction\nfrom liger_kernel.ops import LigerGELUMulFunction\n"
        in functional
    )
    assert "liger_kernel.ops.dyt" not in functional and "liger_kernel.ops.geglu" not in functional
    init = (upstream_checkout / TRANSFORMERS_INIT).read_text()
    assert "from liger_kernel.transformers.dyt import LigerDyT  # noqa: F401\n" in init
    assert "liger_dyt" not in init and "liger_geglu" not in init
    for name in KERNELS:
        for role, path in kernel_paths(name).items():
            text = (upstream_checkout / path).read_text()
            assert lint_findings(text, upstream_checkout, path) == [], path
            assert str(REPO_ROOT) not in text  # the built-in reference is named, not its path
        assert "from utils import run_benchmarks\n" in (upstream_checkout / kernel_paths(name)["benchmark"]).read_text()


def test_the_helpers_the_kernels_import_were_added_to_its_utils(upstream_checkout, tmp_path):
    """geglu imports tanh_from_exp, dyt tanh_from_exp and get_num_sms: each is added once, every original line
    kept, ruff-clean."""
    original = without_kernel_helpers((REPO_ROOT / OPS_UTILS).read_text())
    utils = (upstream_checkout / OPS_UTILS).read_text()
    assert not {"get_num_sms", "tanh_from_exp"} & defined_names(original)
    assert {"get_num_sms", "tanh_from_exp"} <= defined_names(utils)
    assert utils.count("def get_num_sms(") == utils.count("def tanh_from_exp(") == 1
    assert all(line in utils.splitlines() for line in original.splitlines())
    assert lint_findings(utils, upstream_checkout, OPS_UTILS) == []
    for name in KERNELS:
        assert (
            "from liger_kernel.ops.utils import tanh_from_exp\n"
            in (upstream_checkout / kernel_paths(name)["ops"]).read_text()
        )


def test_losses_share_the_scale_kernel_they_add_to_its_utils(upstream_checkout):
    """Tier-3 losses scale their stored gradients in the backward with ``scale_by_grad_output``, which upstream's
    utils lacks, as it lacks the kernel that function launches: the first loss adds both, the second finds them; both
    pass their tests there."""
    root = upstream_checkout
    assert not {"scale_by_grad_output", "scale_by_grad_output_kernel"} & defined_names((root / OPS_UTILS).read_text())
    for name in ("kl_div", "tvd"):
        result = run_kernelgen("new", name, "--repo", str(root))
        assert result.returncode == 0, result.stderr
        ops = (root / kernel_paths(name)["ops"]).read_text()
        assert "from liger_kernel.ops.utils import scale_by_grad_output\n" in ops
        assert "_scale_kernel(" not in ops and "scale_by_grad_output_kernel" not in ops
    utils = (root / OPS_UTILS).read_text()
    assert utils.count("def scale_by_grad_output(") == utils.count("def scale_by_grad_output_kernel(") == 1
    assert lint_findings(utils, root, OPS_UTILS) == []
    result = run_pytest(root, kernel_paths("kl_div")["test"], kernel_paths("tvd")["test"])
    assert result.returncode == 0, result.stdout[-2000:]


def test_the_shared_modules_are_added_once(upstream_checkout):
    """Both kernels import liger_kernel.ops.layout_utils and dtensor_utils, which upstream lacks: the first one's
    generation adds this repository's copies, ruff-clean there, and the second finds them and leaves them."""
    for path in (LAYOUT_UTILS, DTENSOR_UTILS):
        text = (upstream_checkout / path).read_text()
        assert text == (REPO_ROOT / path).read_text()
        assert lint_findings(text, upstream_checkout, path) == []
    for name in KERNELS:
        ops = (upstream_checkout / kernel_paths(name)["ops"]).read_text()
        assert "from liger_kernel.ops.dtensor_utils import dtensor_layout\n" in ops
        assert "class DTensorLayout" not in ops and "def tile_settings" not in ops


def test_no_launch_runtime_is_added(upstream_checkout):
    """The generated wrappers launch their kernels from Python, as upstream's do: nothing else joins the target."""
    assert not (upstream_checkout / NATIVE_LAUNCH).exists()
    for path in upstream_checkout.rglob("*.py"):
        assert "native_launch" not in path.read_text(encoding="utf-8"), path


def test_generated_tests_pass_there(upstream_checkout):
    result = run_pytest(upstream_checkout, *(kernel_paths(name)["test"] for name in KERNELS), *WITHOUT_DTENSOR)
    assert result.returncode == 0, result.stdout[-4000:]


def test_generated_benchmarks_run_on_its_harness_and_append_their_rows(upstream_checkout):
    """Each script is imported where upstream runs it (benchmark/scripts) and runs a tiny sweep of two token counts
    and two providers: its rows are added to the harness's CSV, after the rows already there."""
    before = (upstream_checkout / CSV).read_text()
    sizes = {"geglu": {"hidden_size": 16, "intermediate_size": 37}, "dyt": {"hidden_size": 37}}
    for name in KERNELS:
        script = (
            "import sys, torch\n"
            f"import benchmark_{name} as script\n"
            f"config = dict({sizes[name]!r}, dtype=torch.float32)\n"
            "script.run(x_values=[3, 5], extra_benchmark_configs=[config], kernel_providers=['liger', 'torch'])\n"
        )
        env = {
            **os.environ,
            "TRITON_INTERPRET": "1",
            "PYTHONPATH": f"{upstream_checkout / 'src'}{os.pathsep}{upstream_checkout}",
        }
        result = run_python(["-c", script], cwd=upstream_checkout / "benchmark" / "scripts", env=env)
        assert result.returncode == 0, result.stderr[-3000:]
    text = (upstream_checkout / CSV).read_text()
    assert text.startswith(before)
    rows = list(csv.DictReader(text.splitlines()))[1:]
    for name in KERNELS:
        mine = [row for row in rows if row["kernel_name"] == name]
        # speed and memory, each forward, backward and full, for 2 providers x 2 token counts
        assert len(mine) == (3 + 3) * 2 * 2
        assert {row["kernel_provider"] for row in mine} == {"liger", "torch"}
        assert {row["x_value"] for row in mine} == {"3", "5"}
        assert all(float(row["y_value_50"]) > 0 for row in mine)


def test_with_upstream_s_model_registry_the_benchmark_takes_model_sweep_mode_and_bt(tmp_path):
    """A checkout with benchmark_model_configs.py (MODEL_REGISTRY, get_benchmark_model_config): the script's sizes
    come from --model, and --sweep-mode model_config runs one point per registered model at --bt tokens."""
    root = upstream_layout_checkout(tmp_path / "liger")
    (root / MODEL_CONFIGS).write_text((UPSTREAM_LAYOUT / "benchmark_model_configs.py.txt").read_text())
    assert read_harness((root / BENCHMARK_UTILS).read_text(), (root / MODEL_CONFIGS).read_text()).style == (
        "upstream_models"
    )
    result = run_kernelgen("new", "dyt", "--repo", str(root))
    assert result.returncode == 0, result.stderr
    script = (root / kernel_paths("dyt")["benchmark"]).read_text()
    assert "CONFIG = " not in script and "from test.transformers.test_dyt import " in script
    # The two sweeps as the script's main runs them, with the providers that run on the CPU.
    sweeps = (
        "import benchmark_dyt as s\n"
        "models = [s._model_config(model) for model in s.MODEL_REGISTRY.values()]\n"
        "s.run(s.bench_speed_dyt_model_config, s.bench_memory_dyt_model_config, 'model_config', 'model', range(2),"
        " [{'bt': 3, 'model_configs': models}], providers=['liger', 'torch'])\n"
        "s.run(s.bench_speed_dyt, s.bench_memory_dyt, 'BT', 'B * T', [5],"
        " [s._model_config(s.get_benchmark_model_config('tiny_b'))], providers=['liger', 'torch'])\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(root / "src")}
    result = run_python(["-c", sweeps], cwd=root / "benchmark" / "scripts", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [row for row in csv.DictReader((root / CSV).read_text().splitlines()) if row["kernel_name"] == "dyt"]
    models = [row for row in rows if row["x_name"] == "model_config"]
    # 2 models x 2 providers x (speed + memory) x (forward, backward, full)
    assert {row["x_value"] for row in models} == {"0", "1"} and len(models) == 2 * 2 * 2 * 3
    assert all(str(json.loads(row["extra_benchmark_config_str"])["bt"]) == "3" for row in models)
    tokens = [row for row in rows if row["x_name"] == "BT"]
    assert {row["x_value"] for row in tokens} == {"5"} and len(tokens) == 2 * 2 * 3
    assert all(str(json.loads(row["extra_benchmark_config_str"])["hidden_size"]) == "37" for row in tokens)


def test_with_upstream_s_sweep_builders_the_benchmark_is_a_setup_and_a_main(tmp_path):
    """A checkout whose registry builds the sweeps (build_token_length_sweep, build_model_config_sweep) and whose utils
    build the measurements from a setup (build_speed_bench_fn, ...), as upstream's scripts now use: the script is a
    setup returning (x, layer) and a __main__ calling the builders. Its __main__ runs as upstream runs it, in both
    sweep modes (the providers that run on the CPU), for an MLP, a kernel with parameters and a loss."""
    root = upstream_layout_checkout(tmp_path / "liger")
    model_configs = (UPSTREAM_LAYOUT / "benchmark_model_configs.py.txt").read_text()
    (root / MODEL_CONFIGS).write_text(model_configs + (UPSTREAM_LAYOUT / "builders_model_configs.py.txt").read_text())
    utils = root / BENCHMARK_UTILS
    utils.write_text(utils.read_text() + (UPSTREAM_LAYOUT / "builders_utils.py.txt").read_text())
    assert read_harness(utils.read_text(), (root / MODEL_CONFIGS).read_text()).style == "upstream_builders"
    kernels = ("geglu", "dyt", "tvd")
    for name in kernels:
        result = run_kernelgen("new", name, "--repo", str(root), "--force-new")
        assert result.returncode == 0, result.stderr
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(root / "src")}
    for name in kernels:
        path = root / kernel_paths(name)["benchmark"]
        script = path.read_text()
        assert "def bench_speed" not in script and "BT_VALUES" not in script
        assert f"build_speed_bench_fn(_setup_{name})" in script and "build_token_length_sweep(" in script
        cpu_script = path.with_name(f"cpu_{path.name}")
        cpu_script.write_text(script.replace('"torch_compile"]', "]").replace(', "torch_compile"', ""))
        for argv in (["--model", "tiny_b"], ["--sweep-mode", "model_config", "--bt", "4"]):
            result = run_python([cpu_script.name, *argv], cwd=cpu_script.parent, env=env)
            assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader((root / CSV).read_text().splitlines()))
    for name in kernels:
        mine = [row for row in rows if row["kernel_name"] == name]
        assert {row["kernel_provider"] for row in mine} == {"liger", "torch"}
        tokens = [row for row in mine if row["x_name"] == "BT"]
        models = [row for row in mine if row["x_name"] == "model_config"]
        # 2 x values x 2 providers x (speed + memory) x (forward, backward, full), in each sweep
        assert {row["x_value"] for row in tokens} == {"2", "3"} and len(tokens) == 2 * 2 * 2 * 3
        assert {row["x_value"] for row in models} == {"tiny_a", "tiny_b"} and len(models) == 2 * 2 * 2 * 3
        assert all(float(row["y_value_50"]) > 0 for row in mine)


def test_a_harness_without_the_measurement_helpers_gets_kernelgen_s(tmp_path):
    """Upstream checkouts from before run_speed_benchmark and run_memory_benchmark existed: the script still calls
    them, so kernelgen's versions are added to their utils (every original line kept, ruff-clean)."""
    root = upstream_layout_checkout(tmp_path / "liger")
    utils = root / BENCHMARK_UTILS
    original = utils.read_text()
    older = re.sub(r"\n\n\ndef run_(speed|memory)_benchmark\(.*?(?=\n\n\n)", "", original, flags=re.S)
    assert "def run_speed_benchmark" not in older and "def run_benchmarks" in older
    utils.write_text(older)
    changes = plan_new(LigerRepo.open(root), analyze("snake"))
    updated = changes.changes[BENCHMARK_UTILS]
    assert changes.originals[BENCHMARK_UTILS] == older
    assert "\ndef run_memory_benchmark(fwd_fn, mode, reps=10):\n" in updated
    assert "\ndef run_speed_benchmark(fwd_fn, mode, input_tensors, rep=10):\n" in updated
    assert all(line in updated.splitlines() for line in older.splitlines())
    assert lint_findings(updated, root, BENCHMARK_UTILS) == []
    # A second kernel finds them there.
    assert read_harness(updated).missing == ()


def test_harnesses_kernelgen_cannot_write_for_are_one_line_errors(tmp_path):
    root = upstream_layout_checkout(tmp_path / "liger")
    utils = root / BENCHMARK_UTILS
    upstream = utils.read_text()
    cases = {
        "def helper():\n    pass\n": "defines neither run_model_sweeps",
        upstream.replace("def parse_benchmark_script_args():", "def parse_args():"): "not parse_benchmark_script_args",
        upstream.replace(
            "def run_memory_benchmark(fwd_fn: Callable, mode: str):", "def run_memory_benchmark(fwd_fn, mode, reps):"
        ): ("run_memory_benchmark does not take 2 positional"),
        upstream.replace("def run_memory_benchmark", "def _memory").replace("QUANTILES = [0.5, 0.2, 0.8]\n", ""): (
            "needs QUANTILES"
        ),
    }
    for text, message in cases.items():
        with pytest.raises(HarnessError, match=message):
            read_harness(text)
    # Through the command: one line, exit status 2, nothing written.
    utils.write_text(next(iter(cases)))
    result = run_kernelgen("new", "snake", "--repo", str(root))
    assert result.returncode == 2 and "defines neither run_model_sweeps" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (root / kernel_paths("snake")["ops"]).exists()
    utils.unlink()
    with pytest.raises(GenerateError, match="benchmark/scripts/utils.py is missing"):
        plan_new(LigerRepo.open(root), analyze("snake"))
