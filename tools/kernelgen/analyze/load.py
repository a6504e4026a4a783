"""Resolve a REF string to the PyTorch reference it names and load it.

REF forms: a built-in name (``geglu``), a Python file (``my_op.py``: its single public function or nn.Module
subclass), ``my_op.py:Symbol``, or ``-`` / ``-:Symbol`` for source text read from stdin by the CLI. The
source is the user's own code, so it is executed as-is in a fresh module namespace; its text is kept for
the profile, and registered with ``linecache`` so traces and errors can quote its lines.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import linecache
import sys
import traceback
import types

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

import torch.nn as nn

from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.references import builtin_reference_path
from tools.kernelgen.analyze.references import list_builtin_references

STDIN_ORIGIN = "<stdin>"
HINTS_NAME = "KERNELGEN"
_module_counter = itertools.count()


@dataclass
class LoadedReference:
    """The reference entry point with everything later stages need to report on it."""

    source: str
    entry: str
    obj: Any
    kind: str  # "function" or "module"
    origin: str  # "builtin:geglu", the path as given, or "<stdin>"
    filename: str  # the file name compiled into the code objects (stack traces carry it)
    hints: dict[str, Any] = field(default_factory=dict)
    builtin_name: str | None = None


def split_symbol(ref: str) -> tuple[str, str | None]:
    """``file.py:Symbol`` -> (``file.py``, ``Symbol``); a colon not followed by an identifier stays in the path."""
    head, sep, tail = ref.rpartition(":")
    if sep and head and tail.isidentifier():
        return head, tail
    return ref, None


def read_stdin_source(ref: str) -> str | None:
    """The reference's source from standard input when REF is ``-`` or ``-:Symbol``; None for any other REF."""
    if split_symbol(ref.strip())[0] != "-":
        return None
    text = sys.stdin.read()
    if not text.strip():
        raise AnalyzeError("reference '-': nothing on standard input")
    return text


def load_reference(ref: str, stdin_source: str | None = None) -> LoadedReference:
    if not isinstance(ref, str) or not ref.strip():
        raise AnalyzeError("empty REF: give a built-in name, a file.py, file.py:Symbol or - (stdin)")
    target, symbol = split_symbol(ref.strip())
    if target == "-":
        if stdin_source is None:
            raise AnalyzeError("REF '-' reads the reference from stdin, but no source text was given")
        return _load_source(stdin_source, STDIN_ORIGIN, STDIN_ORIGIN, symbol)
    if symbol is None and target in list_builtin_references():
        path = builtin_reference_path(target)
        loaded = _load_source(path.read_text(encoding="utf-8"), f"builtin:{target}", str(path), None)
        loaded.builtin_name = target
        return loaded
    path = Path(target)
    if not path.is_file():
        if target.endswith(":") and Path(target[:-1]).is_file():
            raise AnalyzeError(f"no symbol after ':' in {target!r}: give file.py:Symbol, or file.py for its only entry")
        if symbol is None and "/" not in target and not target.endswith(".py"):
            available = ", ".join(list_builtin_references())
            raise AnalyzeError(
                f"unknown reference {target!r}: not a built-in (available: {available}) and no such file"
            )
        what = "is a directory, not a Python file" if path.is_dir() else "no such file"
        raise AnalyzeError(what, origin=target)
    if path.suffix in (".yaml", ".yml"):
        raise AnalyzeError("is a YAML file, not a Python reference: a profile is given with --profile", origin=target)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise AnalyzeError(f"cannot read the file ({error})", origin=target) from None
    return _load_source(source, target, str(path.resolve()), symbol)


def reload_source(source: str, loaded: LoadedReference) -> LoadedReference:
    """``loaded``'s entry from a rewritten ``source`` of the same file (same origin, same file name for messages)."""
    return _load_source(source, loaded.origin, loaded.filename, loaded.entry)


# Decorators that compile a function (TorchScript, torch.compile) without changing its math: dropped for tracing,
# which needs the Python function (a ScriptFunction cannot be traced by fx). The generated tests run the reference as
# written, decorators included.
_COMPILING_DECORATORS = {"torch.jit.script", "jit.script", "script", "torch.compile", "compile"}


def _without_compiling_decorators(source: str) -> str:
    """``source`` with each compiling decorator commented out (line numbers kept)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source  # _execute reports it
    lines = source.splitlines(keepends=True)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if ast.unparse(target) not in _COMPILING_DECORATORS:
                continue
            for index in range(decorator.lineno - 1, decorator.end_lineno):
                line = lines[index]
                indent = len(line) - len(line.lstrip())
                lines[index] = f"{line[:indent]}# kernelgen (traced as Python): {line[indent:]}"
    return "".join(lines)


_NO_GRAD = {"torch.no_grad", "no_grad"}


def _without_no_grad(source: str) -> str:
    """``source`` with each ``with torch.no_grad():`` block whose statements all assign one name traced as those
    values ``.detach()``-ed (line numbers kept): the trace does not see grad mode, and a value computed without
    gradient is a constant of the math, as ``.detach()`` makes it. Other blocks are left as written."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source  # _execute reports it
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (line index, column, text inserted there)
    for node in ast.walk(tree):
        if not isinstance(node, ast.With) or len(node.items) != 1:
            continue
        context = node.items[0].context_expr
        if not (isinstance(context, ast.Call) and ast.unparse(context.func) in _NO_GRAD and not context.args):
            continue
        assigns = [statement for statement in node.body if isinstance(statement, ast.Assign)]
        if len(assigns) != len(node.body) or any(
            len(a.targets) != 1 or not isinstance(a.targets[0], ast.Name) for a in assigns
        ):
            continue
        with_line = lines[node.lineno - 1]
        start = len(with_line) - len(with_line.lstrip())
        edits.append((node.lineno - 1, start, "if True:  # kernelgen: traced as .detach() of each value; "))
        for assign in assigns:
            value = assign.value
            edits.append((value.end_lineno - 1, value.end_col_offset, ").detach()"))
            edits.append((value.lineno - 1, value.col_offset, "("))
    # From the end of the source back, so each edit's offsets still hold.
    for index, column, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        line = lines[index]
        offset = len(line.encode("utf-8")[:column].decode("utf-8", errors="ignore"))  # ast columns count bytes
        lines[index] = line[:offset] + text + line[offset:]
    return "".join(lines)


def _load_source(source: str, origin: str, filename: str, symbol: str | None) -> LoadedReference:
    module = _execute(_without_no_grad(_without_compiling_decorators(source)), origin, filename)
    hints = module.__dict__.get(HINTS_NAME, {})
    if not isinstance(hints, dict):
        raise AnalyzeError(f"{HINTS_NAME} must be a dict of hints, got {type(hints).__name__}", origin=origin)
    candidates = _candidates(module)
    entry = symbol or hints.get("entry")
    if entry is None:
        if not candidates:
            raise AnalyzeError("defines no public function or nn.Module subclass to analyze", origin=origin)
        candidates = _uncalled(module, candidates)
        if len(candidates) > 1:
            raise AnalyzeError(
                f"defines several candidates ({', '.join(candidates)}); pick one with "
                + (f"--reference=-:{candidates[0]}" if origin == "<stdin>" else f"{origin}:{candidates[0]}"),
                origin=origin,
            )
        entry = candidates[0]
    if entry not in module.__dict__:
        listed = ", ".join(candidates) or "none"
        raise AnalyzeError(f"no symbol '{entry}' (candidates: {listed})", origin=origin)
    obj = module.__dict__[entry]
    if inspect.isclass(obj) and issubclass(obj, nn.Module):
        kind = "module"
    elif inspect.isfunction(obj):
        kind = "function"
    else:
        raise AnalyzeError(
            f"'{entry}' is a {type(obj).__name__}, not a function or nn.Module subclass", origin=origin, line=None
        )
    return LoadedReference(source, entry, obj, kind, origin, filename, dict(hints))


def remember_source(filename: str, source: str) -> None:
    """Let ``inspect`` find ``source`` under ``filename`` though it never touched the disk (stdin, a profile's copy):
    fx stack traces quote its lines, and ``torch.jit.script`` reads the functions it compiles from it."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def _execute(source: str, origin: str, filename: str) -> types.ModuleType:
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as error:
        raise AnalyzeError(f"syntax error: {error.msg}", origin=origin, line=error.lineno) from None
    name = f"_kernelgen_reference_{next(_module_counter)}"
    module = types.ModuleType(name)
    module.__file__ = filename
    remember_source(filename, source)
    # Registered so that classes defined in the reference (dataclasses, pickling) can find their module.
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except Exception as error:  # noqa: BLE001 - any failure of user code becomes one located line
        raise AnalyzeError(
            f"executing the reference failed: {type(error).__name__}: {error}",
            origin=origin,
            line=line_in_traceback(error, filename),
        ) from None
    return module


def line_in_traceback(error: BaseException, filename: str) -> int | None:
    """The innermost line of ``filename`` in the traceback of ``error`` (None when it never ran there)."""
    line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == filename:
            line = frame.lineno
    return line


def _candidates(module: types.ModuleType) -> list[str]:
    names = []
    for name, obj in module.__dict__.items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj) or (inspect.isclass(obj) and issubclass(obj, nn.Module)):
            names.append(name)
    return names


def _uncalled(module: types.ModuleType, candidates: list[str]) -> list[str]:
    """``candidates`` less those another candidate reads by name: a helper (a function, a lambda, a module class) that
    the entry calls is not an entry of its own. All of them when each one is read by another."""
    read = {name: _names_read(module.__dict__[name]) for name in candidates}
    roots = [name for name in candidates if not any(name in read[other] for other in candidates if other != name)]
    return roots or candidates


def _names_read(obj: Any) -> set[str]:
    """The global names that ``obj``'s code (a function's, or each method's of a class) reads, nested code included."""
    members = [obj] if inspect.isfunction(obj) else [getattr(m, "__func__", m) for m in vars(obj).values()]
    functions = [f for f in members if inspect.isfunction(f)]
    codes = [f.__code__ for f in functions]
    names: set[str] = set()
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes += [const for const in code.co_consts if isinstance(const, types.CodeType)]
    return names
