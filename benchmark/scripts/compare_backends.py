"""One process, one table: a generated TileLang kernel against the generated Triton kernel of the same reference,
eager torch and torch.compile of that reference, with the device-to-device copy rate as the roofline.

    python benchmark/scripts/compare_backends.py --kernel geglu_tl=geglu --kernel dyt_tl=dyt \
        --kernel snake_tl=snake --sizes 4096 14336 --bt 16384

Each ``--kernel`` pairs a tier-1 kernel generated with ``--backend tilelang`` with one generated from the same
reference in Triton (their generation records give the reference and the arguments; ``-`` for no Triton
kernel). Rows (providers ``tilelang``, ``triton``, ``torch``, ``torch_compile``; speed in ms and memory in MB, full
forward + backward, bf16, ``[BT, size]`` inputs) go to the results CSV; a markdown table with TB/s is printed, bytes
counted as reads and writes of ``[BT, size]`` tensors: the forward reads the inputs and writes the outputs, the
backward reads the outputs' gradients and the inputs and writes the inputs' gradients.
"""

import argparse
import sys

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmark.scripts.compare_with_upstream import copy_rate_tb_s
from benchmark.scripts.compare_with_upstream import gpu_step_ms
from benchmark.scripts.compare_with_upstream import load_record
from benchmark.scripts.compare_with_upstream import measure
from benchmark.scripts.compare_with_upstream import setup
from benchmark.scripts.utils import SingleBenchmarkRunInput

PROVIDERS = ["tilelang", "triton", "torch", "torch_compile"]


def _setup(tilelang_name: str, triton_name: str, run: SingleBenchmarkRunInput):
    """Inputs and forward of one provider: the two generated kernels run as compare_with_upstream's ``liger``."""
    kernels = {"tilelang": tilelang_name, "triton": triton_name}
    name = kernels.get(run.kernel_provider, tilelang_name)
    provider = "liger" if run.kernel_provider in kernels else run.kernel_provider
    as_run = SingleBenchmarkRunInput(run.x, provider, run.kernel_operation_mode, run.extra_benchmark_config)
    return setup(name, "-", None, as_run)


def tensors_moved(record: dict) -> int:
    """``[BT, size]`` tensors read or written by one forward + backward of a tier-1 kernel."""
    inputs, outputs = len(record["inputs"]), len(record["outputs"])
    grads = sum(bool(spec["requires_grad"]) for spec in record["inputs"])
    return (inputs + outputs) + (outputs + inputs + grads)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", required=True, help="TILELANG=TRITON (TRITON may be -)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 14336])
    parser.add_argument("--bt", type=int, default=16384)
    parser.add_argument("--csv", default=None, help="results CSV (default: the harness's)")
    parser.add_argument("--providers", nargs="+", default=PROVIDERS, choices=PROVIDERS)
    parser.add_argument("--gpu-time", action="store_true", help="also the GPU-only time (host kept out) per step")
    parser.add_argument("--speed-only", action="store_true", help="skip the peak-memory measurement")
    args = parser.parse_args(argv)

    rate = copy_rate_tb_s()
    print(f"device-to-device copy: {rate:.2f} TB/s", flush=True)
    table = ["| kernel | size | provider | full ms | peak MB | TB/s | % copy | vs triton | GPU-only ms |"]
    table.append("|---|---|---|---|---|---|---|---|---|")
    for pair in args.kernel:
        tilelang_name, triton_name = pair.split("=")
        record = load_record(tilelang_name)
        if record.get("backend") != "tilelang":
            parser.error(f"{tilelang_name} is not a TileLang kernel (its record says backend {record.get('backend')})")
        providers = [p for p in args.providers if p != "triton" or triton_name != "-"]
        for size in args.sizes:
            config = {"hidden_size": size, "dtype": "bfloat16", "model": "compare_backends"}
            figures = measure(
                lambda run: _setup(tilelang_name, triton_name, run), tilelang_name, providers, config, args.bt,
                args.csv, args.speed_only,
            )  # fmt: skip
            if args.gpu_time:
                for provider in providers:
                    run = SingleBenchmarkRunInput(args.bt, provider, "full", dict(config))
                    inputs, forward = _setup(tilelang_name, triton_name, run)
                    figures.setdefault(provider, {})["gpu"] = gpu_step_ms(forward, inputs)
            moved = tensors_moved(record) * args.bt * size * 2  # bf16
            triton_ms = figures.get("triton", {}).get("speed")
            for provider in providers:
                ms = figures.get(provider, {}).get("speed")
                if ms is None:
                    continue
                mb = figures[provider].get("memory", float("nan"))
                tb_s = moved / (ms * 1e-3) / 1e12
                versus = f"{triton_ms / ms:.2f}x" if triton_ms else "-"
                gpu = figures[provider].get("gpu")
                gpu_text = f"{gpu:.3f}" if gpu is not None else "-"
                table.append(
                    f"| {tilelang_name} | {size} | {provider} | {ms:.3f} | {mb:.0f} | {tb_s:.2f} | {tb_s / rate:.0%} "
                    f"| {versus} | {gpu_text} |"
                )
    print("\n".join(table))


if __name__ == "__main__":
    main()
