"""One writer at a time per checkout: commands that change a checkout hold ``state_dir()/lock`` (an ``flock``, which
the system releases when the process ends, however it ends) from reading the files they change to writing them.

A second command waits for it (``KERNELGEN_LOCK_WAIT`` seconds, 30 by default), then stops with one line naming the
holder. Whoever takes the lock first finishes a write a killed command left behind (``writer.recover``).
"""

from __future__ import annotations

import fcntl
import os
import sys
import time

from contextlib import contextmanager
from pathlib import Path

from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.repo import RepoError
from tools.kernelgen.writer import JOURNAL_NAME
from tools.kernelgen.writer import recover

LOCK_NAME = "lock"
WAIT_ENV = "KERNELGEN_LOCK_WAIT"
DEFAULT_WAIT_S = 30.0
_POLL_S = 0.05
_held: dict[Path, int] = {}  # lock file -> how many nested holders in this process


class LockBusy(RepoError):
    """Another process holds the checkout's lock."""


def _wait_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get(WAIT_ENV, DEFAULT_WAIT_S)))
    except ValueError:
        return DEFAULT_WAIT_S


@contextmanager
def checkout_lock(repo: LigerRepo, command: str):
    """Hold ``repo``'s lock inside (re-entrant within a process); a pending journal is recovered first."""
    state = repo.state_dir()
    path = state / LOCK_NAME
    if path in _held:
        _held[path] += 1
        try:
            yield
        finally:
            _held[path] -= 1
        return
    state.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, path, repo)
        _held[path] = 1
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}: kernelgen {command}\n".encode(), 0)
            _report_recovery(state)
            yield
        finally:
            del _held[path]
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, path: Path, repo: LigerRepo) -> None:
    wait = _wait_seconds()
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "a process"
                raise LockBusy(
                    f"another kernelgen command ({holder}) holds the lock of {repo.root} ({path}); waited {wait:g} s, "
                    f"nothing written: run this again when it has finished"
                ) from None
            time.sleep(_POLL_S)


def _report_recovery(state: Path) -> None:
    message = recover(state)
    if message:
        print(f"kernelgen: {message}", file=sys.stderr)


def recover_pending_write(root: Path) -> None:
    """Before a command does anything else: finish the write a killed command left in checkout ``root`` (no-op
    when there is none, or ``root`` is no checkout)."""
    repo = LigerRepo(Path(root).resolve())
    try:
        pending = (repo.state_dir() / JOURNAL_NAME).exists()
    except OSError:
        return
    if pending:
        with checkout_lock(repo, "recover"):
            pass
