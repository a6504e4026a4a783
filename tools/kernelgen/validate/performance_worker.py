"""Forward+backward speed and peak memory of a kernel against its reference (eager and torch.compile), on CUDA.

``python -m tools.kernelgen.validate.performance_worker REPO NAME OUT.json [SPEC] [--providers liger,torch]``
(``tune`` times its candidates with ``liger`` alone). Method (rules/performance.md): one
realistic shape (BT=4096 rows; the profile's benchmark size for the columns), bf16 where the GPU has it, 10
warm-up steps (torch.compile compiles there), then >= 100 timed steps, each between two CUDA events on the stream,
with fresh input copies made before the first event (kernels write gradients over their inputs) and a GPU-side
wait queued before it, so the host has queued the whole step before the GPU reaches it; the median is reported.
Peak memory is ``max_memory_allocated`` during one step minus what was allocated before it. The device-to-device
copy rate (bytes read + written per second, the same events) is the memory roofline the target is set against.
"""

from __future__ import annotations

import json
import statistics
import sys

from pathlib import Path

import torch

from tools.kernelgen.profile import benchmark_size
from tools.kernelgen.validate.harness import KernelUnderTest
from tools.kernelgen.validate.harness import read_spec

BT = 4096
WARMUP = 10
REPS = 100
H200_PEAK_BYTES_PER_S = 4.8e12  # HBM3e
QUEUE_AHEAD_CYCLES = 4_000_000  # ~2 ms of GPU clock: more than one step's host time
PROVIDERS = ("liger", "torch", "torch_compile")
COPY_BYTES = 2**30  # read + written by the copy-rate measurement
COPY_REPS = 20


def step_factory(kut: KernelUnderTest, case, dtype, provider: str):
    """(make_args, step): make_args copies the inputs as fresh leaves; step runs forward and backward."""
    profile = kut.profile
    grads_cache: dict = {}

    def make_args():
        inputs = [kut.leaf(x, spec.requires_grad) for x, spec in zip(case.inputs, profile.inputs)]
        params = [torch.nn.Parameter(p.detach().clone()) for p in case.params]
        return inputs, params

    if provider == "liger":

        def forward(inputs, params):
            return kut.call_kernel(inputs, params, case.hyper)

    else:
        params_for_reference = make_args()[1]
        reference = kut.reference_callable(
            kut.parameter_size(case.inputs[0].shape), case.hyper, dtype, params_for_reference
        )
        owns = kut.owns_params
        if provider == "torch_compile":
            reference = torch.compile(reference)

        forward_hypers = kut.forward_hypers(case.hyper)

        def forward(inputs, params):
            return reference(*inputs, **forward_hypers) if owns else reference(*inputs, *params, **forward_hypers)

    def step(inputs, params):
        outputs = forward(inputs, params)
        outputs = [o for o in (outputs if isinstance(outputs, (tuple, list)) else (outputs,)) if o is not None]
        outputs = [o for o in outputs if o.requires_grad]
        key = tuple((tuple(o.shape), o.dtype) for o in outputs)
        if key not in grads_cache:
            grads_cache[key] = kut.grad_outputs(outputs, case.seed)
        torch.autograd.backward(outputs, grads_cache[key])

    return make_args, step


def measure(kut: KernelUnderTest, case, dtype, provider: str) -> dict:
    make_args, step = step_factory(kut, case, dtype, provider)
    for _ in range(WARMUP):
        step(*make_args())
    torch.cuda.synchronize()
    events = []
    for _ in range(REPS):
        args = make_args()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # Keep the GPU busy while the host queues the step: without this the events would time the host's launch
        # and autograd overhead (large for torch.compile's wrappers) rather than the kernels.
        torch.cuda._sleep(QUEUE_AHEAD_CYCLES)
        start.record()
        step(*args)
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    times = [start.elapsed_time(end) for start, end in events]
    args = make_args()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    step(*args)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    return {"ms": statistics.median(times), "ms_min": min(times), "peak_mb": peak / 2**20, "reps": REPS}


def copy_rate() -> float:
    """Device-to-device copy, bytes read plus written per second (median of CUDA-event timings)."""
    source = torch.empty(COPY_BYTES // 4, dtype=torch.bfloat16, device="cuda")
    destination = torch.empty_like(source)
    destination.copy_(source)
    times = []
    for _ in range(COPY_REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(QUEUE_AHEAD_CYCLES // 4)
        start.record()
        destination.copy_(source)
        end.record()
        times.append((start, end))
    torch.cuda.synchronize()
    ms = statistics.median(start.elapsed_time(end) for start, end in times)
    del source, destination
    torch.cuda.empty_cache()
    return COPY_BYTES / (ms * 1e-3)


def kernel_breakdown(kut: KernelUnderTest, case, dtype) -> list[dict]:
    """GPU time of each kernel in one liger step (torch.profiler), longest first: where the step's time goes."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile

    make_args, step = step_factory(kut, case, dtype, "liger")
    step(*make_args())  # a fresh factory makes its upstream gradients on the first step: keep that out of the profile
    args = make_args()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(*args)
        torch.cuda.synchronize()
    kernels = [
        {"name": event.key, "us": event.self_device_time_total / event.count, "calls": event.count}
        for event in prof.key_averages()
        if event.self_device_time_total > 0
    ]
    return sorted(kernels, key=lambda kernel: -kernel["us"] * kernel["calls"])


def bytes_moved(kut: KernelUnderTest, rows: int, cols: int, element_size: int) -> int:
    """Minimum HBM traffic of forward+backward: every tensor read or written once per pass."""
    n = rows * cols
    if kut.tier == 3:
        # forward reads the logits and writes the gradient over them; backward is a no-op at grad_output == 1
        return 2 * n * element_size
    n_in = len(kut.profile.inputs)
    n_out = len(kut.profile.outputs)
    n_grad = len(kut.profile.grad_inputs)
    forward = (n_in + n_out) * n
    backward = (n_in + n_out + n_grad) * n  # reads inputs and grad_output(s), writes input gradients
    return (forward + backward) * element_size


def run(repo: Path, name: str, spec: dict | None = None, providers: tuple[str, ...] = PROVIDERS) -> dict:
    kut = KernelUnderTest(repo, name, "cuda", spec)
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    key, cols = benchmark_size(kut.profile)
    case = kut.make_case(BT, cols, seed=50, dtype=dtype, label="performance")
    report = {
        "device": torch.cuda.get_device_name(),
        "shape": [BT, cols],
        "columns": key,
        "dtype": str(dtype).replace("torch.", ""),
        "warmup": WARMUP,
        "providers": {},
    }
    report["copy_bytes_per_s"] = copy_rate()
    for provider in providers:
        try:
            report["providers"][provider] = measure(kut, case, dtype, provider)
        except Exception as error:  # torch.compile may not handle a reference: report it, keep the others
            lines = str(error).strip().splitlines()
            report["providers"][provider] = {"error": f"{type(error).__name__}: {lines[0] if lines else ''}"}
        torch.cuda.empty_cache()
    liger = report["providers"]["liger"]
    if "ms" in liger:
        report["liger_kernels"] = kernel_breakdown(kut, case, dtype)
        moved = bytes_moved(kut, BT, cols, torch.tensor([], dtype=dtype).element_size())
        report["bytes_moved"] = moved
        report["bandwidth_tb_s"] = moved / (liger["ms"] * 1e-3) / 1e12
        report["roofline_fraction"] = report["bandwidth_tb_s"] * 1e12 / H200_PEAK_BYTES_PER_S
        report["copy_fraction"] = report["bandwidth_tb_s"] * 1e12 / report["copy_bytes_per_s"]
        for provider in ("torch", "torch_compile"):
            other = report["providers"].get(provider, {})
            if "ms" in other:
                report[f"speedup_vs_{provider}"] = other["ms"] / liger["ms"]
    return report


def main(argv: list[str]) -> int:
    repo, name, out = Path(argv[0]), argv[1], Path(argv[2])
    if not torch.cuda.is_available():
        out.write_text(json.dumps({"skipped": "no GPU"}), encoding="utf-8")
        return 0
    rest = argv[3:]
    providers = PROVIDERS
    if "--providers" in rest:
        at = rest.index("--providers")
        providers = tuple(rest[at + 1].split(","))
        rest = rest[:at] + rest[at + 2 :]
    spec = read_spec(rest[0] if rest else None)
    out.write_text(json.dumps(run(repo, name, spec, providers), indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
