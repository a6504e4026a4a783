"""native_launch.py: a wrapper's launches replayed from C++ give what the wrapper gives, for every layout it records,
and the layouts it must not replay (a copy or a fill in the wrapper, tensor subclasses, keyword arguments) stay on
its Python path. Replays need compiled kernels (CUDA); on the CPU the decorator leaves the wrapper as it is, and the
recording of what a wrapper did besides launching is checked on CPU tensors."""

import warnings

import pytest
import torch
import triton
import triton.language as tl

from liger_kernel.ops import native_launch
from liger_kernel.ops.native_launch import native_launches

GPU = torch.cuda.is_available() and native_launch.native_launch_enabled()
needs_gpu = pytest.mark.skipif(not GPU, reason="native launches replay compiled kernels: CUDA only")


@triton.jit
def _scaled_sum_kernel(x_ptr, x_row_stride, y_ptr, out_ptr, n_cols, scale, SQUARE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + row * n_cols + cols, mask=mask).to(tl.float32)
    value = x * scale + y
    if SQUARE:
        value = value * value
    tl.store(out_ptr + row * n_cols + cols, value.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _squares_kernel(x_ptr, partial_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(partial_ptr + row * n_cols + cols, x * x, mask=mask)


def _launch(x, y, out, scale, square):
    n_cols = x.shape[-1]
    block = min(triton.next_power_of_2(n_cols), 1024)
    grid = (x.shape[0], triton.cdiv(n_cols, block))
    _scaled_sum_kernel[grid](x, x.stride(0), y, out, n_cols, scale, SQUARE=square, BLOCK=block)


RUNS = {"plain": 0}


@native_launches
def scaled_sum(x, y, scale, square):
    """out = (x * scale + y) ** (2 if square else 1) over [rows, cols] (x may have a row stride); returns x's 2-D
    view, the result in x's shape and None."""
    RUNS["plain"] += 1
    shape = x.shape
    x = x.reshape(-1, shape[-1]) if x.stride(-1) == 1 and x.dim() != 2 else x
    y = y.reshape(-1, shape[-1])
    out = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    _launch(x, y, out, scale, square)
    return x, out.view(*shape), None


@native_launches
def scaled_sum_into_y(x, y, scale):
    """The result written over y (a returned argument), as generated backwards write input gradients."""
    RUNS["plain"] += 1
    _launch(x, y, y, scale, False)
    return y


@native_launches
def scaled_sum_of_copy(x, y, scale):
    """A wrapper that copies: never replayed (the copy is work a replay of the launches would skip)."""
    RUNS["plain"] += 1
    x = x.clone()
    out = torch.empty_like(y)
    _launch(x, y, out, scale, False)
    return out


@native_launches
def column_sums_of_squares(x):
    """Per-column and total sums of x ** 2 the way generated backwards reduce their parameter gradients: fp32
    partials from a kernel, summed and converted to x's dtype by torch (ops the replay runs too)."""
    RUNS["plain"] += 1
    partial = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    _squares_kernel[(x.shape[0],)](x, partial, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return partial.sum(dim=0).view(1, -1).to(x.dtype), partial.sum().view(1)


def _expected(x, y, scale, square):
    value = x.float() * scale + y.float()
    return (value * value if square else value).to(y.dtype)


def _runs(call):
    before = RUNS["plain"]
    result = call()
    return result, RUNS["plain"] - before


@needs_gpu
@pytest.mark.parametrize("shape", [(4, 33), (2, 3, 130), (64, 1024)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_replay_matches_the_wrapper_and_skips_its_python(shape, dtype):
    x = torch.randn(shape, device="cuda", dtype=dtype)
    y = torch.randn(shape, device="cuda", dtype=dtype)
    first, ran = _runs(lambda: scaled_sum(x, y, 0.5, True))
    assert ran == 1  # recorded
    x2, y2 = torch.randn_like(x), torch.randn_like(y)
    second, ran = _runs(lambda: scaled_sum(x2, y2, 0.5, True))
    assert ran == 0  # replayed from C++
    torch.testing.assert_close(first[1], _expected(x, y, 0.5, True))
    torch.testing.assert_close(second[1], _expected(x2, y2, 0.5, True))
    assert second[0].shape == (x2.numel() // shape[-1], shape[-1]) and second[0].data_ptr() == x2.data_ptr()
    assert second[1].shape == x2.shape and second[1].is_contiguous() and second[2] is None
    assert second[1].data_ptr() != first[1].data_ptr()  # a fresh output each call


@needs_gpu
def test_another_value_of_a_scalar_or_flag_is_another_layout():
    x = torch.randn(8, 40, device="cuda")
    y = torch.randn(8, 40, device="cuda")
    scaled_sum(x, y, 0.25, False)
    for scale, square in ((0.25, False), (2.0, False), (2.0, True)):
        result, _ = _runs(lambda: scaled_sum(x, y, scale, square))
        torch.testing.assert_close(result[1], _expected(x, y, scale, square))


@needs_gpu
def test_strided_and_misaligned_inputs_replay_with_their_own_plans():
    wide = torch.randn(16, 96, device="cuda")
    for start in (0, 48, 1):  # a half of a fused projection; a slice that starts 4 bytes past 16-byte alignment
        x = wide[:, start : start + 40]
        y = torch.randn(16, 40, device="cuda")
        for _ in range(2):
            result, _ = _runs(lambda: scaled_sum(x, y, 1.5, False))
            torch.testing.assert_close(result[1], _expected(x, y, 1.5, False))


@needs_gpu
def test_the_same_tensor_passed_twice_is_a_layout_of_its_own():
    """Recorded with one tensor as both arguments, the plan reads it for both: distinct tensors of the same shapes
    must not replay it."""
    x = torch.randn(5, 40, device="cuda")
    torch.testing.assert_close(scaled_sum(x, x, 2.0, False)[1], _expected(x, x, 2.0, False))
    for _ in range(2):
        y = torch.randn(5, 40, device="cuda")
        torch.testing.assert_close(scaled_sum(x, y, 2.0, False)[1], _expected(x, y, 2.0, False))
        torch.testing.assert_close(scaled_sum(y, y, 2.0, False)[1], _expected(y, y, 2.0, False))


@needs_gpu
def test_a_result_written_over_an_argument_is_that_argument():
    x = torch.randn(6, 50, device="cuda")
    for call in range(2):
        y = torch.randn(6, 50, device="cuda")
        expected = _expected(x, y, 3.0, False)
        result, ran = _runs(lambda: scaled_sum_into_y(x, y, 3.0))
        assert ran == (1 if call == 0 else 0)
        assert result is y
        torch.testing.assert_close(y, expected)


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sums_and_dtype_conversions_of_partials_are_replayed(dtype):
    for call in range(3):
        x = torch.randn(37, 70, device="cuda", dtype=dtype)
        (per_column, total), ran = _runs(lambda: column_sums_of_squares(x))
        assert ran == (1 if call == 0 else 0)
        squares = x.float() ** 2
        assert per_column.dtype == dtype and per_column.shape == (1, 70) and total.shape == (1,)
        torch.testing.assert_close(per_column, squares.sum(0).view(1, -1).to(dtype))
        torch.testing.assert_close(total, squares.sum().view(1))


@needs_gpu
def test_a_wrapper_that_copies_stays_on_its_python_path():
    x = torch.randn(6, 50, device="cuda")
    y = torch.randn(6, 50, device="cuda")
    for _ in range(3):
        result, ran = _runs(lambda: scaled_sum_of_copy(x, y, 2.0))
        assert ran == 1
        torch.testing.assert_close(result, _expected(x, y, 2.0, False))


@needs_gpu
def test_keyword_arguments_and_cpu_tensors_take_the_python_path():
    x = torch.randn(4, 20, device="cuda")
    y = torch.randn(4, 20, device="cuda")
    scaled_sum(x, y, 1.0, False)
    _, ran = _runs(lambda: scaled_sum(x, y, 1.0, square=False))
    assert ran == 1
    with pytest.raises(Exception):  # the wrapper's own launch refuses CPU tensors; the replay never sees them
        scaled_sum(x.cpu(), y.cpu(), 1.0, False)


def test_without_cuda_or_when_switched_off_the_wrapper_is_returned_as_it_is(monkeypatch):
    def wrapper(x):
        return x

    monkeypatch.setenv("LIGER_NATIVE_LAUNCH", "0")
    assert native_launches(wrapper) is wrapper
    monkeypatch.delenv("LIGER_NATIVE_LAUNCH")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert native_launches(wrapper) is wrapper


class _KeptRecords:
    """Stands in for the extension: keeps what recording hands it."""

    def __init__(self):
        self.specs = []

    def record(self, table, args, spec):
        self.specs.append(spec)


def test_recording_keeps_allocations_sums_conversions_and_results_in_order():
    """What the wrapper did besides launching, as the extension replays it (CPU tensors: no kernel is launched)."""

    def wrapper(x, scale):
        partial = torch.empty(3, 8, dtype=torch.float32)
        total = partial.sum(dim=0).to(torch.bfloat16)
        return x.view(-1), total.view(2, 4), None

    kept = _KeptRecords()
    x = torch.zeros(2, 5)
    results = native_launch._record(kept, 0, wrapper, (x, 1.0))
    steps, outputs, single = kept.specs[0]
    assert [step[0] for step in steps] == [0, 2, 3]  # allocate, sum, convert
    assert steps[0][1] == 24 and steps[0][2].dtype == torch.float32
    assert steps[1][1] == (2, False, [3, 8], [8, 1], 0) and steps[1][2:] == ([0], False)  # the allocation is slot 2
    assert steps[2][1] == (3, False, [8], [1], 0) and steps[2][2].dtype == torch.bfloat16  # the sum is slot 3
    assert outputs == [(0, False, [10], [1], 0), (4, False, [2, 4], [4, 1], 0), None] and not single
    assert results[0].data_ptr() == x.data_ptr() and results[2] is None


def test_recording_refuses_a_wrapper_that_fills_or_copies():
    def fills(x):
        out = torch.empty_like(x)
        out.zero_()
        return out

    def copies(x):
        return x.clone()

    kept = _KeptRecords()
    for wrapper in (fills, copies):
        native_launch._record(kept, 0, wrapper, (torch.ones(4),))
    assert kept.specs == [None, None]


def test_recording_refuses_results_it_cannot_place():
    """A tensor neither an argument's view nor allocated by the wrapper (a module-level buffer) cannot be replayed."""
    held = torch.ones(3)

    def returns_a_held_tensor(x):
        return x, held

    kept = _KeptRecords()
    native_launch._record(kept, 0, returns_a_held_tensor, (torch.ones(2),))
    assert kept.specs == [None]


def test_an_extension_that_does_not_build_warns_once_in_one_line_and_leaves_the_python_path(monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    def fails(**_):
        raise RuntimeError("Error building extension 'liger_native_launch'\n" + "compiler output\n" * 50)

    monkeypatch.setattr(cpp_extension, "load_inline", fails)
    monkeypatch.setattr(native_launch, "_state", {"extension": None, "failed": False})
    with pytest.warns(UserWarning, match=r"did not build: Error building extension 'liger_native_launch'\); kernels"):
        assert native_launch._extension() is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert native_launch._state["failed"] and native_launch._extension() is None
    assert caught == []  # no second build, no second warning
