"""The sequence stage's source as the reference wrote it, not as fx prints a graph.

fx prints one statement per op under the op's name (``getattr_1 = labels.shape``, ``getitem = getattr_1[0]``,
``floordiv = getitem // 2``). Rewritten on the printed function's syntax tree (``ast.unparse`` sets every
parenthesis), it reads like the reference:

- **names**: a value the reference assigns (``half = labels.shape[0] // 2``) takes the reference's name: the
  statement's last op whose result leaves the statement (one per target of a tuple assignment, in order). A name
  the reference reassigns is reused where the earlier value is read no more (``loss = loss + penalty``);
- **inlining**: a value nobody named and only one op reads is written into that op (``labels.shape[0] // 2``), as
  the reference had it; skipped where the function mutates anything in place (moving a read past a write changes
  it). ``x.chunk(2)`` read as ``[0]`` and ``[1]`` into the names of a tuple assignment is written as one;
- **arguments**: fx's ``x[slice(None, n, None)]`` as ``x[:n]``; keyword arguments left at a torch function's
  defaults dropped (fx prints all that ``F.softmax`` binds, ``_stacklevel=3`` included).

``analyze/stages.py`` checks the result against the reference and keeps fx's text where it does not check out.
"""

from __future__ import annotations

import ast
import inspect
import operator

import torch
import torch.fx as fx

from tools.kernelgen.analyze.ops import node_line


def reference_names(graph: fx.Graph, source: str) -> tuple[dict[str, str], list[list[str]]]:
    """fx name -> the name the reference's assignment gives that value, for the ops of ``graph``; and the fx names
    of the values of each tuple assignment (``chosen, rejected = ...``), in order."""
    statements = _assignments(source)
    groups: dict[tuple[int, int], list[fx.Node]] = {}
    for node in graph.nodes:
        line = node_line(node)
        if node.op in ("placeholder", "output") or line is None:
            continue
        span = min((s for s in statements if s[0] <= line <= s[1]), key=lambda s: s[1] - s[0], default=None)
        if span is not None:
            groups.setdefault(span[:2], []).append(node)
    targets = {span[:2]: span[2] for span in statements}
    one_value = {span[:2] for span in statements if span[3]}
    names: dict[str, str] = {}
    unpacked: list[list[str]] = []
    for span, nodes in groups.items():
        leaving = [n for n in nodes if any(user not in nodes for user in n.users)]
        wanted = targets[span]
        if len(wanted) == 1 and leaving and leaving[-1] is nodes[-1]:
            names[nodes[-1].name] = wanted[0]
        elif len(wanted) > 1 and len(leaving) == len(wanted):
            names.update((node.name, name) for node, name in zip(leaving, wanted))
            unpacked.append([node.name for node in leaving])
        elif span in one_value:
            names.update(_items_read(leaving, wanted))
    return names, unpacked


def _items_read(leaving: list[fx.Node], wanted: list[str]) -> dict[str, str]:
    """fx name -> target name of the items read of one value unpacked into ``wanted`` (``B, T, V = logits.shape``
    with B alone read after it: ``shape[0]`` is B); empty where a value leaving is no item of that value."""
    items = [n.args for n in leaving if n.op == "call_function" and n.target is operator.getitem]
    if len(items) != len(leaving) or len({source for source, _ in items}) != 1:
        return {}
    if not all(type(index) is int and 0 <= index < len(wanted) for _, index in items):
        return {}
    return {node.name: wanted[index] for node, (_, index) in zip(leaving, items)}


def _assignments(source: str) -> list[tuple[int, int, list[str], bool]]:
    """(first line, last line, target names, whether one value is unpacked into them) of each assignment to plain
    names in ``source`` (``B, T, V = logits.shape`` unpacks one value, ``a, b = x[0], x[1]`` two)."""
    found = []
    for statement in ast.walk(ast.parse(source)):
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)) and statement.value is not None:
            target = statement.target
        else:
            continue
        elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        if all(isinstance(e, ast.Name) for e in elements):
            one_value = len(elements) > 1 and not isinstance(statement.value, (ast.Tuple, ast.List))
            found.append((statement.lineno, statement.end_lineno, [e.id for e in elements], one_value))
    return found


def readable_function(text: str, names: dict[str, str], unpacked: list[list[str]]) -> str:
    """``text`` (one function, one assignment per op) with ``names`` applied, single-use temporaries inlined, keyword
    arguments left at their defaults dropped, and ``unpacked`` (the reference's tuple assignments) written as such."""
    tree = ast.parse(text)
    function = tree.body[0]
    loads: dict[str, int] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads[node.id] = loads.get(node.id, 0) + 1
    taken = {node.id for node in ast.walk(function) if isinstance(node, ast.Name)} | {
        arg.arg for arg in function.args.args
    }
    renamed: dict[str, str] = {}
    for statement in function.body:
        if _assigned_name(statement) in names:
            old = _assigned_name(statement)
            taken.discard(old)
            renamed[old] = _unique(names[old], taken)
            taken.add(renamed[old])
    inline = not _mutates(function)
    values: dict[str, ast.expr] = {}
    body = []
    for statement in function.body:
        name = _assigned_name(statement)
        statement = _Substitute(values, renamed).visit(statement)
        if inline and name is not None and name not in renamed and (loads.get(name) == 1 or _is_a_shape(statement)):
            values[name] = statement.value
            continue
        body.append(statement)
    body = _unpacked(body, loads, [[renamed[n] for n in group] for group in unpacked if set(group) <= set(renamed)])
    function.body = _rebound(body, {renamed[old]: names[old] for old in renamed})
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _unpacked(body: list[ast.stmt], loads: dict[str, int], groups: list[list[str]]) -> list[ast.stmt]:
    """``pair = x.chunk(2); chosen = pair[0]; rejected = pair[1]`` as ``chosen, rejected = x.chunk(2)`` where the
    reference unpacked the value into exactly those names."""
    out: list[ast.stmt] = []
    index = 0
    while index < len(body):
        statement = body[index]
        temporary = _assigned_name(statement)
        for group in groups:
            following = body[index + 1 : index + 1 + len(group)]
            if temporary is None or loads.get(temporary) != len(group) or len(following) != len(group):
                continue
            if all(_is_item(s, name, temporary, i) for i, (s, name) in enumerate(zip(following, group))):
                targets = ast.Tuple(elts=[ast.Name(id=name, ctx=ast.Store()) for name in group], ctx=ast.Store())
                out.append(ast.Assign(targets=[targets], value=statement.value))
                index += 1 + len(group)
                break
        else:
            out.append(statement)
            index += 1
    return out


def _is_item(statement: ast.stmt, name: str, container: str, index: int) -> bool:
    """Whether ``statement`` is ``name = container[index]``."""
    value = getattr(statement, "value", None)
    return (
        _assigned_name(statement) == name
        and isinstance(value, ast.Subscript)
        and isinstance(value.value, ast.Name)
        and value.value.id == container
        and isinstance(value.slice, ast.Constant)
        and value.slice.value == index
    )


def _rebound(body: list[ast.stmt], wanted: dict[str, str]) -> list[ast.stmt]:
    """A value that took ``name_1`` because the reference reassigns ``name`` takes ``name`` again where nothing after
    its assignment reads the earlier value (``loss = loss + penalty``), as the reference wrote it."""
    for index, statement in enumerate(body):
        name = _assigned_name(statement)
        base = wanted.get(name)
        if base is None or base == name or any(_reads(s, base) for s in body[index + 1 :]):
            continue
        if any(_assigned_name(s) == base for s in body[index + 1 :]):
            continue
        for later in body[index:]:
            _Rename(name, base).visit(later)
    return body


def _reads(statement: ast.stmt, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(statement))


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            node.id = self.new
        return node


def _assigned_name(statement: ast.stmt) -> str | None:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id
    return None


def _is_a_shape(statement: ast.stmt) -> bool:
    """``getattr_1 = logp.shape``: written where it is read, however often (``B = logp.shape[0]``), as references
    unpack or index a shape, never name it."""
    value = getattr(statement, "value", None)
    return isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name)


def _unique(name: str, taken: set[str]) -> str:
    candidate, number = name, 0
    while candidate in taken:
        number += 1
        candidate = f"{name}_{number}"
    return candidate


def _mutates(function: ast.FunctionDef) -> bool:
    """Whether any call writes in place (``x.add_(y)``, ``torch.add(x, y, out=z)``)."""
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if (method.endswith("_") and not method.startswith("_")) or any(k.arg == "out" for k in node.keywords):
            return True
    return False


class _Substitute(ast.NodeTransformer):
    """Reads of inlined temporaries replaced by their values, renamed values by their names, and fx's
    ``x[slice(None, n, None)]`` written ``x[:n]``."""

    def __init__(self, values: dict[str, ast.expr], renamed: dict[str, str]):
        self.values = values
        self.renamed = renamed

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return self.values[node.id]
        if node.id in self.renamed:
            return ast.Name(id=self.renamed[node.id], ctx=node.ctx)
        return node

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        defaults = _defaults(node.func)
        node.keywords = [k for k in node.keywords if not _is_default(k, defaults)]
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.slice, ast.Tuple):
            node.slice.elts = [_as_slice(e) for e in node.slice.elts]
        else:
            node.slice = _as_slice(node.slice)
        return node


def _defaults(function: ast.expr) -> dict[str, object]:
    """The keyword defaults of a ``torch.``-qualified Python function (fx prints every argument ``F.softmax`` binds,
    ``_stacklevel=3, dtype=None`` included); empty for anything else."""
    parts = []
    while isinstance(function, ast.Attribute):
        parts.append(function.attr)
        function = function.value
    if not (isinstance(function, ast.Name) and function.id == "torch"):
        return {}
    target = torch
    for part in reversed(parts):
        target = getattr(target, part, None)
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _is_default(keyword: ast.keyword, defaults: dict[str, object]) -> bool:
    if keyword.arg not in defaults or not isinstance(keyword.value, ast.Constant):
        return False
    default, value = defaults[keyword.arg], keyword.value.value
    return type(default) is type(value) and default == value


def _as_slice(node: ast.expr) -> ast.expr:
    """``slice(a, b, c)`` as ``a:b:c`` (None parts left out)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "slice"):
        return node
    if node.keywords or not 1 <= len(node.args) <= 3:
        return node
    parts = [None if isinstance(a, ast.Constant) and a.value is None else a for a in node.args]
    if len(parts) == 1:
        parts = [None, parts[0], None]
    lower, upper, step = (parts + [None, None])[:3]
    return ast.Slice(lower=lower, upper=upper, step=step)
