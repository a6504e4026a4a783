"""Commands that write a checkout: one at a time (the checkout's lock), and a swap of files that no signal and no
killed process leaves half done (the write journal, which the next command completes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from pathlib import Path

import pytest

from test.forkserver import ForkedRun
from test.forkserver import start_python
from test.kernelgen.conftest import EXAMPLES
from test.kernelgen.conftest import REPO_ROOT
from test.kernelgen.conftest import run_kernelgen
from tools.kernelgen import writer
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import OPS_INIT
from tools.kernelgen.layout import TRANSFORMERS_INIT
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.repo import LigerRepo

WAIT_S = 120


def _start_new(checkout: Path, name: str, example: str, **env: str) -> ForkedRun | subprocess.Popen:
    """``new NAME --profile EXAMPLE`` as a process of its own (a profile: no analysis, a short run; --force-new,
    since the examples include kernels the host already has, such as swiglu), forked from the suite's server, which
    has torch imported already."""
    return start_python(
        ["-m", "tools.kernelgen", "new", name, "--profile", str(EXAMPLES / f"{example}.yaml")]
        + ["--repo", str(checkout), "--force-new"],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
    )


def _paused_in_swap(process: ForkedRun | subprocess.Popen, flag: Path) -> int:
    """Wait until ``process`` holds in its swap (one file renamed); its pid."""
    deadline = time.monotonic() + WAIT_S
    while not flag.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the command never reached its swap"
        time.sleep(0.02)
    return int(flag.read_text())


def _leftovers(checkout: Path) -> list[str]:
    return [
        str(path.relative_to(checkout))
        for path in checkout.rglob(".*")
        if path.is_file() and path.name.endswith((writer.TEMP_SUFFIX, writer.BACKUP_SUFFIX))
    ]


def _imports(checkout: Path, *names: str) -> subprocess.CompletedProcess:
    """The checkout's package imports and holds ``names`` (transformers exports): a Python run of its own (forked
    from the suite's server, which has torch imported already)."""
    code = "import liger_kernel.transformers as t\n" + "".join(f"t.{name}\n" for name in names)
    return run_python(["-c", code], cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout / "src")})


def test_two_concurrent_new_commands_both_register_their_kernels(checkout, tmp_path):
    """The second command waits for the first's lock and plans from the files the first wrote: neither
    registration is lost. A command that cannot get the lock in time says so in one line and writes nothing."""
    flag = tmp_path / "paused"
    first = _start_new(checkout, "gate_one", "swiglu", **{writer.PAUSE_ENV: str(flag)})
    _paused_in_swap(first, flag)
    second = _start_new(checkout, "norm_two", "rms_norm")
    impatient = _start_new(checkout, "gate_three", "swiglu", KERNELGEN_LOCK_WAIT="0.2")
    out, err = impatient.communicate(timeout=WAIT_S)
    assert impatient.returncode == 2, out + err
    assert err.startswith("kernelgen: error: another kernelgen command (pid ") and err.count("\n") == 1, err
    assert "kernelgen new gate_one) holds the lock" in err
    assert second.poll() is None  # waiting for the lock (30 s by default), not writing
    flag.unlink()  # the first goes on with its swap
    for process in (first, second):
        out, err = process.communicate(timeout=WAIT_S)
        assert process.returncode == 0, out + err
    for path, names in (
        (OPS_INIT, ("gate_one", "norm_two")),
        (TRANSFORMERS_INIT, ("LigerGateOne", "LigerNormTwo")),
        (FUNCTIONAL, ("liger_gate_one", "liger_norm_two")),
    ):
        text = (checkout / path).read_text()
        assert all(name in text for name in names), (path, names)
    assert "gate_three" not in (checkout / OPS_INIT).read_text()
    result = _imports(checkout, "LigerGateOneMLP", "LigerNormTwo")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=["TERM", "HUP", "KILL"])
def test_a_signal_in_the_swap_never_leaves_a_half_written_checkout(checkout, tmp_path, signum):
    """SIGTERM and SIGHUP are held until the swap is done, which then reports success as Ctrl-C does; SIGKILL leaves
    the journal, and the next command (whatever it is) completes the write before anything else."""
    flag = tmp_path / "paused"
    process = _start_new(checkout, "gate_one", "swiglu", **{writer.PAUSE_ENV: str(flag)})
    os.kill(_paused_in_swap(process, flag), signum)
    out, err = process.communicate(timeout=WAIT_S)
    journal = LigerRepo(checkout).state_dir() / writer.JOURNAL_NAME
    if signum == signal.SIGKILL:
        assert process.returncode == -signal.SIGKILL
        assert json.loads(journal.read_text())["state"] == "swapping" and _leftovers(checkout)
        assert "liger_gate_one" not in (checkout / FUNCTIONAL).read_text()  # half done, until the next command
        following = run_kernelgen("new", "Bad-Name", "--repo", str(checkout))
        lines = following.stderr.splitlines()
        assert lines[0].startswith("kernelgen: completed the write of 8 file(s) that an earlier kernelgen command")
        assert lines[1].startswith("kernelgen: error: kernel name 'Bad-Name'") and following.returncode == 2
    else:
        assert process.returncode == 0, out + err  # held until the swap was done: the command succeeded
        assert err.startswith("kernelgen: interrupted after the write had finished: all 8 file(s) were written")
    assert not journal.exists() and _leftovers(checkout) == []
    assert "liger_gate_one" in (checkout / FUNCTIONAL).read_text()
    result = _imports(checkout, "LigerGateOneMLP")
    assert result.returncode == 0, result.stderr


def test_a_process_killed_while_staging_leaves_nothing_once_recovered(tmp_path, monkeypatch):
    """Killed before its first rename: the journal of the staging lets the next command remove its temporary files
    and the folders it made; no file of the checkout changed."""
    (tmp_path / "kept.py").write_text("old\n")
    state = tmp_path / "state"
    calls = []
    real = writer.tempfile.mkstemp

    def killed_on_the_second_file(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise SystemExit("killed")  # stands for SIGKILL: nothing of write_all's own clean-up may run
        return real(*args, **kwargs)

    monkeypatch.setattr(writer.tempfile, "mkstemp", killed_on_the_second_file)
    monkeypatch.setattr(writer, "_discard", lambda *args: None)
    monkeypatch.setattr(writer, "_remove_journal", lambda path: None)
    with pytest.raises(SystemExit):
        writer.write_all(tmp_path, {"kept.py": "new\n", "made/new.py": "x\n"}, journal=state)
    monkeypatch.undo()
    assert (state / writer.JOURNAL_NAME).exists() and _leftovers(tmp_path)
    message = writer.recover(state)
    assert message.startswith("discarded the staging of an earlier kernelgen command") and "(1 temporary" in message
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["kept.py", "state"]
    assert (tmp_path / "kept.py").read_text() == "old\n" and writer.recover(state) is None


def test_a_full_disk_names_the_file_it_could_not_write(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(28, "No space left on device")  # as a flush to a full disk: no file name

    monkeypatch.setattr(writer.os, "fsync", full)
    with pytest.raises(writer.WriteError, match=r"cannot write .*b\.py: No space left on device"):
        writer.write_all(tmp_path, {"b.py": "x\n"})
    assert list(tmp_path.iterdir()) == []
