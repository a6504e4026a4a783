"""Archive validated kernels in the skill's knowledge base, and list what it holds.

``validate NAME --archive`` copies the generation record (as ``profile.yaml``), the ops file and ``summary.md``
into ``.claude/skills/liger-kernel-gen/knowledge/NAME/`` of the target checkout; ``analyze`` can then name an
archived kernel as the closest existing one.
"""

from __future__ import annotations

import shutil

from pathlib import Path

from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.validate.report import Target

KNOWLEDGE_DIR = ".claude/skills/liger-kernel-gen/knowledge"
PROFILE_FILE = "profile.yaml"


def knowledge_kernels(repo) -> list[str]:
    """Names of the kernels archived in ``repo`` (a path or a ``LigerRepo``), sorted; each has a profile.yaml."""
    root = repo.root if isinstance(repo, LigerRepo) else Path(repo)
    base = root / KNOWLEDGE_DIR
    if not base.is_dir():
        return []
    return sorted(entry.name for entry in base.iterdir() if (entry / PROFILE_FILE).is_file())


def archive(target: Target, summary: Path) -> Path:
    destination = target.repo.root / KNOWLEDGE_DIR / target.name
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(target.repo.root / ".kernelgen" / f"{target.name}.yaml", destination / PROFILE_FILE)
    shutil.copyfile(target.repo.root / target.paths["ops"], destination / f"{target.name}.py")
    shutil.copyfile(summary, destination / "summary.md")
    return destination
