"""``.detach()`` in a reference: dropped from the traced graph where it changes no gradient.

kernelgen derives every gradient through the ops as written, and its formulas have no stop-gradient. A detach is
most often written where it stops nothing that matters: a softmax's max shift (``x - x.amax(-1,
keepdim=True).detach()``), whose gradient through the shift sums to exactly 0. Such a detach is the identity for the
math, so the graph is checked on a probe input, with the detach and without it: where the outputs and every gradient
(inputs and learnable parameters) agree, the detach is dropped (the kernel then computes the shift's gradient terms
as written, which cancel); where they differ it stays, an op whose derivative is 0.
"""

from __future__ import annotations

import copy

from typing import Any

import torch
import torch.fx as fx

_PROBE_ROWS = 3


def _is_detach(node: fx.Node) -> bool:
    return (node.op == "call_method" and node.target == "detach") or (
        node.op == "call_function" and node.target is torch.detach
    )


def drop_gradient_neutral_detaches(
    graph_module: fx.GraphModule, order: list[str], tensors: list[str], values: dict[str, Any], hidden: int
) -> None:
    """Drop each ``.detach()`` of ``graph_module`` when, all dropped, the outputs and gradients on a probe input are
    those of the graph as traced; keep them otherwise. ``values``: what the placeholders that are no
    tensor inputs take (hyper-parameters' defaults, specialised arguments). A graph the probe cannot run is left as
    it is."""
    detaches = [node for node in graph_module.graph.nodes if _is_detach(node)]
    if not detaches:
        return
    trial = copy.deepcopy(graph_module)
    for node in [node for node in trial.graph.nodes if _is_detach(node)]:
        node.replace_all_uses_with(node.args[0])
        trial.graph.erase_node(node)
    trial.recompile()
    generator = torch.Generator().manual_seed(0)
    probes = {name: torch.randn(_PROBE_ROWS, hidden, generator=generator, dtype=torch.float64) for name in tensors}
    try:
        traced = _outputs_and_gradients(graph_module, order, probes, values)
        dropped = _outputs_and_gradients(trial, order, probes, values)
    except Exception:  # noqa: BLE001 - the user's graph on a probe: a graph it cannot run keeps its detaches
        return
    if len(traced) == len(dropped) and all(
        a.shape == b.shape and torch.allclose(a, b, rtol=1e-4, atol=1e-6, equal_nan=True)
        for a, b in zip(traced, dropped)
    ):
        for node in detaches:
            node.replace_all_uses_with(node.args[0])
            graph_module.graph.erase_node(node)
        graph_module.recompile()
        return
    # It stops a gradient the outputs depend on: kept, a stop-gradient op (derivative 0, synth/rules.py).


def _outputs_and_gradients(
    graph_module: fx.GraphModule, order: list[str], probes: dict[str, torch.Tensor], values: dict[str, Any]
) -> list[torch.Tensor]:
    """The outputs of ``graph_module`` in float64 and the gradients of their weighted sum by every probe input and
    learnable parameter."""
    module = copy.deepcopy(graph_module).double()
    leaves = {name: probe.clone().requires_grad_(True) for name, probe in probes.items()}
    result = module(*[leaves[name] if name in leaves else values.get(name) for name in order])
    outputs = [t for t in (result if isinstance(result, (tuple, list)) else [result]) if isinstance(t, torch.Tensor)]
    weights = torch.Generator().manual_seed(1)
    total = sum((t.double() * torch.rand(t.shape, generator=weights, dtype=torch.float64)).sum() for t in outputs)
    wrt = [*leaves.values(), *(p for p in module.parameters() if p.requires_grad)]
    grads = torch.autograd.grad(total, wrt, allow_unused=True)
    grads = [torch.zeros_like(leaf) if grad is None else grad for leaf, grad in zip(wrt, grads)]
    return [t.detach().double() for t in outputs] + grads
