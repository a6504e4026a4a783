"""The one way kernelgen starts a Python subprocess (a target checkout's tests, a validation worker, a change tried
in a scratch copy): ``run_python(args, ...)`` does what ``subprocess.run([sys.executable, *args], ...)`` does and
returns the same ``CompletedProcess`` (text output captured).

A test suite that starts hundreds of them may install a faster runner with the same contract (``use_runner``):
this repository's forks each run from one process that imported torch once (``test/forkserver.py``).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys

from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

Runner = Callable[..., subprocess.CompletedProcess]
_runner: Runner | None = None


def run_python(
    args: list[str], *, cwd: Path | str, env: dict[str, str] | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess:
    """``python *args`` in ``cwd`` with ``env`` (None: this process's), output captured as text; raises
    ``subprocess.TimeoutExpired`` past ``timeout`` seconds."""
    if _runner is not None:
        return _runner(list(args), cwd=cwd, env=env, timeout=timeout)
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@contextlib.contextmanager
def use_runner(runner: Runner | None) -> Iterator[None]:
    """Inside: ``run_python`` goes through ``runner`` (None: a new interpreter each time)."""
    global _runner
    previous, _runner = _runner, runner
    try:
        yield
    finally:
        _runner = previous


__all__ = ["run_python", "use_runner"]
