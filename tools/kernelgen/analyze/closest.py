"""Name the closest existing kernel: an archived, validated kernel of the same tier that shares the most ops.

``validate NAME --archive`` files accepted kernels under the skill's ``knowledge/`` folder; their profiles say
what they compute. A new reference is compared with each by the functions its Triton statements call (Jaccard
overlap; the formula's functions for profiles without statements); the host's swiglu / rms_norm / cross_entropy
remain the answer when nothing archived overlaps.
"""

from __future__ import annotations

import re

from pathlib import Path

from tools.kernelgen.profile import ProfileError
from tools.kernelgen.profile import load_yaml

KNOWLEDGE_DIR = ".claude/skills/liger-kernel-gen/knowledge"


_CALL = re.compile(r"((?:tl\.)?[A-Za-z_][A-Za-z0-9_]*)\(")


def _op_names(profile) -> set[str]:
    """Functions the kernel calls: from its Triton statements when it has them, else from its formula."""
    statements = profile.math.forward or profile.math.row_statistics
    if statements:
        return {name for line in statements for name in _CALL.findall(line)}
    return set(_CALL.findall(profile.forward_computation))


def closest_archived_kernel(profile, repo_root: Path) -> str | None:
    """The archived kernel closest to ``profile`` (same tier, most shared ops), or None."""
    base = Path(repo_root) / KNOWLEDGE_DIR
    if not base.is_dir():
        return None
    wanted = _op_names(profile)
    best, best_score = None, 0.0
    for entry in sorted(base.iterdir()):
        record = entry / "profile.yaml"
        if not record.is_file() or entry.name == profile.operation_name:
            continue
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
            best, best_score = entry.name, score
    return best
