"""The ops file of a loss in two stages (``math.loss.sequence``; ``analyze/stages.py``): what its template
(``ops_tier3_staged.py.j2``) lays out.

The vocabulary stage is two kernels of the tier-3 schedule (``synth/losses.py``, ``staged``): the statistics kernel
streams each row once and stores every per-token statistic plus the row values its gradient reads (the running
maximum's shift, the exponentials' sum); the gradient kernel streams the row once more and writes
``d logits`` from the statistics' adjoints. The sequence stage is the profile's own Python between them.
"""

from __future__ import annotations

import ast
import re
import warnings

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field

import torch
import torch.fx as fx

from tools.kernelgen.analyze.ops import UnknownOpError
from tools.kernelgen.analyze.ops import normalize
from tools.kernelgen.derivation import loss_math
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import shifted_targets
from tools.kernelgen.synth.printer import jit_helpers_called

SEQUENCE_FUNCTION = "sequence_stage"
_ASSIGNED = re.compile(r"^(\w+) = ")


@dataclass(frozen=True)
class StagedLossOpsView:
    logits: str  # the [B, T, V] input the statistics stream
    row_inputs: list[str]  # class indices the statistics read, one per token
    row_values: list[str]  # floats of one value per token the statistics read
    kernel_hypers: list[str]
    statistics: list[str]  # per-token outputs of the vocabulary stage
    saved: list[str]  # row values the gradient reads, stored by the statistics kernel
    init: list[str]
    passes: list[list[str]]
    outputs_block: list[str]
    adjoints: list[str]
    gradient: list[str]
    sequence_source: str  # the sequence stage, defined as ``_{name}_sequence``
    sequence_call: list[str]  # its arguments, by name
    sequence_inputs: list[tuple[str, str]]  # inputs only it reads, with their shapes (B, T words)
    ignore_markers: list[tuple[str, str]]  # (class-index input, what marks a token the loss skips: the test's text)
    log_probability_inputs: list[str]
    conditions: list[str]  # boolean inputs (what the reference selects by)
    sequence_draws: dict[str, str]  # each sequence input's random draw in the generated tests (before its dtype)
    apply_returns: list[str]
    utils_imports: list[str]
    precision_note: list[str]
    gradient_note: list[str]
    block_elements: int
    num_warps: int | None
    # (class-index input, pad value) of each target the reference shifts one token left: the Function shifts it
    shifted: list[tuple[str, str]] = field(default_factory=list)
    # hyper-parameters the stages were derived for some values of (a loss_type): other values are refused
    checked_choices: list = field(default_factory=list)

    @property
    def shifted_inputs(self) -> set[str]:
        """The names of ``shifted``: a test marks an ignored token of these one token late (their first is the pad)."""
        return {name for name, _ in self.shifted}


def _words(lines: list[str]) -> set[str]:
    return set(re.findall(r"\b\w+\b", " ".join(lines)))


def _sequence_draw(tensor) -> str:
    """A test's draw of a sequence input: a condition true half the time; a token mask, 1 for three tokens in four
    and for each sequence's first and last; a log-probability near the logits' own (added to or subtracted from a
    statistic, so that ratios cross 1), one token's or a whole sequence's sum of T; else a standard normal."""
    words = tensor.sequence_shape
    if tensor.dtype == "bool":
        return f"torch.rand({words}, device=device) > 0.5"
    if tensor.domain == "mask":
        kept = f"torch.rand({words}, device=device) > 0.25"
        if re.search(r"\bT$", words.strip()):
            # Each sequence keeps its first and last tokens: a mean over a sequence's kept tokens is no 0 / 0 (a
            # reference that shifts its mask by one token still keeps one).
            kept = f"({kept}).index_fill(-1, torch.tensor([0, T - 1], device=device), True)"
        return f"({kept}).float()"
    if tensor.domain == "log_probabilities":
        per_sequence = "" if re.search(r"\bT\b", words) else " * T"
        return f"torch.randn({words}, device=device) * 0.5 - torch.tensor(float(V)).log(){per_sequence}"
    return f"torch.randn({words}, device=device)"


def _ignore_markers(profile: KernelProfile, source: str) -> list[tuple[str, str]]:
    """(class-index input, what marks a token the loss treats apart, as the tests write it: a number, or the int
    hyper-parameter of the test's case) for each comparison of a class-index input with one in the sequence stage,
    however it is spelled (``labels != ignore_index``, ``labels.ne(-100)``, ``torch.ne(labels, -100)``, ``~(labels
    == -100)``, ``labels.eq(-100).logical_not()``): its fx trace holds each as an eq or ne op."""
    index_inputs = {t.name for t in profile.inputs if t.dtype == "int64"}
    ints = {hp.name for hp in profile.hyperparameters if hp.type == "int"}
    graph_module = _traced_sequence_stage(profile, source)
    if graph_module is None:
        return []
    markers = []
    for node in graph_module.graph.nodes:
        operands = _equality_operands(node, graph_module)
        for name, value in (operands, operands[::-1]) if operands else ():
            marker = f'hyper["{value}"]' if value in ints else str(value)
            if name in index_inputs and (value in ints or _is_int(value)) and (name, marker) not in markers:
                markers.append((name, marker))
    return markers


def _traced_sequence_stage(profile: KernelProfile, source: str) -> fx.GraphModule | None:
    """The sequence stage traced by fx, its str and bool hyper-parameters at their defaults (a branch on them runs as
    it would); None where the stage does not trace (a profile's hand-written stage with control flow on values)."""
    namespace = {"torch": torch}
    try:
        exec(compile(source, "math.loss.sequence", "exec"), namespace)
        concrete = {
            hp.name: hp.default
            for hp in profile.hyperparameters
            if hp.type in ("str", "bool") and hp.name in sequence_parameters(source)
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fx.symbolic_trace(namespace[SEQUENCE_FUNCTION], concrete_args=concrete)
    except Exception:  # noqa: BLE001 - the markers only make the tests skip some tokens
        return None


def _equality_operands(node: fx.Node, root: fx.GraphModule) -> tuple[object, object] | None:
    """The operands of an eq or ne op, a placeholder as its argument's name; None for another node."""
    try:
        call = normalize(node, root)
    except UnknownOpError:
        return None
    if call is None or call.name not in ("eq", "ne") or len(call.operands) != 2:
        return None
    first, second = (o.target if isinstance(o, fx.Node) and o.op == "placeholder" else o for o in call.operands)
    return first, second


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_staged(profile: KernelProfile) -> bool:
    return profile.tier == 3 and profile.math.loss is not None and bool(profile.math.loss.sequence)


def sequence_parameters(source: str) -> list[str]:
    """The parameters of ``sequence_stage`` in ``source``."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == SEQUENCE_FUNCTION:
            return [arg.arg for arg in node.args.args]
    raise ValueError(f"math.loss.sequence defines no function {SEQUENCE_FUNCTION}")


def sequence_returns_tuple(source: str) -> bool:
    """Whether ``sequence_stage`` in ``source`` returns a tuple (the loss and other values) rather than the loss."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == SEQUENCE_FUNCTION:
            return any(isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple) for n in ast.walk(node))
    raise ValueError(f"math.loss.sequence defines no function {SEQUENCE_FUNCTION}")


def staged_loss_ops(
    profile: KernelProfile, precision_note: Callable[[list[str]], list[str]], gradient_note: Callable[[dict], list[str]]
) -> StagedLossOpsView:
    """``precision_note``, ``gradient_note``: the comment lines every ops file's math carries (``views.py``)."""
    math = loss_math(profile)
    kernel_inputs = [t for t in profile.inputs if not t.sequence_shape]
    logits = next(t.name for t in kernel_inputs if t.dtype != "int64" and not t.per_row)
    running = {match.group(1) for line in math.init if (match := _ASSIGNED.match(line))}
    read = _words(math.adjoints + math.gradient)
    source = profile.math.loss.sequence
    statements = math.init + [line for lines in math.passes for line in lines] + math.outputs_block + math.gradient
    return StagedLossOpsView(
        logits=logits,
        row_inputs=[t.name for t in kernel_inputs if t.dtype == "int64"],
        row_values=[t.name for t in kernel_inputs if t.per_row],
        # Only the hyper-parameters the statistics or their gradient read (a temperature); the rest are the
        # sequence stage's.
        kernel_hypers=[name for name in profile.formula_hyperparameters if name in _words(statements + math.adjoints)],
        statistics=[t.name for t in profile.outputs],
        saved=sorted(running & read),
        init=math.init,
        passes=math.passes,
        outputs_block=math.outputs_block,
        adjoints=math.adjoints,
        gradient=math.gradient,
        sequence_source=source.replace(f"def {SEQUENCE_FUNCTION}(", f"def _{profile.operation_name}_sequence(", 1),
        sequence_call=sequence_parameters(source),
        sequence_inputs=[(t.name, t.sequence_shape) for t in profile.inputs if t.sequence_shape],
        ignore_markers=_ignore_markers(profile, source),
        log_probability_inputs=[t.name for t in profile.inputs if t.domain == "log_probabilities"],
        conditions=[t.name for t in profile.inputs if t.dtype == "bool"],
        sequence_draws={t.name: _sequence_draw(t) for t in profile.inputs if t.sequence_shape},
        apply_returns=[f"grad_{logits}" if t.name == logits else "None" for t in profile.inputs]
        + ["None"] * len(profile.hyperparameters),
        utils_imports=sorted({"next_power_of_2", *jit_helpers_called(statements)}),
        precision_note=precision_note(math.precision_sensitive_ops),
        gradient_note=gradient_note(math.gradient_formulas),
        block_elements=profile.tiling.block_elements or 16384,
        num_warps=profile.tiling.num_warps,
        shifted=shifted_targets(profile),
        checked_choices=[hp for hp in profile.hyperparameters if hp.choices],
    )


__all__ = ["StagedLossOpsView", "is_staged", "sequence_parameters", "staged_loss_ops"]
