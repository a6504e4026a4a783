"""Starting values that follow a module reference's constructor otherwise than as one of its arguments.

``self.g = nn.Parameter(torch.ones(1) * dim ** 0.5)`` starts ``g`` at 2.83 when traced at ``dim=8`` and at 4.0 at
``dim=16``: a module that wrote 2.83 would start every other size wrong. Such a value is found by building the
reference again at another size; the generated module then writes the reference's own expression of it, which
``initial_expression`` reads from ``__init__`` where it uses nothing but the constructor's arguments, torch and math.
``held_expression`` does the same for a tensor the module holds (class weights built from ``num_classes``).

``__init__`` is read in order: each local (``prior = prior / prior.sum()``) and each ``self.<name>`` is written out
as it stands where it is read; what a branch or loop assigns is unknown after it.
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
    held = _held_values(source, entry, constructor)
    if held is None or attribute not in held:
        return None
    value = held[attribute]
    if not (isinstance(value, ast.Call) and ast.unparse(value.func) in PARAMETER_CALLS and value.args):
        return None
    return _self_contained(value.args[0], constructor)


def held_expression(source: str, entry: str, attribute: str, constructor: set[str]) -> str | None:
    """The expression ``__init__`` of class ``entry`` holds as ``self.<attribute>`` (``register_buffer`` or a plain
    assignment) where it computes it (``torch.linspace(0.5, 1.5, num_classes)``) from ``constructor``'s names,
    torch, nn, math and builtins; None where there is none, or it is one constructor argument as given. A held loss
    module's argument counts: ``self.loss = nn.CrossEntropyLoss(weight=EXPRESSION)`` holds ``loss.weight``."""
    held = _held_values(source, entry, constructor)
    if held is None:
        return None
    value = held.get(attribute)
    holder, _, keyword = attribute.rpartition(".")
    if value is None and holder in held and isinstance(held[holder], ast.Call):
        value = next((k.value for k in held[holder].keywords if k.arg == keyword), None)
    if value is None or (isinstance(value, ast.Name) and value.id in constructor):
        return None
    return _self_contained(value, constructor)


def names_read(expression: str) -> set[str]:
    """The names an expression of a profile reads (none for an empty one)."""
    if not expression:
        return set()
    return {n.id for n in ast.walk(ast.parse(expression, mode="eval")) if isinstance(n, ast.Name)}


def reads_math(expression: str) -> bool:
    return "math" in names_read(expression)


def _held_values(source: str, entry: str, constructor: set[str]) -> dict[str, ast.expr] | None:
    """What ``__init__`` of class ``entry`` holds in ``self.<name>`` at its end, its locals written out; None where
    there is no such ``__init__``. A constructor argument assigned again (``dim = dim * 2``) is no longer the
    argument: it is written out too."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == entry.split(".")[0]), None)
    init = next((n for n in (cls.body if cls else []) if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return None
    local: dict[str, ast.expr | None] = {}
    held: dict[str, ast.expr | None] = {}
    for statement in init.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], _written_out(statement.value, local, held)
            if isinstance(target, ast.Name):
                local[target.id] = value
            elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                held[target.attr] = value
            else:
                _forget(statement, local, held)
        elif isinstance(statement, ast.Expr) and _is_register(statement.value):
            name, value = statement.value.args[0].value, statement.value.args[1]
            held[name] = _written_out(value, local, held)
        else:
            _forget(statement, local, held)  # a branch, a loop, an augmented assignment: unknown after it
    return {name: value for name, value in held.items() if value is not None}


def _is_register(call: ast.expr) -> bool:
    return (
        isinstance(call, ast.Call)
        and ast.unparse(call.func) in ("self.register_buffer", "self.register_parameter")
        and len(call.args) >= 2
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    )


def _forget(statement: ast.stmt, local: dict, held: dict) -> None:
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local[node.id] = None
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and ast.unparse(node.value) == "self":
            held[node.attr] = None
        elif _is_register(node):
            held[node.args[0].value] = None


class _WriteOut(ast.NodeTransformer):
    """Locals and ``self.<name>`` read in an expression, replaced by what they hold (None where unknown: kept)."""

    def __init__(self, local: dict, held: dict):
        self.local, self.held = local, held

    def visit_Name(self, node: ast.Name) -> ast.expr:
        value = self.local.get(node.id)
        return _parenthesised(value) if value is not None else node

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        if isinstance(node.value, ast.Name) and node.value.id == "self" and self.held.get(node.attr) is not None:
            return _parenthesised(self.held[node.attr])
        return self.generic_visit(node)


def _parenthesised(value: ast.expr) -> ast.expr:
    return ast.parse(f"({ast.unparse(value)})", mode="eval").body


def _written_out(value: ast.expr, local: dict, held: dict) -> ast.expr:
    copy = ast.parse(ast.unparse(value), mode="eval").body
    return _WriteOut(local, held).visit(copy)


def _self_contained(expression: ast.expr, constructor: set[str]) -> str | None:
    """``expression`` as text where it reads the constructor's arguments, torch, nn, math and builtins only."""
    names = {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)}
    if names - constructor - MODULES - set(dir(builtins)) or "self" in names:
        return None
    return ast.unparse(expression)
