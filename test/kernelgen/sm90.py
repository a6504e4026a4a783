"""Compile a generated Triton kernel for an H100/H200 (sm_90) on a machine without a GPU.

``triton.compile`` with a ``GPUTarget`` runs the NVIDIA backend's passes, LLVM and ptxas, which Triton's wheel
ships, without a device. Pointers are marked 16-byte aligned, as Triton specializes them at launch on a GPU: that
is the specialization under which LLVM once took minutes on a generated loss (a row sum of an indicator), which
the CPU interpreter cannot show.
"""

import time

from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler import compile as triton_compile

SM90 = GPUTarget("cuda", 90, 32)
INTEGER_ARGUMENTS = ("n_rows", "n_cols", "ignore_index")


def compile_for_sm90(kernel, constexprs: dict, num_warps: int = 8) -> float:
    """Seconds to compile ``kernel`` (a ``@triton.jit`` function) for sm_90 with ``constexprs``; pointers are fp32
    (``*_ptr``) or int64 (``target_ptr``), strides and sizes int32, other scalars fp32; unlisted constexprs are 1."""
    signature, attrs, values = {}, {}, dict(constexprs)
    for index, name in enumerate(kernel.arg_names):
        if kernel.params[index].is_constexpr:
            signature[name] = "constexpr"
            values.setdefault(name, 1)
        elif name.endswith("_ptr"):
            signature[name] = "*i64" if name == "target_ptr" else "*fp32"
            attrs[(index,)] = [["tt.divisibility", 16]]
        elif "stride" in name or name in INTEGER_ARGUMENTS:
            signature[name] = "i32"
        else:
            signature[name] = "fp32"
    start = time.perf_counter()
    source = ASTSource(fn=kernel, signature=signature, constexprs=values, attrs=attrs)
    triton_compile(source, target=SM90, options={"num_warps": num_warps})
    return time.perf_counter() - start
