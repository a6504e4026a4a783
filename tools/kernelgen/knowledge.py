"""The archive of validated kernels (``validate NAME --archive``), which ``analyze`` reads back.

Each archived kernel is a folder ``.claude/skills/liger-kernel-gen/knowledge/NAME/`` of the checkout holding its
generation record (as ``profile.yaml``), its ops file and the ``summary.md`` of the validation that accepted it.
"""

from __future__ import annotations

import shutil

from pathlib import Path

from tools.kernelgen.layout import KNOWLEDGE_DIR
from tools.kernelgen.layout import KNOWLEDGE_PROFILE
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.record import read_record_text


def knowledge_kernels(root: Path) -> list[str]:
    """Names of the kernels archived in the checkout at ``root``, sorted; each has a profile.yaml."""
    base = Path(root) / KNOWLEDGE_DIR
    if not base.is_dir():
        return []
    return sorted(entry.name for entry in base.iterdir() if (entry / KNOWLEDGE_PROFILE).is_file())


def archived_profile_path(root: Path, name: str) -> Path:
    return Path(root) / KNOWLEDGE_DIR / name / KNOWLEDGE_PROFILE


def archive(root: Path, name: str, summary: Path) -> Path:
    """Copy kernel ``name``'s record, ops file and validation summary into the archive; returns its folder."""
    root = Path(root)
    destination = root / KNOWLEDGE_DIR / name
    destination.mkdir(parents=True, exist_ok=True)
    (destination / KNOWLEDGE_PROFILE).write_text(read_record_text(root, name), encoding="utf-8")
    shutil.copyfile(root / kernel_paths(name)["ops"], destination / f"{name}.py")
    shutil.copyfile(summary, destination / "summary.md")
    return destination
