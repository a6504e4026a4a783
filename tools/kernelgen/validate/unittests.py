"""Stage 3: the kernel's generated pytest file, in a subprocess in the target checkout (a hard gate)."""

from __future__ import annotations

import re

from tools.kernelgen.interpreter import SCRIPT as INTERPRETER_SCRIPT
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.validate.report import FAIL
from tools.kernelgen.validate.report import PASS
from tools.kernelgen.validate.report import SKIP
from tools.kernelgen.validate.report import StageResult
from tools.kernelgen.validate.report import Target

COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")
SKIP_REASON = re.compile(r"^SKIPPED \[\d+\] [^:]+:\d+: (.+)$", re.MULTILINE)
TAIL_LINES = 25
NO_TESTS_COLLECTED = 5  # pytest's exit status when a file skips as a whole (allow_module_level)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def counts(output: str) -> dict[str, int]:
    """``{"passed": 6, "skipped": 6}`` from pytest's last summary line."""
    summary = [line for line in output.splitlines() if COUNT.search(line)]
    if not summary:
        return {}
    found = {}
    for number, kind in COUNT.findall(summary[-1]):
        found["errors" if kind.startswith("error") else kind] = int(number)
    return found


def run(target: Target) -> StageResult:
    test = target.paths["test"]
    if not target.repo.exists(test):
        return StageResult("unit tests", FAIL, f"{test} is missing")
    options = ["-q", "-rs", "-p", "no:cacheprovider", test]
    # Generated kernels run under the interpreter as they are; hand-written ones (no record) as compiled Triton would
    # (libdevice math, float scalars with ``.to``): upstream's geglu, dyt or cross_entropy call libdevice's tanh.
    as_compiled = not target.recorded and not _cuda_available()
    command = [str(INTERPRETER_SCRIPT), *options] if as_compiled else ["-m", "pytest", *options]
    print(f"  $ {' '.join(['python', *command])}")
    result = run_python(command, cwd=target.repo.root)
    output = result.stdout + result.stderr
    found = counts(output)
    described = ", ".join(f"{n} {kind}" for kind, n in found.items()) or "no summary line"
    reasons = SKIP_REASON.findall(output)
    skipped_whole = result.returncode in (0, NO_TESTS_COLLECTED) and set(found) == {"skipped"} and reasons
    if target.profile.backend == "tilelang" and skipped_whole:
        # TileLang kernels cannot run without a GPU: the file skips, and says why.
        return StageResult("unit tests", SKIP, f"{test}: {described} ({reasons[0]})", found)
    if result.returncode != 0 or not found.get("passed"):
        for line in output.strip().splitlines()[-TAIL_LINES:]:
            print(f"  | {line}")
        # pytest exits 1 when tests ran and failed; anything else (a file that does not collect because the kernel
        # does not import, an internal error) means the tests could not run.
        crashed = result.returncode not in (0, 1)
        return StageResult("unit tests", FAIL, f"{test}: {described} (exit {result.returncode})", found, crashed)
    return StageResult("unit tests", PASS, f"{test}: {described}", found)
