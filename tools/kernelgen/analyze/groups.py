"""Statistics over groups of channels (GroupNorm): the first input ``[batch, channels, rest]`` regrouped as
``x.view(b, groups, -1)`` and reduced along its last dim, or ``F.group_norm(x, groups, weight, bias, eps)``.

A group of a sample is then the kernel's row (its channels' elements in order), so the graph is rewritten into the
row program over it: the regrouping view and the view back to the input's shape pass their operand on, a per-channel
tensor read against the channels (``self.weight[:, None]``, ``w.view(-1, 1)``, ``w.unsqueeze(-1)``) is read as it
is, and ``F.group_norm`` becomes the layer norm of the row with that affine. The kernel reads such a tensor at each
element's channel (``math.groups``, ``group`` parameters, ``* _`` inputs in the profile)."""

from __future__ import annotations

import operator

from dataclasses import dataclass
from dataclasses import field

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from tools.kernelgen.analyze.errors import HAND_WRITTEN_PROFILE_HINT
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.ops import node_line

_RESHAPES = ("view", "reshape")
_GROUP_NORMS = (F.group_norm, torch.group_norm)


@dataclass
class ChannelGroups:
    """What the rewrite found: the hyper-parameter giving the number of groups (its value when traced), and the
    per-channel tensors, parameters by their attribute path and inputs by their argument name."""

    hyper: str
    count: int
    parameters: set[str] = field(default_factory=set)
    inputs: set[str] = field(default_factory=set)
    # The call the row's layer norm stands for, as the reference wrote it (F.group_norm, an nn.GroupNorm), if any
    written_as: str = ""


def regroup_channels(loaded, graph: fx.Graph, placeholders: dict, tensors: list[str], hypers, hidden: int, root=None):
    """Rewrite ``graph`` in place as described above when its first tensor input is regrouped; the groups found, or
    None. ``hypers``: the reference's arguments and constructor arguments as (name, value); ``hidden``: the row
    length of the examples the graph runs on; ``root``: the module a module reference's graph calls into."""
    if not tensors or tensors[0] not in placeholders:
        return None
    first = placeholders[tensors[0]]
    group_norm = next((n for n in graph.nodes if n.op == "call_function" and n.target in _GROUP_NORMS), None)
    written_as = "F.group_norm" if group_norm is not None else "nn.GroupNorm"
    group_norm = group_norm or _group_norm_module_as_call(graph, root)
    regrouping = next((n for n in first.users if _reshaped_dims(n) is not None), None)
    if group_norm is not None and group_norm.args[:1] == (first,):
        count = group_norm.args[1] if len(group_norm.args) > 1 else group_norm.kwargs.get("num_groups")
        groups = ChannelGroups(_groups_hyper(loaded, count, group_norm, hypers), count, written_as=written_as)
        _rewrite_group_norm(graph, group_norm, groups, placeholders, hidden)
        return groups
    if regrouping is None:
        return None
    dims = _reshaped_dims(regrouping)
    if len(dims) != 3 or not isinstance(dims[1], int):
        return None
    back = _view_back(loaded, regrouping, first)
    if back is None:
        raise AnalyzeError(
            f"`{_label(regrouping)}` regroups {tensors[0]} into groups, and no view brings the result back to the "
            f"shape of {tensors[0]} (`.view(b, c, h)`, `.view_as({tensors[0]})`); a GroupNorm's statistics are taken "
            f"over the groups and its output has the input's shape; rewrite it with supported ops "
            f"{HAND_WRITTEN_PROFILE_HINT}",
            origin=loaded.origin,
            line=node_line(regrouping),
        )
    groups = ChannelGroups(_groups_hyper(loaded, dims[1], regrouping, hypers), dims[1])
    back.replace_all_uses_with(back.args[0])
    graph.erase_node(back)
    regrouping.replace_all_uses_with(first)
    graph.erase_node(regrouping)
    _read_channel_tensors(graph, groups, placeholders, first)
    return groups


def _group_norm_module_as_call(graph: fx.Graph, root) -> fx.Node | None:
    """An ``nn.GroupNorm`` submodule's call as the ``F.group_norm`` call it makes (its affine read as attributes)."""
    for node in graph.nodes:
        if node.op != "call_module" or root is None or not isinstance(root.get_submodule(node.target), nn.GroupNorm):
            continue
        norm = root.get_submodule(node.target)
        with graph.inserting_before(node):
            affine = [graph.get_attr(f"{node.target}.{key}") if norm.affine else None for key in ("weight", "bias")]
            call = graph.call_function(F.group_norm, (node.args[0], norm.num_groups, *affine, norm.eps))
        call.meta = dict(node.meta)
        node.replace_all_uses_with(call)
        graph.erase_node(node)
        return call
    return None


def _label(node: fx.Node) -> str:
    return f".{node.target}()" if node.op == "call_method" else getattr(node.target, "__name__", str(node.target))


def _reshaped_dims(node: fx.Node) -> tuple | None:
    """The target dims of ``x.view(...)`` / ``x.reshape(...)`` / ``torch.reshape(x, ...)``, else None."""
    if node.op == "call_method" and node.target in _RESHAPES:
        dims = node.args[1:]
    elif node.op == "call_function" and node.target is torch.reshape:
        dims = node.args[1:] or (node.kwargs.get("shape"),)
    else:
        return None
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    return tuple(dims)


def _view_back(loaded, regrouping: fx.Node, first: fx.Node) -> fx.Node | None:
    """The first view after ``regrouping``, fed by it, that brings its value back to the first input's shape:
    ``.view(b, c, h)`` of the input's sizes, ``.view(x.shape)`` or ``.view_as(x)``. A reduction in between over
    another dim than the groups' last is refused (the rewrite would make it one over the input's dims)."""
    fed = {regrouping}
    for node in regrouping.graph.nodes:
        if node in fed or not any(isinstance(a, fx.Node) and a in fed for a in node.all_input_nodes):
            continue
        if node.op == "call_method" and node.target in (*_RESHAPES, "view_as", "reshape_as"):
            if node.target.endswith("_as") and node.args[1] is first:
                return node
            if _reads_shape_of(node, first):
                return node
        _refuse_other_reductions(loaded, node, regrouping)
        fed.add(node)
    return None


# Reductions a group's statistics may take, by their method or function name.
_REDUCTIONS = {"mean", "sum", "var", "std", "var_mean", "std_mean", "amax", "amin", "max", "min", "logsumexp", "norm"}
_REDUCTIONS |= {"softmax", "log_softmax", "softmin", "prod", "cumsum", "median", "vector_norm"}


def _refuse_other_reductions(loaded, node: fx.Node, regrouping: fx.Node) -> None:
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if node.op not in ("call_method", "call_function") or name not in _REDUCTIONS:
        return
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if dims in ((-1,), (2,)):
        return
    over = "every dim" if dim is None else f"dim {dim}"
    raise AnalyzeError(
        f"`{_label(node)}` (line {node_line(node)}) reduces {over} of the groups `{_label(regrouping)}` (line "
        f"{node_line(regrouping)}) makes: statistics over groups of channels reduce each group's elements (its last "
        f"dim); reductions over other dims are not supported; rewrite it with supported ops {HAND_WRITTEN_PROFILE_HINT}",
        origin=loaded.origin,
        line=node_line(node),
    )


def _reads_shape_of(node: fx.Node, first: fx.Node) -> bool:
    """Whether ``node``'s arguments are sizes of ``first`` (``b, c, h = x.shape`` or ``x.shape``)."""
    seen, stack = set(), [a for a in node.args[1:] if isinstance(a, fx.Node)]
    stack += [a for arg in node.args[1:] if isinstance(arg, (tuple, list)) for a in arg if isinstance(a, fx.Node)]
    while stack:
        current = stack.pop()
        if current is first:
            return True
        if current in seen or current.op not in ("call_function", "call_method"):
            continue
        seen.add(current)
        stack.extend(current.all_input_nodes)
    return False


def _groups_hyper(loaded, count, node: fx.Node, hypers) -> str:
    """The argument that gives the number of groups ``count``: an int one traced at that value, named like groups
    where several are."""
    candidates = [name for name, value in hypers if type(value) is int and value == count]
    named = [name for name in candidates if "group" in name]
    if named or len(candidates) == 1:
        return (named or candidates)[0]
    raise AnalyzeError(
        f"`{_label(node)}` splits the channels into {count!r} groups, which no int argument of the reference gives "
        "(the kernel takes the number of groups at run time): make it an argument (num_groups: int = 4) or a "
        f"constructor argument {HAND_WRITTEN_PROFILE_HINT}",
        origin=loaded.origin,
        line=node_line(node),
    )


def _channel_view(node: fx.Node) -> bool:
    """``t[:, None]``, ``t[None, :, None]``, ``t.view(-1, 1)``, ``t.view(1, -1, 1)``, ``t.unsqueeze(-1)``, and with
    more trailing unit dims (``t.view(1, -1, 1, 1)``, ``t[None, :, None, None]`` for images): a [channels] tensor put
    against the channels of ``[batch, channels, rest...]``."""
    if node.op == "call_function" and node.target is operator.getitem:
        index = node.args[1]
        if not isinstance(index, tuple) or len(index) < 2:
            return False
        lead = 1 if index[0] is None else 0
        return index[lead] == slice(None) and len(index) > lead + 1 and all(i is None for i in index[lead + 1 :])
    if node.op == "call_method" and node.target == "unsqueeze":
        return node.args[1:] in ((-1,), (1,))
    dims = _reshaped_dims(node)
    if dims is None or len(dims) < 2:
        return False
    lead = 1 if dims[0] == 1 and len(dims) > 2 else 0
    return all(d == 1 for d in dims[lead + 1 :]) and (lead == 0 or dims[0] == 1)


def _read_channel_tensors(graph: fx.Graph, groups: ChannelGroups, placeholders: dict[str, fx.Node], first) -> None:
    names = {node: name for name, node in placeholders.items()}
    for node in list(graph.nodes):
        if not _channel_view(node) or not isinstance(node.args[0], fx.Node) or node.args[0] is first:
            continue
        source = node.args[0]
        if source.op == "get_attr":
            groups.parameters.add(str(source.target))
        elif source in names:
            groups.inputs.add(names[source])
        else:
            continue
        node.replace_all_uses_with(source)
        graph.erase_node(node)


def _rewrite_group_norm(graph: fx.Graph, node: fx.Node, groups: ChannelGroups, placeholders, hidden: int) -> None:
    """``F.group_norm(x, groups, weight, bias, eps)`` as the layer norm of the row (the group) with that affine."""
    names = {n: name for name, n in placeholders.items()}
    arguments = dict(zip(("input", "num_groups", "weight", "bias", "eps"), node.args))
    arguments.update(node.kwargs)
    for key in ("weight", "bias"):
        tensor = arguments.get(key)
        if isinstance(tensor, fx.Node) and tensor.op == "get_attr":
            groups.parameters.add(str(tensor.target))
        elif isinstance(tensor, fx.Node) and tensor in names:
            groups.inputs.add(names[tensor])
    with graph.inserting_after(node):
        norm = graph.call_function(
            F.layer_norm,
            (arguments["input"], (hidden,)),
            {"weight": arguments.get("weight"), "bias": arguments.get("bias"), "eps": arguments.get("eps", 1e-5)},
        )
    norm.meta = dict(node.meta)
    node.replace_all_uses_with(norm)
    graph.erase_node(node)
