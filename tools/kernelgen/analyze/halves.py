"""GLU references that split one argument into two halves along the last dim (``a, b = x.chunk(2, dim=-1)``, or
torch's own ``F.glu(x, dim=-1)`` or ``nn.GLU()`` module, which is ``a * sigmoid(b)`` of those halves).

Element-wise kernels take the halves as two inputs, read in place (each a view of ``x`` with a row stride, as a fused
gate/up projection's halves are), so the reference is analyzed on its halves: the function's source is rewritten
with ``a, b`` for ``x`` and without the split statement. Every other line keeps its text and number, so messages
about the reference still point into the file as written. A function reference, or a module's ``forward``; ``x`` is
read by the split only (or, after it, as the half that took its name).
"""

from __future__ import annotations

import ast
import re

from tools.kernelgen.analyze.load import LoadedReference
from tools.kernelgen.analyze.load import reload_source
from tools.kernelgen.analyze.written import entry_function


def _literal(args: list[ast.expr], keywords: list[ast.keyword], position: int, keyword: str) -> list:
    """The literal a call passes at ``position`` of ``args`` or as ``keyword=``: [] when absent, [value] (or both, if
    written twice); ValueError when it is computed."""
    given = args[position : position + 1] + [k.value for k in keywords if k.arg == keyword]
    return [ast.literal_eval(node) for node in given]


def _split_call(value: ast.expr, argument: str) -> bool:
    """``argument.chunk(2, -1)``, ``argument.chunk(2, dim=-1)``, ``torch.chunk(argument, 2, -1 / dim=-1)``."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute) or value.func.attr != "chunk":
        return False
    args = list(value.args)
    if isinstance(value.func.value, ast.Name) and value.func.value.id == argument:
        pass  # the method form
    elif args and isinstance(args[0], ast.Name) and args[0].id == argument:
        args = args[1:]  # torch.chunk(argument, ...)
    else:
        return False
    chunks, dims = _literal(args, value.keywords, 0, "chunks"), _literal(args, value.keywords, 1, "dim")
    return chunks == [2] and dims == [-1]


def _split_statement(function: ast.FunctionDef) -> tuple[ast.Assign, str, list[str]] | None:
    """The statement ``a, b = x.chunk(2, dim=-1)`` of a positional argument ``x`` used nowhere else."""
    arguments = [a.arg for a in function.args.posonlyargs + function.args.args]
    for statement in function.body:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
            continue
        target = statement.targets[0]
        if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
            continue
        if not all(isinstance(name, ast.Name) for name in target.elts):
            continue
        for argument in arguments:
            try:
                if not _split_call(statement.value, argument):
                    continue
            except ValueError:  # a non-literal chunk count or dim
                return None
            halves = [name.id for name in target.elts]
            reads = [
                n
                for n in ast.walk(function)
                if isinstance(n, ast.Name) and n.id == argument and isinstance(n.ctx, ast.Load)
            ]
            # x read only by the split, or after it where a half took its name (``x, gate = x.chunk(2, -1)``)
            later = [n for n in reads if (n.lineno, n.col_offset) > (statement.end_lineno, statement.end_col_offset)]
            if len(reads) != 1 + len(later) or (later and argument not in halves):
                return None  # x itself is read again
            return statement, argument, halves
    return None


def _glu_modules(module: ast.Module, function: ast.FunctionDef) -> dict[str, list]:
    """``self.NAME = nn.GLU(dim)`` of the class whose ``forward`` is ``function``: NAME -> the dims it names."""
    for node in module.body:
        if isinstance(node, ast.ClassDef) and function in node.body:
            found = {}
            for statement in ast.walk(node):
                if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
                    continue
                target, value = statement.targets[0], statement.value
                if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
                    continue
                if target.value.id != "self" or not isinstance(value, ast.Call):
                    continue
                callee = value.func
                if (callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")) == "GLU":
                    try:
                        found[target.attr] = _literal(value.args, value.keywords, 0, "dim")
                    except ValueError:
                        continue
            return found
    return {}


def _glu_call(function: ast.FunctionDef, glu_modules: dict[str, list]) -> tuple[ast.Call, str] | None:
    """``F.glu(x)`` / ``F.glu(x, -1)`` / ``torch.nn.functional.glu(x, dim=-1)``, or ``self.NAME(x)`` of an
    ``nn.GLU(dim=-1)`` module, on one line, of a positional argument ``x`` read nowhere else."""
    arguments = [a.arg for a in function.args.posonlyargs + function.args.args]
    for node in ast.walk(function):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if not node.args or not isinstance(node.args[0], ast.Name) or node.args[0].id not in arguments:
            continue
        owner = node.func.value
        held = isinstance(owner, ast.Name) and owner.id == "self"
        if held and node.func.attr not in glu_modules or not held and node.func.attr != "glu":
            continue
        try:
            dims = glu_modules[node.func.attr] if held else _literal(node.args, node.keywords, 1, "dim")
        except ValueError:  # a dim computed at run time
            return None
        if dims not in ([], [-1]) or node.lineno != node.end_lineno:
            return None
        argument = node.args[0].id
        reads = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == argument]
        return (node, argument) if len(reads) == 1 else None
    return None


def _half_names(function: ast.FunctionDef, argument: str) -> list[str]:
    """``a`` and ``b`` as F.glu's documentation names the halves, unless the function uses those names."""
    used = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)} | {
        a.arg for a in function.args.posonlyargs + function.args.args + function.args.kwonlyargs
    }
    return ["a", "b"] if not {"a", "b"} & used else [f"{argument}_a", f"{argument}_b"]


def _splitting_function(module: ast.Module, loaded: LoadedReference) -> ast.FunctionDef | None:
    """The function that takes the reference's tensors: the entry function, or the entry module's ``forward``."""
    function = entry_function(module, loaded.entry, loaded.kind)
    return None if function is None or function.decorator_list else function


def split_into_halves(loaded: LoadedReference) -> tuple[LoadedReference, str] | None:
    """The reference rewritten on the halves of the argument it chunks, and a remark for the profile; None when it
    splits no argument so."""
    try:
        module = ast.parse(loaded.source)
    except SyntaxError:
        return None
    function = _splitting_function(module, loaded)
    if function is None:
        return None
    found = _split_statement(function)
    glu = _glu_call(function, _glu_modules(module, function)) if found is None else None
    if found is None and glu is None:
        return None
    argument = found[1] if found else glu[1]
    halves = found[2] if found else _half_names(function, argument)
    parameter = next(a for a in function.args.posonlyargs + function.args.args if a.arg == argument)
    if parameter.lineno != parameter.end_lineno:
        return None
    lines = loaded.source.splitlines(keepends=True)
    if glu is not None:  # F.glu(x, -1) is a * sigmoid(b) of the halves, written in place of the call
        call = glu[0]
        row = lines[call.lineno - 1]
        glu_of_halves = f"({halves[0]} * {halves[1]}.sigmoid())"
        lines[call.lineno - 1] = row[: call.col_offset] + glu_of_halves + row[call.end_col_offset :]
    annotation = ast.get_source_segment(loaded.source, parameter.annotation) if parameter.annotation else None
    replacement = ", ".join(f"{h}: {annotation}" if annotation else h for h in halves)
    row = lines[parameter.lineno - 1]
    lines[parameter.lineno - 1] = row[: parameter.col_offset] + replacement + row[parameter.end_col_offset :]
    if found is not None:
        statement = found[0]
        indent = " " * statement.col_offset
        note = f"{indent}pass  # kernelgen: {', '.join(halves)} = {argument}.chunk(2, dim=-1), taken as two inputs\n"
        blank = f"{indent}pass\n"
        for index in range(statement.lineno - 1, statement.end_lineno):
            lines[index] = note if index == statement.lineno - 1 else blank
    rewritten = reload_source("".join(lines), loaded)
    remark = (
        f"{INTERFACE}{argument}.chunk(2, dim=-1) is taken as two inputs, {' and '.join(halves)}: call the kernel with "
        f"*{argument}.chunk(2, dim=-1) (each half is read in place, as a view with the row stride of {argument})"
    )
    return rewritten, remark


# How the remark of a split starts: ``new`` prints it beside the roles the analysis decided.
INTERFACE = "interface: "
_SPLIT_REMARK = re.compile(rf"^{INTERFACE}(\w+)\.chunk\(2, dim=-1\) is taken as two inputs, (\w+) and (\w+):")


def split_of(remarks: list[str]) -> str | None:
    """``a, b = x.chunk(2, dim=-1)`` when a profile's remarks say its two inputs are halves of one argument."""
    for remark in remarks:
        found = _SPLIT_REMARK.match(remark)
        if found:
            argument, first, second = found.groups()
            return f"{first}, {second} = {argument}.chunk(2, dim=-1)"
    return None
