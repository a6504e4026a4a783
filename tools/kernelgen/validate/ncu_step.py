"""One forward+backward step of a kernel, bracketed for Nsight Compute (``ncu --profile-from-start off``).

``python -m tools.kernelgen.validate.ncu_step REPO NAME [SPEC]``: the performance worker's shape, dtype and step
(``performance_worker``), two warm-up steps outside the profiled range (Triton compiles there), then
``cudaProfilerStart``, one step, ``cudaProfilerStop``. It prints nothing on stdout, where ncu writes its CSV.
"""

from __future__ import annotations

import sys

from pathlib import Path

import torch

from tools.kernelgen.profile import benchmark_size
from tools.kernelgen.validate.harness import KernelUnderTest
from tools.kernelgen.validate.harness import read_spec
from tools.kernelgen.validate.performance_worker import BT
from tools.kernelgen.validate.performance_worker import step_factory

WARMUP = 2


def main(argv: list[str]) -> int:
    repo, name = Path(argv[0]), argv[1]
    spec = read_spec(argv[2] if len(argv) > 2 else None)
    kut = KernelUnderTest(repo, name, "cuda", spec)
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    _, cols = benchmark_size(kut.profile)
    case = kut.make_case(BT, cols, seed=50, dtype=dtype, label="ncu")
    make_args, step = step_factory(kut, case, dtype, "liger")
    for _ in range(WARMUP):
        step(*make_args())
    args = make_args()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    step(*args)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"ncu_step: profiled one step of {name} at {BT}x{cols} {dtype}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
