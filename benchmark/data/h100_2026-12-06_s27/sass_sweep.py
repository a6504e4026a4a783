"""Registers and SASS opcode counts of the generated sweep kernel and the hand-written P_1_8_3 (sm_90, offline)."""

import collections
import importlib.util
import re
import subprocess
import sys
import tempfile

from pathlib import Path

import triton

from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

TOOLS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
FP32 = ("mean_ptr", "variance_ptr", "grad_weight_partial_ptr", "grad_bias_partial_ptr")
DIVISIBLE = ("stride", "n_rows", "n_cols")


def load(path, name):
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def compile_counts(kernel, constexprs, num_warps, dump):
    signature, attrs = {}, {}
    for index, name in enumerate(kernel.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
            continue
        if name.endswith("_ptr"):
            signature[name] = "*fp32" if name in FP32 else "*bf16"
            attrs[(index,)] = [["tt.divisibility", 16]]
        elif name.startswith("n_") or "stride" in name or name.startswith(("tiles", "rows_per")):
            signature[name] = "i32"
            if any(key in name for key in DIVISIBLE):
                attrs[(index,)] = [["tt.divisibility", 16]]
        else:
            signature[name] = "fp32"
    compiled = triton.compile(
        ASTSource(kernel, signature, constexprs=constexprs, attrs=attrs),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": num_warps},
    )
    Path(dump + ".ttgir").write_text(compiled.asm["ttgir"])
    Path(dump + ".ptx").write_text(compiled.asm["ptx"])
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        sass = subprocess.run(
            [TOOLS / "cuobjdump", "-sass", cubin.name], capture_output=True, text=True, check=True
        ).stdout
        usage = subprocess.run([TOOLS / "cuobjdump", "-res-usage", cubin.name], capture_output=True, text=True).stdout
    Path(dump + ".sass").write_text(sass)
    ops = collections.Counter()
    for line in sass.splitlines():
        line = line.strip()
        if line.startswith("/*") and "*/" in line:
            words = line.split("*/", 1)[1].strip().rstrip(";").split()
            if words and not words[0].startswith("/*"):
                op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
                ops[op.split(".")[0]] += 1
    ops.pop("NOP", None)
    print(
        dump,
        "regs",
        re.search(r"REG:(\d+)", usage).group(1),
        "shared",
        re.search(r"SHARED:(\d+)", usage).group(1) if "SHARED" in usage else "?",
        "total",
        sum(ops.values()),
    )
    print("   ", ops.most_common(18))


gen = load(sys.argv[1], "_layer_norm_gen_sweep_backward_kernel")
compile_counts(gen, {"BLOCK_ROWS": 1, "BLOCK_COLS": 8192, "COL_BLOCKS": 2, "PIPELINE_LOADS": 1}, 8, "/tmp/sw_gen")
p = load(sys.argv[2], "_ln_cosum_backward_kernel")
compile_counts(p, {"COL_BLOCKS": 2, "BLOCK_COLS": 8192, "NUM_STAGES": 3}, 8, "/tmp/sw_p")
