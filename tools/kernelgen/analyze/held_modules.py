"""Torch modules a reference holds and calls (``self.norm(x)``, ``self.crit(logits, target)``), traced as their
functional calls: fx keeps a torch module as one leaf call whose options (eps, label_smoothing, class weights) the
graph never shows; as a functional call they are numbers and attribute reads of the graph, which the analysis follows
like any other (analyze/argument_numbers.py) and turns into inputs."""

from __future__ import annotations

import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from tools.kernelgen.analyze.ops import LINE_KEY

_NORM_FUNCTIONS = {
    nn.LayerNorm: F.layer_norm,
    getattr(nn, "RMSNorm", nn.LayerNorm): getattr(F, "rms_norm", None),
    nn.GroupNorm: F.group_norm,
}


def norm_modules_as_calls(graph: fx.Graph, root: nn.Module) -> None:
    """``self.norm = nn.LayerNorm(hidden, eps=eps)`` called as ``self.norm(x)`` (an nn.RMSNorm or nn.GroupNorm too):
    the functional call with the module's shape (or groups), eps and parameter reads, so that its eps is a number of
    the graph, which follows the constructor's ``eps`` (trace._follow_constructor_numbers) instead of holding the
    module at its default."""
    for node in list(graph.nodes):
        if node.op != "call_module":
            continue
        module = root.get_submodule(node.target)
        function = _NORM_FUNCTIONS.get(type(module))
        source = node.args[0] if node.args else node.kwargs.get("input")  # forward(input): by position or name
        if function is None or source is None:
            continue
        with graph.inserting_before(node):
            weight, bias = (
                graph.get_attr(f"{node.target}.{name}") if getattr(module, name, None) is not None else None
                for name in ("weight", "bias")
            )
            if function is F.group_norm:
                arguments = (source, module.num_groups, weight, bias)
            else:
                arguments = (source, tuple(module.normalized_shape), weight)
            if function is F.layer_norm:
                arguments += (bias,)
            call = graph.call_function(function, arguments, {"eps": module.eps})
        for made in (weight, bias, call):
            if made is not None:
                made.meta[LINE_KEY] = node.meta.get(LINE_KEY)
        node.replace_all_uses_with(call)
        graph.erase_node(node)


def loss_modules_as_calls(graph: fx.Graph, root: nn.Module) -> None:
    """A held ``nn.CrossEntropyLoss`` / ``nn.NLLLoss`` called as ``self.loss(x, t)``: the functional call with the
    module's options as numbers of the graph (its label_smoothing then follows the constructor's argument, as
    _follow_constructor_numbers finds) and its weight buffer, if any, as an attribute read, so the class weights are
    not lost (they become an input of the kernel like any buffer of class weights)."""
    for node in list(graph.nodes):
        if node.op != "call_module":
            continue
        module = root.get_submodule(node.target)
        if not isinstance(module, (nn.CrossEntropyLoss, nn.NLLLoss)):
            continue
        options = {"ignore_index": module.ignore_index, "reduction": module.reduction}
        if isinstance(module, nn.CrossEntropyLoss):
            options["label_smoothing"] = module.label_smoothing
        function = F.cross_entropy if isinstance(module, nn.CrossEntropyLoss) else F.nll_loss
        with graph.inserting_before(node):
            if getattr(module, "weight", None) is not None:
                options["weight"] = graph.get_attr(f"{node.target}.weight")
                options["weight"].meta[LINE_KEY] = node.meta.get(LINE_KEY)
            call = graph.call_function(function, node.args, {**options, **node.kwargs})
        call.meta[LINE_KEY] = node.meta.get(LINE_KEY)
        node.replace_all_uses_with(call)
        graph.erase_node(node)


# Activations whose options are numbers: as functional calls, their numbers follow the constructor's arguments.
_ACTIVATION_FUNCTIONS = {
    nn.LeakyReLU: (F.leaky_relu, ("negative_slope",)),
    nn.ELU: (F.elu, ("alpha",)),
    nn.CELU: (F.celu, ("alpha",)),
    nn.Softplus: (F.softplus, ("beta", "threshold")),
    nn.Hardtanh: (F.hardtanh, ("min_val", "max_val")),
    nn.Threshold: (F.threshold, ("threshold", "value")),
    nn.Softshrink: (F.softshrink, ("lambd",)),
    nn.Hardshrink: (F.hardshrink, ("lambd",)),
}


def activation_modules_as_calls(graph: fx.Graph, root: nn.Module) -> None:
    """``self.act = nn.LeakyReLU(slope)`` called as ``self.act(x)``: the functional call with the module's options as
    numbers of the graph, so that its slope follows the constructor's ``slope`` (trace._follow_constructor_numbers)
    instead of holding the module at its default. ReLU6 (a Hardtanh of fixed bounds) stays the module it is."""
    for node in list(graph.nodes):
        if node.op != "call_module":
            continue
        module = root.get_submodule(node.target)
        found = _ACTIVATION_FUNCTIONS.get(type(module))
        source = node.args[0] if node.args else node.kwargs.get("input")
        if found is None or source is None:
            continue
        function, options = found
        with graph.inserting_before(node):
            call = graph.call_function(function, (source,), {name: getattr(module, name) for name in options})
        call.meta[LINE_KEY] = node.meta.get(LINE_KEY)
        node.replace_all_uses_with(call)
        graph.erase_node(node)
