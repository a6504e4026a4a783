"""The dim a broadcast input is unsqueezed at, as the reference writes it (``cos.unsqueeze(unsqueeze_dim)``,
``scale.unsqueeze(1)``): the kernels insert that dim as torch does, at whatever rank the input comes in, instead of
the position the trace saw at its example rank. HF's RoPE takes ``cos`` of ``[batch, seq, dim]`` against ``q`` of
``[batch, heads, seq, dim]`` (``unsqueeze_dim=1``) or ``[batch, seq, heads, dim]`` (``unsqueeze_dim=2``); the trace
drew ``q`` with three dims, where ``unsqueeze(1)`` inserted the dim two from the end."""

from __future__ import annotations

import ast

import torch.fx as fx

from tools.kernelgen.analyze.ops import node_line
from tools.kernelgen.analyze.trace import TracedReference
from tools.kernelgen.broadcast import INSERTED
from tools.kernelgen.broadcast import pattern_tokens


def written_unsqueeze_dims(traced: TracedReference) -> dict[str, str]:
    """Each broadcast input that reaches the math through ``unsqueeze`` calls of one and the same dim -> that dim as
    written: an int literal, or the name of the hyper-parameter passed there (its value is read at run time)."""
    found = {}
    by_name = {name: node for node, name in traced.placeholder_names.items()}
    lines = traced.loaded.source.splitlines()
    hypers = {h.name for h in traced.hyperparameters}
    for name, pattern in traced.broadcast_inputs.items():
        if pattern_tokens(pattern).count(INSERTED) != 1 or name not in by_name:
            continue
        written = {_written_dim(user, lines, hypers) for user in by_name[name].users}
        if len(written) == 1 and None not in written:
            found[name] = written.pop()
    return found


def _written_dim(user: fx.Node, lines: list[str], hypers: set[str]) -> str | None:
    """The dim argument of ``user`` (an unsqueeze) as its source line writes it; None for any other op or a line
    that does not tell."""
    if user.target != "unsqueeze" and getattr(user.target, "__name__", "") != "unsqueeze":
        return None
    literal = user.args[1] if len(user.args) > 1 else user.kwargs.get("dim")
    if not isinstance(literal, int):
        return None
    line = node_line(user)
    text = lines[line - 1].strip() if line and 0 < line <= len(lines) else ""
    try:
        tree = ast.parse(text.removeprefix("return ")) if text else None
    except SyntaxError:
        tree = None
    spelled = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "unsqueeze":
            # the dim is the last positional argument of both cos.unsqueeze(d) and torch.unsqueeze(cos, d)
            dim = node.args[-1] if node.args else next((k.value for k in node.keywords if k.arg == "dim"), None)
            # a hyper-parameter by name, or as the module holds it (self.unsqueeze_dim)
            name = dim.id if isinstance(dim, ast.Name) else dim.attr if isinstance(dim, ast.Attribute) else None
            if name in hypers:
                spelled.add(name)
            elif isinstance(dim, (ast.Constant, ast.UnaryOp)):
                spelled.add(str(literal))
    return spelled.pop() if len(spelled) == 1 else str(literal)


__all__ = ["written_unsqueeze_dims"]
