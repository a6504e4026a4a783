"""What of a reference's source generated tests and benchmarks carry: its imports and the top-level definitions its
entry needs (functions, classes and assignments it reads, and what those read in turn), in the file's order.
Nothing else of the file: a statement that does work at import (a print, a file written, a hint table for analysis)
would run at every collection of the tests.
"""

from __future__ import annotations

import ast

from collections.abc import Iterator

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _defined_names(node: ast.stmt) -> list[str]:
    """The module-level names a definition statement binds (none for other statements)."""
    if isinstance(node, _DEFINITIONS):
        return [node.name]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets = [node.target]
    names: list[str] = []
    for target in targets:
        elements = target.elts if isinstance(target, ast.Tuple) else [target]
        if not all(isinstance(element, ast.Name) for element in elements):
            return []  # an assignment to an attribute or an item changes something else: not a definition
        names.extend(element.id for element in elements)
    return names


def _read_names(node: ast.AST) -> Iterator[str]:
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            yield child.id


def needed_statements(tree: ast.Module, entry: str) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(imports, definitions) of ``tree`` that ``entry`` needs, each in the file's order."""
    imports = [
        node
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        and not (isinstance(node, ast.ImportFrom) and node.module == "__future__")
    ]
    binders: dict[str, list[int]] = {}
    for index, node in enumerate(tree.body):
        for name in _defined_names(node):
            binders.setdefault(name, []).append(index)
    needed: set[int] = set()
    pending = [entry]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for index in binders.get(name, []):
            if index not in needed:
                needed.add(index)
                pending.extend(_read_names(tree.body[index]))
    return imports, [tree.body[index] for index in sorted(needed)]


def names_the_entry_takes(source: str, entry: str) -> set[str] | None:
    """The names through which ``entry`` can take a hyper-parameter: a function's arguments; a module's constructor and
    method arguments and the attributes it sets (``self.eps = ...``). None where that cannot be told from the source:
    ``**kwargs``, or a class built on another than ``nn.Module`` (its base may hold the attribute)."""
    node = next((n for n in ast.parse(source).body if isinstance(n, _DEFINITIONS) and n.name == entry), None)
    if node is None:
        return None
    if isinstance(node, ast.ClassDef):
        if any(ast.unparse(base) not in ("nn.Module", "torch.nn.Module", "Module") for base in node.bases):
            return None
        functions = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    else:
        functions = [node]
    names: set[str] = set()
    for function in functions:
        arguments = function.args
        if arguments.kwarg is not None:
            return None
        names.update(a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs])
    if isinstance(node, ast.ClassDef):
        for child in ast.walk(node):
            if isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Store):
                if isinstance(child.value, ast.Name) and child.value.id == "self":
                    names.add(child.attr)
            elif (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr in ("register_buffer", "register_parameter")
                and child.args
            ):
                first = child.args[0]  # self.register_buffer("scale", ...) binds an attribute too
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names.add(first.value)
            elif isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "setattr":
                return None  # attributes named at run time
    return names


def reference_source_problems(source: str, entry: str) -> list[str]:
    """Why ``source`` cannot give the generated tests ``entry`` (one phrase each), or nothing."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return [f"reference.source: does not parse (line {error.lineno}: {error.msg})"]
    except (ValueError, RecursionError, MemoryError) as error:
        return [f"reference.source: does not parse ({type(error).__name__})"]
    if not any(entry in _defined_names(node) for node in tree.body):
        return [f"reference.entry: {entry!r} is not defined at the top level of reference.source"]
    return []
