"""benchmark/scripts/sass_counts.py: static SASS counts for sm_90 from the tools Triton's wheel ships, no GPU."""

import os
import subprocess
import sys
import textwrap

from pathlib import Path

import pytest

from benchmark.scripts import sass_counts

SCRIPT = Path(sass_counts.__file__)

KERNELS = textwrap.dedent(
    """
    import triton
    import triton.language as tl

    from liger_kernel.ops.utils import log1p_unit


    @triton.jit
    def _plain_forward_kernel(x_ptr, y_ptr, n_cols, BLOCK_COLS: tl.constexpr):
        cols = tl.program_id(0).to(tl.int64) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
        x = tl.load(x_ptr + cols).to(tl.float32)
        tl.store(y_ptr + cols, (2.0 * x + 1.0).to(y_ptr.dtype.element_ty))


    @triton.jit
    def _softplus_forward_kernel(x_ptr, y_ptr, n_cols, BLOCK_COLS: tl.constexpr):
        cols = tl.program_id(0).to(tl.int64) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
        x = tl.load(x_ptr + cols).to(tl.float32)
        y = tl.maximum(x, 0.0) + log1p_unit(tl.exp(-tl.abs(x)))
        tl.store(y_ptr + cols, y.to(y_ptr.dtype.element_ty))
    """
)


@pytest.mark.skipif(not (sass_counts.TOOLS / "cuobjdump").exists(), reason="this Triton wheel ships no cuobjdump")
def test_counts_read_registers_and_opcodes_per_element(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    # Compiled kernels, not the CPU interpreter's (which the test session may have chosen): a process of its own.
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    command = [sys.executable, str(SCRIPT), str(path), "--constexpr", "BLOCK_COLS=2048", "--forward-warps", "4"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    plain, softplus = lines["kernels.py _plain_forward_kernel"], lines["kernels.py _softplus_forward_kernel"]
    per_element = {name: float(text.split(" registers, ")[1].split()[0]) for name, text in lines.items()}
    # 16 elements a thread: one FFMA each for 2x + 1; the softplus adds log1p_unit's nine FMAs and an exp (MUFU).
    assert "FFMA 1.0" in plain and "FFMA 9.0" in softplus and "MUFU 1.0" in softplus, lines
    assert per_element["kernels.py _softplus_forward_kernel"] > per_element["kernels.py _plain_forward_kernel"] + 9
    assert sass_counts._opcode("/*0070*/  @P0 FFMA R1, R2, R3, R4 ;") == "FFMA"
    assert sass_counts._opcode("/* 0x000fe20000000f00 */") is None


def test_a_file_without_kernels_is_one_clear_line(tmp_path):
    path = tmp_path / "empty.py"
    path.write_text("X = 1\n")
    with pytest.raises(SystemExit, match="no _\\*_kernel Triton function"):
        sass_counts.main([str(path)])
