"""``--ncu``: the parser of Nsight Compute's CSV (both layouts), the bottleneck rule, and the one-line skips.

The samples are written from ncu's documented formats: ``--csv --page raw`` (a header of launch attributes and
metric names, a units row, one row per launch) and the details page (one row per metric: ``Metric Name``,
``Metric Unit``, ``Metric Value``), with the ``==PROF==`` lines and program output ncu mixes into stdout."""

import stat
import sys

import pytest

from tools.kernelgen.validate import ncu

ATTRIBUTES = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC"'
METRIC_NAMES = ",".join(f'"{m}"' for m in ncu.METRICS)
RAW_PAGE = f"""==PROF== Connected to process 4242 (/usr/bin/python3.12)
ncu_step: warming up
==PROF== Profiling "_geglu_forward_kernel" - 0: 0%....50%....100% - 9 passes
==PROF== Profiling "_geglu_backward_kernel" - 1: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 4242
{ATTRIBUTES},{METRIC_NAMES}
"","","","","","","","","","","","usecond","%","%","%","%"
"0","4242","python3.12","127.0.0.1","_geglu_forward_kernel","1","7","(256, 1, 1)","(1376, 4, 1)","0","9.0","107.49","71.20","76.85","75.02","88.13"
"1","4242","python3.12","127.0.0.1","_geglu_backward_kernel","1","7","(256, 1, 1)","(1376, 4, 1)","0","9.0","1,168.10","38.40","91.70","90.55","86.02"
"2","4242","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>","1","7","(128, 1, 1)","(16, 1, 1)","0","9.0","2.02","3.10","5.40","1.25","n/a"
"""
DETAILS_PAGE = """==PROF== Connected to process 77
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","77","python","host","_dyt_backward_kernel","1","7","(256, 1, 1)","(264, 4, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","40,128"
"0","77","python","host","_dyt_backward_kernel","1","7","(256, 1, 1)","(264, 4, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","22.50"
"0","77","python","host","_dyt_backward_kernel","1","7","(256, 1, 1)","(264, 4, 1)","0","9.0","Command line profiler metrics","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","%","31.75"
"0","77","python","host","_dyt_backward_kernel","1","7","(256, 1, 1)","(264, 4, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","24.00"
"1","77","python","host","_dyt_backward_kernel","1","7","(256, 1, 1)","(264, 4, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","120,384"
"1","77","python","host","_dyt_backward_kernel","1","7","(256, 1, 1)","(264, 4, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","82.50"
"1","77","python","host","_dyt_backward_kernel","1","7","(256, 1, 1)","(264, 4, 1)","0","9.0","Command line profiler metrics","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","%","61.75"
"1","77","python","host","_dyt_backward_kernel","1","7","(256, 1, 1)","(264, 4, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","48.00"
==PROF== Disconnected from process 77
"""


def test_the_raw_page_gives_one_launch_per_row_with_units_applied():
    launches = ncu.parse_csv(RAW_PAGE)
    assert [launch.name for launch in launches] == [
        "_geglu_forward_kernel",
        "_geglu_backward_kernel",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
    ]
    forward, backward, fill = launches
    assert forward.metrics[ncu.DURATION] == pytest.approx(107.49)  # usecond
    assert backward.metrics[ncu.DURATION] == pytest.approx(1168.10)  # thousands separator
    assert forward.metrics[ncu.COMPUTE] == pytest.approx(71.20) and forward.metrics[ncu.DRAM] == pytest.approx(75.02)
    assert fill.metrics[ncu.OCCUPANCY] is None  # n/a


def test_the_details_page_is_grouped_by_launch_and_nanoseconds_become_microseconds():
    launches = ncu.parse_csv(DETAILS_PAGE)
    assert len(launches) == 2
    assert launches[0].metrics[ncu.DURATION] == pytest.approx(40.128)
    assert launches[1].metrics[ncu.MEMORY] == pytest.approx(61.75)
    assert ncu.DRAM not in launches[0].metrics  # not collected: absent, not zero


def test_kernels_are_merged_per_name_weighted_by_time_and_classified():
    (dyt,) = ncu.summarize_kernels(ncu.parse_csv(DETAILS_PAGE))
    assert dyt["launches"] == 2 and dyt["duration_us"] == pytest.approx(160.512)
    weights = (40.128, 120.384)
    assert dyt["compute_pct"] == pytest.approx((22.5 * weights[0] + 82.5 * weights[1]) / sum(weights))
    assert dyt["bottleneck"] == "compute"  # SM 67.5% ahead of memory 54.25%
    kernels = ncu.summarize_kernels(ncu.parse_csv(RAW_PAGE))
    assert [k["name"][:21] for k in kernels] == [
        "_geglu_backward_kernel"[:21],
        "_geglu_forward_kernel",
        "void at::native::vect",
    ]
    assert [k["bottleneck"] for k in kernels] == ["memory", "memory", "latency"]


@pytest.mark.parametrize(
    "compute, memory, expected",
    [
        (71.0, 76.0, "memory"),
        (85.0, 40.0, "compute"),
        (59.0, 59.9, "latency"),
        (60.0, 10.0, "compute"),
        (None, 50.0, "unknown"),
    ],
)
def test_bottleneck_is_the_busier_unit_from_sixty_percent_of_its_peak(compute, memory, expected):
    assert ncu.bottleneck(compute, memory) == expected


def test_the_block_prints_each_kernel_with_its_figures():
    text = ncu.block(ncu.summarize_kernels(ncu.parse_csv(RAW_PAGE)), "iteration 3")
    lines = text.splitlines()
    assert lines[0] == "NCU_PROFILE (iteration 3)" and len(lines) == 5
    assert lines[3].startswith(
        "kernel: _geglu_forward_kernel      107.5 us  bottleneck: memory   memory  76.9% (DRAM  75.0%)"
    )
    assert "compute (SM)  71.2%  occupancy  88.1%" in lines[3]
    assert lines[4].endswith("occupancy     -")


@pytest.mark.parametrize(
    "output, reason",
    [
        ("==PROF== Connected\n==ERROR== Failed to initialize the profiler: LibraryNotLoaded\n", "LibraryNotLoaded"),
        (
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters",
            "ERR_NVGPUCTRPERM - The user does not have permission",
        ),
        ("==PROF== Disconnected from process 1\n", None),
    ],
)
def test_counter_problems_are_read_from_the_first_error_line(output, reason):
    found = ncu.counter_problem(output)
    assert (found is None) if reason is None else (reason in found)


def test_without_a_gpu_or_without_ncu_profile_is_a_one_line_reason(monkeypatch):
    assert ncu.profile("/repo", "geglu", cuda=False) == (None, "no GPU (Nsight Compute profiles CUDA kernels)")
    monkeypatch.delenv("KERNELGEN_NCU", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert ncu.profile("/repo", "geglu", cuda=True) == (None, "ncu (Nsight Compute) is not on PATH")


def _fake_ncu(tmp_path, monkeypatch, stdout: str, stderr: str = "", code: int = 0):
    """An ``ncu`` that prints ``stdout``/``stderr`` whatever it is asked (the command line is checked apart)."""
    (tmp_path / "out.txt").write_text(stdout)
    (tmp_path / "err.txt").write_text(stderr)
    script = tmp_path / "ncu"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(tmp_path / 'out.txt')!r}).read())\n"
        f"sys.stderr.write(open({str(tmp_path / 'err.txt')!r}).read())\nsys.exit({code})\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KERNELGEN_NCU", str(script))


def test_an_ncu_that_cannot_read_counters_gives_its_error_as_the_reason(tmp_path, monkeypatch):
    _fake_ncu(
        tmp_path,
        monkeypatch,
        "==PROF== Connected to process 9\n",
        "==ERROR== Failed to initialize the profiler: LibraryNotLoaded\n",
        1,
    )
    kernels, reason = ncu.profile(str(tmp_path), "geglu", cuda=True)
    assert kernels is None
    assert reason == "ncu cannot read the GPU's counters here: Failed to initialize the profiler: LibraryNotLoaded"


def test_an_ncu_run_is_parsed_into_kernels(tmp_path, monkeypatch):
    _fake_ncu(tmp_path, monkeypatch, RAW_PAGE)
    kernels, reason = ncu.profile(str(tmp_path), "geglu", cuda=True)
    assert reason is None and [k["bottleneck"] for k in kernels] == ["memory", "memory", "latency"]
    _fake_ncu(tmp_path, monkeypatch, "==PROF== Disconnected\n==WARNING== No kernels were profiled.\n")
    assert ncu.profile(str(tmp_path), "geglu", cuda=True)[1].startswith("ncu profiled no kernel (exit 0; ")


def test_the_command_profiles_one_step_with_the_documented_metrics():
    command = ncu.command("/opt/ncu", "/repo", "geglu")
    assert command[:6] == ["/opt/ncu", "--clock-control", "none", "--profile-from-start", "off", "--target-processes"]
    metrics = command[command.index("--metrics") + 1].split(",")
    assert metrics == [
        "gpu__time_duration.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
    ]
    assert command[command.index("--page") + 1] == "raw" and "--csv" in command
    assert command[-5:] == [sys.executable, "-m", "tools.kernelgen.validate.ncu_step", "/repo", "geglu"]
