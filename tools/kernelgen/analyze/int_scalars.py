"""Arguments whose default is an int written without an annotation (``scale=1``; a module's ``alpha=2`` that
``__init__`` stores as ``self.alpha``) that the entry reads only as a number in tensor arithmetic
(``F.silu(x) * scale``, ``logits / temperature``): a float written as an int, as ``scale: float = 1`` says in so
many words, so the kernel takes it at run time. An int that picks a dim, a size, a count or an exponent (``dim=-1``,
``x.view(-1, n)``, ``x.chunk(n)``, ``x ** n``, ``range(n)``) stays an int, specialised into the trace; so does one
the entry only meets with other numbers (``n * 2``), which may be a size. An argument a torch function annotates
``float`` (``F.softplus(x, beta=beta)``) is a number as well."""

from __future__ import annotations

import ast
import inspect

import torch

from tools.kernelgen.analyze.written import entry_function

# Arithmetic that keeps a number a number: an int scaled, shifted or divided into a tensor's values.
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_SIGNS = (ast.USub, ast.UAdd)
# Calls whose result is a Python number or sequence, not a tensor.
_NUMBER_FUNCTIONS = frozenset(("abs", "float", "int", "len", "max", "min", "range", "round", "sum"))
_NUMBER_METHODS = frozenset(("dim", "element_size", "item", "numel", "size", "stride", "tolist"))
# Modules whose functions compute on Python numbers (``math.sqrt(d)``).
_NUMBER_MODULES = frozenset(("math", "np", "numpy", "operator"))


def read_as_numbers(
    source: str, entry: str, kind: str, names: list[str], tensors: list[str], namespace: dict
) -> set[str]:
    """The ``names`` (int-defaulted arguments) that the entry function (a module's ``forward``) reads, every time,
    as a number: an operand of ``+ - * /`` in an expression that also computes with a tensor (``tensors``: its
    tensor arguments, and the locals assigned from tensor values), or an argument torch takes as a float; and never
    assigns. ``namespace``: the reference module's globals, where the functions it calls are looked up."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    function = entry_function(tree, entry, kind)
    if function is None or not names:
        return set()
    parents = {child: node for node in ast.walk(function) for child in ast.iter_child_nodes(node)}
    tensor_names = _tensor_names(function, set(tensors))
    numbers, others = set(), set()
    for node in ast.walk(function):
        if not (isinstance(node, ast.Name) and node.id in names):
            continue
        if isinstance(node.ctx, ast.Load) and _read_as_number(node, parents, tensor_names, namespace):
            numbers.add(node.id)
        else:
            others.add(node.id)
    return numbers - others


def _read_as_number(node: ast.expr, parents, tensor_names: set[str], namespace: dict) -> bool:
    return _scales_a_tensor(node, parents, tensor_names) or _float_argument(node, parents, tensor_names, namespace)


# Argument types of an aten schema that take a number, not an int that picks something.
_NUMBER_TYPES = frozenset(("number", "float", "Optional[number]", "Optional[float]"))


def _float_argument(node: ast.expr, parents, tensor_names: set[str], namespace: dict) -> bool:
    """``node`` is passed as an argument that a torch function or tensor method takes as a float (``F.elu(x,
    alpha=alpha)``, ``F.softplus(x, beta=beta)``, ``x.clamp(min=low)``): annotated ``float``, or a number in its
    aten schema."""
    parent = parents.get(node)
    call, keyword = (parents.get(parent), parent.arg) if isinstance(parent, ast.keyword) else (parent, None)
    if not isinstance(call, ast.Call) or (keyword is None and node not in call.args):
        return False
    position = None if keyword is not None else call.args.index(node)
    if isinstance(call.func, ast.Attribute) and _is_tensor(call.func.value, tensor_names):
        # A tensor method: its schema's first argument is the tensor itself.
        return _schema_takes_number(call.func.attr, keyword, None if position is None else position + 1)
    function = _called_function(call.func, namespace)
    if not callable(function):
        return False
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # a builtin without a Python signature: torch's aten schema says
        if not (getattr(function, "__module__", None) or "").startswith("torch"):
            return False
        return _schema_takes_number(getattr(function, "__name__", ""), keyword, position)
    if keyword is None:
        parameter = parameters[position] if position < len(parameters) else None
    else:
        parameter = next((p for p in parameters if p.name == keyword), None)
    return parameter is not None and parameter.annotation in (float, "float")


# Exponents stay ints where written as ints: the printer makes x * x of x ** 2, a runtime exponent is a pow call.
_EXPONENT_OPS = frozenset(("float_power", "pow"))


def _schema_takes_number(name: str, keyword: str | None, position: int | None) -> bool:
    """Whether aten op ``name`` takes a number at ``keyword`` (or ``position``): some overload's schema types the
    argument a number (``mul.Scalar``'s ``other``, ``softplus``'s ``beta``) and none an int (a dim, a size)."""
    if name in _EXPONENT_OPS:
        return False
    packet = getattr(torch.ops.aten, name, None) if name else None
    if packet is None:
        return False
    types = set()
    try:
        for overload in packet.overloads():
            arguments = getattr(packet, overload)._schema.arguments
            if not arguments or str(arguments[0].type) != "Tensor":
                continue  # an overload on Python numbers or lists (``mul.int``, ``mul.left_t``)
            if keyword is not None:
                types |= {str(a.type) for a in arguments if a.name == keyword}
            elif position < len(arguments) and not arguments[position].kwarg_only:
                types.add(str(arguments[position].type))
    except (AttributeError, RuntimeError):
        return False
    return bool(types & _NUMBER_TYPES) and not any("int" in t.lower() for t in types)


def _called_function(function: ast.expr, namespace: dict):
    """The object a call's ``func`` names in the reference's own module (``F.softplus``, ``torch.mul``, a helper of
    its file), or None where it is no plain dotted name there."""
    parts = []
    while isinstance(function, ast.Attribute):
        parts.append(function.attr)
        function = function.value
    if not isinstance(function, ast.Name) or function.id not in namespace:
        return None
    found = namespace[function.id]
    for part in reversed(parts):
        found = getattr(found, part, None)
    return found


def _scales_a_tensor(name: ast.expr, parents: dict[ast.AST, ast.AST], tensor_names: set[str]) -> bool:
    """``name`` is an operand of the arithmetic expression around it (``+ - * /`` and signs, nothing else between),
    and that expression reads a tensor value."""
    expression = name
    while True:
        parent = parents.get(expression)
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, _ARITHMETIC):
            expression = parent
        elif isinstance(parent, ast.UnaryOp) and isinstance(parent.op, _SIGNS):
            expression = parent
        else:
            break
    parent = parents.get(expression)
    if isinstance(parent, ast.AugAssign) and isinstance(parent.op, _ARITHMETIC) and parent.value is expression:
        # ``y *= scale``: the target is the tensor the expression computes with.
        return _is_tensor(parent.target, tensor_names) or _reads_tensor(expression, tensor_names)
    return expression is not name and _reads_tensor(expression, tensor_names)


def _reads_tensor(expression: ast.expr, tensor_names: set[str]) -> bool:
    return any(_is_tensor(operand, tensor_names) for operand in _operands(expression))


def _operands(expression: ast.expr) -> list[ast.expr]:
    """The leaves of an arithmetic expression: what ``+ - * /`` and signs combine."""
    if isinstance(expression, ast.BinOp) and isinstance(expression.op, _ARITHMETIC):
        return _operands(expression.left) + _operands(expression.right)
    if isinstance(expression, ast.UnaryOp) and isinstance(expression.op, _SIGNS):
        return _operands(expression.operand)
    return [expression]


def _is_tensor(expression: ast.expr, tensor_names: set[str]) -> bool:
    """Whether ``expression`` is a tensor value: a tensor name, a slice or attribute of one (``x[..., :d]``,
    ``x.T``), or a call that returns one (``F.silu(x)``, ``x.float()``, ``torch.sigmoid(y)``) rather than a number
    (``len(x)``, ``x.size(-1)``)."""
    if isinstance(expression, ast.Name):
        return expression.id in tensor_names
    if isinstance(expression, ast.Subscript):
        return _is_tensor(expression.value, tensor_names)
    if isinstance(expression, ast.Attribute):
        if _is_self_attribute(expression):
            return f"self.{expression.attr}" in tensor_names
        return expression.attr not in ("shape", "ndim") and _is_tensor(expression.value, tensor_names)
    if isinstance(expression, ast.Call):
        function = expression.func
        if isinstance(function, ast.Name):
            return function.id not in _NUMBER_FUNCTIONS
        if isinstance(function, ast.Attribute):
            if isinstance(function.value, ast.Name) and function.value.id in _NUMBER_MODULES:
                return False
            return function.attr not in _NUMBER_METHODS
        return False
    if isinstance(expression, ast.BinOp):  # any operator: a tensor ** 2 and x @ w are tensors too
        return _is_tensor(expression.left, tensor_names) or _is_tensor(expression.right, tensor_names)
    if isinstance(expression, ast.UnaryOp):
        return _is_tensor(expression.operand, tensor_names)
    return False


def _tensor_names(function: ast.FunctionDef, tensors: set[str]) -> set[str]:
    """``tensors`` and the locals some assignment gives a tensor value, to a fixed point (``h = F.silu(x)``, then
    ``y = h * scale``)."""
    names = set(tensors)
    assignments = [
        (node.targets if isinstance(node, ast.Assign) else [node.target], node.value)
        for node in ast.walk(function)
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None
    ]
    changed = True
    while changed:
        changed = False
        for targets, value in assignments:
            if not _is_tensor(value, names):
                continue
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name) and leaf.id not in names:
                        names.add(leaf.id)
                        changed = True
    return names


def constructor_numbers(source: str, entry: str, names: list[str], namespace: dict) -> set[str]:
    """The ``names`` (int-defaulted arguments of module ``entry``'s ``__init__``) that ``__init__`` only stores as
    they are (``self.alpha = alpha``) and that ``forward`` reads, every time, as a number in tensor arithmetic
    (``self.alpha * torch.tanh(x)``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    init = _method(tree, entry, "__init__")
    forward = entry_function(tree, entry, "module")
    if init is None or forward is None or not names:
        return set()
    stored = {}  # attribute -> argument
    for node in ast.walk(init):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and _is_self_attribute(node.targets[0])
            and isinstance(node.value, ast.Name)
            and node.value.id in names
        ):
            stored[node.targets[0].attr] = node.value.id
    # An argument __init__ also reads otherwise (a layer's size, a computed attribute) is left as it is.
    reads = [node.id for node in ast.walk(init) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)]
    stored = {attribute: name for attribute, name in stored.items() if reads.count(name) == 1}
    tensors = [a.arg for a in forward.args.args[1 : len(forward.args.args) - len(forward.args.defaults)]]
    parents = {child: node for node in ast.walk(forward) for child in ast.iter_child_nodes(node)}
    # The module's parameters and buffers are tensors too (``self.offset + self.weight``).
    held = {
        f"self.{target.attr}"
        for node in ast.walk(init)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        for target in node.targets
        if _is_self_attribute(target) and _is_tensor(node.value, set())
    }
    tensor_names = _tensor_names(forward, set(tensors) | held)
    numbers, others = set(), set()
    for node in ast.walk(forward):
        if _is_self_attribute(node) and node.attr in stored:
            number = isinstance(node.ctx, ast.Load) and _read_as_number(node, parents, tensor_names, namespace)
            (numbers if number else others).add(node.attr)
    return {stored[attribute] for attribute in numbers - others}


def _method(tree: ast.Module, entry: str, name: str) -> ast.FunctionDef | None:
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == entry]
    if len(classes) != 1:
        return None
    found = [node for node in classes[0].body if isinstance(node, ast.FunctionDef) and node.name == name]
    return found[0] if len(found) == 1 else None


def _is_self_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


__all__ = ["constructor_numbers", "read_as_numbers"]
