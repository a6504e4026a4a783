"""Try a change set in a scratch copy of the checkout before anything is written to the real one.

``verify_changes`` copies the checkout into a temporary folder (``scratch.stage_checkout``: every file of its own, so
whatever the test run imports is there), writes the change set there, and in one Python process imports every
changed module of ``liger_kernel`` and runs one test function of one test file (the whole file is collected). It answers None when that went as
required, else one line saying what failed: a module that no longer imports, a test file that no longer collects,
or the first failing case.
"""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ElementTree

from pathlib import Path

from tools.kernelgen.interpreter import SCRIPT as INTERPRETER_SCRIPT
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.scratch import changed_library_modules
from tools.kernelgen.scratch import scratch_folder
from tools.kernelgen.scratch import stage_checkout

TIMEOUT_S = 900
# Hand-written kernels are written for compiled Triton (libdevice math, float scalars with ``.to``): under the
# interpreter the staged tests run them as the compiler would.
IMPORT_FAILED = 3

_SCRIPT = """
import importlib
import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path[:0] = [{src!r}, {root!r}]
for name in {modules!r}:
    try:
        importlib.import_module(name)
    except Exception as error:
        text = (str(error).strip().splitlines() or [""])[0]
        print(f"KERNELGEN-IMPORT-FAILED {{name}}: {{type(error).__name__}}: {{text}}")
        sys.exit({failed})
import contextlib
import importlib.util

import pytest

scalars = contextlib.nullcontext()
if os.environ.get("TRITON_INTERPRET") == "1":
    # Loaded by its path: the kernelgen checkout on sys.path would shadow the target's own ``test`` package.
    spec = importlib.util.spec_from_file_location("kernelgen_interpreter", {shim!r})
    shim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim)
    scalars = shim.compiled_scalars()
with scalars:
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--junitxml", {xml!r}, {test!r}, "-k", {selector!r}])
sys.exit(code)
"""


def _outcomes(xml_path: Path) -> dict[str, tuple[str, str]]:
    """``{test id: (passed|failed|error|skipped, first line of the message)}`` from pytest's JUnit XML."""
    if not xml_path.exists():
        return {}
    found = {}
    for case in ElementTree.parse(xml_path).getroot().iter("testcase"):
        name = case.get("name", "")
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                text = child.get("message") or child.text or ""
                message = next((line.strip() for line in text.splitlines() if line.strip()), "")
        found[name or case.get("classname", "")] = (outcome, message)
    return found


def verify_changes(
    repo: LigerRepo, changes: dict[str, str], test_path: str, test_name: str, *, defaults_only: bool = False
) -> str | None:
    """None when, with ``changes`` applied, every changed module imports, ``test_path`` collects and every case of
    ``test_name`` passes (``defaults_only``: its ``defaults`` cases); else what went wrong, in one line (a
    ``Failure`` when cases ran and failed)."""
    modules = changed_library_modules(changes)
    with scratch_folder("kernelgen-verify-") as folder:
        stage_checkout(repo.root, folder, changes)
        xml_path = folder / "results.xml"
        script = _SCRIPT.format(
            src=str(folder / "src"),
            root=str(folder),
            modules=modules,
            failed=IMPORT_FAILED,
            shim=str(INTERPRETER_SCRIPT),
            xml=str(xml_path),
            test=test_path,
            selector=test_name,
        )
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        try:
            result = run_python(["-c", script], cwd=folder, env=env, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"the staged check of {test_path} ran past {TIMEOUT_S} s"
        output = result.stdout + result.stderr
        if result.returncode == IMPORT_FAILED:
            line = next((x for x in output.splitlines() if x.startswith("KERNELGEN-IMPORT-FAILED")), output)
            return f"{line.removeprefix('KERNELGEN-IMPORT-FAILED ')} (after the change)"
        outcomes = _outcomes(xml_path)
    broken = [message for name, (outcome, message) in outcomes.items() if outcome == "error"]
    if broken or result.returncode in (2, 3, 4) or not outcomes:
        detail = broken[0] if broken else _last_line(output)
        return f"{test_path} does not collect after the change: {detail}"
    cases = {name: value for name, value in outcomes.items() if test_name in name}
    if defaults_only:
        cases = {name: value for name, value in cases.items() if name.endswith("-defaults]")}
    ran = {name: value for name, value in cases.items() if value[0] != "skipped"}
    if not ran:
        return f"{test_name} ran no case in {test_path}"
    failed = sorted(name for name, (outcome, _) in ran.items() if outcome != "passed")
    if failed:
        text = f"{len(failed)} of {len(ran)} case(s) fail, first {failed[0]}: {ran[failed[0]][1]}"
        return Failure(text, crashed=all(not _is_assertion(ran[name][1]) for name in failed))
    return None


class Failure(str):
    """What went wrong, in one line; ``crashed``: every failing case raised before comparing anything (the kernel
    does not run on this machine), none computed a wrong value."""

    crashed: bool

    def __new__(cls, text: str, *, crashed: bool = False) -> Failure:
        failure = super().__new__(cls, text)
        failure.crashed = crashed
        return failure


def _is_assertion(message: str) -> bool:
    return message.startswith(("AssertionError", "assert ")) or message == "assert"


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


__all__ = ["Failure", "verify_changes"]
