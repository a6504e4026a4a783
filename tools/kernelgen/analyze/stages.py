"""Split a loss whose math after the per-token statistics is no sum or mean of rows (DPO's per-sequence sums and
pairs of sequences, GRPO's masked mean per sequence) into two stages, from the traced graph:

1. the *vocabulary stage*: every value over the class dim of ``[B, T, V]`` logits, up to the first values with one
   number per token (a picked log-probability, a log-sum-exp, an entropy): the *per-token statistics*. It becomes a
   tier-3 kernel that streams each row once and writes ``d logits`` from the statistics' adjoints;
2. the *sequence stage*: the rest of the reference, which reads the statistics and the inputs of one value per
   token or per sequence (a mask, a reference model's log-probabilities, advantages), run as the reference's own
   PyTorch (its graph, printed as a function); autograd gives the statistics' adjoints.

A reference that flattens the tokens itself (``logits.view(-1, V)``, ``labels.reshape(B * T, 1)``) computes the same
statistics of [B*T] rows: the vocabulary stage keeps its flattening (the kernel streams the rows of [B, T, V] logits
either way) and the sequence stage takes the [B, T] statistic, as it is where the reference views it back
(``logp.view(B, T)``), elsewhere flattened as the reference had it (``logp.reshape(-1) * flat_mask``).

The graph says nothing of the shapes of the inputs the sequence stage alone reads (``ref_chosen_logps`` is one value
per chosen sequence): each is tried as ``[B, T]``, ``[B]``, ``[B // 2]`` and ``[B // 2, T]`` on small logits, the
fewest away from ``[B, T]`` first, until the reference runs without broadcasting anything beyond ``[B, T]``.

An int hyper-parameter is traced at its default (``trace.py``: the vocabulary stage may need it as a number), the
trace guarded by fx's ``torch._assert(ignore_index == -100, ...)``. The sequence stage is PyTorch, which takes any
value: the places of the graph that hold the int itself are found by tracing the reference again at another value,
and read the argument there (``labels != ignore_index``), the guard dropped. An int the graph holds otherwise (a
value computed from it, a branch it picks) keeps the default and the guard.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import operator
import re
import warnings

from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from typing import Any

import torch
import torch.fx as fx

from torch.fx.passes.shape_prop import ShapeProp
from torch.utils._pytree import tree_leaves

from tools.kernelgen.analyze.argument_numbers import same_program
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.ops import descendants
from tools.kernelgen.analyze.ops import node_line
from tools.kernelgen.analyze.sequence_text import readable_function
from tools.kernelgen.analyze.sequence_text import reference_names
from tools.kernelgen.analyze.trace import TracedReference
from tools.kernelgen.analyze.trace import trace_reference
from tools.kernelgen.profile import SEQUENCE_SHAPES
from tools.kernelgen.profile import shape_of

# Example sizes of the probe: all different, so a broadcast of a wrong guess fails; B even for halves of a batch.
_B, _T, _V = 4, 5, 11
_META = {"size", "dim", "shape", "dtype", "device"}
# What the logits' dtype and device are to the sequence stage: the statistics' (fp32, on the logits' device), as a
# Llama-style ``mask.to(logits.dtype)`` reads them there.
_KIND = {"dtype", "device"}
# The shapes the probe tries: a second [B, T, V] input too, to name it in the refusal (chosen and rejected logits as
# two tensors, a reference model's logits), tried before one value, which a log-softmax over the last dim also takes.
_LOGITS = "B, T, V"
_PROBED = (*(words for words in SEQUENCE_SHAPES if words != "1"), _LOGITS, "1")
# The logits with their tokens flattened into rows (``logits.view(-1, V)``): the same tokens, one row each.
_OVER_VOCABULARY = ((_B * _T, _V),)
# One value per token: as [B, T] (or [B, T, 1], a ``gather`` not squeezed yet), or as the flattened rows' [B*T]
# (or [B*T, 1]), which the sequence stage gets by flattening the [B, T] statistic.
_PER_TOKEN = ((_B, _T), (_B, _T, 1), (_B * _T,), (_B * _T, 1))
# Ops that regroup a tensor's elements in their order (row-major), moving none: a flattened token keeps its place.
_REGROUPS = {"view", "reshape", "flatten", "unflatten", "view_as", "reshape_as"}


@dataclass
class StagedLoss:
    vocabulary: TracedReference  # the reference with the per-token statistics as its outputs
    statistics: list[str]  # their names, in the order of ``vocabulary.outputs``
    sequence_source: str  # ``def NAME(statistics..., inputs..., hyper-parameters...)``, the rest of the reference
    sequence_parameters: list[str]
    sequence_inputs: dict[str, str]  # inputs only the sequence stage reads -> their shape (SEQUENCE_SHAPES)
    log_probability_inputs: list[str]  # of those, what is subtracted from or added to a statistic's value
    conditions: list[str]  # of those, what the reference selects by (``torch.where(desirable, ...)``): booleans
    # of those, token masks: a weight of per-token values that the reference also counts (``(loss * mask).sum() /
    # mask.sum()``), which tests draw as 0 or 1
    mask_inputs: list[str] = field(default_factory=list)
    groups: str = ""  # what one sequence's adjoints read (profile.SEQUENCE_GROUPS)
    # int hyper-parameters the sequence stage takes as values (read where the reference reads them, or not at all),
    # not at their traced defaults
    int_values: list[str] = field(default_factory=list)
    # int hyper-parameters the vocabulary stage holds a constant of (a value to its kernel where the lowering reads
    # it as a hyper-parameter: ``target != ignore_index``)
    vocabulary_ints: list[str] = field(default_factory=list)


class NoStagesError(AnalyzeError):
    """The reference has no per-token statistics to split at (or inputs of no shape the split knows). ``reason``:
    why, where it is worth adding to the one kernel's refusal (a second [B, T, V] input), else empty."""

    def __init__(self, message: str, *, origin: str = "", line: int | None = None, reason: str = ""):
        super().__init__(message, origin=origin, line=line)
        self.reason = reason


class _Probe:
    def __init__(self, traced: TracedReference):
        self.traced = traced
        self.graph = traced.graph_module.graph
        self.placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        self.names = {node: traced.placeholder_names.get(node, node.target) for node in self.placeholders}
        first = traced.tensor_inputs[0]
        self.logits = next(node for node in self.placeholders if self.names[node] == first)
        generator = torch.Generator().manual_seed(0)
        self.values: dict[str, Any] = {first: torch.randn(_B, _T, _V, generator=generator)}
        for name in traced.index_inputs:
            self.values[name] = torch.randint(0, _V, (_B, _T), generator=generator)
        self.values.update({hp.name: hp.default for hp in traced.hyperparameters})
        self.floats = [n for n in traced.tensor_inputs[1:] if n not in traced.index_inputs]
        self.conditions = traced.conditions

    def run(self, shapes: dict[str, str], record: bool = False) -> Any:
        generator = torch.Generator().manual_seed(1)
        values = dict(self.values)
        values.update(self.draw(shapes, generator))
        args = [values.get(self.names[node]) for node in self.placeholders]
        with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
            interpreter = ShapeProp(self.traced.graph_module) if record else _Largest(self.traced.graph_module)
            result = interpreter.run(*args)
        if not record and interpreter.largest > _B * _T:
            raise ValueError("a guess broadcast beyond [B, T]")
        return result

    def draw(self, shapes: dict[str, str], generator: torch.Generator) -> dict[str, torch.Tensor]:
        values = {}
        for name in self.floats:
            value = torch.rand(_probe_shape(shapes[name]), generator=generator)
            values[name] = value > 0.5 if name in self.conditions else value + 0.5
        return values

    def shapes(self) -> dict[str, str]:
        """The shape of each float input after the first, the fewest of them away from ``[B, T]``."""
        for count in range(len(self.floats) + 1):
            for moved in itertools.combinations(self.floats, count):
                for choice in itertools.product(_PROBED[1:], repeat=count):
                    shapes = dict.fromkeys(self.floats, SEQUENCE_SHAPES[0]) | dict(zip(moved, choice))
                    try:
                        self.run(shapes)
                    except Exception:  # noqa: BLE001 - a wrong guess of shapes fails anywhere in the reference
                        continue
                    return shapes
        raise NoStagesError(
            f"the reference does not run with {', '.join(self.floats)} of one value per token or per sequence "
            f"([B, T], [B] or [B // 2] of [B, T, V] logits)",
            origin=self.traced.loaded.origin,
        )


def _probe_shape(words: str) -> tuple[int, ...]:
    return (_B, _T, _V) if words == _LOGITS else shape_of(words, _B, _T)


class _Largest(fx.Interpreter):
    """Runs the graph, remembering the most elements of a value that is not over the vocabulary."""

    largest = 0

    def run_node(self, node):
        result = super().run_node(node)
        if isinstance(result, torch.Tensor) and (result.dim() == 0 or result.shape[-1] != _V):
            self.largest = max(self.largest, result.numel())
        return result


def _error(traced: TracedReference, message: str, node: fx.Node, kind: type = AnalyzeError) -> AnalyzeError:
    line = node_line(node)
    origin = traced.loaded.origin
    return kind(message, origin=f"{origin}:{line}" if line else origin)


def _in_words(shape: tuple[int, ...] | None) -> str:
    """A probed shape in the words of the logits' dims (``[B]``, ``[B*T, V]``; a scalar: ``one value``); a size of
    none of them is ``?`` (the probe's sizes are its own, not the user's: ``logits[:, :-1]`` has T - 1 tokens)."""
    if shape is None:
        return "a value of unknown shape"
    if not shape:
        return "one value"
    words = {_B: "B", _T: "T", _V: "V", _B * _T: "B*T", _B // 2: "B // 2", _T * _V: "T*V", _B * _T * _V: "B*T*V"}
    return "[" + ", ".join(words.get(size, "?") for size in shape) + "]"


def _is_regroup(node: fx.Node) -> bool:
    if node.op == "call_method":
        return node.target in _REGROUPS
    return node.op == "call_function" and getattr(node.target, "__name__", "") in _REGROUPS


def _not_per_token(traced: TracedReference, node: fx.Node) -> str:
    """Why ``node``, computed from the logits, is neither over the vocabulary nor a statistic per token."""
    written, shape = _line_text(traced, node), _shape(node)
    if _is_regroup(node):
        return (
            f"`{written}` regroups the [B, T, V] logits as {_in_words(shape)}; a statistic of the vocabulary is "
            f"taken over each token's V values, so only the tokens may be flattened together ([B*T, V])"
        )
    return (
        f"`{written}` reduces the [B, T, V] logits to {_in_words(shape)}; a statistic of the vocabulary holds one "
        f"value per token ([B, T]), which the math after it may reduce further"
    )


def _slices_the_tokens(traced: TracedReference, node: fx.Node) -> str:
    return (
        f"`{_line_text(traced, node)}` slices the tokens of the [B, T, V] logits (a causal LM's shift "
        "logits[:, :-1, :]), whose rows a loss in two stages streams all of: slice before the kernel and pass it the "
        "sliced logits and labels, or shift the labels alone, which kernelgen takes (labels = F.pad(labels, (0, 1), "
        "value=ignore_index)[..., 1:], the logits whole: the last token of each sequence is then ignored)"
    )


def _check_the_token_order(traced: TracedReference, frontier: list[fx.Node]) -> None:
    """The kernel computes the statistic of each row of the [B, T, V] logits in their order, which the sequence
    stage flattens where the reference did (``logp.view(B, T)`` undoes it): a value the vocabulary stage flattens
    into rows (the logits, the labels) must have held its tokens as [B, T] before (not ``logits.transpose(0, 1)``'s
    [T, B, V], whose rows are in another order)."""
    ancestors: set[fx.Node] = set()
    pending = list(frontier)
    while pending:
        node = pending.pop()
        if node not in ancestors:
            ancestors.add(node)
            pending.extend(node.all_input_nodes)
    for node in traced.graph_module.graph.nodes:  # the first such line of the reference
        shape = _shape(node)
        if node not in ancestors or not _is_regroup(node) or not shape or shape[0] != _B * _T:
            continue
        source = _shape(node.args[0]) if isinstance(node.args[0], fx.Node) else None
        if source is None or source[:2] != (_B, _T) and source[0] != _B * _T:
            raise _error(
                traced,
                f"`{_line_text(traced, node)}` flattens {_in_words(source)} into rows: a loss in two stages takes its "
                f"per-token statistics in the order of the [B, T] tokens, so only [B, T, ...] values may be flattened",
                node,
            )


def _line_text(traced: TracedReference, node: fx.Node) -> str:
    """The reference's line that made ``node``, as written (its fx name where the line is unknown)."""
    line = node_line(node)
    lines = traced.loaded.source.splitlines()
    return " ".join(lines[line - 1].split()) if line and line <= len(lines) else node.name


def _shape(node: fx.Node) -> tuple[int, ...] | None:
    meta = node.meta.get("tensor_meta")
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _meets_the_logits(probe: _Probe, shapes: dict[str, str], second: fx.Node) -> bool:
    """Whether ``second`` and the logits meet at the logits' own shape ([B, T, V]): an op takes both as [B, T, V]
    values, or makes one (combined element by element before any statistic of the vocabulary)."""
    try:
        probe.run(shapes, record=True)
    except Exception:  # noqa: BLE001 - a reference that does not run at these shapes meets nothing here
        return False
    from_logits = descendants(probe.logits) | {probe.logits}
    from_second = descendants(second) | {second}
    logits_shaped = {node for node in from_logits | from_second if _shape(node) == (_B, _T, _V)}
    for node in from_logits & from_second:
        operands = set(node.all_input_nodes) & logits_shaped
        if (
            operands & from_logits - from_second
            and operands & from_second - from_logits
            or _shape(node) == (_B, _T, _V)
        ):
            return True
    return False


def _is_meta(node: fx.Node) -> bool:
    if node.op == "call_method" and node.target in _META:
        return True
    return node.op == "call_function" and node.target is getattr and node.args[1] in _META


def split_stages(traced: TracedReference) -> StagedLoss:
    """The two stages of ``traced`` (see the module docstring); refuses with the op and its line what neither takes."""
    probe = _Probe(traced)
    shapes = probe.shapes()
    second = [name for name, words in shapes.items() if words == _LOGITS]
    if second:
        node = next(n for n in probe.placeholders if probe.names[n] == second[0])
        if _meets_the_logits(probe, shapes, node):
            # Combined with the logits element by element (a target or a teacher distribution, as in a binary
            # cross entropy of two [B, T, V] tensors): no chosen/rejected split; the one kernel's refusal says why.
            reason = (
                f"nor is it a loss in two stages (per-token statistics, then the reference's math over tokens and "
                f"sequences), which streams one [B, T, V] logits tensor: {second[0]} is a second one that meets "
                f"{traced.tensor_inputs[0]} element by element"
            )
            raise NoStagesError(reason, origin=traced.loaded.origin, reason=reason)
        raise _error(
            traced,
            f"{second[0]} is a second [B, T, V] input beside {traced.tensor_inputs[0]} (`{_line_text(traced, next(iter(node.users)))}`); "
            f"a loss in two stages streams one logits tensor (chosen and rejected as one batch, the first half chosen)",
            next(iter(node.users)),
        )
    probe.run(shapes, record=True)
    graph = probe.graph
    over_vocabulary: set[fx.Node] = {probe.logits}
    frontier: list[fx.Node] = []
    vocabulary_stage: set[fx.Node] = set()  # the values computed from the logits, up to the statistics
    for node in graph.nodes:
        if node.op in ("placeholder", "output") or _is_meta(node):
            continue
        operands = [a for a in node.all_input_nodes if a in over_vocabulary]
        if not operands:
            continue
        shape = _shape(node)
        if shape is not None and len(shape) == 3 and shape[::2] == (_B, _V) and shape[1] != _T:
            # logits[:, :-1, :] (a causal LM's shift, TRL's logits_to_keep): T - 1 tokens, which the words of the
            # logits' dims would have named B (the probe's T - 1) in the statistic's refusal
            refusal = AnalyzeError if traced.rank == 3 else NoStagesError
            raise _error(traced, _slices_the_tokens(traced, node), node, refusal)
        if shape in _OVER_VOCABULARY or shape is not None and len(shape) == 3 and shape[-1] == _V:
            over_vocabulary.add(node)
        elif shape in _PER_TOKEN:
            frontier.append(_squeezed(node))
            vocabulary_stage |= {node, frontier[-1]}
        else:
            # A reference written for [B, T, V] logits hears what the split needs; another one, the one kernel's
            # refusal (the caller's).
            refusal = AnalyzeError if traced.rank == 3 else NoStagesError
            raise _error(traced, _not_per_token(traced, node), node, refusal)
    vocabulary_stage |= over_vocabulary
    _check_the_token_order(traced, frontier)
    returned = [a for a in next(n for n in graph.nodes if n.op == "output").all_input_nodes]
    for node in returned:
        if node in over_vocabulary:
            raise _error(
                traced, f"output `{node.name}` holds a value per class; a loss returns per-token or less", node
            )
    if not frontier:
        raise NoStagesError("no per-token statistic of the logits found", origin=traced.loaded.origin)
    names: list[str] = []
    taken = {*probe.names.values(), *(hp.name for hp in traced.hyperparameters)}
    for index, node in enumerate(frontier):
        name = base = _statistic_name(traced, node, index)
        while name in taken or name in names:  # an input's name, or two statistics of one line
            name = f"{base}_{len(names)}" if name == base else f"{name}_"
        names.append(name)
    moved = _moved_traces(traced)
    sequence, parameters, int_values = _sequence_graph(probe, frontier, names, over_vocabulary, vocabulary_stage, moved)
    vocabulary = _vocabulary_reference(traced, frontier, names)
    traced_source = _function_source(sequence, "sequence_stage", traced)
    source = _as_written(traced_source, sequence, traced)
    read = set(parameters)
    sequence_inputs = {name: words for name, words in shapes.items() if name in read}
    for name in probe.floats:
        if name not in read:
            sequence_inputs.setdefault(name, shapes[name])
    staged = StagedLoss(
        vocabulary=vocabulary,
        statistics=names,
        sequence_source=source,
        sequence_parameters=parameters,
        sequence_inputs=sequence_inputs,
        log_probability_inputs=_log_probability_inputs(sequence, names, set(sequence_inputs)),
        conditions=[name for name in probe.conditions if name in sequence_inputs],
        mask_inputs=_mask_inputs(sequence, names, set(sequence_inputs) - set(probe.conditions)),
        int_values=int_values,
        vocabulary_ints=[m.name for m in moved if any(_holds(node, m) for node in vocabulary.calls)],
    )
    try:
        _check_against_the_reference(probe, staged, shapes)
    except Exception:  # the rewrite's text fails or differs: fx's own text, one statement per op, is the graph
        if source == traced_source:
            raise
        staged.sequence_source = traced_source
        _check_against_the_reference(probe, staged, shapes)
    staged.groups = _sequence_groups(probe, staged)
    return staged


def _sequence_groups(probe: _Probe, staged: StagedLoss) -> str:
    """Which sequences' statistics the adjoints of one sequence's depend on, found on random statistics of 4 and of
    8 sequences: each its own (``sequence``), i with i + B // 2 (``pair``), or others too (empty). Only a loss of one
    number has adjoints that do not wait for a grad_output."""
    found = set()
    for batch in (4, 8):
        partner = [_partners(probe, staged, batch, j) for j in range(batch)]
        if partner[0] is None:
            return ""
        if all(p == {j} for j, p in enumerate(partner)):
            found.add("sequence")
        elif all(p == {j, (j + batch // 2) % batch} for j, p in enumerate(partner)):
            found.add("pair")
        else:
            return ""
    return found.pop() if len(found) == 1 else ""


def _partners(probe: _Probe, staged: StagedLoss, batch: int, moved: int) -> set[int] | None:
    """The sequences whose statistics' adjoints change when sequence ``moved``'s statistics do (None: the first
    output is not one number), over the draws of ``_DRAWS``; a draw whose adjoints are not finite (outside the
    stage's domain) says nothing, and none that is finite, every sequence. One draw can sit where a clamp is flat: KTO's
    baseline ``(policy_kl - ref_kl).mean().clamp(min=0)`` is 0 wherever the reference's log-probabilities are above
    the policy's, and its value (detached or not) moves every sequence's adjoints elsewhere."""
    found: set[int] = {moved}
    evidence = False
    for draw in range(len(_DRAWS)):
        partners = _partners_of_one_draw(probe, staged, batch, moved, draw)
        if partners is None:
            return None
        evidence = evidence or bool(partners)
        found |= partners
    # No draw where the stage is finite (every draw outside its domain): coupled to every sequence, as far as known.
    return found if evidence else set(range(batch))


# Each draw: the scale of the sequence inputs (values near 1, then below and above any sequence's sum of statistics)
# and the statistics' offset, -2 a token (log-probabilities), or +2 (a statistic that is a negative log-probability,
# whose sums log1p(-exp(-mean)) takes: there, log-probability draws are NaN).
_DRAWS = ((1, -2.0), (-8 * _T, -2.0), (8 * _T, -2.0), (1, 2.0))


def _partners_of_one_draw(probe: _Probe, staged: StagedLoss, batch: int, moved: int, draw: int) -> set[int] | None:
    generator = torch.Generator().manual_seed(batch + 1000 * draw)
    namespace: dict[str, Any] = {}
    exec(compile("import torch\n" + staged.sequence_source, "<sequence stage>", "exec"), namespace)  # noqa: S102
    known = {hp.name: hp.default for hp in probe.traced.hyperparameters}
    known |= {name: torch.randint(0, _V, (batch, _T), generator=generator) for name in probe.traced.index_inputs}
    for name, words in staged.sequence_inputs.items():
        value = torch.rand(shape_of(words, batch, _T), generator=generator, dtype=torch.float64)
        if name in staged.conditions:
            known[name] = value > 0.5
        else:
            known[name] = (value + 0.5) * _DRAWS[draw][0]
    offset = _DRAWS[draw][1]
    statistics = [torch.randn(batch, _T, generator=generator, dtype=torch.float64) + offset for _ in staged.statistics]

    def adjoints(values):
        leaves = [value.clone().requires_grad_() for value in values]
        arguments = dict(known) | dict(zip(staged.statistics, leaves))
        outputs = namespace["sequence_stage"](*(arguments[name] for name in staged.sequence_parameters))
        loss = outputs[0] if isinstance(outputs, tuple) else outputs
        if loss.dim() != 0:
            return None
        found = torch.autograd.grad(loss, leaves, allow_unused=True)
        return torch.stack([torch.zeros(batch, _T, dtype=torch.float64) if g is None else g for g in found])

    before = adjoints(statistics)
    if before is None:
        return None
    moved_values = [value.clone() for value in statistics]
    for value in moved_values:
        value[moved] += torch.randn(_T, generator=generator, dtype=torch.float64) * 0.5
    after = adjoints(moved_values)
    if not (before.isfinite().all() and after.isfinite().all()):
        return set()  # outside the stage's domain: no evidence either way
    changed = ~torch.isclose(after, before, rtol=1e-9, atol=1e-12)
    return {moved} | {int(i) for i in changed.any(dim=2).any(dim=0).nonzero().flatten()}


def _squeezed(node: fx.Node) -> fx.Node:
    """A ``[B, T, 1]`` (``[B*T, 1]``) statistic squeezed at once (``gather(...).squeeze(-1)``, ``[..., 0]``,
    ``.view(-1)``): the squeezed value is the one."""
    users = list(node.users)
    squeeze = len(users) == 1 and users[0].op == "call_method" and users[0].target == "squeeze"
    picked = len(users) == 1 and users[0].op == "call_function" and users[0].target is operator.getitem
    regrouped = len(users) == 1 and _is_regroup(users[0])
    shape = _shape(node)
    if (squeeze or picked or regrouped) and shape[-1] == 1 and _shape(users[0]) == shape[:-1]:
        return users[0]
    return node


def _statistic_name(traced: TracedReference, node: fx.Node, index: int) -> str:
    """The name the reference gives a statistic (``per_token_logps = ...gather(...).squeeze(-1)``); one part of a
    line's value is named after it and the op (``entropy = -(p * logp).sum(-1)``: ``entropy_sum``), else the op."""
    assigned = _assigned(traced, node)
    if assigned is None:
        return f"{node.name}_{index}"
    operation = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "value")
    return assigned if _final_of(node) is _assigned_node(node) else f"{assigned}_{operation}"


def _assigned(traced: TracedReference, node: fx.Node) -> str | None:
    """The name the line that made ``node`` assigns (``name = ...``), or None."""
    line = node_line(node)
    lines = traced.loaded.source.splitlines()
    if not line or line > len(lines):
        return None
    match = re.match(r"\s*([A-Za-z_]\w*)\s*=[^=]", lines[line - 1])
    return match.group(1) if match else None


def _assigned_node(node: fx.Node) -> fx.Node | None:
    """The last op of ``node``'s line: the value its name takes."""
    line = node_line(node)
    later = [n for n in node.graph.nodes if node_line(n) == line and n.op != "output"]
    return later[-1] if later else None


def _keeps_the_value(node: fx.Node) -> bool:
    """A cast, a squeeze or a view back to [B, T] (``gather(...).reshape(B, -1)``): the same value a line names."""
    if node.op == "call_method" and node.target in ("squeeze", "float", "to"):
        return True
    return _is_regroup(node) and _shape(node) == (_B, _T)


def _final_of(node: fx.Node) -> fx.Node:
    users = list(node.users)
    while len(users) == 1 and _keeps_the_value(users[0]):
        if node_line(users[0]) != node_line(node):
            break
        node = users[0]
        users = list(node.users)
    return node


def _sequence_graph(
    probe: _Probe, frontier, names, over_vocabulary, vocabulary_stage, moved
) -> tuple[fx.Graph, list[str], list[str]]:
    """The reference after the statistics: their values and the other inputs in, the outputs out; and the int
    hyper-parameters of ``moved`` (``_moved_traces``) it takes as values (``_read_as_value``)."""
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    copies: dict[fx.Node, fx.Node] = {}  # a node of the reference's graph -> its copy
    statistics = [graph.placeholder(name) for name in names]
    for node, placeholder in zip(frontier, statistics):
        env[node] = _shaped_as_computed(graph, placeholder, _shape(node))
        for user in node.users:
            if _is_regroup(user) and _shape(user) == (_B, _T):
                env[user] = placeholder  # ``logp.view(B, T)`` of a flattened statistic: the statistic itself
    inputs = {node: graph.placeholder(probe.names[node]) for node in probe.placeholders if node is not probe.logits}
    read = _read_after_the_statistics(probe.graph, vocabulary_stage)
    skipped: set[fx.Node] = set()  # sizes of the logits only the vocabulary stage reads, and what is computed of them
    for node in probe.graph.nodes:
        if node in env or node in vocabulary_stage:
            continue
        if node.op == "placeholder":
            env[node] = inputs[node]
            continue
        if node.op == "output":
            graph.output(fx.map_arg(node.args[0], lambda n: env[n]))
            continue
        if any(a in skipped for a in node.all_input_nodes):
            skipped.add(node)
            continue
        if _is_meta(node) and node.args[0] in over_vocabulary:
            if node not in read:  # ``logits.view(-1, logits.size(-1))``
                skipped.add(node)
                continue
            # The logits' leading dims are the statistics': ``logits.shape[0]`` reads the batch from them (of
            # flattened logits, ``flat.shape[0]`` the tokens of the flattened statistic).
            if not (node.target is getattr and node.args[1] in _KIND):
                _refuse_the_vocabulary_size(probe.traced, node, read)
            rank = len(_shape(node.args[0]))
            sized = statistics[0] if rank == 3 else _shaped_as_computed(graph, statistics[0], (_B * _T,))
            env[node] = copies[node] = graph.node_copy(node, lambda n: sized if n in over_vocabulary else env[n])
            continue
        if any(a in vocabulary_stage and a not in env for a in node.all_input_nodes):
            continue  # feeds the vocabulary stage only
        env[node] = copies[node] = graph.node_copy(node, lambda n: env[n])
    int_values = [trace.name for trace in moved if _read_as_value(graph, copies, trace)]
    _drop_switch_guards(graph, probe.traced)
    graph.eliminate_dead_code()
    for placeholder in [n for n in graph.nodes if n.op == "placeholder" and not n.users]:
        if placeholder not in statistics:
            graph.erase_node(placeholder)
    graph.lint()
    return graph, [n.target for n in graph.nodes if n.op == "placeholder"], int_values


def _drop_switch_guards(graph: fx.Graph, traced: TracedReference) -> None:
    """fx's guards of the str and bool arguments the stage was traced at (``loss_type == "sigmoid"``): the generated
    Function refuses other values before it runs (its ``choices`` check), and ``average_log_prob == False`` written
    out is a ruff finding."""
    switches = [name for name, value in traced.specialized.items() if isinstance(value, (bool, str))]
    for node in list(graph.nodes):
        if any(_guards(node, name) for name in switches):
            condition = node.args[0]
            graph.erase_node(node)
            if isinstance(condition, fx.Node) and not condition.users:
                graph.erase_node(condition)


def _shaped_as_computed(graph: fx.Graph, statistic: fx.Node, shape: tuple[int, ...]) -> fx.Node:
    """The [B, T] ``statistic`` in the shape the reference computed it: [B, T, 1] unsqueezed, the flattened
    tokens' [B*T] (or [B*T, 1]) flattened in their order."""
    if shape == (_B, _T):
        return statistic
    if shape == (_B, _T, 1):
        return graph.call_method("unsqueeze", (statistic, -1))
    return graph.call_method("reshape", (statistic, *[-1 if size == _B * _T else size for size in shape]))


def _read_after_the_statistics(graph: fx.Graph, vocabulary_stage: set[fx.Node]) -> set[fx.Node]:
    """The nodes the math after the statistics reads: returned, with an effect, or read by such a node outside the
    vocabulary stage (``B * T`` of ``logits.view(B * T, V)`` alone is read by the vocabulary stage only)."""
    read: set[fx.Node] = set()
    for node in reversed(graph.nodes):
        if node in vocabulary_stage:
            continue
        if node.op == "output" or node.is_impure() or any(user in read for user in node.users):
            read.add(node)
    return read


# What an int hyper-parameter is moved by to find the places that hold it: odd and large, so that a value computed
# from it (``// 2``, ``% 2``, a sign) moves too and is not taken for a constant of the reference.
_MOVED_BY = 1009


@dataclass
class _MovedTrace:
    name: str
    default: int
    moved: int
    twin: dict[fx.Node, fx.Node]  # each node of the reference's graph -> the same node traced at ``moved``


class _Derived(Exception):
    """The graph holds a value computed from the int (``ignore_index + 1``), not the int: it stays specialized."""


def _moved_traces(traced: TracedReference) -> list[_MovedTrace]:
    """The reference traced again with each int hyper-parameter at another value, where the graph is the same but
    for constants (an int that picks a branch, or a dim the reference cannot take at that value, has none)."""
    nodes = list(traced.graph_module.graph.nodes)
    found = []
    for hp in traced.hyperparameters:
        default = traced.specialized.get(hp.name)
        if hp.type != "int" or type(default) is not int:
            continue
        moved = default + _MOVED_BY
        try:
            with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
                warnings.simplefilter("ignore")
                other = trace_reference(traced.loaded, {hp.name: moved}).graph_module.graph
        except Exception:  # noqa: BLE001 - the reference fails at that value anywhere: traced at its default only
            continue
        if same_program([traced.graph_module.graph, other]):
            found.append(_MovedTrace(hp.name, default, moved, dict(zip(nodes, other.nodes))))
    return found


def _read_as_value(graph: fx.Graph, copies: dict[fx.Node, fx.Node], moved: _MovedTrace) -> bool:
    """Whether the sequence stage (``graph``, ``copies`` of the reference's nodes) takes ``moved.name`` as a value:
    the constants that moved with it become its placeholder (added where the reference holds it on the module,
    ``self.ignore_index``) and fx's guard of its traced value goes; False, and the graph as it was, where a constant
    moved otherwise."""
    guards = [copy for node, copy in copies.items() if _guards(node, moved.name)]
    placeholder = next((n for n in graph.nodes if n.op == "placeholder" and n.target == moved.name), None)
    if placeholder is None:
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        with graph.inserting_after(placeholders[-1]):
            placeholder = graph.placeholder(moved.name)
    conditions = {guard.args[0] for guard in guards}
    try:
        rewritten = {
            copy: (
                _moved_places(copy.args, moved.twin[node].args, moved, placeholder),
                _moved_places(copy.kwargs, moved.twin[node].kwargs, moved, placeholder),
            )
            for node, copy in copies.items()
            if copy not in guards and copy not in conditions
        }
    except _Derived:
        if not placeholder.users:
            graph.erase_node(placeholder)
        return False
    for copy, (args, kwargs) in rewritten.items():
        copy.args, copy.kwargs = args, kwargs
    for guard in guards:
        graph.erase_node(guard)
    for condition in conditions:
        if isinstance(condition, fx.Node) and not condition.users:
            graph.erase_node(condition)
    return True


def _holds(node: fx.Node, moved: _MovedTrace) -> bool:
    """Whether a constant of ``node`` moves with ``moved.name`` (or its arguments differ in kind)."""
    twin = moved.twin[node]
    mine, theirs = tree_leaves((node.args, node.kwargs)), tree_leaves((twin.args, twin.kwargs))
    return len(mine) != len(theirs) or any(not isinstance(a, fx.Node) and a != b for a, b in zip(mine, theirs))


def _guards(node: fx.Node, name: str) -> bool:
    """fx's ``torch._assert(name == default, "name has been specialized ...")`` of an argument traced at a value."""
    return (
        node.op == "call_function"
        and node.target is torch._assert
        and len(node.args) > 1
        and isinstance(node.args[1], str)
        and node.args[1].startswith(f"{name} has been specialized")
    )


def _moved_places(value: Any, twin: Any, moved: _MovedTrace, placeholder: fx.Node) -> Any:
    """``value`` (a node's arguments) with each int that is ``moved.default`` here and ``moved.moved`` in ``twin``
    (the same arguments traced at the moved value) as ``placeholder``; raises _Derived where a constant moved
    otherwise."""
    if isinstance(value, fx.Node):
        return value
    if isinstance(value, (tuple, list)):
        if not isinstance(twin, (tuple, list)) or len(twin) != len(value):
            raise _Derived
        items = [_moved_places(a, b, moved, placeholder) for a, b in zip(value, twin)]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        if not isinstance(twin, dict) or twin.keys() != value.keys():
            raise _Derived
        return {key: _moved_places(value[key], twin[key], moved, placeholder) for key in value}
    if isinstance(value, slice):
        if not isinstance(twin, slice):
            raise _Derived
        parts = zip((value.start, value.stop, value.step), (twin.start, twin.stop, twin.step))
        return slice(*(_moved_places(a, b, moved, placeholder) for a, b in parts))
    if type(value) is int and value == moved.default and type(twin) is int and twin == moved.moved:
        return placeholder
    if type(value) is type(twin) and (value is twin or value == twin):
        return value
    raise _Derived


def _refuse_the_vocabulary_size(traced: TracedReference, node: fx.Node, read: set[fx.Node]) -> None:
    """A size of the logits the sequence stage reads (``read``) must be one of their leading dims (``shape[0]``,
    ``size(1)``; of flattened logits, ``shape[0]``): the vocabulary's is no size of any tensor it has."""
    if node.op == "call_method" and node.target == "size":
        dims = [node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")]
    else:
        getters = list(node.users)
        if any(u.op != "call_function" or u.target is not operator.getitem for u in getters):
            dims = [None]
        else:
            # Only the sizes read (``B, T, V = logits.shape`` with V unused reads no vocabulary size).
            dims = [u.args[1] for u in getters if u in read]
    if node.op == "call_method" and node.target == "dim":
        dims = [None]
    rank = len(_shape(node.args[0]))
    if all(isinstance(dim, int) and -rank <= dim < rank - 1 and dim != -1 for dim in dims):
        return
    leading = "dims [B, T]" if rank == 3 else "dim [B*T] (its tokens flattened)"
    raise _error(
        traced,
        f"`{_line_text(traced, node)}` reads a size of {traced.tensor_inputs[0]} beyond its leading {leading} "
        f"after the per-token statistics (its vocabulary size?); the math after them sees [B, T] values only",
        node,
    )


def _vocabulary_reference(traced: TracedReference, frontier, names) -> TracedReference:
    """``traced`` with the statistics as its outputs and only the inputs they read."""
    needed: set[fx.Node] = set()
    stack = list(frontier)
    while stack:
        node = stack.pop()
        if node in needed:
            continue
        needed.add(node)
        stack.extend(node.all_input_nodes)
    read = {traced.placeholder_names.get(n, n.target) for n in needed if n.op == "placeholder"}
    tensors = [name for name in traced.tensor_inputs if name in read]
    return replace(
        traced,
        outputs=list(frontier),
        output_names=list(names),
        calls={node: call for node, call in traced.calls.items() if node in needed},
        tensor_inputs=tensors,
        index_inputs=[name for name in traced.index_inputs if name in read],
        row_inputs=[name for name in tensors[1:] if name not in traced.index_inputs],
        broadcast_inputs={},
        hyperparameters=[hp for hp in traced.hyperparameters if hp.name in read or hp.name in traced.specialized],
    )


_IMPORTS = {"torch": "import torch", "inf": "from math import inf", "nan": "from math import nan"}


def _function_source(graph: fx.Graph, name: str, traced: TracedReference) -> str:
    code = graph.python_code(root_module="self")
    unknown = sorted(set(code.globals) - set(_IMPORTS) - {"device", "fx_pytree", "pytree", "NoneType", "getattr"})
    if unknown:
        raise AnalyzeError(
            f"the math after the per-token statistics calls {', '.join(unknown)}, which the generated sequence "
            f"stage cannot import",
            origin=traced.loaded.origin,
        )
    text = _public_names(code.src.strip(), code.globals)
    text = re.sub(r";  [^;\n]*= None$", "", text, flags=re.M)  # fx frees values early; a small function need not
    text = text.replace("def forward(self, ", f"def {name}(", 1).replace("def forward(self)", f"def {name}()", 1)
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip()) + "\n"


def _as_written(text: str, graph: fx.Graph, traced: TracedReference) -> str:
    """``text`` with the reference's names and expressions (``sequence_text.py``); ``text`` itself where that
    rewrite fails on a construct it does not know (the caller checks either against the reference)."""
    try:
        return readable_function(text, *reference_names(graph, traced.loaded.source))
    except (SyntaxError, ValueError, TypeError, AttributeError, IndexError):
        return text


def _public_names(text: str, names: dict[str, Any]) -> str:
    """``torch._C._nn.log_sigmoid`` as the reference wrote it, ``torch.nn.functional.logsigmoid``: fx prints a
    builtin by the module that defines it."""
    import torch.nn.functional as F

    public = {id(getattr(F, name)): name for name in dir(F) if not name.startswith("_")}

    def replace(match: re.Match) -> str:
        target = torch
        for part in match.group(0).split(".")[1:]:
            target = getattr(target, part, None)
        name = public.get(id(target))
        return f"torch.nn.functional.{name}" if name else match.group(0)

    return re.sub(r"\btorch\._C\._nn\.\w+", replace, text)


def _log_probability_inputs(graph: fx.Graph, statistics: list[str], inputs: set[str]) -> list[str]:
    """Inputs added to or subtracted from a value of a statistic (``logp - old_logp``): log-probabilities, which
    tests draw near a picked one so that ratios reach every branch of a clip."""
    from_statistics: set[fx.Node] = set()
    for node in graph.nodes:
        if node.op == "placeholder" and node.target in statistics:
            from_statistics.add(node)
        elif node.op == "call_method" and node.target in ("squeeze", "unsqueeze", "float", "to", "sum", "mean"):
            if node.args[0] in from_statistics:
                from_statistics.add(node)
        elif node.op == "call_function" and node.target is operator.getitem and node.args[0] in from_statistics:
            from_statistics.add(node)
    found = []
    for node in graph.nodes:
        if node.op == "call_function" and node.target in (operator.sub, operator.add):
            operands = [a for a in node.args if isinstance(a, fx.Node)]
            if any(a in from_statistics for a in operands):
                for a in operands:
                    if a.op == "placeholder" and a.target in inputs and a.target not in found:
                        found.append(a.target)
    return found


_PASS_THROUGH = ("float", "to", "type_as", "squeeze", "unsqueeze", "view", "reshape", "contiguous")
_COUNTS = ("sum", "mean", "count_nonzero")


def _mask_inputs(graph: fx.Graph, statistics: list[str], inputs: set[str]) -> list[str]:
    """Inputs that weight a value computed from the statistics (``per_token * mask``) and that the reference also
    reduces on their own (``mask.sum(-1)``, a count of tokens): token masks, which tests draw as 0 or 1 (a standard
    normal draw makes the count a sum of signs, which a ``clamp(min=1)`` then hides)."""
    placeholders = [node for node in graph.nodes if node.op == "placeholder" and node.target in statistics]
    statistic_values = set(placeholders).union(*(descendants(node) for node in placeholders))

    def input_of(node) -> str | None:
        """The sequence input ``node`` is, through casts and views."""
        while isinstance(node, fx.Node):
            if node.op == "placeholder":
                return node.target if node.target in inputs else None
            if node.op == "call_method" and node.target in _PASS_THROUGH:
                node = node.args[0]
                continue
            return None
        return None

    weights, counted = set(), set()
    for node in graph.nodes:
        if node.op == "call_function" and node.target in (operator.mul, torch.mul):
            operands = [a for a in node.args if isinstance(a, fx.Node)]
            if any(a in statistic_values for a in operands):
                weights.update(name for name in map(input_of, operands) if name)
        name = getattr(node.target, "__name__", node.target)
        if node.op in ("call_method", "call_function") and name in _COUNTS and node.args:
            if input_of(node.args[0]):
                counted.add(input_of(node.args[0]))
    return sorted(weights & counted)


def _check_against_the_reference(probe: _Probe, staged: StagedLoss, shapes: dict[str, str]) -> None:
    """The two stages compute what the reference does on the probe's inputs (the split lost nothing)."""
    values = dict(probe.values) | probe.draw(shapes, torch.Generator().manual_seed(1))
    args = [values.get(probe.names[node]) for node in probe.placeholders]
    expected = fx.Interpreter(probe.traced.graph_module).run(*args)
    vocabulary = fx.GraphModule(probe.traced.graph_module, _outputs_graph(probe.graph, staged.vocabulary.outputs))
    statistics = vocabulary(*args)
    namespace: dict[str, Any] = {}
    exec(compile("import torch\n" + staged.sequence_source, "<sequence stage>", "exec"), namespace)  # noqa: S102
    known = dict(zip(staged.statistics, [s.reshape(_B, _T) for s in statistics]))  # [B, T, 1], [B*T]: [B, T]
    known.update(values)
    got = namespace["sequence_stage"](*(known[name] for name in staged.sequence_parameters))
    for want, have in zip(_as_list(expected), _as_list(got)):
        if not torch.allclose(want, have, rtol=1e-5, atol=1e-6, equal_nan=True):
            raise AnalyzeError(
                "internal: the sequence stage split from the reference computes another value",
                origin=probe.traced.loaded.origin,
            )


def _outputs_graph(graph: fx.Graph, outputs: list[fx.Node]) -> fx.Graph:
    copy = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for node in graph.nodes:
        if node.op == "output":
            copy.output(tuple(env[n] for n in outputs))
            break
        env[node] = copy.node_copy(node, lambda n: env[n])
    copy.eliminate_dead_code()
    return copy


def _as_list(value: Any) -> list[torch.Tensor]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


__all__ = ["NoStagesError", "StagedLoss", "split_stages"]
