"""TileLang kernels (``new NAME --backend tilelang``, issue 19) on a machine without a GPU.

geglu (a gated MLP activation, rounded per op), dyt (a scalar, a per-channel and an optional per-channel parameter),
snake (a per-channel parameter) and leaky_relu_mul (a runtime hyper-parameter) are generated as TileLang kernels into
a scratch checkout. Checked here: the files are ruff-clean and pure, the library imports without tilelang and the
generated tests skip with one reason, the record keeps the backend, validate and the benchmark script run, and the
CLI refuses the backend in one line without tilelang or beyond tier 1. Where tilelang is installed (not in CI), each
generated program is also built with the settings its wrappers compute and lowered to CUDA source, and every launch's
arguments are checked against the program's buffers: that catches TileLang API mistakes before a GPU runs the tests.
"""

import pytest
import sympy
import torch
import yaml

from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import import_generated_ops
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import run_pytest
from test.kernelgen.conftest import snapshot
from tools.kernelgen import backends
from tools.kernelgen.analyze import analyze
from tools.kernelgen.formatting import lint_findings
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import dump_yaml
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.record import read_record
from tools.kernelgen.record import record_file
from tools.kernelgen.synth import apply_op
from tools.kernelgen.synth.printer import print_tilelang
from tools.kernelgen.validate.purity import check_source

# kernel name -> built-in reference
KERNELS = {"geglu_tl": "geglu", "dyt_tl": "dyt", "snake_tl": "snake", "leaky_relu_mul_tl": "leaky_relu_mul"}
CPU_SKIP = "TileLang kernels run on CUDA GPUs only (device: cpu)"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = copy_checkout(tmp_path_factory.mktemp("tilelang") / "liger")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(backends, "tilelang_installed", lambda: True)  # generating needs no tilelang, only new's check
        for name, reference in KERNELS.items():
            result = run_kernelgen("new", name, "--reference", reference, "--backend", "tilelang", "--repo", str(root))
            assert result.returncode == 0, result.stderr
            # No CPU interpreter runs TileLang: new says in one line that it made no smoke run.
            notes = [line for line in result.stderr.splitlines() if "smoke run" in line]
            assert notes == [
                "kernelgen: note: no smoke run (TileLang kernels run on CUDA GPUs only); run its tests on a GPU"
            ]
    return root


def test_tilelang_printer_spells_the_math_in_tilelang():
    x, y, p = sympy.symbols("x y p", real=True)
    assert print_tilelang(apply_op("where", apply_op("gt", x, 0), x, 0.5 * y)) == "T.if_then_else(x > 0.0, x, 0.5 * y)"
    assert print_tilelang(sympy.tanh(x) + sympy.exp(x)) == "T.exp(x) + T.tanh(x)"
    assert print_tilelang(x**p) == "T.pow(x, p)"
    assert print_tilelang(x**9) == "T.pow(x, 9.0)"  # powf keeps the sign of an odd power
    assert print_tilelang(x ** sympy.Float(1.7)) == "T.pow(x, 1.7)"
    assert print_tilelang(x ** sympy.Rational(-1, 2)) == "T.rsqrt(x)"
    assert print_tilelang(sympy.Max(x, y)) == "T.max(x, y)"
    assert print_tilelang(apply_op("cast_to_input", x * y)) == 'T.cast(T.cast(x * y, input_dtype), "float32")'
    condition = sympy.Piecewise((x, (x > 0) & ((x < y) | (y <= 1))), (y, True))
    assert print_tilelang(condition) == "T.if_then_else(T.And(x > 0.0, T.Or(y <= 1.0, x < y)), x, y)"


def test_generated_files_are_ruff_clean_and_their_kernels_pure_tilelang(checkout):
    for name in KERNELS:
        paths = kernel_paths(name)
        for role in ("ops", "module", "test", "benchmark"):
            assert lint_findings((checkout / paths[role]).read_text(), checkout, paths[role]) == [], (name, role)
        source = (checkout / paths["ops"]).read_text()
        assert "triton" not in source and "@T.prim_func" in source, name
        assert check_source(source, paths["ops"], ["x"]) == [], name
    # A torch call inside a TileLang program is caught like one inside a Triton kernel.
    ops = (checkout / kernel_paths("dyt_tl")["ops"]).read_text()
    tampered = ops.replace("T.tanh(alpha * x)", "torch.tanh(alpha * x)", 1)
    (finding,) = check_source(tampered, "dyt_tl.py", ["x"])
    assert "TileLang program _dyt_tl_forward_program: calls torch.tanh(...)" in finding.message


def test_the_library_imports_without_tilelang_and_the_generated_tests_skip_with_one_reason(checkout):
    """Every registration imports without tilelang (the generated tests import them before they skip: tilelang is
    imported only when a kernel is first built); each generated test file skips as a whole on the CPU, saying why."""
    result = run_pytest(checkout, "-rs", *[kernel_paths(name)["test"] for name in KERNELS])
    assert result.returncode in (0, 5), result.stdout[-3000:]  # 5: no test collected, every file skipped whole
    reasons = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(reasons) == len(KERNELS) and all(line.endswith(CPU_SKIP) for line in reasons), result.stdout[-3000:]


def test_the_record_keeps_the_backend_and_modify_keeps_it(checkout, monkeypatch):
    record = read_record(checkout, "dyt_tl")
    assert record.backend == "tilelang" and "backend: tilelang" in dump_yaml(record)
    assert "backend: tilelang" in record_file(checkout, "dyt_tl").read_text()
    monkeypatch.setattr(backends, "tilelang_installed", lambda: True)
    # A new analysis of the same reference keeps the recorded kernel language: nothing changes.
    result = run_kernelgen("modify", "dyt_tl", "--reference", "dyt", "--repo", str(checkout), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "nothing to change" in result.stdout or "0 files would change" in result.stderr, result.stdout


def test_validate_runs_what_runs_without_a_gpu(checkout):
    result = run_kernelgen("validate", "dyt_tl", "--repo", str(checkout))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "purity: PASS (src/liger_kernel/ops/dyt_tl.py: kernels are pure TileLang" in result.stdout
    assert f"unit tests: SKIP (test/transformers/test_dyt_tl.py: 1 skipped ({CPU_SKIP}))" in result.stdout
    assert "correctness: SKIP (TileLang kernels run on CUDA GPUs only" in result.stdout


def test_the_benchmark_script_smoke_runs_its_reference_on_the_cpu(checkout):
    csv_path = checkout / "smoke.csv"
    result = run_python([kernel_paths("snake_tl")["benchmark"], "--smoke", "--csv", str(csv_path)], cwd=checkout)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = csv_path.read_text().splitlines()[1:]
    assert rows and all(row.startswith("snake_tl,torch,") for row in rows)


def test_without_tilelang_new_says_how_to_install_it_and_writes_nothing(checkout, monkeypatch, tmp_path):
    monkeypatch.setattr(backends, "tilelang_installed", lambda: False)
    before = snapshot(checkout)
    line = one_line_error(
        run_kernelgen("new", "reglu_tl", "--reference", "reglu", "--backend", "tilelang", "--repo", str(checkout))
    )
    assert line == (
        'kernelgen: error: --backend tilelang needs the tilelang package, which is not installed: pip install -e ".[tilelang]"; '
        "nothing written"
    )
    # A profile that records the backend asks for it too.
    profile = analyze("reglu")
    profile.backend = "tilelang"
    (tmp_path / "reglu.yaml").write_text(dump_yaml(profile))
    result = run_kernelgen("new", "reglu_tl", "--profile", str(tmp_path / "reglu.yaml"), "--repo", str(checkout))
    assert one_line_error(result) == line
    assert snapshot(checkout) == before


def test_tilelang_is_refused_beyond_tier_1_in_one_line(checkout, monkeypatch):
    monkeypatch.setattr(backends, "tilelang_installed", lambda: True)
    before = snapshot(checkout)
    result = run_kernelgen(
        "new", "ln_tl", "--reference", "layer_norm", "--backend", "tilelang", "--repo", str(checkout)
    )
    assert "backend: tilelang renders tier-1 (element-wise) kernels; this is tier 2 (use triton)" in one_line_error(
        result
    )
    assert snapshot(checkout) == before
    result = run_kernelgen("analyze", "layer_norm", "--backend", "tilelang")
    assert one_line_error(result).startswith("kernelgen: error: invalid profile for layer_norm: backend: tilelang")


# Where tilelang is installed: every program lowered to CUDA ------------------------------------------------------
@pytest.fixture(scope="module")
def lowered(checkout):
    """``lower(module, apply)``: runs ``apply`` (host code on CPU tensors) with the module's ``_compiled`` replaced by
    one that builds each program, lowers it for an H100-class GPU and returns a launch that checks its arguments."""
    tilelang = pytest.importorskip("tilelang", reason="tilelang is not installed (pip install -e '.[tilelang]')")
    from tvm.target import Target

    target = Target({"kind": "cuda", "arch": "sm_90"})
    done = {}

    def compiled(program, *settings):
        key = (program.__name__, *map(str, settings))
        if key not in done:
            func = program(*settings)
            with target:
                source = tilelang.lower(func, target=target).kernel_source
            assert "double" not in source.split('extern "C"', 1)[1], f"{key}: fp64 math in the kernel"
            done[key] = func
        return lambda *args: _check_launch(done[key], key, args)

    def lower(name, apply):
        module = import_generated_ops(checkout, name)
        module._compiled = compiled
        apply(module)

    return lower


def _check_launch(func, key, args) -> None:
    """The launch passes one argument per parameter; each tensor has the dtype, rank, sizes and strides its buffer
    declares (sizes named by a dynamic variable: the same value wherever the variable appears)."""
    assert len(args) == len(func.params), f"{key}: {len(args)} arguments for {len(func.params)} parameters"
    bound = {}
    for arg, param in zip(args, func.params):
        buffer = func.buffer_map.get(param)
        if buffer is None:  # a runtime number
            assert isinstance(arg, (int, float)) and not isinstance(arg, bool), f"{key}: {param} is {arg!r}"
            continue
        if arg is None:  # an absent optional parameter: the program does not read it
            continue
        where = f"{key}: {buffer.name}"
        assert str(buffer.dtype) == str(arg.dtype).removeprefix("torch."), f"{where}: dtype {arg.dtype}"
        assert len(buffer.shape) == arg.dim(), f"{where}: rank {arg.dim()}"
        for size, actual in zip(buffer.shape, arg.shape):
            expected = bound.setdefault(str(size), actual) if not hasattr(size, "value") else int(size.value)
            assert expected == actual, f"{where}: size {actual}, declared {size}"
        for stride, actual, size in zip(buffer.strides or [], arg.stride(), arg.shape):
            assert size == 1 or int(stride) == actual, f"{where}: stride {actual}, declared {stride}"


def _run(function, inputs, params, hypers=()):
    """Forward and backward of ``function`` on CPU tensors (the launches only check their arguments)."""
    leaves = [t.requires_grad_(True) for t in inputs] + [
        p.requires_grad_(True) if p is not None else None for p in params
    ]
    output = function.apply(*leaves, *hypers)
    output.backward(torch.ones_like(output))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_program_lowers_to_cuda_and_takes_what_its_wrappers_pass(lowered, dtype):
    def widths(n_cols):  # a contiguous input and one that is the first half of wider rows
        return [torch.randn(3, 5, n_cols, dtype=dtype), torch.randn(3, 5, 2 * n_cols, dtype=dtype)[..., :n_cols]]

    def geglu(module):
        for a in widths(33):
            _run(module.LigerGegluTlFunction, [a, torch.randn(a.shape, dtype=dtype)], [])

    def dyt(module):
        for x in widths(33):
            gamma, beta = torch.rand(33, dtype=dtype), torch.rand(33, dtype=dtype)
            _run(module.LigerDytTlFunction, [x], [torch.rand(1, dtype=dtype), gamma, beta])
            _run(module.LigerDytTlFunction, [x.detach().clone()], [torch.rand(1, dtype=dtype), gamma.clone(), None])

    def snake(module):
        _run(module.LigerSnakeTlFunction, [torch.randn(4, 4096, dtype=dtype)], [torch.rand(4096, dtype=dtype) + 0.5])

    def leaky_relu_mul(module):
        a, b = torch.randn(7, 1023, dtype=dtype), torch.randn(7, 1023, dtype=dtype)
        _run(module.LigerLeakyReluMulTlFunction, [a, b], [], (0.2,))

    for name, apply in (
        ("geglu_tl", geglu),
        ("dyt_tl", dyt),
        ("snake_tl", snake),
        ("leaky_relu_mul_tl", leaky_relu_mul),
    ):
        lowered(name, apply)


def test_the_backend_comparison_counts_the_tensors_each_step_moves(checkout):
    from benchmark.scripts.compare_backends import tensors_moved

    def record(name):
        return yaml.safe_load(record_file(checkout, name).read_text().split("\n", 1)[1])

    # geglu: a and b in, y out; dy, a and b in, da and db out. dyt: x in, y out; dy and x in, dx out.
    assert tensors_moved(record("geglu_tl")) == 8
    assert tensors_moved(record("dyt_tl")) == 5
    assert record("geglu_tl")["backend"] == "tilelang"
