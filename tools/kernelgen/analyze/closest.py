"""Name the closest existing kernel: an archived, validated kernel of the same tier that shares the most ops.

``validate NAME --archive`` files accepted kernels under the skill's ``knowledge/`` folder; their profiles say
what they compute. A new reference is compared with each by the functions its Triton statements call (derived from
its formulas, or hand-written; Jaccard overlap), or by its description's functions for a profile without math (a
tier-3 reference); names are compared without their ``tl.`` / ``libdevice.`` qualifier, so ``tl.rsqrt``
and the formula's ``rsqrt`` match. The host's swiglu / rms_norm / cross_entropy remain the answer when nothing
archived overlaps.
"""

from __future__ import annotations

import re

from pathlib import Path

from tools.kernelgen.derivation import elementwise_math
from tools.kernelgen.derivation import row_math
from tools.kernelgen.knowledge import archived_profile_path
from tools.kernelgen.knowledge import knowledge_kernels
from tools.kernelgen.profile import ProfileError
from tools.kernelgen.profile import load_yaml

# A called function, by its bare name: ``tl.rsqrt(`` / ``libdevice.rsqrt(`` / ``tl.extra.cuda.libdevice.rsqrt(``
# give ``rsqrt``, and a jit helper's leading underscores go (``_tanh(`` reads ``tanh``). Method calls
# (``x.to(``, ``.float(``) are not ops and match nothing.
_CALL = re.compile(r"(?<![\w.])(?:(?:tl|libdevice)\.(?:\w+\.)*)?_*([A-Za-z]\w*)\(")


def _op_names(profile) -> set[str]:
    """Functions the kernel calls: from its Triton statements (hand-written or derived from its formulas), else
    from its description."""
    math = profile.math
    if math.triton is not None:
        texts = [*math.triton.row_statistics, *math.triton.forward, *math.triton.backward]
    elif math.outputs and profile.tier in (1, 2):
        derived = elementwise_math(profile) if profile.tier == 1 else row_math(profile)
        texts = derived.forward + derived.backward
    else:
        texts = [f"{s.reduce}({s.of})" for s in math.statistics] + list(math.outputs.values())
    if texts:
        return {name for text in texts for name in _CALL.findall(text)}
    return set(_CALL.findall(profile.forward_computation))


def ranked_archived_kernels(profile, repo_root: Path) -> list[tuple[str, float, list[str]]]:
    """Archived kernels of ``profile``'s tier that share an op with it, closest first: ``(name, score, shared ops)``
    (score: the Jaccard overlap of the ops they call)."""
    wanted = _op_names(profile)
    ranked = []
    for name in knowledge_kernels(repo_root):
        if name == profile.operation_name:
            continue
        record = archived_profile_path(repo_root, name)
        try:
            archived = load_yaml(record.read_text(encoding="utf-8"), source=str(record), validate=False)
        except ProfileError:
            continue
        if archived.tier != profile.tier:
            continue
        theirs = _op_names(archived)
        union = wanted | theirs
        score = len(wanted & theirs) / len(union) if union else 0.0
        if score > 0:
            ranked.append((name, score, sorted(wanted & theirs)))
    return sorted(ranked, key=lambda entry: (-entry[1], entry[0]))


def closest_archived_kernel(profile, repo_root: Path) -> str | None:
    """The archived kernel closest to ``profile`` (same tier, most shared ops), or None."""
    ranked = ranked_archived_kernels(profile, repo_root)
    return ranked[0][0] if ranked else None
