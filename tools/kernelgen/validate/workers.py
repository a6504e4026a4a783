"""Run a worker module (correctness, performance) in its own Python process and read back its JSON report."""

from __future__ import annotations

import json
import os
import subprocess

from pathlib import Path

from tools.kernelgen.profile import dump_yaml
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.repo import default_repo_root
from tools.kernelgen.validate.report import Target

TAIL_LINES = 20


class WorkerFailed(RuntimeError):
    """The worker died before writing its report (the kernel does not import, the reference does not run...)."""


def worker_env() -> dict:
    """The environment of a worker process: ``tools.kernelgen`` from this checkout first on ``PYTHONPATH`` (the
    kernel itself is imported from the target's src/ by the worker)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(default_repo_root()), env.get("PYTHONPATH", "")) if p)
    return env


def spec_file(target: Target) -> Path | None:
    """The target spec of a kernel not checked against its own record (written to the workspace), else None."""
    if target.call is None:
        return None
    spec = target.workspace / "target.json"
    spec.write_text(json.dumps({"profile": dump_yaml(target.profile), "call": target.call}), encoding="utf-8")
    return spec


def run_worker(
    module: str,
    target: Target,
    report_name: str,
    timeout: float | None = None,
    extra: tuple[str, ...] = (),
    spec: bool = True,
) -> dict:
    """The worker's JSON report; it runs as ``python -m MODULE REPO NAME OUT [EXTRA...] [SPEC]`` (``SPEC``: the
    target spec of a kernel not checked against its own record, for workers that take one)."""
    out = target.workspace / report_name
    out.unlink(missing_ok=True)
    command = ["-m", module, str(target.repo.root), target.name, str(out), *extra]
    spec_path = spec_file(target) if spec else None
    if spec_path is not None:
        command.append(str(spec_path))
    try:
        result = run_python(command, cwd=default_repo_root(), env=worker_env(), timeout=timeout)
    except subprocess.TimeoutExpired:
        raise WorkerFailed(f"{module} ran past {timeout:.0f} s") from None
    if result.returncode != 0 or not out.exists():
        tail = (result.stderr or result.stdout).strip().splitlines()[-TAIL_LINES:]
        for line in tail:
            print(f"  | {line}")
        last = tail[-1] if tail else f"exit status {result.returncode}"
        raise WorkerFailed(last)
    return json.loads(Path(out).read_text(encoding="utf-8"))
