"""Starting values that follow a module reference's constructor otherwise than as one of its arguments.

``self.g = nn.Parameter(torch.ones(1) * dim ** 0.5)`` starts ``g`` at 2.83 when traced at ``dim=8`` and at 4.0 at
``dim=16``: a module that wrote 2.83 would start every other size wrong. Such a value is found by building the
reference again at another size; the generated module then writes the reference's own expression of it, which
``initial_expression`` reads from ``__init__`` where it uses nothing but the constructor's arguments, torch and math.
"""

from __future__ import annotations

import ast
import builtins

# Names an expression copied into the generated module may read beside the constructor's arguments: the module
# file imports torch and nn (and math where the expression reads it).
MODULES = frozenset({"torch", "nn", "math"})
PARAMETER_CALLS = frozenset({"nn.Parameter", "torch.nn.Parameter", "Parameter"})


def initial_expression(source: str, entry: str, attribute: str, constructor: set[str]) -> str | None:
    """The expression ``__init__`` of class ``entry`` wraps in ``nn.Parameter`` for ``self.<attribute>``, where
    it reads only ``constructor``'s names, torch, nn, math and builtins; None where there is no such one."""
    init = _constructor(source, entry)
    if init is None:
        return None
    found = []
    for node in _assignments_to(init, attribute):
        call = node.value
        if isinstance(call, ast.Call) and ast.unparse(call.func) in PARAMETER_CALLS and call.args:
            found.append(call.args[0])
    return _self_contained(init, found, constructor)


def held_expression(source: str, entry: str, attribute: str, constructor: set[str]) -> str | None:
    """The expression ``__init__`` of class ``entry`` holds as ``self.<attribute>`` (``register_buffer`` or a plain
    assignment) where it computes it (``torch.linspace(0.5, 1.5, num_classes)``) from ``constructor``'s names,
    torch, nn, math and builtins; None where there is none, or it is one constructor argument as given."""
    init = _constructor(source, entry)
    if init is None:
        return None
    found = [node.value for node in _assignments_to(init, attribute)]
    holder, _, keyword = attribute.rpartition(".")
    if holder and "." not in holder:
        # A held loss module's argument: ``self.loss = nn.CrossEntropyLoss(weight=EXPRESSION)`` holds loss.weight.
        for node in _assignments_to(init, holder):
            if isinstance(node.value, ast.Call):
                found += [k.value for k in node.value.keywords if k.arg == keyword]
    for node in ast.walk(init):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "self.register_buffer"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == attribute
        ):
            found.append(node.args[1])
    if len(found) == 1 and isinstance(found[0], ast.Name) and found[0].id in constructor:
        return None
    return _self_contained(init, found, constructor)


def _constructor(source: str, entry: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == entry.split(".")[0]), None)
    return next((n for n in (cls.body if cls else []) if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)


def _assignments_to(init: ast.FunctionDef, attribute: str) -> list[ast.Assign]:
    return [
        node
        for node in ast.walk(init)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Attribute)
        and ast.unparse(node.targets[0]) == f"self.{attribute}"
    ]


def _self_contained(init: ast.FunctionDef, found: list[ast.expr], constructor: set[str]) -> str | None:
    """The one expression ``found`` with ``init``'s locals written out, where it then reads the constructor's
    arguments, torch, nn, math and builtins only."""
    if len(found) != 1:
        return None  # none, or set in branches: which one the module takes is not for the text to say
    # A constructor argument assigned again (``dim = dim * 2``) is no local to write out: its value is not the text's.
    if any(name in constructor for name in _assigned_names(init)):
        return None
    expression = _inline_locals(found[0], _local_values(init))
    names = {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)}
    if names - constructor - MODULES - set(dir(builtins)):
        return None
    return ast.unparse(expression)


def _assigned_names(init: ast.FunctionDef) -> set[str]:
    return {
        target.id
        for node in ast.walk(init)
        for target in (node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)])
        if isinstance(target, ast.Name)
    }


def _local_values(init: ast.FunctionDef) -> dict[str, ast.expr]:
    """The local names ``__init__`` assigns once (``scale = dim ** -0.5``), with their expressions."""
    assigned: dict[str, list[ast.expr]] = {}
    for node in ast.walk(init):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        )
        for target in targets:
            if isinstance(target, ast.Name):
                assigned.setdefault(target.id, []).append(node.value)
    return {name: values[0] for name, values in assigned.items() if len(values) == 1}


class _Inliner(ast.NodeTransformer):
    def __init__(self, values: dict[str, ast.expr], depth: int):
        self.values, self.depth = values, depth

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.values and self.depth > 0:
            return _Inliner(self.values, self.depth - 1).visit(
                ast.parse(f"({ast.unparse(self.values[node.id])})", mode="eval").body
            )
        return node


def _inline_locals(expression: ast.expr, values: dict[str, ast.expr], depth: int = 4) -> ast.expr:
    """``expression`` with the locals it reads written out (a few levels deep), so that it reads the constructor's
    arguments alone where they do."""
    return _Inliner(values, depth).visit(ast.parse(ast.unparse(expression), mode="eval").body)


def names_read(expression: str) -> set[str]:
    """The names an expression of a profile reads (none for an empty one)."""
    if not expression:
        return set()
    return {n.id for n in ast.walk(ast.parse(expression, mode="eval")) if isinstance(n, ast.Name)}


def reads_math(expression: str) -> bool:
    return "math" in names_read(expression)
