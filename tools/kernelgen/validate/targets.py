"""What "fast enough" means for a kernel, and what to do next when it is not (issue 16's rule).

The target is torch.compile's time / 1.2; where that would need more than 95% of the device-to-device copy rate
(compile already moves the bytes near the copy rate), 95% of the copy rate instead, and never slower than compile.
``speedup_target`` is the target as a speed-up over torch.compile; ``delta_vs_target`` is how far the kernel's speed
is from the target's, as a fraction (``target_ms / kernel_ms - 1``: -0.2 is 20% short, positive is ahead).
``next_action`` says what to do: ``accept``, tune the tiling, trim host work, or what the profiler's bottleneck
points at. Pure arithmetic on the performance worker's figures (and ncu's, when it ran), so it is tested on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

COMPILE_FACTOR = 1.2
ROOFLINE_FRACTION = 0.95
HOST_GAP = 0.7  # kernels covering less than this fraction of the step: the host's launches leave the GPU idle
MEMORY_SATURATED = 80.0  # ncu memory throughput (% of peak) above which a memory-bound kernel has little to gain


@dataclass(frozen=True)
class Target:
    target_ms: float | None
    basis: str  # how the target was set, in words
    speedup_target: float | None  # over torch.compile
    delta_vs_target: float | None

    @property
    def met(self) -> bool:
        return self.delta_vs_target is not None and self.delta_vs_target >= 0.0


def performance_target(
    liger_ms: float | None, compile_ms: float | None, bytes_moved: float | None, copy_bytes_per_s: float | None
) -> Target:
    roofline_ms = None
    if bytes_moved and copy_bytes_per_s:
        roofline_ms = bytes_moved / (ROOFLINE_FRACTION * copy_bytes_per_s) * 1e3
    if compile_ms:
        target_ms, basis = compile_ms / COMPILE_FACTOR, f"torch.compile / {COMPILE_FACTOR:g}"
        if roofline_ms is not None and target_ms < roofline_ms:
            needed = 100 * ROOFLINE_FRACTION * roofline_ms / target_ms
            target_ms = min(roofline_ms, compile_ms)
            basis = (
                f"{100 * ROOFLINE_FRACTION:.0f}% of the copy rate (torch.compile / {COMPILE_FACTOR:g} would need "
                f"{needed:.0f}% of it)"
                if target_ms == roofline_ms
                else f"torch.compile's own time (it beats {100 * ROOFLINE_FRACTION:.0f}% of the copy rate already)"
            )
    elif roofline_ms is not None:
        target_ms, basis = roofline_ms, f"{100 * ROOFLINE_FRACTION:.0f}% of the copy rate (no torch.compile time)"
    else:
        return Target(None, "no torch.compile time and no copy rate", None, None)
    speedup_target = compile_ms / target_ms if compile_ms else None
    delta = target_ms / liger_ms - 1.0 if liger_ms else None
    return Target(target_ms, basis, speedup_target, delta)


def next_action(
    target: Target,
    name: str,
    generated: bool,
    step_ms: float | None = None,
    kernel_us: list[float] | None = None,
    profiled: list[dict] | None = None,
) -> str:
    """``accept`` or the next thing to try. ``kernel_us``: GPU time of each kernel of one step (torch.profiler);
    ``profiled``: ncu's per-kernel figures (``ncu.summarize_kernels``), when it ran."""
    if target.target_ms is None:
        return "measure torch.compile (it failed here) to set a target"
    if target.met:
        return "accept"
    if profiled:
        worst = max(profiled, key=lambda kernel: kernel.get("duration_us") or 0.0)
        label = worst["name"]
        sm, memory, occupancy = worst.get("compute_pct"), worst.get("memory_pct"), worst.get("occupancy_pct")
        if worst["bottleneck"] == "compute":
            return (
                f"profile with --ncu: compute bound ({label}: SM {sm:.0f}%, memory {memory:.0f}%): cheaper math "
                f"(fewer transcendental ops, libdevice where it exists)"
            )
        if worst["bottleneck"] == "latency":
            return (
                f"tune tiling: {label} is latency bound (SM {sm:.0f}%, memory {memory:.0f}%, occupancy "
                f"{occupancy:.0f}%): more work per program or more programs in flight"
            )
        if memory is not None and memory >= MEMORY_SATURATED:
            return (
                f"move fewer bytes: {label} is memory bound at {memory:.0f}% of peak (fuse passes, in-place "
                f"gradients, no saved intermediates)"
            )
        return f"tune tiling: {label} is memory bound at {memory:.0f}% of peak"
    if step_ms and kernel_us and sum(kernel_us) < HOST_GAP * step_ms * 1e3:
        return (
            f"trim host work: the kernels take {sum(kernel_us) / 1e3:.3f} of the step's {step_ms:.3f} ms "
            f"(launches, allocations, Python between kernels)"
        )
    if generated:
        return f"tune tiling (python -m tools.kernelgen tune {name}), then profile with --ncu"
    return "profile with --ncu (a hand-written kernel: its tiling is in its code)"


def describe(target: Target, liger_ms: float | None) -> list[str]:
    """The block's ``speedup_target`` and ``delta_vs_target`` lines."""
    if target.target_ms is None:
        return ["speedup_target: - (no torch.compile time and no copy rate)", "delta_vs_target: -"]
    vs = f"{target.speedup_target:.2f}x vs torch_compile" if target.speedup_target else "-"
    lines = [f"speedup_target: {vs} (target {target.target_ms:.4f} ms: {target.basis})"]
    if target.delta_vs_target is None or not liger_ms:
        lines.append("delta_vs_target: - (the kernel has no time)")
        return lines
    gap = liger_ms - target.target_ms
    where = f"{gap:.4f} ms over the target" if gap > 0 else f"{-gap:.4f} ms under the target"
    lines.append(f"delta_vs_target: {100 * target.delta_vs_target:+.1f}% ({where})")
    return lines
