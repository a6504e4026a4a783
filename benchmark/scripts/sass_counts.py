"""Static instruction counts of an ops file's Triton kernels, compiled for an H100/H200 (sm_90) on any machine: no GPU
is needed, only the ``ptxas`` and ``cuobjdump`` that Triton's wheel ships.

    python benchmark/scripts/sass_counts.py src/liger_kernel/ops/logsigmoid_gen.py [more files] \
        --constexpr BLOCK_ROWS=1 BLOCK_COLS=2048 WALK_ROWS=0 WHOLE_TILES=1 --forward-warps 4 --backward-warps 8

For each ``_*_kernel`` of each file: the registers a thread takes and the SASS instructions per element (the
kernel's instructions, NOPs left out, over the elements a thread handles: BLOCK_ROWS x BLOCK_COLS / threads), with the
most frequent opcodes. A kernel whose arithmetic issues more instructions per element than the memory system gives it
time for is compute-bound: on an H200 (132 SMs, 4 schedulers each, 1.98 GHz, 4.3 TB/s), a bf16 element-wise pass
that moves B bytes an element has about 132 * 4 * 32 * 1.98e9 / (4.3e12 / B) lane-instructions an element of time,
about 31 for B = 4 (one bf16 read and one write). The defaults are the tier-1 flat walk's tile (2048 elements; 4
warps forward, 8 backward). Pointer arguments are bf16, names starting ``n_`` or holding ``stride`` int32 (both
divisible by 16, as at the benchmarks' shapes), other runtime arguments fp32: the signature the benchmarks launch.
Hyper-parameters that are constexpr take ``--constexpr``.
"""

import argparse
import collections
import importlib.util
import re
import subprocess
import sys
import tempfile

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import triton

from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

TOOLS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
TARGET = GPUTarget("cuda", 90, 32)
DEFAULT_CONSTEXPRS = {"BLOCK_ROWS": 1, "BLOCK_COLS": 2048, "WALK_ROWS": 0, "WHOLE_TILES": 1}


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(f"_sass_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _signature(kernel, constexprs: dict) -> tuple[dict, dict]:
    """The argument types and the specialization a launch at the benchmarks' shapes gets: every pointer and integer
    divisible by 16 (``tt.divisibility``: Triton marks them so at launch, which vectorizes the loads)."""
    signature, attrs = {}, {}
    for index, name in enumerate(kernel.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
            continue
        if name.endswith("_ptr"):
            signature[name] = "*bf16"
        elif name.startswith("n_") or "stride" in name:
            signature[name] = "i32"
        else:
            signature[name] = "fp32"
            continue
        attrs[(index,)] = [["tt.divisibility", 16]]
    return signature, attrs


def _opcode(line: str) -> str | None:
    """The opcode of one ``cuobjdump -sass`` instruction line (``/*0070*/ @P0 FFMA R1, ...`` -> ``FFMA``)."""
    if not line.startswith("/*") or "*/" not in line:
        return None
    words = line.split("*/", 1)[1].strip().rstrip(";").split()
    if not words or words[0].startswith("/*"):
        return None
    opcode = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return opcode.split(".")[0].rstrip(";")


def counts(kernel, constexprs: dict, num_warps: int) -> tuple[int, collections.Counter]:
    """Registers a thread and the opcode counts of ``kernel`` compiled for sm_90 with ``constexprs``."""
    wanted = {name: value for name, value in constexprs.items() if name in kernel.arg_names}
    signature, attrs = _signature(kernel, wanted)
    source = ASTSource(kernel, signature, constexprs=wanted, attrs=attrs)
    compiled = triton.compile(source, target=TARGET, options={"num_warps": num_warps})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        sass = subprocess.run([TOOLS / "cuobjdump", "-sass", cubin.name], capture_output=True, text=True, check=True)
        usage = subprocess.run([TOOLS / "cuobjdump", "-res-usage", cubin.name], capture_output=True, text=True)
    registers = int(re.search(r"REG:(\d+)", usage.stdout).group(1))
    opcodes = collections.Counter(op for line in sass.stdout.splitlines() if (op := _opcode(line.strip())))
    opcodes.pop("NOP", None)
    return registers, opcodes


def _constexpr(text: str) -> tuple[str, int]:
    name, _, value = text.partition("=")
    if not value.lstrip("-").isdigit():
        raise argparse.ArgumentTypeError(f"--constexpr {text!r}: expected NAME=INTEGER")
    return name, int(value)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--constexpr", nargs="*", type=_constexpr, default=[], help="NAME=INTEGER (tile, flags)")
    parser.add_argument("--forward-warps", type=int, default=4)
    parser.add_argument("--backward-warps", type=int, default=8)
    args = parser.parse_args(argv)
    if not (TOOLS / "cuobjdump").exists():
        sys.exit(f"sass_counts: no cuobjdump in {TOOLS} (this Triton wheel ships no CUDA tools)")
    constexprs = {**DEFAULT_CONSTEXPRS, **dict(args.constexpr)}
    for path in args.files:
        module = _module(path)
        kernels = [
            (name, value)
            for name, value in vars(module).items()
            if isinstance(value, triton.runtime.jit.JITFunction) and name.startswith("_") and name.endswith("_kernel")
        ]
        if not kernels:
            sys.exit(f"sass_counts: {path}: no _*_kernel Triton function")
        for name, kernel in kernels:
            warps = args.backward_warps if "backward" in name else args.forward_warps
            registers, opcodes = counts(kernel, constexprs, warps)
            tile = constexprs.get("BLOCK_ROWS", 1) * constexprs.get("BLOCK_COLS", 1)
            per_thread = max(1, tile // (32 * warps))
            total = sum(opcodes.values())
            common = " ".join(f"{op} {n / per_thread:.1f}" for op, n in opcodes.most_common(8))
            print(
                f"{path.name} {name}: {registers} registers, {total / per_thread:.1f} instructions an element ({common})"
            )


if __name__ == "__main__":
    main()
