"""Arguments that default to None but that the entry reads as tensors (``gate=None`` then ``gate.to(torch.float32)``,
``hidden * F.silu(gate)`` or ``labels != ignore_index``): HF's gated norms take their gate so, and a model always passes it. Such an argument is
a tensor input; one the entry only passes on by keyword (``weight=weight``: an option of the call) or never reads
(HF's ``position_ids=None``) keeps its default."""

from __future__ import annotations

import ast

from tools.kernelgen.analyze.written import entry_function


def _compared_by_value(parent: ast.AST) -> bool:
    """``labels != ignore_index``: a comparison of values, not ``labels is None`` (which asks whether it was given)."""
    return isinstance(parent, ast.Compare) and not any(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops)


def read_as_tensors(source: str, entry: str, kind: str, names: list[str]) -> set[str]:
    """The ``names`` that the entry function (a module's ``forward``) reads as a tensor: a method's or attribute's
    receiver, an arithmetic operand or a call's positional argument, and never a keyword's value."""
    try:
        function = entry_function(ast.parse(source), entry, kind)
    except SyntaxError:
        return set()
    if function is None:
        return set()
    parents = {child: node for node in ast.walk(function) for child in ast.iter_child_nodes(node)}
    as_tensor, as_option = set(), set()
    for node in ast.walk(function):
        if not (isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load)):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.keyword):
            as_option.add(node.id)
        elif (
            (isinstance(parent, ast.Attribute) and parent.value is node)
            or isinstance(parent, (ast.BinOp, ast.UnaryOp))
            or (isinstance(parent, ast.Call) and node in parent.args)
            or _compared_by_value(parent)
        ):
            as_tensor.add(node.id)
    return as_tensor - as_option


def divisor_when_given(source: str, entry: str, kind: str, names: list[str]) -> tuple[str, int] | None:
    """(name, line) of the first of ``names`` that the entry asks whether it was given (``x is not None``) and divides
    by: Transformers' ``num_items_in_batch``, which turns a mean into a sum over the tokens of every micro-batch
    divided by their count when given."""
    try:
        function = entry_function(ast.parse(source), entry, kind)
    except SyntaxError:
        return None
    if function is None:
        return None
    checked = {
        operand.id
        for node in ast.walk(function)
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
        for operand in [node.left, *node.comparators]
        if isinstance(operand, ast.Name)
    }
    for node in sorted(ast.walk(function), key=lambda n: getattr(n, "lineno", 0)):
        divisor = node.right if isinstance(node, ast.BinOp) else node.value if isinstance(node, ast.AugAssign) else None
        if isinstance(getattr(node, "op", None), ast.Div) and isinstance(divisor, ast.Name):
            if divisor.id in names and divisor.id in checked:
                return divisor.id, node.lineno
    return None


# Keywords of torch's functions (F.cross_entropy, F.nll_loss, F.layer_norm, ...) whose value is a tensor of weights.
WEIGHT_KEYWORDS = ("weight", "pos_weight")


def weights_left_out(source: str, entry: str, kind: str, names: list[str]) -> list[tuple[str, str, str, int]]:
    """(name, call, keyword, line) of each of ``names`` (arguments defaulting to None) that the entry passes on only as a
    loss's weights (``F.nll_loss(..., weight=class_weight)``): traced at None, the kernel computes without them and
    takes no such argument."""
    try:
        function = entry_function(ast.parse(source), entry, kind)
    except SyntaxError:
        return []
    if function is None or not names:
        return []
    others = read_as_tensors(source, entry, kind, names)
    found = []
    for node in sorted(ast.walk(function), key=lambda n: getattr(n, "lineno", 0)):
        for keyword in node.keywords if isinstance(node, ast.Call) else []:
            value = keyword.value
            if keyword.arg in WEIGHT_KEYWORDS and isinstance(value, ast.Name) and value.id in names:
                if value.id not in others and value.id not in [name for name, *_ in found]:
                    found.append((value.id, ast.unparse(node.func), keyword.arg, node.lineno))
    return found


def numbers_when_absent(source: str, entry: str, kind: str, names: list[str]) -> dict[str, float]:
    """The ``names`` (arguments defaulting to None) that the entry sets to a number where absent, with that number:
    ``if scale is None: scale = 1.0``, ``scale = 1.0 if scale is None else scale``. Such an argument is a
    hyper-parameter of that default, not an optional tensor (``scale or 1.0`` tests the value itself: refused as
    control flow, as before)."""
    try:
        function = entry_function(ast.parse(source), entry, kind)
    except SyntaxError:
        return {}
    if function is None:
        return {}
    found: dict[str, float] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.If) and _is_none_test(node.test) and len(node.body) == 1 and not node.orelse:
            name = node.test.left.id
            assigned = node.body[0]
            if isinstance(assigned, ast.Assign) and [ast.unparse(t) for t in assigned.targets] == [name]:
                _add_number(found, name, assigned.value, names)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            if isinstance(value, ast.IfExp) and _is_none_test(value.test) and value.test.left.id == name:
                is_none = isinstance(value.test.ops[0], ast.Is)
                _add_number(found, name, value.body if is_none else value.orelse, names)
    return found


def _is_none_test(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )


def _add_number(found: dict[str, float], name: str, value: ast.expr, names: list[str]) -> None:
    try:
        number = ast.literal_eval(value)
    except ValueError:
        return
    if name in names and isinstance(number, (int, float)) and not isinstance(number, bool):
        found[name] = number
