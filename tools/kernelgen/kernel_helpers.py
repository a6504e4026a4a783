"""Helpers generated kernels import from the target's ``liger_kernel/ops/utils.py``, and the edit that adds the ones
a target lacks (an upstream Liger-Kernel checkout has none of them).

- ``ceil_div`` and ``next_power_of_2``: host-side integer math for grids and tiles (``triton.cdiv`` and
  ``triton.next_power_of_2`` are ConstexprFunctions in Triton 3.6 and cost about 5 us a call on the host, which a
  kernel's launch pays several times: at small shapes the host time is the step's time);
- ``get_num_sms``: streaming multiprocessors, to size the persistent grids of kernels with parameter gradients;
- ``is_triton_interpreter``: whether kernels run under ``TRITON_INTERPRET=1`` (the jit math below picks its
  formulas by it);
- ``own_buffer``: an input's own buffer for its gradient where it is contiguous and not under torch.compile (kernels
  that read each block of the input before they write its gradient there: losses over their logits, element-wise
  backwards);
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

Each helper's text is its definition in this repository's own ``utils.py`` (read, never copied here), but
``get_num_sms``, whose target form takes no device argument. What a target defines is read with ``ast`` (never imported): a name bound at module level, in a conditional block
too (this host's ``tanh`` is bound in an ``if``/``else`` on the interpreter), counts as the helper and is reused.
"""

from __future__ import annotations

import ast
import textwrap

from collections.abc import Callable
from pathlib import Path

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
# This repository's own utils.py (tools/kernelgen/ sits two levels below the root): the helpers' text a target lacks
# is its definition there, so the two never drift apart.
_OWN_UTILS = Path(__file__).resolve().parents[2] / OPS_UTILS


def _own_sources(names: tuple[str, ...], interpreted: bool = False) -> dict[str, str]:
    """The source of each of ``names`` as this repository's utils.py defines it (decorators included, dedented), at
    module level or, ``interpreted``, in its ``if is_triton_interpreter():`` block (the core-op formulas of the jit
    math libdevice gives when compiled)."""
    text = _OWN_UTILS.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    scope = tree.body
    if interpreted:
        scope = next(
            n.body for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "is_triton_interpreter()"
        )
    found = {}
    for node in scope:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found[node.name] = "\n" + textwrap.dedent("\n".join(lines[first - 1 : node.end_lineno])) + "\n"
    return {name: found[name] for name in names}


# Plain host functions (what they call of the file: NEEDS; the modules they read: HOST_READS), each added at its
# alphabetical place among the target's functions.
HOST_SOURCES = _own_sources(("ceil_div", "next_power_of_2", "own_buffer", "scale_by_grad_output"))
HOST_READS = {"get_num_sms": {"torch"}, "own_buffer": {"torch"}}
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

IS_TRITON_INTERPRETER_SOURCE = _own_sources(("is_triton_interpreter",))["is_triton_interpreter"]

# The interpreted definitions of the jit math helpers (compiled, each is libdevice's function of the same name).
INTERPRETED_SOURCES = _own_sources(("erfc", "expm1", "log1p", "pow", "tanh"), interpreted=True)
JIT_MATH = tuple(sorted(INTERPRETED_SOURCES))
# Jit code of core ``tl`` ops, compiled and interpreted alike (added as a plain function): math, and the kernel that
# scales stored gradients.
CORE_SOURCES = _own_sources(("log1p_unit", "scale_by_grad_output_kernel", "tanh_from_exp", "widen_to_fp32"))
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
        reads = {module for name in wanted for module in HOST_READS.get(name, ())}
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
