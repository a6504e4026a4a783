"""Speed and peak memory of one kernel in two libraries, the working tree's and a baseline's, in one process.

``python -m tools.kernelgen.validate.baseline_worker REPO NAME OUT.json BASELINE_SRC [--smoke]``. The working
tree's ``liger_kernel`` is imported, its modules are set aside, then the baseline's are imported from
``BASELINE_SRC``; each measurement runs with its own library installed in ``sys.modules`` and first on
``sys.path`` (the benchmark scripts import ``liger_kernel`` lazily, inside their setup). Both run through the
working tree's benchmark script of the kernel (``benchmark/scripts/benchmark_NAME.py``: its setup function, its
size dimension) and harness (``run_speed_benchmark``/``run_memory_benchmark``: forward, backward, full), at the
benchmark's shapes: the BT sweep at the default model's size on a GPU, the smoke shapes with ``--smoke``. The two
libraries alternate shape by shape, so drift of the GPU's clock hits both alike.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import json
import os
import sys

from pathlib import Path

import torch

CUDA = torch.cuda.is_available()
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

MODES = ("forward", "backward", "full")
PACKAGE = "liger_kernel"


def _ours(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


class Library:
    """One ``liger_kernel``: its source folder and, once loaded, its modules."""

    def __init__(self, label: str, src: Path, kernel: str):
        self.label = label
        self.src = Path(src).resolve()
        self.modules: dict = {}
        with self.active():
            for module in (PACKAGE, f"{PACKAGE}.ops", f"{PACKAGE}.ops.{kernel}", f"{PACKAGE}.transformers"):
                importlib.import_module(module)
            self.ops_file = sys.modules[f"{PACKAGE}.ops.{kernel}"].__file__

    @contextlib.contextmanager
    def active(self):
        """This library's modules in ``sys.modules`` (and its ``src`` first on ``sys.path``) inside the block."""
        others = {name: module for name, module in sys.modules.items() if _ours(name)}
        for name in others:
            del sys.modules[name]
        sys.modules.update(self.modules)
        sys.path.insert(0, str(self.src))
        try:
            yield
        finally:
            sys.path.remove(str(self.src))
            self.modules = {name: module for name, module in sys.modules.items() if _ours(name)}
            for name in self.modules:
                del sys.modules[name]
            sys.modules.update(others)


def benchmark_script(repo: Path, kernel: str):
    """The kernel's benchmark module and what its ``run_model_sweeps`` call says: setup function, size key, smoke
    size."""
    path = repo / "benchmark" / "scripts" / f"benchmark_{kernel}.py"
    if not path.exists():
        raise SystemExit(f"no {path.relative_to(repo)}: the comparison runs the kernel's benchmark")
    call = next(
        node
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "run_model_sweeps"
    )
    spec = importlib.util.spec_from_file_location(f"kernelgen_benchmark_{kernel}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # The call's arguments, evaluated in the script's namespace (a literal or a module constant).
    keywords = {
        k.arg: eval(compile(ast.Expression(k.value), str(path), "eval"), module.__dict__)  # noqa: S307
        for k in call.keywords
        if k.arg in ("size_key", "smoke_size")
    }
    setup = getattr(module, call.args[1].id)
    return setup, keywords["size_key"], keywords["smoke_size"]


def shapes(setup, size_key: str, smoke_size: int, smoke: bool) -> tuple[list[int], int, str]:
    """BT values, the size and the dtype name the kernel's benchmark uses."""
    from benchmark.scripts import utils

    model = utils.get_benchmark_model_config(None)
    device = "cuda" if CUDA else "cpu"
    dtype = utils.benchmark_dtype_name(model.dtype, device)
    if smoke:
        return list(utils.CPU_SEQ_LEN_SWEEP), smoke_size, dtype
    size = getattr(model, size_key)
    probe = utils.SingleBenchmarkRunInput(utils.PROBE_BT, "torch", "full", {size_key: size, "dtype": dtype})
    probe_bytes = utils.full_pass_peak_bytes(setup, probe)
    return (
        utils.compute_seq_len_sweep_config(model, probe_bytes / utils.PROBE_BT, max_seq_len=utils.MAX_BT),
        size,
        dtype,
    )


def measure(library: Library, setup, bt: int, size_key: str, size: int, dtype: str, mode: str) -> dict:
    from benchmark.scripts import utils

    with library.active():
        run = utils.SingleBenchmarkRunInput(bt, "liger", mode, {size_key: size, "dtype": dtype})
        tensors, forward = setup(run)
        speed = utils.run_speed_benchmark(forward, mode, tensors)
        tensors, forward = setup(run)
        memory = utils.run_memory_benchmark(forward, mode, tensors)
    if CUDA:
        torch.cuda.empty_cache()
    return {"ms": speed.y_50, "mb": memory.y_50}


def run(repo: Path, kernel: str, baseline_src: Path, smoke: bool) -> dict:
    sys.path.insert(0, str(repo))  # benchmark.scripts of the working tree
    current = Library("working tree", repo / "src", kernel)
    baseline = Library("baseline", baseline_src, kernel)
    setup, size_key, smoke_size = benchmark_script(repo, kernel)
    with current.active():
        bt_values, size, dtype = shapes(setup, size_key, smoke_size, smoke)
    rows = []
    for index, bt in enumerate(bt_values):
        for mode in MODES:
            order = (current, baseline) if index % 2 == 0 else (baseline, current)
            figures = {library.label: measure(library, setup, bt, size_key, size, dtype, mode) for library in order}
            rows.append(
                {
                    "BT": bt,
                    "mode": mode,
                    "current_ms": figures["working tree"]["ms"],
                    "baseline_ms": figures["baseline"]["ms"],
                    "current_mb": figures["working tree"]["mb"],
                    "baseline_mb": figures["baseline"]["mb"],
                }
            )
    return {
        "device": torch.cuda.get_device_name() if CUDA else "cpu (Triton interpreter, wall clock)",
        "cuda": CUDA,
        "smoke": smoke,
        "dtype": dtype,
        "size_key": size_key,
        "size": size,
        "current_ops": current.ops_file,
        "baseline_ops": baseline.ops_file,
        "rows": rows,
    }


def main(argv: list[str]) -> int:
    repo, kernel, out, baseline_src = Path(argv[0]), argv[1], Path(argv[2]), Path(argv[3])
    smoke = "--smoke" in argv[4:]
    if not CUDA and not smoke:
        out.write_text(json.dumps({"skipped": "no GPU"}), encoding="utf-8")
        return 0
    out.write_text(json.dumps(run(repo, kernel, baseline_src, smoke), indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
