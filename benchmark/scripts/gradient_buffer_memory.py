"""Peak GPU memory of a generated row kernel's forward + backward beside upstream Liger's kernel, with the output
gradient the caller's (``y.backward(dy)``, dy kept by the caller) and with it autograd's (handed over by the
backward of the op after the kernel, as in training): once with y still held by the caller, once with y consumed
by that op and dropped (a training step's norm output, which the next layer's backward has freed by the time the
norm's backward runs). A generated backward writes d(x) over d(y) in the last two cases only, leaving the caller's
dy intact; upstream's in-place RMSNorm writes over it in all three. So the caller's case costs a generated
RMSNorm one [rows, columns] tensor more than upstream's, by design. The consumed case is training's peak: one
such tensor for either RMSNorm.

    python benchmark/scripts/gradient_buffer_memory.py --upstream DIR --helper-dir DIR \
        --kernel rms_norm_gen=rms_norm --kernel layer_norm_gen=layer_norm --kernel l2_normalize_gen=- --sizes 4096 14336

Arguments and kernels as ``compare_with_upstream.py`` sets them up (``-``: no upstream kernel); MiB above what was
allocated before the forward.
"""

import argparse
import sys

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from benchmark.scripts.compare_with_upstream import UPSTREAM
from benchmark.scripts.compare_with_upstream import Consume
from benchmark.scripts.compare_with_upstream import _first
from benchmark.scripts.compare_with_upstream import add_common_arguments
from benchmark.scripts.compare_with_upstream import setup
from benchmark.scripts.compare_with_upstream import upstream_from
from benchmark.scripts.utils import SingleBenchmarkRunInput


class _HandOver(torch.autograd.Function):
    """The identity, whose backward hands autograd a new gradient buffer (a copy of the caller's)."""

    @staticmethod
    def forward(ctx, y):
        return y.view_as(y)

    @staticmethod
    def backward(ctx, grad):
        return grad.clone()


def peak_mib(run) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    run()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, upstream_required=False)
    args = parser.parse_args()
    up = upstream_from(args)
    for pair in args.kernel:
        name, upstream_key = pair.split("=")
        providers = ["liger"] + (["liger_upstream"] if up is not None and upstream_key in UPSTREAM else [])
        for size in args.sizes:
            for provider in providers:
                config = {"hidden_size": size}
                inputs, forward = setup(
                    name, upstream_key, up, SingleBenchmarkRunInput(args.bt, provider, "full", config)
                )
                dy = torch.randn(args.bt, size, device="cuda", dtype=torch.bfloat16)
                for label, run in (
                    ("caller's dy", lambda: _first(forward()).backward(dy)),
                    ("autograd's dy", lambda: _HandOver.apply(_first(forward())).backward(dy)),
                    ("autograd's dy, y consumed", lambda: Consume.apply(_first(forward()), dy).backward()),
                ):
                    run()  # compile and warm up
                    for t in inputs:
                        t.grad = None
                    print(f"{name} {provider} {args.bt}x{size}, {label}: {peak_mib(run):.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
