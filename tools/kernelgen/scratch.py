"""Scratch copies of a checkout, to try a change (its tests, an import, a smoke run) before it is written.

A copy holds every file the checkout holds as its own source, so whatever a test run imports (conftest helpers, a
fork server, fixtures, data) is there without a list of parts to keep up to date: in a git checkout, what git tracks
plus the untracked files it does not ignore (a helper written but not yet committed counts); in a checkout without
git, every file outside hidden folders, caches and build outputs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

from collections.abc import Iterator
from pathlib import Path

from tools.kernelgen.repo import private_git_dir

# Folders of a checkout without git that hold no source: caches, environments and build outputs.
_NOT_SOURCE_DIRS = frozenset({"__pycache__", "node_modules", "build", "dist"})
_NOT_SOURCE_SUFFIXES = (".pyc", ".pyo", ".egg-info")


@contextlib.contextmanager
def scratch_folder(prefix: str) -> Iterator[Path]:
    """A temporary folder, removed on the way out even when a signal (Ctrl-C, SIGTERM: KeyboardInterrupt) arrives
    while it is being removed: the removal finishes, then the signal goes on. A scratch checkout is megabytes, and a
    ``TemporaryDirectory`` interrupted in its cleanup left one behind in /tmp."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        interrupted = None
        while path.exists():
            try:
                shutil.rmtree(path, ignore_errors=True)
            except KeyboardInterrupt as signal:
                interrupted = signal
        if interrupted is not None:
            raise interrupted


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


@contextlib.contextmanager
def library_imports_from(src: Path) -> Iterator[None]:
    """Inside: ``liger_kernel`` imports from ``src`` (a scratch copy's, another checkout's) under the Triton
    interpreter; after: this process's ``sys.path``, ``liger_kernel`` modules and environment as they were."""
    saved_path = list(sys.path)
    saved_modules = {name: module for name, module in sys.modules.items() if _is_library(name)}
    saved_interpret = os.environ.get("TRITON_INTERPRET")
    for name in saved_modules:
        del sys.modules[name]
    sys.path.insert(0, str(src))
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        for name in [name for name in sys.modules if _is_library(name)]:
            del sys.modules[name]
        sys.modules.update(saved_modules)
        sys.path[:] = saved_path
        if saved_interpret is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved_interpret


def _is_library(name: str) -> bool:
    return name == "liger_kernel" or name.startswith("liger_kernel.")


def changed_library_modules(changes: dict[str, str]) -> list[str]:
    """The ``liger_kernel`` modules a change set writes (``src/liger_kernel/ops/geglu.py`` -> ``liger_kernel.ops.geglu``,
    a package's ``__init__.py`` -> the package), in path order: what a scratch try imports first."""
    modules = []
    for path in sorted(changes):
        parts = Path(path).with_suffix("").parts
        if path.endswith(".py") and parts[:2] == ("src", "liger_kernel"):
            modules.append(".".join(parts[1:-1] if parts[-1] == "__init__" else parts[1:]))
    return modules
