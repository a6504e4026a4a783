"""The target checkout's benchmark harness (``benchmark/scripts/utils.py``): which style of benchmark script it runs,
and the helpers a script of that style calls that it lacks, which the inserter adds to it.

Two harnesses are known, told apart by what the file defines at module level (read with ``ast``, never imported):

* ``sweeps``: this repository's, with ``run_model_sweeps`` (model-sized sweeps, ``--smoke`` on the CPU, a CSV per
  run); the generated script calls it from its ``main``.
* ``upstream``: Liger-Kernel's, with ``run_benchmarks``, ``SingleBenchmarkRunInput``/``Output`` and
  ``parse_benchmark_script_args``; the generated script is laid out like upstream's own (a setup factory, speed and
  memory functions, ``run_benchmarks`` appending rows to ``benchmark/data/all_benchmark_data.csv``). It measures with
  ``run_speed_benchmark(fwd_fn, mode, input_tensors)`` and ``run_memory_benchmark(fwd_fn, mode)``: checkouts from
  before upstream added them get kernelgen's versions of the two, inserted into their utils. With upstream's model
  registry (``benchmark_model_configs.py``) the script takes ``--model``, ``--sweep-mode`` and ``--bt``; where that
  module also builds the sweeps (``build_token_length_sweep``, ``build_model_config_sweep``, which probe the
  reference's peak memory to size them) and the utils build the measurements from a setup function
  (``build_speed_bench_fn``, ``build_memory_bench_fn``), the script is a setup function and a ``__main__`` calling
  them, as upstream's own scripts now are.
"""

from __future__ import annotations

import ast

from dataclasses import dataclass

from tools.kernelgen.insert import InsertError
from tools.kernelgen.insert import add_function
from tools.kernelgen.insert import check_invariants

BENCHMARK_UTILS = "benchmark/scripts/utils.py"
# Upstream's model registry (newer checkouts): scripts take their sizes from --model and sweep models with
# --sweep-mode model_config at --bt tokens.
MODEL_CONFIGS = "benchmark/scripts/benchmark_model_configs.py"
MODEL_REGISTRY_NAMES = ("MODEL_REGISTRY", "get_benchmark_model_config")
# parse_benchmark_script_args options a registry-driven script reads.
REGISTRY_OPTIONS = ("--model", "--sweep-mode", "--bt")

SWEEPS = "sweeps"
UPSTREAM = "upstream"
UPSTREAM_MODELS = "upstream_models"  # upstream's harness with its model registry and sweep options
UPSTREAM_BUILDERS = "upstream_builders"  # ... and the registry's sweep builders, the utils' measurement builders
# The builders a script of the last style calls, where each is defined, and the arguments it passes.
BUILDERS = {
    "build_token_length_sweep": (
        MODEL_CONFIGS,
        (
            0,
            (
                "kernel_name",
                "probe_x",
                "model",
                "setup_fn",
                "model_keys",
                "scale_dim",
                "x_label",
                "probe_provider",
                "overwrite",
            ),
        ),
    ),
    "build_model_config_sweep": (
        MODEL_CONFIGS,
        (0, ("kernel_name", "setup_fn", "model_keys", "probe_provider", "probe_dim", "bt", "overwrite")),
    ),
    "build_speed_bench_fn": (BENCHMARK_UTILS, (1, ())),
    "build_memory_bench_fn": (BENCHMARK_UTILS, (1, ())),
}

# What an upstream-style script imports from utils and cannot do without, with the arguments it passes:
# (positional count, keyword names); a helper must accept them and default everything else.
REQUIRED = {
    "SingleBenchmarkRunInput": None,
    "SingleBenchmarkRunOutput": None,
    "parse_benchmark_script_args": (0, ()),
    "run_benchmarks": (
        0,
        (
            "bench_test_fn",
            "kernel_name",
            "metric_name",
            "metric_unit",
            "x_name",
            "x_label",
            "x_values",
            "kernel_providers",
            "kernel_operation_modes",
            "extra_benchmark_configs",
            "overwrite",
        ),
    ),
}
# Measurement helpers the script calls, and the arguments it passes; added to the target's utils when missing.
INSERTABLE = {
    "run_speed_benchmark": (3, ()),
    "run_memory_benchmark": (2, ()),
}

# kernelgen's versions of upstream's measurement helpers, for checkouts whose utils predate them. They use only what
# every upstream harness has: torch, triton's do_bench, QUANTILES, SingleBenchmarkRunOutput and liger_kernel.utils.
HELPER_SOURCES = {
    "run_speed_benchmark": '''
def run_speed_benchmark(fwd_fn, mode, input_tensors, rep=10):
    """Milliseconds (median, 20th and 80th percentiles) of ``fwd_fn`` ("forward"), of the backward of its output
    ("backward") or of both ("full"); the gradients of ``input_tensors`` are reset between calls."""
    import triton

    if mode == "forward":
        timed = fwd_fn
    elif mode == "backward":
        y = fwd_fn()
        dy = torch.randn_like(y)

        def timed():
            y.backward(dy, retain_graph=True)

    elif mode == "full":

        def timed():
            y = fwd_fn()
            y.backward(torch.randn_like(y))

    else:
        raise ValueError(f"Unsupported mode: {mode}. Use 'forward', 'backward', or 'full'.")
    ms_50, ms_20, ms_80 = triton.testing.do_bench(timed, grad_to_none=input_tensors, rep=rep, quantiles=QUANTILES)
    return SingleBenchmarkRunOutput(y_20=ms_20, y_50=ms_50, y_80=ms_80)
''',
    "run_memory_benchmark": '''
def run_memory_benchmark(fwd_fn, mode, reps=10):
    """Peak MB allocated while running ``fwd_fn`` ("forward"), the backward of its output ("backward") or both
    ("full"), as the median, 20th and 80th percentiles of ``reps`` runs."""
    from liger_kernel.utils import infer_device

    backend = getattr(torch, infer_device())
    if mode == "forward":
        measured = fwd_fn
    elif mode == "backward":
        y = fwd_fn()
        dy = torch.randn_like(y)

        def measured():
            y.backward(dy, retain_graph=True)

    elif mode == "full":

        def measured():
            y = fwd_fn()
            y.backward(torch.randn_like(y))

    else:
        raise ValueError(f"Unsupported mode: {mode}. Use 'forward', 'backward', or 'full'.")
    peaks = []
    for _ in range(reps):
        backend.memory.reset_peak_memory_stats()
        measured()
        peaks.append(backend.max_memory_allocated() / 2**20)
    mem_50, mem_20, mem_80 = torch.quantile(torch.tensor(peaks), torch.tensor(QUANTILES)).tolist()
    return SingleBenchmarkRunOutput(y_20=mem_20, y_50=mem_50, y_80=mem_80)
''',
}
# Names the inserted helpers read from the utils module they land in.
HELPER_NEEDS = ("torch", "QUANTILES", "SingleBenchmarkRunOutput")


class HarnessError(ValueError):
    """A benchmark harness kernelgen cannot render a script for; nothing was written."""


@dataclass(frozen=True)
class BenchmarkHarness:
    style: str  # SWEEPS, UPSTREAM, UPSTREAM_MODELS or UPSTREAM_BUILDERS
    missing: tuple[str, ...] = ()  # helpers of INSERTABLE the script calls and the target's utils lacks


def _fits(function: ast.FunctionDef | ast.AsyncFunctionDef, positional: int, keywords: tuple[str, ...]) -> bool:
    """Whether ``function`` accepts ``positional`` positional arguments and ``keywords`` by name, with every other
    argument defaulted."""
    args = function.args
    ordered = [*args.posonlyargs, *args.args]
    if len(ordered) < positional and args.vararg is None:
        return False
    named = {a.arg for a in [*args.args, *args.kwonlyargs]}
    if args.kwarg is None and any(name not in named for name in keywords):
        return False
    passed = {a.arg for a in ordered[:positional]} | set(keywords)
    defaulted = {a.arg for a in ordered[len(ordered) - len(args.defaults) :]}
    defaulted |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    return all(a.arg in passed or a.arg in defaulted for a in [*ordered, *args.kwonlyargs])


def _definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level names: functions and classes by their node, assigned and imported names by their statement."""
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            found.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
    return found


def read_harness(source: str | None, model_configs: str | None = None) -> BenchmarkHarness:
    """The harness ``benchmark/scripts/utils.py`` (its text, None when the file is absent) implements;
    ``model_configs``: the text of ``benchmark_model_configs.py``, None when the checkout has none."""
    if source is None:
        raise HarnessError(f"{BENCHMARK_UTILS} is missing: there is no benchmark harness to write a script for")
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise HarnessError(f"{BENCHMARK_UTILS}: does not parse (line {error.lineno}: {error.msg})") from None
    defined = _definitions(tree)
    if "run_model_sweeps" in defined:
        return BenchmarkHarness(SWEEPS)
    if "run_benchmarks" not in defined:
        raise HarnessError(
            f"{BENCHMARK_UTILS} defines neither run_model_sweeps (kernelgen's harness) nor run_benchmarks "
            f"(Liger-Kernel's): no benchmark style to follow"
        )
    for name, call in REQUIRED.items():
        _check(defined, name, call, required=True)
    registry = _registry_definitions(source, model_configs)
    if registry is not None and _has_builders({BENCHMARK_UTILS: defined, MODEL_CONFIGS: registry}):
        return BenchmarkHarness(UPSTREAM_BUILDERS)  # its script measures through the builders, not the helpers
    missing = tuple(name for name, call in INSERTABLE.items() if not _check(defined, name, call, required=False))
    if missing:
        absent = [name for name in HELPER_NEEDS if name not in defined]
        if absent:
            raise HarnessError(
                f"{BENCHMARK_UTILS} lacks {missing[0]}, and the version kernelgen would add needs "
                f"{', '.join(absent)}, which it does not define"
            )
    return BenchmarkHarness(UPSTREAM_MODELS if registry is not None else UPSTREAM, missing)


def _has_builders(definitions: dict[str, dict[str, ast.AST]]) -> bool:
    """Whether every builder of ``BUILDERS`` is a function of its module that takes the script's call; a checkout
    with some of them, or with other signatures, gets the script that calls none."""
    for name, (module, call) in BUILDERS.items():
        node = definitions[module].get(name)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not _fits(node, *call):
            return False
    return True


def _registry_definitions(utils: str, model_configs: str | None) -> dict[str, ast.AST] | None:
    """The module-level names of the checkout's model registry, where it has upstream's (``MODEL_REGISTRY``,
    ``get_benchmark_model_config``) and its utils parse the options that drive it; else None."""
    if model_configs is None:
        return None
    try:
        defined = _definitions(ast.parse(model_configs))
    except SyntaxError:
        return None
    registry = all(name in defined for name in MODEL_REGISTRY_NAMES)
    return defined if registry and all(f'"{o}"' in utils for o in REGISTRY_OPTIONS) else None


def _check(defined: dict[str, ast.AST], name: str, call: tuple[int, tuple[str, ...]] | None, required: bool) -> bool:
    """Whether ``name`` is there and takes the script's call; raises when it cannot be used (or is required)."""
    node = defined.get(name)
    if node is None:
        if required:
            raise HarnessError(f"{BENCHMARK_UTILS} has run_benchmarks but not {name}, which its scripts use")
        return False
    if call is not None and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _fits(node, *call):
        positional, keywords = call
        shape = f"{positional} positional argument(s)" if positional else f"the keywords {', '.join(keywords)}"
        raise HarnessError(f"{BENCHMARK_UTILS}: {name} does not take {shape} with the rest defaulted")
    return True


def add_helpers(source: str, harness: BenchmarkHarness) -> str:
    """``source`` (the target's utils) with kernelgen's versions of the helpers ``harness`` misses, each at its
    alphabetical place among the module's functions; the edit keeps every original line."""

    def insert(text: str) -> str:
        for name in harness.missing:
            text = add_function(text, HELPER_SOURCES[name].lstrip("\n"))
        return text

    try:
        result = insert(source)
        check_invariants(BENCHMARK_UTILS, source, result, insert)
    except InsertError as error:
        raise HarnessError(str(error)) from None
    return result
