"""kernelgen's first stage: read a PyTorch reference and fill a kernel profile.

``analyze(REF)`` loads the reference (built-in name, file.py, file.py:Symbol or stdin source), traces it into an
fx graph, classifies it (tier 1 element-wise, 2 row reduction, 3 fused/complex), finds its tensor inputs,
hyper-parameters and learnable parameters, and for tier 1 synthesizes the forward and backward Triton math.
Tier 2/3 profiles carry everything but the math, with ``math.extra["todo"]`` saying what to write.
"""

from __future__ import annotations

from pathlib import Path

from tools.kernelgen.analyze.classify import Classification
from tools.kernelgen.analyze.classify import classify
from tools.kernelgen.analyze.closest import closest_archived_kernel
from tools.kernelgen.analyze.contain import contained_reference
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.fill import build_profile
from tools.kernelgen.analyze.halves import split_into_halves
from tools.kernelgen.analyze.lanes import lanes_reason
from tools.kernelgen.analyze.lanes import lower_lanes
from tools.kernelgen.analyze.lanes import moves_elements
from tools.kernelgen.analyze.load import load_reference
from tools.kernelgen.analyze.load import read_stdin_source
from tools.kernelgen.analyze.references import list_builtin_references
from tools.kernelgen.analyze.trace import trace_reference
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.repo import default_repo_root


def analyze(
    ref: str, *, name: str | None = None, stdin_source: str | None = None, knowledge_root: Path | None = None
) -> KernelProfile:
    """The kernel profile of reference ``ref``; ``name`` overrides the operation name. Raises ``AnalyzeError``.

    ``knowledge_root``: the checkout whose archived kernels (``validate --archive``) may be named as the closest
    existing kernel (default: this checkout); a reference's own hint wins.
    """
    with contained_reference(ref):
        loaded = load_reference(ref, stdin_source)
        halves = split_into_halves(loaded)
        if halves is not None:
            loaded = halves[0]
        traced = trace_reference(loaded)
        classification = classify(traced)
        lanes = None
        if moves_elements(traced, classification):
            lanes = lower_lanes(traced)
            classification = Classification(1, lanes_reason(traced, lanes))
        profile = build_profile(traced, classification, name, lanes)
    if halves is not None:
        profile.notes.remarks.append(halves[1])
    if "closest_existing_kernel" not in loaded.hints:
        archived = closest_archived_kernel(profile, knowledge_root or default_repo_root())
        if archived:
            profile.notes.closest_existing_kernel = archived
    return profile


def analyze_for_checkout(ref: str, *, name: str | None = None, repo_root: Path | None = None) -> KernelProfile:
    """``analyze`` as the commands run it: REF ``-`` or ``-:Symbol`` reads standard input, and the closest existing
    kernel is looked for among the archived kernels of the target checkout ``repo_root`` (default: this one)."""
    return analyze(ref, name=name, stdin_source=read_stdin_source(ref), knowledge_root=repo_root)


__all__ = ["AnalyzeError", "analyze", "analyze_for_checkout", "list_builtin_references"]
