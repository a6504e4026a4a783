"""Name the closest existing kernel: an archived, validated kernel of the same tier that shares the most ops.

``validate NAME --archive`` files accepted kernels under the skill's ``knowledge/`` folder; their profiles say
what they compute. A new reference is compared with each by the functions its Triton statements call (row
statistics, forward and backward; Jaccard overlap), or by its formula's functions for a profile without statements
(a new tier 2/3 reference); names are compared without their ``tl.`` / ``libdevice.`` qualifier, so ``tl.rsqrt``
and the formula's ``rsqrt`` match. The host's swiglu / rms_norm / cross_entropy remain the answer when nothing
archived overlaps.
"""

from __future__ import annotations

import re

from pathlib import Path

from tools.kernelgen.profile import ProfileError
from tools.kernelgen.profile import load_yaml
from tools.kernelgen.validate.knowledge import KNOWLEDGE_DIR
from tools.kernelgen.validate.knowledge import PROFILE_FILE
from tools.kernelgen.validate.knowledge import knowledge_kernels

# A called function, by its bare name: ``tl.rsqrt(`` / ``libdevice.rsqrt(`` / ``tl.extra.cuda.libdevice.rsqrt(``
# give ``rsqrt``, and a jit helper's leading underscores go (``_tanh(`` reads ``tanh``). Method calls
# (``x.to(``, ``.float(``) are not ops and match nothing.
_CALL = re.compile(r"(?<![\w.])(?:(?:tl|libdevice)\.(?:\w+\.)*)?_*([A-Za-z]\w*)\(")


def _op_names(profile) -> set[str]:
    """Functions the kernel calls: from its Triton statements when it has them, else from its formula."""
    math = profile.math
    statements = [*math.row_statistics, *math.forward, *math.backward]
    if statements:
        return {name for line in statements for name in _CALL.findall(line)}
    return set(_CALL.findall(profile.forward_computation))


def closest_archived_kernel(profile, repo_root: Path) -> str | None:
    """The archived kernel closest to ``profile`` (same tier, most shared ops), or None."""
    base = Path(repo_root) / KNOWLEDGE_DIR
    wanted = _op_names(profile)
    best, best_score = None, 0.0
    for name in knowledge_kernels(repo_root):
        if name == profile.operation_name:
            continue
        record = base / name / PROFILE_FILE
        try:
            archived = load_yaml(record.read_text(encoding="utf-8"), source=str(record), validate=False)
        except ProfileError:
            continue
        if archived.tier != profile.tier:
            continue
        theirs = _op_names(archived)
        union = wanted | theirs
        score = len(wanted & theirs) / len(union) if union else 0.0
        if score > best_score:
            best, best_score = name, score
    return best
