"""Roles the code alone does not fix: whether ``F.cross_entropy``'s target holds class indices (one per row) or a
probability distribution over each row (PyTorch tells them apart by the target's dtype, which a reference does not
state). Decided from the evidence there is, strongest first, and said in the profile's remarks:

1. the hint ``KERNELGEN = {"roles": {"target": "class indices"}}`` (or ``"probabilities"``);
2. the argument's annotation (``torch.LongTensor`` / ``torch.FloatTensor``, or a string naming one);
3. how the reference makes the target from the argument (``.softmax(-1)``, ``.float()``, a division);
4. the argument's name (``labels``, ``class_ids``; ``probs``, ``soft_targets``, ``teacher_dist``);
5. otherwise class indices, PyTorch's common use.
"""

from __future__ import annotations

import inspect
import re

from dataclasses import dataclass

import torch.fx as fx

from tools.kernelgen.analyze.errors import AnalyzeError

CLASS_INDICES = "class indices"
PROBABILITIES = "probabilities"
ROLES = (CLASS_INDICES, PROBABILITIES)
# Losses whose target is either (PyTorch's F.nll_loss takes class indices only).
EITHER_TARGET = ("cross_entropy",)

_INDEX_WORDS = frozenset({"label", "labels", "index", "indices", "idx", "ids", "id", "class", "classes", "cls"})
_PROBABILITY_WORDS = frozenset(
    {"prob", "probs", "probability", "probabilities", "soft", "dist", "distribution", "distributions", "teacher"}
)
_PROBABILITY_CALLS = frozenset({"float", "softmax", "log_softmax", "exp", "sigmoid", "normalize", "div", "truediv"})


@dataclass(frozen=True)
class RoleDecision:
    name: str  # the reference's argument
    role: str  # CLASS_INDICES or PROBABILITIES
    evidence: str  # what decided it, as the remark says it

    def remark(self, loss: str) -> str:
        kind = "a probability target" if self.role == PROBABILITIES else "a class-index target"
        return f"role: {self.name} is {kind} of F.{loss} ({self.evidence})"


def target_role(loaded, fn, name: str, operand: fx.Node) -> RoleDecision:
    """The role of argument ``name`` of ``fn`` (the entry, or a module's forward) as the target ``operand``."""
    hinted = (loaded.hints.get("roles") or {}).get(name)
    if hinted is not None:
        if hinted not in ROLES:
            raise AnalyzeError(
                f"KERNELGEN hint 'roles': {name}: {hinted!r} is not one of {', '.join(map(repr, ROLES))}",
                origin=loaded.origin,
            )
        return RoleDecision(name, hinted, "the KERNELGEN hint 'roles' says so")
    annotation = _annotation(fn, name)
    if re.search(r"Long|Int|int64|int32", annotation):
        return RoleDecision(name, CLASS_INDICES, f"annotated {annotation}")
    if re.search(r"Float|Half|BFloat16|Double|float", annotation):
        return RoleDecision(name, PROBABILITIES, f"annotated {annotation}")
    made = _made_by(operand)
    if made in _PROBABILITY_CALLS:
        return RoleDecision(name, PROBABILITIES, f"the reference makes it with {made}")
    words = set(name.lower().split("_"))
    if words & _PROBABILITY_WORDS:
        return RoleDecision(name, PROBABILITIES, f"its name says {sorted(words & _PROBABILITY_WORDS)[0]}")
    if words & _INDEX_WORDS:
        return RoleDecision(name, CLASS_INDICES, f"its name says {sorted(words & _INDEX_WORDS)[0]}")
    return RoleDecision(
        name, CLASS_INDICES, f'nothing says otherwise; KERNELGEN = {{"roles": {{"{name}": "probabilities"}}}} if not'
    )


def _annotation(fn, name: str) -> str:
    try:
        parameter = inspect.signature(fn).parameters.get(name)
    except (TypeError, ValueError):
        return ""
    if parameter is None or parameter.annotation is inspect.Parameter.empty:
        return ""
    annotation = parameter.annotation
    if isinstance(annotation, str):
        return annotation.strip("'\"")  # postponed evaluation keeps a quoted annotation's quotes
    return getattr(annotation, "__name__", str(annotation))


def _made_by(operand: fx.Node) -> str | None:
    """The call that makes the target from the argument, if the target is not the argument itself."""
    if operand.op in ("call_method", "call_function"):
        target = operand.target
        return target if isinstance(target, str) else getattr(target, "__name__", None)
    return None


__all__ = ["CLASS_INDICES", "EITHER_TARGET", "PROBABILITIES", "RoleDecision", "target_role"]
