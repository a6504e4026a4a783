"""All-or-nothing writes: every file is staged next to its target, then swapped in; any failure undoes all.

A signal (SIGINT, SIGTERM, SIGHUP) while files are staged discards the staging (nothing written); one during the
swap is held until the swap and its clean-up are finished (everything written, no backup left behind), then raised
as ``WriteInterrupted`` saying which of the two happened.

A process killed outright (SIGKILL, a crash, power loss) cannot clean up after itself. Writes into a checkout
therefore keep a journal in the checkout's private state folder (``journal=``): written and flushed to disk before
the first temporary file exists, and again, listing every rename, before the first rename. The next kernelgen
command reads it before anything else (``recover``): a journal of a staging discards the temporary files (nothing
was written), a journal of a swap completes the remaining renames (every temporary file was complete). No target
ever goes missing: a backup is a second link to the old file, and each target is replaced by one atomic rename.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time

from contextlib import contextmanager
from pathlib import Path

BACKUP_SUFFIX = ".kernelgen-backup"
TEMP_SUFFIX = ".kernelgen"
JOURNAL_NAME = "write-journal.json"
HELD_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
# Test hook: after the first rename of a swap, create the file this names (holding the pid) and wait until a signal
# comes or the file is removed (at most PAUSE_LIMIT_S), so that a test can stop or overtake a process at the worst
# moment without racing it.
PAUSE_ENV = "KERNELGEN_TEST_PAUSE_IN_SWAP"
PAUSE_LIMIT_S = 30.0
_completed: list[str] = []  # every path this process wrote, for the CLI's report of an interrupt


class WriteError(OSError):
    """A change set that could not be written; the repository was left exactly as it was."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()  # the line itself, without OSError's "[Errno N]" prefix


class WriteInterrupted(KeyboardInterrupt):
    """A signal during ``write_all``: ``written`` is True when the whole change set is on disk, False when none is."""

    def __init__(self, written: bool, paths: list[str], signum: int = signal.SIGINT):
        super().__init__()
        self.written = written
        self.paths = paths
        self.signum = signum


# Every signal the command's handlers saw, in order. A signal raised inside third-party code (a bare ``except:`` of a
# library that ``import torch`` runs) can be swallowed there; what was received stays known, and no write starts
# after one.
SIGNALS_RECEIVED: list[int] = []


def signal_received() -> int | None:
    """The first signal this process received while a command ran, or None."""
    return SIGNALS_RECEIVED[0] if SIGNALS_RECEIVED else None


def written_in_this_process() -> list[str]:
    """Paths ``write_all`` finished writing so far in this process (an interrupt later must not deny them)."""
    return list(_completed)


class _SignalGate:
    """SIGINT, SIGTERM and SIGHUP while files are written: raised at once while staging (``hold`` False), held
    while swapping (``hold`` True). Outside the main thread signals cannot be caught, and nothing is installed."""

    def __init__(self):
        self.hold = False
        self.received: list[int] = []

    def _handle(self, signum, frame):
        self.received.append(signum)
        SIGNALS_RECEIVED.append(signum)
        if not self.hold:
            self.hold = True  # one raise: a second signal must not interrupt the discarding of the staging
            raise WriteInterrupted(False, [], signum)

    @contextmanager
    def installed(self):
        previous = {}
        try:
            for signum in HELD_SIGNALS:
                previous[signum] = signal.signal(signum, self._handle)
        except ValueError:  # not the main thread
            pass
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


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


def _write_error(error: OSError, target: Path | None) -> WriteError:
    """One line naming the file: the one the system named, else the target being written (a full disk names none)."""
    where = error.filename or target or "a file"
    return WriteError(error.errno, f"cannot write {where}: {error.strerror or error}")


def write_all(
    root: Path, changes: dict[str, str], *, create_dirs: bool = True, journal: Path | None = None
) -> list[str]:
    """Write ``changes`` (path -> full text; relative to ``root`` unless absolute) atomically as a set; returns the
    paths written. ``create_dirs=False``: a missing folder is an error rather than created. ``journal``: the folder
    of the write journal (a checkout's private state folder), which makes the write survive a killed process; the
    caller holds the checkout's lock."""
    root = Path(root)
    targets = [(relative, root / relative) for relative in sorted(changes)]
    missing_dirs: list[Path] = []
    for _, target in targets:
        for parent in reversed(target.parents):
            if not parent.exists() and parent not in missing_dirs:
                if not create_dirs:
                    raise WriteError(2, f"cannot write {target}: folder {parent} does not exist")
                missing_dirs.append(parent)
    journal_path = Path(journal) / JOURNAL_NAME if journal is not None else None
    gate = _SignalGate()
    if signal_received() is not None:  # received earlier and swallowed before it reached the command
        raise WriteInterrupted(False, [], signal_received())
    with gate.installed():
        staged = _stage(targets, changes, missing_dirs, journal_path)
        gate.hold = True
        _swap(staged, missing_dirs, journal_path, gate)
        written = [relative for relative, _ in targets]
        _completed.extend(written)
    if gate.received:
        raise WriteInterrupted(True, written, gate.received[0])
    return written


def _stage(targets, changes, missing_dirs, journal_path) -> list[tuple[Path, Path]]:
    """Every text in a flushed temporary file beside its target: [(temporary, target)]."""
    staged: list[tuple[Path, Path]] = []
    created_dirs: list[Path] = []
    target = None
    try:
        if journal_path is not None:
            _write_journal(journal_path, {"state": "staging", "targets": [str(t) for _, t in targets]}, missing_dirs)
        for directory in missing_dirs:
            target = directory
            directory.mkdir()
            created_dirs.append(directory)
        for relative, target in targets:
            fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent)
            staged.append((Path(temp_name), target))
            try:
                handle = os.fdopen(fd, "w", encoding="utf-8", newline="")
            except BaseException:
                os.close(fd)
                raise
            with handle:
                handle.write(changes[relative])
                handle.flush()
                os.fsync(handle.fileno())
            if target.exists():
                os.chmod(temp_name, target.stat().st_mode & 0o7777)
    except BaseException as error:
        _discard([temp for temp, _ in staged], created_dirs)
        _remove_journal(journal_path)
        if isinstance(error, WriteError):
            raise
        if isinstance(error, OSError):
            raise _write_error(error, target) from None
        if isinstance(error, KeyboardInterrupt):
            raise WriteInterrupted(False, [], getattr(error, "signum", signal.SIGINT)) from None
        raise
    return staged


def _swap(staged, missing_dirs, journal_path, gate) -> None:
    """Swap every staged file in (new files first, so that each prefix of the renames still imports); on a failure,
    put back what was there."""
    entries: list[tuple[Path, Path, Path | None]] = []
    done: list[tuple[Path, Path, Path | None]] = []
    target = None
    try:
        for temp, target in sorted(staged, key=lambda pair: pair[1].exists()):
            backup = None
            if target.exists():
                backup = target.with_name(f".{target.name}{BACKUP_SUFFIX}")
                _link_backup(target, backup)
            entries.append((temp, target, backup))
        if journal_path is not None:
            state = {"state": "swapping", "renames": [[str(t), str(g), str(b) if b else None] for t, g, b in entries]}
            _write_journal(journal_path, state, missing_dirs)
        for entry in entries:
            temp, target, _ = entry
            os.replace(temp, target)
            done.append(entry)
            if len(done) == 1:
                _pause_for_tests(gate)
    except BaseException as error:
        _rollback(done)
        _discard([temp for temp, _ in staged], [])  # the renamed ones are gone already
        _discard([backup for _, _, backup in entries if backup is not None], list(missing_dirs))
        _remove_journal(journal_path)
        if isinstance(error, OSError):
            raise _write_error(error, target) from None
        raise
    _sync_folders({target.parent for _, target, _ in entries})
    _discard([backup for _, _, backup in entries if backup is not None], [])
    _remove_journal(journal_path)


def _link_backup(target: Path, backup: Path) -> None:
    """A second name for the old file (a hard link, a copy where links are not supported): the target stays."""
    backup.unlink(missing_ok=True)
    try:
        os.link(target, backup)
    except OSError:
        shutil.copy2(target, backup)


def _pause_for_tests(gate: _SignalGate) -> None:
    flag = os.environ.get(PAUSE_ENV)
    if not flag:
        return
    flag = Path(flag)
    partial = flag.with_name(f"{flag.name}.partial")
    partial.write_text(str(os.getpid()), encoding="utf-8")
    os.rename(partial, flag)  # whole when it appears
    deadline = time.monotonic() + PAUSE_LIMIT_S
    while not gate.received and flag.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _rollback(done: list[tuple[Path, Path, Path | None]]) -> None:
    for _, target, backup in reversed(done):
        if backup is not None and backup.exists():
            os.replace(backup, target)
        elif backup is None:
            target.unlink(missing_ok=True)


def _discard(files: list[Path], created_dirs: list[Path]) -> None:
    for path in files:
        Path(path).unlink(missing_ok=True)
    for directory in sorted(created_dirs, key=lambda d: len(Path(d).parts), reverse=True):
        try:
            Path(directory).rmdir()
        except OSError:
            pass


def _sync_folders(folders) -> None:
    """Flush the renames themselves to disk (a rename is an entry of its folder)."""
    for folder in folders:
        try:
            fd = os.open(folder, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)


def _write_journal(path: Path, state: dict, missing_dirs: list[Path]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {**state, "pid": os.getpid(), "created_dirs": [str(d) for d in missing_dirs]}
    temp = path.with_name(f"{path.name}.tmp")
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(temp, path)  # replaces atomically on POSIX, as fcntl locking (checkout_lock) assumes anyway
    _sync_folders([path.parent])


def _remove_journal(path: Path | None) -> None:
    if path is not None:
        path.unlink(missing_ok=True)
        _sync_folders([path.parent])


def recover(journal: Path) -> str | None:
    """Finish what a killed write left in ``journal`` (a folder, as ``write_all`` takes it): discard a staging,
    complete a swap. Returns one line saying what was done, or None when there was nothing to do. The caller holds
    the checkout's lock."""
    path = Path(journal) / JOURNAL_NAME
    path.with_name(f"{path.name}.tmp").unlink(missing_ok=True)  # a journal killed while being written: no rename yet
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise WriteError(getattr(error, "errno", None), f"cannot read the write journal {path}: {error}") from None
    pid = state.get("pid", "?")
    if state.get("state") == "swapping":
        completed = []
        for temp, target, backup in state.get("renames", []):
            if Path(temp).exists():
                os.replace(temp, target)
                completed.append(target)
            if backup:
                Path(backup).unlink(missing_ok=True)
        _sync_folders({Path(target).parent for _, target, _ in state.get("renames", [])})
        _remove_journal(path)
        total = len(state.get("renames", []))
        return (
            f"completed the write of {total} file(s) that an earlier kernelgen command (pid {pid}) was stopped in "
            f"({len(completed)} were still to rename)"
        )
    leftovers = []
    for target in map(Path, state.get("targets", [])):
        if target.parent.is_dir():
            prefix = f".{target.name}."
            leftovers += [
                p for p in target.parent.iterdir() if p.name.startswith(prefix) and p.name.endswith(TEMP_SUFFIX)
            ]
    _discard(leftovers, state.get("created_dirs", []))
    _remove_journal(path)
    return (
        f"discarded the staging of an earlier kernelgen command (pid {pid}) that was stopped before it wrote anything "
        f"({len(leftovers)} temporary file(s) removed)"
    )
