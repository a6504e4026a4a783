"""All-or-nothing writes: every file is staged next to its target, then swapped in; any failure undoes all."""

from __future__ import annotations

import os
import signal
import tempfile

from contextlib import contextmanager
from pathlib import Path


class WriteError(OSError):
    """A change set that could not be written; the repository was left exactly as it was."""


@contextmanager
def _deferred_interrupts():
    """Hold SIGINT while files are swapped so Ctrl-C cannot leave half the change set on disk."""
    received = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    except ValueError:  # not the main thread: nothing to defer
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            raise KeyboardInterrupt


def write_all(root: Path, changes: dict[str, str]) -> list[str]:
    """Write ``changes`` (repo-relative path -> full text) atomically as a set; returns the paths written."""
    staged: list[tuple[Path, Path]] = []
    created_dirs: list[Path] = []
    try:
        for relative, text in sorted(changes.items()):
            target = root / relative
            missing = [parent for parent in reversed(target.parents) if not parent.exists()]
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
        if isinstance(error, OSError):
            raise WriteError(error.errno, f"cannot write {error.filename or 'a file'}: {error.strerror}") from None
        raise

    backups: list[tuple[Path, Path | None]] = []
    with _deferred_interrupts():
        try:
            for temp, target in staged:
                backup = None
                if target.exists():
                    backup = target.with_name(f".{target.name}.kernelgen-backup")
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
    return sorted(changes)


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
