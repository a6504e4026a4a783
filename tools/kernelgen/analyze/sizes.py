"""Numbers a module computes from a size argument: ``math.sqrt(self.dim)`` in forward, or ``self.scale = dim ** -0.5``
in ``__init__`` (lucidrains' ScaleNorm and RMSNorm). fx reads ``self.dim`` as the int it was built with, so the trace
holds ``2.83`` where the reference means ``sqrt(dim)``; the generated module takes any ``dim``, so the number must
follow it.

A number is followed when it is ``k * size ** p``, proven at three sizes (the module built again at each); it then
becomes ``k * n ** p`` in the graph, where ``n`` is the row's length (``x.shape[-1]``) when the size is the row's
(it sizes the per-channel parameters, or the trace filled it in for want of a default) and the size itself as a
hyper-parameter otherwise (``head_dim`` of a softmax over keys). Anything else is refused in one line naming the
size and the line that reads it.
"""

from __future__ import annotations

import math
import operator

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F

from tools.kernelgen.analyze.ops import LINE_KEY

# Ops whose numbers are sizes, not values: a size read there changes the shapes, which the kernel takes from its
# inputs at run time anyway.
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
    F.layer_norm,  # normalized_shape
    torch.layer_norm,
    torch.split,
    torch.chunk,
    torch.narrow,
    torch.reshape,
    torch.broadcast_to,
    torch.tile,
    operator.getitem,
}
_SHAPE_FUNCTIONS |= {getattr(F, "rms_norm", F.layer_norm), getattr(torch, "rms_norm", F.layer_norm)}


@dataclass
class SizeNumber:
    """A number of the traced graph that is ``k * size ** p``: at ``path`` of ``node``'s arguments."""

    node: fx.Node
    path: tuple
    k: float
    p: float


def fit_power(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """``(k, p)`` with ``y = k * x ** p`` at every point (three or more), or None. Exponents within 1e-9 of a
    multiple of 1/2 are taken as that multiple, as they are written."""
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
        return k, p
    return None


def _numbers(value: Any, path: tuple = ()):
    """``(path, number)`` for each int or float (not bool) in a node's arguments, nested tuples and dicts included."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from _numbers(item, (*path, index))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, (*path, key))


def _reads_a_shape(node: fx.Node) -> bool:
    if node.op == "call_method":
        return node.target in _SHAPE_METHODS
    return node.op == "call_function" and node.target in _SHAPE_FUNCTIONS


def _aligned(graphs: list[fx.Graph]) -> bool:
    """Whether the graphs are the same program up to their numbers."""
    listed = [list(graph.nodes) for graph in graphs]
    if len({len(nodes) for nodes in listed}) != 1:
        return False
    return all(len({(n.op, n.target) for n in column}) == 1 for column in zip(*listed))


def size_numbers(graphs: list[fx.Graph], sizes: list[int]) -> tuple[list[SizeNumber], fx.Node | None]:
    """The numbers of ``graphs[0]`` that change with the size (``graphs[i]`` traced at ``sizes[i]``) where the graph
    computes values, each as ``k * size ** p``; and the first node whose number changes other than so (None: all
    followed). Graphs that are not the same program at each size are left as traced (nothing found)."""
    if not _aligned(graphs):
        return [], None
    found = []
    for column in zip(*(list(graph.nodes) for graph in graphs)):
        node = column[0]
        if _reads_a_shape(node):
            continue
        per_graph = [dict(_numbers((n.args, n.kwargs))) for n in column]
        for path, value in per_graph[0].items():
            values = [numbers.get(path) for numbers in per_graph]
            if any(v is None for v in values) or len(set(values)) == 1:
                continue
            fitted = fit_power(list(zip(sizes, values)))
            if fitted is None:
                return found, node
            found.append(SizeNumber(node, path, *fitted))
    return found, None


def size_expression(graph: fx.Graph, size: fx.Node, k: float, p: float, before: fx.Node, line: int | None) -> fx.Node:
    """Nodes computing ``k * size ** p`` inserted before ``before``; the last one returned."""
    with graph.inserting_before(before):
        value = size if p == 1.0 else graph.call_function(operator.pow, (size, p))
        if k != 1.0:
            value = graph.call_function(operator.mul, (value, k))
    for node in (value, *value.all_input_nodes):
        if node is not size:
            node.meta[LINE_KEY] = line
    return value


def replace_number(found: SizeNumber, size_of: Callable[[fx.Node], fx.Node]) -> None:
    """``found``'s number in its node's arguments replaced by ``k * size ** p`` (``size_of(node)``: the size's node,
    made before ``node``)."""
    node = found.node
    value = size_expression(node.graph, size_of(node), found.k, found.p, node, node.meta.get(LINE_KEY))
    arguments = _replaced((node.args, node.kwargs), found.path, value)
    node.args, node.kwargs = arguments


def _replaced(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {key: _replaced(item, rest, new) if key == head else item for key, item in value.items()}
    items = [_replaced(item, rest, new) if index == head else item for index, item in enumerate(value)]
    return tuple(items) if isinstance(value, tuple) else items
