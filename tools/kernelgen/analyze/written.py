"""The reference's computation as its source writes it, for the docstrings (``forward_computation``) of kernels whose
traced description would not read as the user's code: index maps (``x[..., : x.shape[-1] // 2]``, ``chunk``,
``torch.cat``, helpers such as ``rotate_half``) and inputs the reference lays out itself (``cos.unsqueeze(dim)``),
which the trace records as slices of computed bounds or drops. HF's RoPE reads ``q_embed = (q * cos) +
(rotate_half(q) * sin)`` instead of the traced ``cat((-slice(q, index=(Ellipsis, slice(floordiv_1, ...``.

Only straight-line code is quoted (assignments and one final ``return``): the statements the returned values read,
in order, and the returned expressions under the outputs' names. Anything else (branches, loops, calls for effect)
gets None, and the caller keeps the traced description."""

from __future__ import annotations

import ast

_ASSIGNMENTS = (ast.Assign, ast.AnnAssign, ast.AugAssign)


def entry_function(tree: ast.Module, entry: str, kind: str) -> ast.FunctionDef | None:
    """The function that takes the reference's tensors: the top-level function ``entry``, or the ``forward`` of the
    top-level class ``entry`` (``kind`` "module"); None unless exactly one is defined."""
    scope: list[ast.stmt] = tree.body
    if kind == "module":
        classes = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == entry]
        if len(classes) != 1:
            return None
        scope = classes[0].body
    wanted = "forward" if kind == "module" else entry
    found = [node for node in scope if isinstance(node, ast.FunctionDef) and node.name == wanted]
    return found[0] if len(found) == 1 else None


def written_computation(source: str, entry: str, kind: str, output_names: list[str]) -> str | None:
    """``name = expression`` for each statement of ``entry`` the returned values read and each returned value not
    already a variable of that name, joined by ``; `` (one line); None where the entry is not straight-line code or
    returns another number of values than ``output_names``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    function = entry_function(tree, entry, kind)
    if function is None:
        return None
    body = list(function.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return None
    statements, returned = body[:-1], body[-1].value
    if not all(isinstance(statement, _ASSIGNMENTS) and _bound_names(statement) for statement in statements):
        return None
    values = returned.elts if isinstance(returned, ast.Tuple) else [returned]
    if len(values) != len(output_names):
        return None
    bound = {name for statement in statements for name in _bound_names(statement)}
    quoted = [_text(source, statement) for statement in _read_by(statements, values)]
    for name, value in zip(output_names, values):
        if not (isinstance(value, ast.Name) and value.id == name and name in bound):
            quoted.append(f"{name} = {_text(source, value)}")
    return "; ".join(quoted)


def _bound_names(statement: ast.stmt) -> list[str]:
    """The variables an assignment binds; empty when it assigns anything else (an attribute, an item)."""
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    names = []
    for target in targets:
        for element in target.elts if isinstance(target, ast.Tuple) else [target]:
            if not isinstance(element, ast.Name):
                return []
            names.append(element.id)
    return names


def _read_names(node: ast.AST) -> set[str]:
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load)}


def _read_by(statements: list[ast.stmt], values: list[ast.expr]) -> list[ast.stmt]:
    """The statements whose bindings ``values`` read, directly or through other statements, in order."""
    needed = set().union(*(_read_names(value) for value in values))
    kept = []
    for statement in reversed(statements):
        bound = set(_bound_names(statement))
        if not bound & needed:
            continue
        kept.append(statement)
        # x += y reads the x it updates; any other assignment's targets were not read before it.
        needed = (needed if isinstance(statement, ast.AugAssign) else needed - bound) | _read_names(statement)
    return kept[::-1]


def _text(source: str, node: ast.AST) -> str:
    """``node`` as written when it is on one line, else as Python prints it (comments and line breaks dropped)."""
    segment = ast.get_source_segment(source, node)
    return segment if segment is not None and "\n" not in segment else ast.unparse(node)
