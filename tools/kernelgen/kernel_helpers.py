"""Helpers generated kernels import from the target's ``liger_kernel/ops/utils.py``, and the edit that adds the ones
a target lacks (an upstream Liger-Kernel checkout has none of them).

- ``ceil_div`` and ``next_power_of_2``: host-side integer math for grids and tiles (``triton.cdiv`` and
  ``triton.next_power_of_2`` are ConstexprFunctions in Triton 3.6 and cost about 5 us a call on the host, which a
  kernel's launch pays several times: at small shapes the host time is the step's time);
- ``get_num_sms``: streaming multiprocessors, to size the persistent grids of kernels with parameter gradients;
- ``is_triton_interpreter``: whether kernels run under ``TRITON_INTERPRET=1`` (the jit math below picks its
  formulas by it);
- ``pow``, ``tanh``, ``log1p``, ``expm1`` and ``erfc``: jit math; compiled, libdevice's; under ``TRITON_INTERPRET=1``
  libdevice does not exist, and they are formulas of core ``tl`` ops with the same values (``pow`` with torch's
  signs for integer exponents of negative bases and ``x ** 0 == 1``); the printer emits ``pow`` for runtime
  exponents, ``expm1``, ``erfc`` and ``log1p`` for the reference's (``exp(v) - 1``, ``1 - erf(v)`` and ``log(1 + v)``
  would lose a small result's digits), and ``tanh`` where a kernel's math is printed with libdevice's functions
  (``tiling.forward_math`` / ``backward_math``, and forwards whose only transcendental is tanh);
- ``log1p_unit``: ``log(1 + v)`` for ``v`` in [0, 1], which the printer emits for softplus's ``log(1 + exp(-|u|))``
  and other arguments it can show lie there, core ``tl`` ops compiled and interpreted alike;
- ``scale_by_grad_output`` and its ``scale_by_grad_output_kernel``: the backward of losses whose forward stores
  their gradients (tier 3, fused linear): each row times grad_output in place, skipped on the device when
  grad_output is exactly 1;
- ``tanh_from_exp``: the tanh the printer emits (``synth/printer.py``), core ``tl`` ops compiled and interpreted
  alike (libdevice's tanh costs generated backward kernels registers they need);
- ``widen_to_fp32``: a loaded bf16 value widened to fp32 by bits (tier-2 backwards hold their rows in 16 bits
  through a reduction and widen them again after it).

What a target defines is read with ``ast`` (never imported): a name bound at module level, in a conditional block
too (this host's ``tanh`` is bound in an ``if``/``else`` on the interpreter), counts as the helper and is reused.
"""

from __future__ import annotations

import ast
import textwrap

from collections.abc import Callable

import libcst as cst

from tools.kernelgen.insert import InsertError
from tools.kernelgen.insert import add_function
from tools.kernelgen.insert import add_to_all
from tools.kernelgen.insert import check_invariants
from tools.kernelgen.insert import is_line_subsequence
from tools.kernelgen.insert.errors import parse_source
from tools.kernelgen.insert.ordering import BLANK_LINE
from tools.kernelgen.insert.ordering import is_import_line
from tools.kernelgen.layout import OPS_UTILS

UTILS_MODULE = "liger_kernel.ops.utils"

# Plain host functions (no imports; what they call of the file: NEEDS), each added at its alphabetical place among the
# target's functions.
HOST_SOURCES = {
    "ceil_div": '''
def ceil_div(n: int, d: int) -> int:
    """``triton.cdiv`` for host integers: a plain function, cheaper to call on the host than a ConstexprFunction."""
    return -(-n // d)
''',
    "next_power_of_2": '''
def next_power_of_2(n: int) -> int:
    """The least power of 2 that is at least ``n`` (1 for ``n <= 1``): ``triton.next_power_of_2`` for host integers,
    a plain function, cheaper to call on the host than a ConstexprFunction."""
    return 1 << max(n - 1, 0).bit_length()
''',
    "scale_by_grad_output": '''
def scale_by_grad_output(grad, grad_output):
    """``grad``, stored by a forward for a grad_output of 1, times ``grad_output`` in place on the device (one scalar,
    or one value per row of ``grad``'s last dim); returns ``grad``."""
    rows = grad.view(-1, grad.shape[-1])
    if rows.numel() == 0:
        return grad
    grad_output = grad_output.reshape(-1).contiguous()
    block_size = min(4096, 1 << (rows.shape[1] - 1).bit_length())
    # At most 1024 programs, each walking rows: when grad_output is 1 they return at once, where one program a row
    # would launch as many as the vocabulary has classes (d(weight) of a fused linear loss).
    scale_by_grad_output_kernel[(min(rows.shape[0], 1024),)](
        rows,
        rows.stride(0),
        grad_output,
        rows.shape[0],
        rows.shape[1],
        PER_ROW=grad_output.numel() != 1,
        BLOCK_SIZE=block_size,
        num_warps=8 if block_size >= 2048 else 4,
    )
    return grad
''',
}
# Helpers that call others (added with them).
NEEDS = {"scale_by_grad_output": ("scale_by_grad_output_kernel",)}

GET_NUM_SMS_SOURCE = '''
def get_num_sms() -> int:
    """Streaming multiprocessors (an XPU's subslices) of the current GPU, to size persistent grids."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return torch.xpu.get_device_properties(torch.xpu.current_device()).gpu_subslice_count
    return 4  # Triton's CPU interpreter runs programs one by one: a few partial sums keep the reduction tested
'''

IS_TRITON_INTERPRETER_SOURCE = '''
def is_triton_interpreter() -> bool:
    """True when Triton kernels run on the CPU under Triton's interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"
'''

# The interpreted definitions of the jit math helpers (compiled, each is libdevice's function of the same name).
INTERPRETED_SOURCES = {
    "erfc": """
@triton.jit
def erfc(x):
    # 1 - erf(x) without the cancellation that leaves 1 - erf(x) zero from x = 4 on: Chebyshev's fit of erfc(|x|)
    # as t * exp(-x^2 + P(t)), t = 1 / (1 + |x| / 2) (relative error under 1.2e-7 everywhere), and 2 - erfc(-x)
    # below 0.
    z = tl.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    p = -0.82215223 + t * 0.17087277
    p = 1.48851587 + t * p
    p = -1.13520398 + t * p
    p = 0.27886807 + t * p
    p = -0.18628806 + t * p
    p = 0.09678418 + t * p
    p = 0.37409196 + t * p
    p = 1.00002368 + t * p
    p = -1.26551223 + t * p
    tail = t * tl.exp(-z * z + p)
    return tl.where(x < 0.0, 2.0 - tail, tail)
""",
    "expm1": """
@triton.jit
def expm1(x):
    # exp(x) - 1 keeping the digits of a small x: Kahan's (u - 1) * x / log(u) with u = exp(x) cancels u's
    # rounding error below |x| = 1 (u == 1 gives x itself); beyond it exp(x) - 1 loses under an ulp.
    u = tl.exp(x)
    near_zero = u == 1.0
    small = (u - 1.0) * x / tl.log(tl.where(near_zero | (tl.abs(x) >= 1.0), 2.0, u))
    return tl.where(tl.abs(x) >= 1.0, u - 1.0, tl.where(near_zero, x, small))
""",
    "log1p": """
@triton.jit
def log1p(x):
    # log(1 + x) keeping the digits of a small x that 1 + x rounds away: log(u) * x / (u - 1) with u = 1 + x
    # cancels u's rounding error (Goldberg), u == 1 gives x itself and u == inf gives inf.
    u = 1.0 + x
    exact = (u == 1.0) | (u == float("inf"))
    return tl.where(exact, tl.where(u == 1.0, x, u), tl.log(u) * x / tl.where(exact, 1.0, u - 1.0))
""",
    "pow": """
@triton.jit
def pow(x, y):
    # |x| ** y by exp2/log2; a negative base keeps its sign for an odd integer exponent and gives NaN for a
    # fractional one, and anything ** 0 is 1, as in torch (and libdevice).
    magnitude = tl.exp2(y * tl.log2(tl.abs(x)))
    whole = y == tl.floor(y)
    odd = whole & (y - 2.0 * tl.floor(0.5 * y) == 1.0)
    signed = tl.where(odd, -magnitude, magnitude)
    negative = tl.where(whole, signed, float("nan"))
    return tl.where(y == 0.0, 1.0, tl.where(x < 0.0, negative, magnitude))
""",
    "tanh": """
@triton.jit
def tanh(x):
    # tanh(|x|) = -m / (2 + m) with m = expm1(-2|x|), which neither overflows nor, unlike 2 * sigmoid(2x) - 1,
    # loses relative precision near 0 (that form is off by ~1e-5 relative at |x| = 0.01). expm1 is Kahan's
    # exp(y) - 1 = (u - 1) * y / log(u) with u = exp(y), accurate to a few ulps; y is clamped at -60, where
    # tanh is 1 in fp32 anyway, so u never underflows to 0, and u == 1 (y ~ 0) gives m = y.
    y = tl.maximum(-2.0 * tl.abs(x), -60.0)
    u = tl.exp(y)
    near_zero = u == 1.0
    m = tl.where(near_zero, y, (u - 1.0) * y / tl.where(near_zero, 1.0, tl.log(u)))
    t = -m / (2.0 + m)
    return tl.where(x < 0, -t, t)
""",
}
JIT_MATH = tuple(sorted(INTERPRETED_SOURCES))
# Jit code of core ``tl`` ops, compiled and interpreted alike (added as a plain function): math, and the kernel that
# scales stored gradients.
CORE_SOURCES = {
    "log1p_unit": """
@triton.jit
def log1p_unit(v):
    # log(1 + v) for v in [0, 1] (softplus's exp(-|u|)) as v * p(v), p a degree-8 polynomial fitted to log1p(v) / v
    # (minimax relative error, 3e-8): within 2 ulps of log1p over [0, 1], exact at 0, and keeps the digits of a
    # small v that 1 + v would round away. Nine FMAs, fewer instructions than tl.log's range reduction and polynomial.
    p = 0.005232689902186394 * v - 0.029505223035812378
    p = p * v + 0.07822593301534653
    p = p * v - 0.13663244247436523
    p = p * v + 0.19106006622314453
    p = p * v - 0.2484298199415207
    p = p * v + 0.3331909775733948
    p = p * v - 0.4999949336051941
    p = p * v + 0.9999999403953552
    return p * v
""",
    "scale_by_grad_output_kernel": """
@triton.jit
def scale_by_grad_output_kernel(
    grad_ptr,
    grad_row_stride,
    grad_output_ptr,
    n_rows,
    n_cols: tl.constexpr,
    PER_ROW: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    # Rows program_id, program_id + num_programs, ... of a gradient the forward stored for a grad_output of 1, times
    # the real grad_output in place: one scalar, or one value a row (PER_ROW). A loss that is the last op gets a
    # scalar of exactly 1: every program returns at once, with no pass over the gradient and no host sync.
    if not PER_ROW:
        if tl.load(grad_output_ptr).to(tl.float32) == 1.0:
            return
    row = tl.program_id(0).to(tl.int64)
    # A while loop: Triton's CPU interpreter takes no runtime bound in range().
    while row < n_rows:
        if PER_ROW:
            scale = tl.load(grad_output_ptr + row).to(tl.float32)
        else:
            scale = tl.load(grad_output_ptr).to(tl.float32)
        for start in range(0, n_cols, BLOCK_SIZE):
            cols = start + tl.arange(0, BLOCK_SIZE)
            mask = cols < n_cols
            grad = tl.load(grad_ptr + row * grad_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(grad_ptr + row * grad_row_stride + cols, (grad * scale).to(grad_ptr.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)
""",
    "tanh_from_exp": """
@triton.jit
def tanh_from_exp(x):
    # tanh from one exponential: an odd Taylor polynomial near 0 (where 1 - exp(-2|x|) would cancel; below
    # |x| = 0.1 the first term left out, 62 x^9 / 2835, is under 3e-10 of tanh) and the overflow-free exponential
    # form elsewhere. Kernels with other transcendentals call it instead of libdevice's tanh, which takes registers
    # they need.
    x2 = x * x
    series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))))
    e = tl.exp(-2.0 * tl.abs(x))
    magnitude = (1.0 - e) / (1.0 + e)
    return tl.where(tl.abs(x) < 0.1, series, tl.where(x < 0.0, -magnitude, magnitude))
""",
    "widen_to_fp32": """
@triton.jit
def widen_to_fp32(x):
    # A value as loaded (its storage dtype) in fp32. bf16 is the upper half of an fp32, so it widens exactly by
    # bits; a kernel holding a row through a reduction widens it again after the reduction with this, which the
    # compiler cannot merge with the conversion before it, so the row stays held in 16-bit registers. Other
    # dtypes convert as usual.
    if x.dtype == tl.bfloat16:
        widened = (x.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
    else:
        widened = x.to(tl.float32)
    return widened
""",
}
HELPERS = (*sorted(HOST_SOURCES), "get_num_sms", "is_triton_interpreter", *JIT_MATH, *sorted(CORE_SOURCES))

_BLOCK_COMMENT = """\
# libdevice math is compiled to PTX intrinsics and does not exist under the interpreter (``libdevice.tanh`` is
# ``None`` there), so kernels import these names instead and get a formula built from core ``tl`` ops on the CPU."""
_LIBDEVICE_IMPORT = """\
    try:
        from triton.language.extra import libdevice
    except ImportError:  # Triton < 3.0 ships libdevice under the CUDA namespace
        from triton.language.extra.cuda import libdevice"""
# The module-level names each inserted piece reads, with the import that binds them.
_IMPORTS = {"os": "import os", "torch": "import torch", "triton": "import triton", "tl": "import triton.language as tl"}


def defined_names(source: str) -> frozenset[str]:
    """Names ``source`` binds at module level: defs, classes, assignments and imports, in module-level ``if``/``try``
    blocks too (an unparsable file defines nothing)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return frozenset()
    names: set[str] = set()
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            pending += [*node.body, *node.orelse, *getattr(node, "handlers", ()), *getattr(node, "finalbody", ())]
        elif isinstance(node, ast.ExceptHandler):
            pending += node.body
    return frozenset(names)


def jit_math_block(names: list[str], interpreter_test: str) -> str:
    """The module-level block that binds the jit math helpers ``names``: core-op formulas under the interpreter,
    libdevice's functions compiled. ``interpreter_test``: the condition that tells the two apart."""
    interpreted = "\n\n".join(textwrap.indent(INTERPRETED_SOURCES[name].strip("\n"), "    ") for name in names)
    aliases = "\n".join(f"    {name} = libdevice.{name}" for name in names)
    return f"{_BLOCK_COMMENT}\nif {interpreter_test}:\n\n{interpreted}\n\nelse:\n{_LIBDEVICE_IMPORT}\n\n{aliases}\n"


def missing_helpers(utils_source: str, used: set[str]) -> list[str]:
    """The helpers among ``used`` that the target's ``ops/utils.py`` does not define, in ``HELPERS`` order."""
    defined = defined_names(utils_source)
    used = set(used) | {needed for name in used for needed in NEEDS.get(name, ())}
    return [name for name in HELPERS if name in used and name not in defined]


def add_kernel_helpers(source: str, names: list[str], sort_imports: Callable[[str], str]) -> str:
    """``source`` (the target's ``ops/utils.py``) with kernelgen's versions of the helpers ``names``: ``get_num_sms``
    at its alphabetical place among the functions, the jit math in one block before ``__all__`` (which lists them,
    if the file has one), and the imports they read. ``sort_imports`` places new import lines as the target's
    isort settings want (they are first put above the file's first import); every original line is kept."""

    def insert(text: str) -> str:
        defined = defined_names(text)
        wanted = [name for name in names if name not in defined]
        if not wanted:
            return text
        reads = {"torch"} if "get_num_sms" in wanted else set()
        if "is_triton_interpreter" in wanted:
            reads.add("os")
        math = [name for name in wanted if name in INTERPRETED_SOURCES]
        core = [name for name in wanted if name in CORE_SOURCES]
        if math:
            reads |= {"triton", "tl"} | (set() if "is_triton_interpreter" in defined else {"os"})
        if core:
            reads |= {"triton", "tl"}
        text = _add_imports(text, [line for name, line in _IMPORTS.items() if name in reads and name not in defined])
        for name in wanted:
            if name in HOST_SOURCES:
                text = add_function(text, HOST_SOURCES[name].lstrip("\n"))
        if "get_num_sms" in wanted:
            text = add_function(text, GET_NUM_SMS_SOURCE.lstrip("\n"))
        if "is_triton_interpreter" in wanted:
            text = add_function(text, IS_TRITON_INTERPRETER_SOURCE.lstrip("\n"))
        for name in core:
            text = add_function(text, CORE_SOURCES[name].lstrip("\n"))
        if math:
            test = "is_triton_interpreter()" if "is_triton_interpreter" in defined else _ENV_TEST
            text = _add_block(text, jit_math_block(math, test))
        if "__all__" in defined:
            for name in wanted:
                text = add_to_all(text, name)
        return text

    try:
        result = insert(source)
        if result != source:
            sorted_result = sort_imports(result)
            result = sorted_result if _keeps_lines(source, sorted_result) else result
        check_invariants(OPS_UTILS, source, result, insert)
    except InsertError as error:
        raise InsertError(OPS_UTILS, f"adding {', '.join(names)}: {error.message}") from None
    return result


_ENV_TEST = 'os.environ.get("TRITON_INTERPRET", "0") == "1"'


def _keeps_lines(before: str, after: str) -> bool:
    """The isort pass kept every line of the original file in order: it only placed the new imports (on a file whose
    own imports were unsorted it would reorder those too, and is not taken)."""
    return is_line_subsequence(before, after)


def _add_imports(source: str, lines: list[str]) -> str:
    """``lines`` above the first module-level import (after the docstring when there is none)."""
    if not lines:
        return source
    tree = parse_source(source)
    body = list(tree.body)
    statements = [cst.parse_statement(f"{line}\n") for line in lines]
    first = next((index for index, statement in enumerate(body) if is_import_line(statement)), None)
    if first is None:
        first = 1 if body and _is_docstring(body[0]) else 0
        statements[0] = statements[0].with_changes(leading_lines=(BLANK_LINE,) if first else ())
        if first < len(body):
            body[first] = body[first].with_changes(leading_lines=(BLANK_LINE, BLANK_LINE, *body[first].leading_lines))
    else:
        statements[0] = statements[0].with_changes(leading_lines=body[first].leading_lines)
        body[first] = body[first].with_changes(leading_lines=())
    body[first:first] = statements
    return tree.with_changes(body=body).code


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _add_block(source: str, block: str) -> str:
    """``block`` (module-level statements) before a trailing ``__all__`` assignment, else at the end."""
    tree = parse_source(source)
    body = list(tree.body)
    # Parsed after a placeholder statement, so the block's leading comment stays its own (libcst gives a module's
    # leading comments to the module's header).
    statements = list(parse_source(f"pass\n{block}".replace("\n", tree.default_newline)).body)[1:]
    statements[0] = statements[0].with_changes(leading_lines=(BLANK_LINE, BLANK_LINE, *statements[0].leading_lines))
    position = len(body) - 1 if body and _assigns_all(body[-1]) else len(body)
    body[position:position] = statements
    return tree.with_changes(body=body).code


def _assigns_all(statement: cst.BaseStatement) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    small = statement.body[0]
    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else []
    return any(isinstance(t, cst.Name) and t.value == "__all__" for t in targets)


__all__ = [
    "HELPERS",
    "JIT_MATH",
    "UTILS_MODULE",
    "add_kernel_helpers",
    "defined_names",
    "jit_math_block",
    "missing_helpers",
]
