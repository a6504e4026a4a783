"""Stage 5: speed and peak memory on a GPU (``performance_worker`` in a subprocess); skipped without one.

The ``PERFORMANCE_VALIDATION`` block ends with ``speedup_target``, ``delta_vs_target`` and ``next_action``
(``targets.py``: torch.compile / 1.2, or 95% of the copy rate where compile is already near it)."""

from __future__ import annotations

from tools.kernelgen.validate.report import FAIL
from tools.kernelgen.validate.report import PASS
from tools.kernelgen.validate.report import SKIP
from tools.kernelgen.validate.report import WARN
from tools.kernelgen.validate.report import StageResult
from tools.kernelgen.validate.report import Target
from tools.kernelgen.validate.workers import WorkerFailed
from tools.kernelgen.validate.workers import run_worker

WORKER = "tools.kernelgen.validate.performance_worker"
NO_GPU = "no GPU; run validate on a CUDA device"
TIMEOUT_S = 1200
PROVIDERS = ("liger", "torch", "torch_compile")
KERNELS_SHOWN = 6  # the per-kernel lines of one liger step (torch.profiler), longest first


def block(report: dict, tail: list[str] = ()) -> str:
    rows, cols = report["shape"]
    lines = [
        "PERFORMANCE_VALIDATION",
        f"device: {report['device']}  shape: {rows}x{cols} ({report['columns']})  dtype: {report['dtype']}  "
        f"warm-up: {report['warmup']}  reps: {report['providers']['liger'].get('reps', '-')} (median, CUDA events)",
    ]
    for provider in PROVIDERS:
        figures = report["providers"].get(provider)
        if figures is None:
            continue
        if "ms" in figures:
            lines.append(f"{provider + ':':<15} {figures['ms']:9.4f} ms   peak {figures['peak_mb']:10.1f} MB")
        else:
            lines.append(f"{provider + ':':<15} failed: {figures['error']}")
    for provider in ("torch", "torch_compile"):
        speedup = report.get(f"speedup_vs_{provider}")
        lines.append(f"speedup vs {provider}: " + (f"{speedup:.2f}x" if speedup else "-"))
    liger, torch_eager = report["providers"]["liger"], report["providers"].get("torch", {})
    if "peak_mb" in liger and torch_eager.get("peak_mb"):
        lines.append(f"memory vs torch: {liger['peak_mb'] / torch_eager['peak_mb']:.2f}x of eager's peak")
    if "bandwidth_tb_s" in report:
        lines.append(
            f"bandwidth: {report['bandwidth_tb_s']:.2f} TB/s, {100 * report['roofline_fraction']:.0f}% of the H200's "
            f"4.8 TB/s (estimate from {report['bytes_moved'] / 1e9:.2f} GB moved)"
        )
    if "copy_bytes_per_s" in report:
        share = f", the kernel at {100 * report['copy_fraction']:.0f}% of it" if "copy_fraction" in report else ""
        lines.append(f"copy rate: {report['copy_bytes_per_s'] / 1e12:.2f} TB/s (device-to-device, read + write){share}")
    for kernel in report.get("liger_kernels", [])[:KERNELS_SHOWN]:
        calls = f" x{kernel['calls']}" if kernel["calls"] > 1 else ""
        lines.append(f"  liger kernel {kernel['us']:9.1f} us{calls:<4} {kernel['name'][:80]}")
    lines.extend(tail)
    return "\n".join(lines)


def target_of(report: dict):
    """The report's target (``targets.performance_target``) from its liger and torch.compile times."""
    from tools.kernelgen.validate.targets import performance_target

    providers = report["providers"]
    return performance_target(
        providers["liger"].get("ms"),
        providers.get("torch_compile", {}).get("ms"),
        report.get("bytes_moved"),
        report.get("copy_bytes_per_s"),
    )


def run(target: Target, cuda: bool, profiled: list[dict] | None = None) -> StageResult:
    """``profiled``: ncu's per-kernel figures from the ``--ncu`` stage, which sharpen ``next_action``."""
    from tools.kernelgen.validate.targets import describe
    from tools.kernelgen.validate.targets import next_action

    if not cuda:
        return StageResult("performance", SKIP, NO_GPU)
    try:
        report = run_worker(WORKER, target, "performance.json", timeout=TIMEOUT_S)
    except WorkerFailed as error:
        return StageResult("performance", FAIL, f"the performance run crashed: {error}", crashed=True)
    if "skipped" in report:
        return StageResult("performance", SKIP, NO_GPU)
    liger = report["providers"]["liger"]
    goal = target_of(report)
    kernels = report.get("liger_kernels", [])
    action = next_action(
        goal,
        target.name,
        generated=target.recorded,
        step_ms=liger.get("ms"),
        kernel_us=[k["us"] * k["calls"] for k in kernels],
        profiled=profiled,
    )
    tail = [*describe(goal, liger.get("ms")), f"next_action: {action}"]
    text = block(report, tail)
    figures = {
        "speedup": report.get("speedup_vs_torch"),
        "speedup_compile": report.get("speedup_vs_torch_compile"),
        "liger_ms": liger.get("ms"),
        "peak_mb": liger.get("peak_mb"),
        "speedup_target": goal.speedup_target,
        "delta_vs_target": goal.delta_vs_target,
        "target_ms": goal.target_ms,
        "next_action": action,
        "target_line": " / ".join(tail),
    }
    if "ms" not in liger:
        print(text + "\noverall: FAIL")
        return StageResult(
            "performance", FAIL, f"the kernel failed at the benchmark shape: {liger['error']}", figures, crashed=True
        )
    speedup = report.get("speedup_vs_torch")
    verdict = WARN if speedup is not None and speedup < 1.0 else PASS
    print(text + f"\noverall: {verdict}")
    summary = f"{liger['ms']:.3f} ms fwd+bwd, " + (f"{speedup:.2f}x vs eager" if speedup else "eager failed")
    if report.get("speedup_vs_torch_compile"):
        summary += f", {report['speedup_vs_torch_compile']:.2f}x vs torch.compile"
    summary += f"; next_action: {action}"
    return StageResult("performance", verdict, summary, figures)
