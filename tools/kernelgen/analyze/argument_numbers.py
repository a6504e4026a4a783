"""Numbers a module computes from a constructor argument, which fx reads as the value the module was built with: a
size (``math.sqrt(self.dim)`` in forward, ``self.scale = dim ** -0.5`` in ``__init__``, lucidrains' ScaleNorm and
RMSNorm) or a float a held submodule keeps (``self.norm = nn.LayerNorm(hidden, eps=eps)``). The trace holds ``2.83``
where the reference means ``sqrt(dim)``, and the generated module takes any ``dim``: the number must follow it.

The module is traced again at two other values of the argument; a number that changes with it is followed where it
is ``k * size ** p`` (a size) or ``a * value + b`` (a float), proven at the three values, and becomes that expression
of the row's length or of a hyper-parameter in the graph (trace.py decides which). Numbers in shape arguments
(``view(-1, self.dim)``, ``F.layer_norm``'s ``normalized_shape``) are sizes the kernel takes from its inputs anyway.
"""

from __future__ import annotations

import builtins
import math
import operator

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F

from tools.kernelgen.analyze.ops import LINE_KEY

# Ops whose numbers are all sizes.
_SHAPE_METHODS = {
    "view",
    "reshape",
    "expand",
    "repeat",
    "new_ones",
    "new_zeros",
    "new_full",
    "new_empty",
    "split",
    "chunk",
    "narrow",
    "unflatten",
    "flatten",
    "tile",
    "broadcast_to",
}
_SHAPE_FUNCTIONS = {
    torch.ones,
    torch.zeros,
    torch.empty,
    torch.full,
    torch.eye,
    torch.arange,
    torch.linspace,
    torch.split,
    torch.chunk,
    torch.narrow,
    torch.reshape,
    torch.broadcast_to,
    torch.tile,
    operator.getitem,
    F.one_hot,  # num_classes
}
# Norms whose second argument, ``normalized_shape``, is a size; their eps is a value.
_NORMALIZED_SHAPE = {F.layer_norm, torch.layer_norm, getattr(F, "rms_norm", F.layer_norm)}
_NORMALIZED_SHAPE.add(getattr(torch, "rms_norm", F.layer_norm))

# A fitted number: ("power", k, p) for k * x ** p, ("line", a, b) for a * x + b.
Fit = tuple[str, float, float]


@dataclass
class ArgumentNumber:
    """A number of the traced graph, at ``path`` of ``node``'s ``(args, kwargs)``, that is ``fit`` of the argument."""

    node: fx.Node
    path: tuple
    fit: Fit


def fit_power(points: list[tuple[float, float]]) -> Fit | None:
    """``("power", k, p)`` with ``y = k * x ** p`` at every point (three or more), or None. Exponents within 1e-9 of
    a multiple of 1/2 are taken as that multiple, as they are written."""
    (x0, y0), (x1, y1) = points[:2]
    if y0 == 0.0 or y1 == 0.0 or (y0 > 0) != (y1 > 0) or x0 <= 0 or x1 <= 0:
        return None
    p = math.log(y1 / y0) / math.log(x1 / x0)
    if abs(2 * p - round(2 * p)) < 1e-9:
        p = round(2 * p) / 2
    k = y0 / x0**p
    if abs(k - round(k)) < 1e-12 * max(1.0, abs(k)):
        k = float(round(k))
    if all(math.isclose(k * x**p, y, rel_tol=1e-9) for x, y in points):
        return "power", k, p
    return None


def fit_line(points: list[tuple[float, float]]) -> Fit | None:
    """``("line", a, b)`` with ``y = a * x + b`` at every point (three or more), or None."""
    (x0, y0), (x1, y1) = points[:2]
    a = (y1 - y0) / (x1 - x0)
    b = y0 - a * x0
    if abs(b) < 1e-12 * max(abs(y0), abs(y1)):
        b = 0.0
    if all(math.isclose(a * x + b, y, rel_tol=1e-9, abs_tol=1e-15) for x, y in points):
        return "line", a, b
    return None


def numbers_in(value: Any, path: tuple = ()):
    """``(path, number)`` for each int or float (not bool) in a node's arguments, nested tuples and dicts included."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from numbers_in(item, (*path, index))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from numbers_in(item, (*path, key))


def _is_a_size(node: fx.Node, path: tuple) -> bool:
    """Whether the number at ``path`` of ``node``'s ``(args, kwargs)`` is a size."""
    if node.op == "call_method":
        return node.target in _SHAPE_METHODS
    if node.op != "call_function":
        return False
    if node.target in _NORMALIZED_SHAPE:
        return path[:2] in ((0, 1), (1, "normalized_shape"))
    return node.target in _SHAPE_FUNCTIONS


def same_program(graphs: list[fx.Graph]) -> bool:
    """Whether the graphs (one reference traced at several values of an argument) are the same program up to their
    numbers: node for node, the same op of the same target."""
    listed = [list(graph.nodes) for graph in graphs]
    if len({len(nodes) for nodes in listed}) != 1:
        return False
    return all(len({(n.op, n.target) for n in column}) == 1 for column in zip(*listed))


def numbers_of_argument(
    graphs: list[fx.Graph], values: list[float], fit: Callable, placeholders: bool
) -> tuple[list[ArgumentNumber], fx.Node | None]:
    """The numbers of ``graphs[0]`` that change with the argument (``graphs[i]`` traced at ``values[i]``) where the
    graph computes values, each fitted by ``fit``; and the first node whose number changes and does not fit (None:
    all fit). ``placeholders``: whether an input's default counts (an attribute ``__init__`` computed from a size);
    else inputs are left alone (a float argument's own input already follows it). Graphs that are not the same
    program at each value are left as traced (nothing found)."""
    if not same_program(graphs):
        return [], None
    found = []
    for column in zip(*(list(graph.nodes) for graph in graphs)):
        node = column[0]
        if node.op == "placeholder" and not placeholders:
            continue
        per_graph = [dict(numbers_in((n.args, n.kwargs))) for n in column]
        for path, value in per_graph[0].items():
            seen = [numbers.get(path) for numbers in per_graph]
            if any(v is None for v in seen) or len(set(seen)) == 1 or _is_a_size(node, path):
                continue
            fitted = fit(list(zip(values, seen)))
            if fitted is None:
                return found, node
            found.append(ArgumentNumber(node, path, fitted))
    return found, None


def expression(graph: fx.Graph, source: fx.Node, fit: Fit, before: fx.Node, line: int | None) -> fx.Node:
    """Nodes computing ``fit`` of ``source`` inserted before ``before``; the last one returned."""
    form, first, second = fit
    with graph.inserting_before(before):
        value = source
        if form == "power" and second != 1.0:
            value = graph.call_function(operator.pow, (value, second))
        if first != 1.0:
            value = graph.call_function(operator.mul, (value, first))
        if form == "line" and second != 0.0:
            value = graph.call_function(operator.add, (value, second))
    made = value
    while made is not source:
        made.meta[LINE_KEY] = line
        made = made.args[0]
    return value


def replace_number(found: ArgumentNumber, source_of: Callable[[fx.Node], fx.Node]) -> None:
    """``found``'s number in its node's arguments replaced by its fit of the argument (``source_of(node)``: the
    argument's node, made before ``node``)."""
    node = found.node
    value = expression(node.graph, source_of(node), found.fit, node, node.meta.get(LINE_KEY))
    node.args, node.kwargs = _replaced((node.args, node.kwargs), found.path, value)


def _replaced(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {key: _replaced(item, rest, new) if key == head else item for key, item in value.items()}
    items = [_replaced(item, rest, new) if index == head else item for index, item in enumerate(value)]
    return tuple(items) if isinstance(value, tuple) else items


def other_sizes(value: int) -> list[int]:
    """Two other sizes to build the module at: multiples, which keep whatever the size must divide into (heads), or
    for a model-sized default the half and the quarter, so that no probe builds a module larger than the reference."""
    if value > 256 and value % 4 == 0:
        return [value // 2, value // 4]
    return [2 * value, 3 * value]


def row_length_of(graph: fx.Graph, tensor: str):
    """``node -> x.shape[-1]`` of the input ``tensor``, made once before the first node that asks."""
    made: list[fx.Node] = []

    def size_of(before: fx.Node) -> fx.Node:
        if not made:
            source = next(node for node in graph.nodes if node.op == "placeholder" and node.target == tensor)
            with graph.inserting_before(before):
                shape = graph.call_function(builtins.getattr, (source, "shape"))
                made.append(graph.call_function(operator.getitem, (shape, -1)))
            shape.meta[LINE_KEY] = made[0].meta[LINE_KEY] = before.meta.get(LINE_KEY)
        return made[0]

    return size_of


def hyper_of(graph: fx.Graph, argument: str, value: float, attributes: dict[str, Any]):
    """``node -> the constructor argument's input``: a hyper-parameter named after it (the one the module already
    has where it keeps the argument itself), defaulting to the value the module was built with."""
    placeholders = [node for node in graph.nodes if node.op == "placeholder"]
    existing = next((node for node in placeholders if node.target == argument), None)
    if existing is None:
        with graph.inserting_after(placeholders[-1]):
            existing = graph.placeholder(argument, default_value=float(value))
        attributes[argument] = float(value)
    return lambda before: existing
