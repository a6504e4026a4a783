"""Targets shifted one token to the left, as a causal LM's loss reads its labels: token t is scored against label
t + 1 and the last token of each sequence against a pad value (the ignore index). Transformers' ``ForCausalLMLoss``
writes ``labels = F.pad(labels, (0, 1), value=ignore_index)`` then ``labels[..., 1:]``; other spellings are
``F.pad(labels[..., 1:], (0, 1), value=...)`` and ``torch.cat([labels[..., 1:], labels.new_full((B, 1), ...)],
dim=-1)``.

The logits are not shifted, only the labels, a [B, T] tensor of integers beside [B, T, V] logits: the generated
Function shifts them on the host with the reference's own op before the kernel, as Liger's ``LigerForCausalLMLoss``
does, and the kernel reads each row's class index at the row. The analysis reads the input where the graph read the
shifted labels, so every later pass sees an ordinary target; ``TensorSpec.shift`` keeps the pad value.
"""

from __future__ import annotations

import operator

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F

from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.ops import node_line

_PADS = {F.pad, getattr(torch._C._nn, "pad", F.pad)}
_CATS = {torch.cat, torch.concat, torch.concatenate}
# Methods that keep a target's values and shape (``labels.to(logits.device)``): a shift commutes with them.
_SAME_VALUES = {"to", "long", "int", "contiguous", "clone", "detach"}
# Reads of a tensor's shape, dtype or device, not of its values.
_SHAPE_METHODS = {"size", "dim"}
_SHAPE_ATTRIBUTES = {"shape", "dtype", "device", "ndim"}


@dataclass(frozen=True)
class Shift:
    """``input`` read one token to the left, its last token of each sequence reading ``value``."""

    input: str
    value: int
    line: int | None


@dataclass
class _Match:
    source: fx.Node  # the labels before the shift
    shifted: list[fx.Node]  # what reads the shifted labels: its users read ``source`` instead
    spent: list[fx.Node]  # the shift's own nodes, dead once ``shifted`` is bypassed
    value: int
    line: int | None


def unshift_targets(graph: fx.Graph, names: dict[fx.Node, str], origin: str) -> list[Shift]:
    """Rewrite every shift of a tensor input (``names``: placeholder -> input name) in ``graph`` to read the input
    itself, and say which inputs were shifted and with what pad value. A shift the kernel cannot take from the host
    (of a computed value, an input also read unshifted, two pad values) is refused."""
    matches = [match for node in list(graph.nodes) if (match := _match(node, origin))]
    shifts: dict[str, Shift] = {}
    for match in matches:
        placeholder = _input_behind(match.source)
        if placeholder not in names:
            raise AnalyzeError(
                f"the shift of the labels at line {match.line} shifts a value computed from the inputs; kernelgen "
                "shifts a target as it is passed: shift the input itself, then compute with it",
                origin=origin,
                line=match.line,
            )
        name = names[placeholder]
        earlier = shifts.get(name)
        if earlier is not None and earlier.value != match.value:
            raise AnalyzeError(
                f"'{name}' is shifted with two pad values ({earlier.value} at line {earlier.line}, {match.value}); "
                "the kernel takes one shifted target",
                origin=origin,
                line=match.line,
            )
        shifts[name] = Shift(name, match.value, match.line)
    for name, shift in shifts.items():
        placeholder = next(node for node, input_name in names.items() if input_name == name)
        spent = {node for match in matches if _input_behind(match.source) is placeholder for node in match.spent}
        _refuse_unshifted_reads(placeholder, spent, shift, origin)
    for match in matches:
        for node in match.shifted:
            node.replace_all_uses_with(match.source)
        _erase_dead(graph, reversed(match.spent))
    return list(shifts.values())


def _erase_dead(graph: fx.Graph, nodes) -> None:
    """Erase ``nodes`` and what only they read (the ``labels.shape[0]`` of a fill's size) once nothing reads them."""
    stack, erased = list(nodes)[::-1], set()
    while stack:
        node = stack.pop()
        if node in erased or node.op in ("placeholder", "output") or node.users:
            continue
        inputs = node.all_input_nodes
        graph.erase_node(node)
        erased.add(node)
        stack.extend(inputs)


def _match(node: fx.Node, origin: str) -> _Match | None:
    if node.op == "call_function" and node.target in _PADS:
        return _padded(node, origin)
    if node.op == "call_function" and node.target in _CATS:
        return _concatenated(node)
    return None


def _padded(pad: fx.Node, origin: str) -> _Match | None:
    """``F.pad(labels, (0, 1), value=v)[..., 1:]`` or ``F.pad(labels[..., 1:], (0, 1), value=v)``."""
    source, widths, mode, value = _pad_arguments(pad)
    line = node_line(pad)
    # The slice read by the pad alone: another read of it would read the labels shifted twice once the host shifts.
    sliced = _last_dim_from_one(source) if isinstance(source, fx.Node) and len(source.users) == 1 else None
    slices = [user for user in pad.users if _last_dim_from_one(user) is pad]
    shifted = tuple(widths or ()) == (0, 1) and mode == "constant" and _is_int(value)
    if shifted and sliced is not None:
        return _Match(sliced, [pad], [source, pad], value, line)
    if shifted and slices and len(slices) == len(pad.users):
        return _Match(source, slices, [pad, *slices], value, line)
    if isinstance(source, fx.Node) and _input_behind(source) is not None:
        raise AnalyzeError(
            f"`F.pad` (line {line}) pads '{_input_behind(source).target}' otherwise than a causal LM's shift of its "
            "labels; kernelgen reads F.pad only as F.pad(labels, (0, 1), value=ignore_index) followed by "
            "[..., 1:] (token t scored against label t + 1, the last one ignored)",
            origin=origin,
            line=line,
        )
    return None


def _pad_arguments(pad: fx.Node) -> tuple[Any, Any, Any, Any]:
    """(input, pad widths, mode, value) of an ``F.pad`` call, positional or by keyword; value None pads with 0."""
    bound = dict(zip(("input", "pad", "mode", "value"), pad.args))
    bound.update(pad.kwargs)
    value = bound.get("value")
    return bound.get("input"), bound.get("pad"), bound.get("mode", "constant"), 0 if value is None else value


def _concatenated(cat: fx.Node) -> _Match | None:
    """``torch.cat([labels[..., 1:], FILL], dim=-1)``, FILL one column of a constant: ``labels.new_full((B, 1), v)``,
    ``torch.full((B, 1), v)`` or ``torch.full_like(labels[..., :1], v)``."""
    parts = cat.args[0] if cat.args else cat.kwargs.get("tensors")
    dim = cat.args[1] if len(cat.args) > 1 else cat.kwargs.get("dim", 0)
    if not isinstance(parts, (list, tuple)) or len(parts) != 2 or not all(isinstance(p, fx.Node) for p in parts):
        return None
    head, fill = parts
    source = _last_dim_from_one(head)
    value = _one_column_of(fill)
    if source is None or value is None or dim not in (-1, _last_dim(head)) or len(head.users) != 1:
        return None
    column = [fill.args[0]] if _is_leading_column(fill.args[0]) else []  # full_like's x[..., :1]
    return _Match(source, [cat], [head, *column, fill, cat], value, node_line(cat))


def _one_column_of(fill: fx.Node) -> int | None:
    """The constant of a tensor of one column: ``x.new_full((B, 1), v)``, ``torch.full((B, 1), v)``,
    ``torch.full_like(x[..., :1], v)``; None for anything else."""
    if fill.op == "call_method" and fill.target == "new_full" and len(fill.args) >= 3:
        size, value = fill.args[1], fill.args[2]
    elif fill.op == "call_function" and fill.target is torch.full and len(fill.args) >= 2:
        size, value = fill.args[0], fill.args[1]
    elif fill.op == "call_function" and fill.target is torch.full_like and len(fill.args) >= 2:
        return fill.args[1] if _is_leading_column(fill.args[0]) and _is_int(fill.args[1]) else None
    else:
        return None
    one_column = isinstance(size, (list, tuple)) and size and size[-1] == 1
    return value if one_column and _is_int(value) else None


def _is_leading_column(node: Any) -> bool:
    """``x[..., :1]`` (or ``x[:, :1]``): the first column, kept as a dim."""
    index = _last_dim_index(node)
    return index is not None and index == slice(None, 1, None)


def _last_dim_from_one(node: Any) -> fx.Node | None:
    """``x`` of ``x[..., 1:]`` (or ``x[:, 1:]``: every dim before the last whole), else None."""
    index = _last_dim_index(node)
    return node.args[0] if index == slice(1, None, None) else None


def _last_dim_index(node: Any) -> slice | None:
    """The slice of the last dim of an indexing that takes every other dim whole, None for another one."""
    if not (isinstance(node, fx.Node) and node.op == "call_function" and node.target is operator.getitem):
        return None
    index = node.args[1]
    if not isinstance(index, tuple) or len(index) < 2 or not isinstance(index[-1], slice):
        return None
    whole = all(part is Ellipsis or part == slice(None) for part in index[:-1])
    return index[-1] if whole else None


def _last_dim(node: fx.Node) -> int:
    """The positive dim ``x[:, 1:]`` slices (1); ``x[..., 1:]`` of labels is taken as [B, T] ones (1 too)."""
    index = node.args[1]
    return 1 if Ellipsis in index else len(index) - 1


def _input_behind(node: Any) -> fx.Node | None:
    """The placeholder ``node`` is, or is through methods that keep its values and shape (``.to(device)``)."""
    while isinstance(node, fx.Node) and node.op == "call_method" and node.target in _SAME_VALUES:
        node = node.args[0]
    return node if isinstance(node, fx.Node) and node.op == "placeholder" else None


def _refuse_unshifted_reads(placeholder: fx.Node, spent: set[fx.Node], shift: Shift, origin: str) -> None:
    """The host hands the kernel the shifted labels only: a read of their values as passed would read them shifted."""
    chain, stack = {placeholder}, [placeholder]
    while stack:
        for user in stack.pop().users:
            if user in spent or _reads_shape_only(user):
                continue
            if user.op == "call_method" and user.target in _SAME_VALUES and user not in chain:
                chain.add(user)
                stack.append(user)
                continue
            raise AnalyzeError(
                f"'{shift.input}' is read shifted one token (line {shift.line}) and as passed (line "
                f"{node_line(user)}); the kernel takes the shifted target alone: compute everything from it",
                origin=origin,
                line=node_line(user),
            )


def _reads_shape_only(node: fx.Node) -> bool:
    if node.op == "call_method" and node.target in _SHAPE_METHODS:
        return True
    return node.op == "call_function" and node.target is getattr and node.args[1] in _SHAPE_ATTRIBUTES


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


__all__ = ["Shift", "unshift_targets"]
