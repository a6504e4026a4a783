"""All-or-nothing writes: every file is staged next to its target, then swapped in; any failure undoes all.

Ctrl-C while files are staged discards the staging (nothing written); Ctrl-C during the swap is held until the swap
and its clean-up are finished (everything written, no backup left behind), then raised as ``WriteInterrupted`` saying
which of the two happened.
"""

from __future__ import annotations

import os
import signal
import tempfile

from contextlib import contextmanager
from pathlib import Path

BACKUP_SUFFIX = ".kernelgen-backup"
_completed: list[str] = []  # every path this process wrote, for the CLI's report of an interrupt


class WriteError(OSError):
    """A change set that could not be written; the repository was left exactly as it was."""


class WriteInterrupted(KeyboardInterrupt):
    """Ctrl-C during ``write_all``: ``written`` is True when the whole change set is on disk, False when none is."""

    def __init__(self, written: bool, paths: list[str]):
        super().__init__()
        self.written = written
        self.paths = paths


def written_in_this_process() -> list[str]:
    """Paths ``write_all`` finished writing so far in this process (an interrupt later must not deny them)."""
    return list(_completed)


@contextmanager
def _deferred_interrupts(received: list[int]):
    """Hold SIGINT while files are swapped so Ctrl-C cannot leave half the change set on disk."""
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    except ValueError:  # not the main thread: nothing to defer
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def check_writable(path: Path) -> str | None:
    """Why ``path`` cannot be written (one phrase), or None: checked before anything else is written."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a directory"
    parent = path.parent
    if not parent.exists():
        return f"folder {parent} does not exist"
    if not parent.is_dir():
        return f"{parent} is not a folder"
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"{path} is not writable (permission denied)"
    return None


def write_all(root: Path, changes: dict[str, str], *, create_dirs: bool = True) -> list[str]:
    """Write ``changes`` (path -> full text; relative to ``root`` unless absolute) atomically as a set; returns the
    paths written. ``create_dirs=False``: a missing folder is an error rather than created."""
    root = Path(root)
    staged: list[tuple[Path, Path]] = []
    created_dirs: list[Path] = []
    try:
        for relative, text in sorted(changes.items()):
            target = root / relative
            missing = [parent for parent in reversed(target.parents) if not parent.exists()]
            if missing and not create_dirs:
                raise WriteError(2, f"cannot write {target}: folder {missing[0]} does not exist")
            for directory in missing:
                directory.mkdir()
                created_dirs.append(directory)
            fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".kernelgen", dir=target.parent)
            staged.append((Path(temp_name), target))
            try:
                handle = os.fdopen(fd, "w", encoding="utf-8", newline="")
            except BaseException:
                os.close(fd)
                raise
            with handle:
                handle.write(text)
            if target.exists():
                os.chmod(temp_name, target.stat().st_mode & 0o7777)
    except BaseException as error:
        _discard(staged, created_dirs)
        if isinstance(error, WriteError):
            raise
        if isinstance(error, OSError):
            raise WriteError(error.errno, f"cannot write {error.filename or 'a file'}: {error.strerror}") from None
        if isinstance(error, KeyboardInterrupt):
            raise WriteInterrupted(False, []) from None
        raise

    received: list[int] = []
    backups: list[tuple[Path, Path | None]] = []
    with _deferred_interrupts(received):
        try:
            for temp, target in staged:
                backup = None
                if target.exists():
                    backup = target.with_name(f".{target.name}{BACKUP_SUFFIX}")
                    os.replace(target, backup)
                backups.append((target, backup))
                os.replace(temp, target)
        except BaseException as error:
            _rollback(backups)
            _discard(staged, created_dirs)
            if isinstance(error, OSError):
                raise WriteError(error.errno, f"cannot write {error.filename or 'a file'}: {error.strerror}") from None
            raise
        for _, backup in backups:
            if backup is not None:
                backup.unlink(missing_ok=True)
        written = sorted(changes)
        _completed.extend(written)
    if received:
        raise WriteInterrupted(True, written)
    return written


def _rollback(backups: list[tuple[Path, Path | None]]) -> None:
    for target, backup in reversed(backups):
        if backup is not None and backup.exists():
            os.replace(backup, target)
        elif backup is None and target.exists():
            target.unlink()


def _discard(staged: list[tuple[Path, Path]], created_dirs: list[Path]) -> None:
    for temp, _ in staged:
        temp.unlink(missing_ok=True)
    for directory in reversed(created_dirs):
        try:
            directory.rmdir()
        except OSError:
            pass
