"""PERFORMANCE_VALIDATION's target and next action (issue 16's rule), from figures, without a GPU."""

import pytest

from tools.kernelgen.validate.performance import block
from tools.kernelgen.validate.targets import describe
from tools.kernelgen.validate.targets import next_action
from tools.kernelgen.validate.targets import performance_target

GB = 1e9
COPY = 4.27e12  # bytes read + written per second


def test_the_target_is_compile_over_1_2_where_that_stays_under_the_copy_rate():
    # 0.72 GB in compile's 0.40 ms: compile / 1.2 = 0.333 ms needs 2.16 TB/s, well under 95% of the copy rate.
    target = performance_target(liger_ms=0.40, compile_ms=0.40, bytes_moved=0.72 * GB, copy_bytes_per_s=COPY)
    assert target.target_ms == pytest.approx(0.40 / 1.2)
    assert target.basis == "torch.compile / 1.2" and target.speedup_target == pytest.approx(1.2)
    assert target.delta_vs_target == pytest.approx(1 / 1.2 - 1)  # 16.7% short
    assert not target.met


def test_the_target_is_95_percent_of_the_copy_rate_where_compile_is_near_it():
    roofline = 0.72 * GB / (0.95 * COPY) * 1e3  # 0.1775 ms
    target = performance_target(liger_ms=0.1875, compile_ms=0.1900, bytes_moved=0.72 * GB, copy_bytes_per_s=COPY)
    assert target.target_ms == pytest.approx(roofline)
    assert target.basis.startswith("95% of the copy rate (torch.compile / 1.2 would need ")
    assert target.speedup_target == pytest.approx(0.19 / roofline)
    assert target.delta_vs_target == pytest.approx(roofline / 0.1875 - 1)
    met = performance_target(liger_ms=0.1700, compile_ms=0.1900, bytes_moved=0.72 * GB, copy_bytes_per_s=COPY)
    assert met.met and met.delta_vs_target > 0


def test_the_target_is_never_slower_than_compile():
    # compile beats the bytes estimate (it moved fewer bytes than the estimate assumes): the target is compile
    target = performance_target(liger_ms=0.2, compile_ms=0.15, bytes_moved=0.72 * GB, copy_bytes_per_s=COPY)
    assert target.target_ms == pytest.approx(0.15) and target.speedup_target == pytest.approx(1.0)
    assert target.basis == "torch.compile's own time (it beats 95% of the copy rate already)"


def test_without_compile_the_target_is_the_copy_rate_and_without_either_there_is_none():
    target = performance_target(liger_ms=0.2, compile_ms=None, bytes_moved=0.72 * GB, copy_bytes_per_s=COPY)
    assert target.speedup_target is None and target.basis.startswith("95% of the copy rate (no torch.compile")
    none = performance_target(liger_ms=0.2, compile_ms=None, bytes_moved=None, copy_bytes_per_s=None)
    assert none.target_ms is None and next_action(none, "geglu", True).startswith("measure torch.compile")
    assert describe(none, 0.2) == ["speedup_target: - (no torch.compile time and no copy rate)", "delta_vs_target: -"]


SHORT = performance_target(liger_ms=0.40, compile_ms=0.40, bytes_moved=0.72 * GB, copy_bytes_per_s=COPY)


def _kernel(name, us, compute, memory, bottleneck, occupancy=50.0):
    return {
        "name": name,
        "duration_us": us,
        "compute_pct": compute,
        "memory_pct": memory,
        "occupancy_pct": occupancy,
        "bottleneck": bottleneck,
    }


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"generated": True}, "tune tiling (python -m tools.kernelgen tune geglu), then profile with --ncu"),
        ({"generated": False}, "profile with --ncu (a hand-written kernel: its tiling is in its code)"),
        (
            {"generated": True, "step_ms": 0.40, "kernel_us": [100.0, 120.0]},
            "trim host work: the kernels take 0.220 of the step's 0.400 ms",
        ),
        (
            {
                "generated": True,
                "profiled": [_kernel("_fwd", 50, 30, 40, "latency"), _kernel("_bwd", 90, 88, 70, "compute")],
            },
            "profile with --ncu: compute bound (_bwd: SM 88%, memory 70%)",
        ),
        (
            {"generated": True, "profiled": [_kernel("_bwd", 90, 40, 65, "memory")]},
            "tune tiling: _bwd is memory bound at 65% of peak",
        ),
        (
            {"generated": True, "profiled": [_kernel("_bwd", 90, 40, 91, "memory")]},
            "move fewer bytes: _bwd is memory bound at 91% of peak",
        ),
        (
            {"generated": True, "profiled": [_kernel("_bwd", 90, 20, 30, "latency", occupancy=12.0)]},
            "tune tiling: _bwd is latency bound (SM 20%, memory 30%, occupancy 12%)",
        ),
    ],
)
def test_next_action_follows_the_bottleneck(kwargs, expected):
    assert next_action(SHORT, "geglu", **kwargs).startswith(expected)


def test_a_kernel_at_its_target_is_accepted_whatever_the_profiler_says():
    met = performance_target(liger_ms=0.30, compile_ms=0.40, bytes_moved=0.72 * GB, copy_bytes_per_s=COPY)
    assert next_action(met, "geglu", True, profiled=[_kernel("_bwd", 90, 88, 70, "compute")]) == "accept"


def test_the_block_ends_with_target_delta_and_next_action():
    report = {
        "device": "NVIDIA H200",
        "shape": [4096, 11008],
        "columns": "intermediate_size",
        "dtype": "bfloat16",
        "warmup": 10,
        "providers": {
            "liger": {"ms": 0.1875, "peak_mb": 86.0, "reps": 100},
            "torch": {"ms": 0.3153, "peak_mb": 344.0},
            "torch_compile": {"ms": 0.1738, "peak_mb": 258.0},
        },
        "speedup_vs_torch": 0.3153 / 0.1875,
        "speedup_vs_torch_compile": 0.1738 / 0.1875,
        "bytes_moved": 0.72 * GB,
        "bandwidth_tb_s": 3.84,
        "roofline_fraction": 0.8,
        "copy_bytes_per_s": COPY,
        "copy_fraction": 3.84e12 / COPY,
    }
    target = performance_target(0.1875, 0.1738, 0.72 * GB, COPY)
    tail = [*describe(target, 0.1875), f"next_action: {next_action(target, 'geglu', True)}"]
    lines = block(report, tail).splitlines()
    assert "copy rate: 4.27 TB/s (device-to-device, read + write), the kernel at 90% of it" in lines
    # compile (0.1738 ms) already beats 95% of the copy rate (0.1775 ms): the target is compile's own time
    assert lines[-3] == (
        "speedup_target: 1.00x vs torch_compile (target 0.1738 ms: torch.compile's own time (it beats 95% of the copy "
        "rate already))"
    )
    assert lines[-2] == "delta_vs_target: -7.3% (0.0137 ms over the target)"
    assert lines[-1] == "next_action: tune tiling (python -m tools.kernelgen tune geglu), then profile with --ncu"
