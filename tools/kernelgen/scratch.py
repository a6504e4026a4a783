"""Scratch copies of a checkout, to try a change (its tests, an import, a smoke run) before it is written.

A copy holds every file the checkout holds as its own source, so whatever a test run imports (conftest helpers, a
fork server, fixtures, data) is there without a list of parts to keep up to date: in a git checkout, what git tracks
plus the untracked files it does not ignore (a helper written but not yet committed counts); in a checkout without
git, every file outside hidden folders, caches and build outputs.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from pathlib import Path

from tools.kernelgen.repo import private_git_dir

# Folders of a checkout without git that hold no source: caches, environments and build outputs.
_NOT_SOURCE_DIRS = frozenset({"__pycache__", "node_modules", "build", "dist"})
_NOT_SOURCE_SUFFIXES = (".pyc", ".pyo", ".egg-info")


def checkout_files(root: Path) -> list[str]:
    """The checkout's own files under ``root``, relative paths with ``/``, sorted."""
    root = Path(root)
    listed = _git_files(root) if private_git_dir(root) is not None else None
    if listed is None:
        listed = _walked_files(root)
    return sorted(path for path in listed if (root / path).is_file())


def _git_files(root: Path) -> list[str] | None:
    try:
        result = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=False,
        )
    except OSError:  # no git on this machine
        return None
    if result.returncode != 0:
        return None
    return [name for name in result.stdout.decode("utf-8", errors="surrogateescape").split("\0") if name]


def _walked_files(root: Path) -> list[str]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _NOT_SOURCE_DIRS]
        dirs[:] = [d for d in dirs if not d.endswith(_NOT_SOURCE_SUFFIXES)]
        relative = Path(folder).relative_to(root)
        found.extend((relative / name).as_posix() for name in files if not name.endswith(_NOT_SOURCE_SUFFIXES))
    return found


def stage_checkout(root: Path, folder: Path, changes: dict[str, str]) -> None:
    """Copy the checkout at ``root`` into ``folder`` and write ``changes`` (relative path -> text) over the copy."""
    root, folder = Path(root), Path(folder)
    for relative in checkout_files(root):
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / relative, target)
    for relative, text in changes.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


__all__ = ["checkout_files", "stage_checkout"]
