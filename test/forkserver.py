"""A fork server for the test suite's Python runs: a generated checkout's tests, a benchmark script, a validation
worker, a change tried in a scratch copy. Each would start an interpreter and import torch and Triton (seconds of
CPU apiece, a hundred times in the suite); here one server process imports them once and forks a child per run,
which then behaves as ``python ARGS`` would in its folder and environment. Runs may go on side by side (``start``:
commands that wait for each other's lock, or that a test signals).

The server also imports the third-party modules many runs import (transformers and its Llama model, sympy); never
``liger_kernel``, ``test`` or ``tools``, which each run imports from its own checkout. A run the server cannot reproduce
goes to a new interpreter instead: one under another ``TRITON_INTERPRET`` or ``PYTHONHASHSEED`` than the server's (both
are fixed once torch, Triton and the interpreter are up), one with interpreter options, and every run on a machine with
a GPU (a process that has touched CUDA must not fork).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

from pathlib import Path

# The environment variables a child cannot change: read when the server started.
_FIXED = ("TRITON_INTERPRET", "PYTHONHASHSEED")

_SERVER = r"""
import json, os, runpy, select, signal, sys, traceback

import torch

if not torch.cuda.is_available() and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
    os.environ.setdefault("TRITON_INTERPRET", "1")  # as the root conftest.py does before Triton is imported
import numpy
import pytest
import triton
import triton.language

# What many runs import besides (the host's tests import transformers and its Llama model, the reference of the host's
# RMSNorm and SwiGLU; validation workers, sympy and yaml): third-party modules only, never liger_kernel, test or tools,
# which each run takes from its own checkout.
for name in ("transformers", "transformers.models.llama.modeling_llama", "sympy", "yaml", "jinja2"):
    try:
        __import__(name)
    except ImportError:
        pass

replies = os.dup(1)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)


# Most runs are pytest runs, and each would import its plugins (xdist, hypothesis, ...) and rewrite their asserts again,
# from source where no bytecode is written: a collection of an empty folder does it once, here, and a run finds them
# imported by pytest's own loader, as it would have left them.
def import_pytest_plugins():
    import gc
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        open(os.path.join(folder, "pytest.ini"), "w").close()  # this folder's (empty) settings, not a parent's
        options = os.environ.pop("PYTEST_ADDOPTS", None)
        stderr, sys.stderr = sys.stderr, open(os.devnull, "w")
        try:
            pytest.main(["--collect-only", "-q", "-s", "-p", "no:cacheprovider", folder])
        finally:
            sys.stderr.close()
            sys.stderr = stderr
            if options is not None:
                os.environ["PYTEST_ADDOPTS"] = options
    # Everything imported so far lives as long as the server: out of every collection a run makes (pytest collects
    # five times as it exits, each a pass over all of torch's objects otherwise).
    gc.freeze()


import_pytest_plugins()
fixed = {name: os.environ.get(name) for name in FIXED}
os.write(replies, (json.dumps({"gpu": torch.cuda.is_available(), "fixed": fixed}) + "\n").encode())


def child(request):
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.close(wake_read)
    os.close(wake_write)
    os.close(replies)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(os.open(request["stdout"], os.O_WRONLY), 1)
    os.dup2(os.open(request["stderr"], os.O_WRONLY), 2)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    args = request["args"]
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if args[0] == "-c":
        sys.argv, first = ["-c", *args[2:]], ""
    elif args[0] == "-m":
        sys.argv, first = [args[1], *args[2:]], os.getcwd()
    else:
        sys.argv, first = list(args), os.path.dirname(os.path.abspath(args[0]))
    sys.path[:1] = [first, *extra]
    code = 0
    try:
        if args[0] == "-c":
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        elif args[0] == "-m":
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as exit:
        if isinstance(exit.code, int) or exit.code is None:
            code = exit.code or 0
        else:
            print(exit.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# Runs go on side by side: each request is forked at once ({"pid": ...}), each child's end is reported as it comes
# ({"pid": ..., "returncode": ...}); a SIGCHLD wakes the loop through the wakeup pipe.
wake_read, wake_write = os.pipe()
os.set_blocking(wake_write, False)
signal.set_wakeup_fd(wake_write)
signal.signal(signal.SIGCHLD, lambda *_: None)
pending, running = b"", set()
while True:
    ready, _, _ = select.select([0, wake_read], [], [])
    if wake_read in ready:
        os.read(wake_read, 4096)
    if 0 in ready:
        chunk = os.read(0, 65536)
        if not chunk:
            break  # the suite is done: children still running finish on their own
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                child(json.loads(line))
            running.add(pid)
            os.write(replies, (json.dumps({"pid": pid}) + "\n").encode())
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        running.discard(pid)
        os.write(replies, (json.dumps({"pid": pid, "returncode": os.waitstatus_to_exitcode(status)}) + "\n").encode())
"""


class ForkServer:
    """``run(args, cwd=, env=, timeout=)`` as ``tools.kernelgen.pyrun.run_python``, and ``start(args, cwd=, env=)`` as
    ``subprocess.Popen`` with text output captured (a run that goes on beside the caller, to signal or wait for);
    the server starts on first use."""

    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None
        self._pending = b""
        self._fixed: dict[str, str | None] = {}
        self._usable = True
        self._ended: dict[int, int] = {}  # pid -> exit status of the forked runs that ended, until their caller asks

    def _start(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", f"FIXED = {list(_FIXED)!r}\n{_SERVER}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=tempfile.gettempdir(),
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )
        atexit.register(self.close)
        hello = self._reply(timeout=120)
        self._fixed = hello["fixed"] if hello else {}
        self._usable = bool(hello) and not hello["gpu"]

    def _reply(self, timeout: float | None) -> dict | None:
        """The server's next reply line, None if none came within ``timeout`` seconds (or the server died)."""
        fd = self._process.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], left)
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                return None
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def _forked(self, timeout: float) -> int | None:
        """The pid of the run just requested (the next reply that is no run's end), None if the server died."""
        while True:
            reply = self._reply(timeout)
            if reply is None:
                return None
            if "returncode" not in reply:
                return reply["pid"]
            self._ended[reply["pid"]] = reply["returncode"]

    def _wait(self, pid: int, timeout: float | None) -> int | None:
        """Forked run ``pid``'s exit status once it ends, None if it did not within ``timeout`` seconds (0: only the
        replies already there are read)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while pid not in self._ended:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            reply = self._reply(left)
            if reply is None:
                return None
            if "returncode" in reply:
                self._ended[reply["pid"]] = reply["returncode"]
        return self._ended.pop(pid)

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait(timeout=30)
        self._process = None

    def _can_run(self, args: list[str], env: dict[str, str]) -> bool:
        if not args or (args[0].startswith("-") and args[0] not in ("-c", "-m")):
            return False
        if self._process is None and self._usable:
            self._start()
        return self._usable and all(env.get(name) == self._fixed.get(name) for name in _FIXED)

    def _fork(self, args, cwd, env: dict[str, str], folder: Path) -> int | None:
        """Asks the server to fork ``python ARGS`` writing its output into ``folder``; its pid (None: the server
        died, and this run and the next ones get new interpreters)."""
        out, err = folder / "stdout", folder / "stderr"
        out.touch()
        err.touch()
        request = {"args": list(args), "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err)}
        self._process.stdin.write((json.dumps(request) + "\n").encode())
        self._process.stdin.flush()
        pid = self._forked(timeout=60)
        if pid is None:
            self._usable = False
        return pid

    def run(self, args, *, cwd, env=None, timeout=None) -> subprocess.CompletedProcess:
        env = dict(os.environ if env is None else env)
        command = [sys.executable, *args]
        if not self._can_run(list(args), env):
            return subprocess.run(
                command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        with tempfile.TemporaryDirectory() as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            pid = self._fork(args, cwd, env, Path(folder))
            if pid is None:
                return self.run(args, cwd=cwd, env=env, timeout=timeout)
            returncode = self._wait(pid, timeout)
            if returncode is None:
                os.kill(pid, 9)
                self._wait(pid, timeout=60)
                raise subprocess.TimeoutExpired(command, timeout, out.read_text(), err.read_text())
            return subprocess.CompletedProcess(command, returncode, out.read_text(), err.read_text())

    def start(self, args, *, cwd, env=None):
        """``python ARGS`` going on beside the caller: a ``ForkedRun`` (a ``subprocess.Popen``, text output piped,
        where the server cannot run it)."""
        env = dict(os.environ if env is None else env)
        if self._can_run(list(args), env):
            folder = tempfile.mkdtemp()
            pid = self._fork(args, cwd, env, Path(folder))
            if pid is not None:
                return ForkedRun(self, pid, [sys.executable, *args], Path(folder))
            shutil.rmtree(folder, ignore_errors=True)
        return subprocess.Popen(
            [sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )


class ForkedRun:
    """A run ``ForkServer.start`` forked: ``pid``, ``returncode`` (negative: killed by that signal), ``poll()``,
    ``wait(timeout)`` and ``communicate(timeout)`` as ``subprocess.Popen`` has them."""

    def __init__(self, server: ForkServer, pid: int, args: list[str], folder: Path) -> None:
        self._server, self.pid, self.args, self._folder = server, pid, args, folder
        self.returncode: int | None = None
        self._output: tuple[str, str] | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server._wait(self.pid, timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server._wait(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        if self._output is None:
            self._output = (self._folder / "stdout").read_text(), (self._folder / "stderr").read_text()
            shutil.rmtree(self._folder, ignore_errors=True)
        return self._output


SERVER = ForkServer()


def start_python(args: list[str], *, cwd, env: dict[str, str] | None = None):
    """``python ARGS`` started beside the caller, as ``subprocess.Popen`` with text output piped would: forked from
    the suite's server, or a new interpreter where ``KERNELGEN_FORKSERVER=0``."""
    if os.environ.get("KERNELGEN_FORKSERVER") == "0":
        return subprocess.Popen(
            [sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    return SERVER.start(args, cwd=cwd, env=env)


__all__ = ["SERVER", "ForkServer", "ForkedRun", "start_python"]
