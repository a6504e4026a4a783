"""The workspace files the workflow's agents write and the audit reads, and how each is parsed.

Written by the CLI: ``request.json`` (``workspace``), ``iterations.tsv`` (``validate`` and ``tune``, statuses
accept/reject/crash), ``summary.md`` (``validate``), ``validate_report.json`` (``validate --report``),
``kernel_function_best.py`` and ``phase_4_summary.md`` (``tune`` on a GPU). Written by agents, in the formats the
skill's files give: ``knowledge.md`` (phase 0), ``profile.yaml`` and ``approvals.sha256`` (phase 1/3: ``sha256sum``
lines of what a person approved), ``sample_inputs.py`` (phase 2), ``kernel_function_best.py`` and
``phase_4_summary.md`` where tune did not run (phase 4), ``results.md`` and ``ORCHESTRATOR_REPORT.md`` (phase 6).
Agent-written summaries are ``key: value`` lines (a leading ``- `` allowed), so that what they claim can be checked.
"""

from __future__ import annotations

import json
import re

from dataclasses import dataclass
from pathlib import Path

from tools.kernelgen.tune.loop import FOCUS_PREFIX as TUNE_FOCUS_PREFIX
from tools.kernelgen.tune.loop import START as TUNE_START
from tools.kernelgen.validate.workspace import ACCEPT
from tools.kernelgen.validate.workspace import COLUMNS
from tools.kernelgen.validate.workspace import STATUSES

KNOWLEDGE = "knowledge.md"
PROFILE = "profile.yaml"
APPROVALS = "approvals.sha256"
SAMPLER = "sample_inputs.py"
VALIDATE_REPORT = "validate_report.json"
BEST = "kernel_function_best.py"
PHASE_4_SUMMARY = "phase_4_summary.md"
RESULTS = "results.md"
ORCHESTRATOR_REPORT = "ORCHESTRATOR_REPORT.md"
ITERATIONS = "iterations.tsv"
SUMMARY = "summary.md"

# iterations.tsv statuses, validate's and tune's alike (``validate/workspace.py``): accept, reject, crash.
ACCEPTED = (ACCEPT,)
# ``- accepted iteration: 3 (...)`` (tune's summary) and ``accepted_iteration: 3`` read as the same key.
KEY_LINE = re.compile(r"^\s*(?:[-*]\s+)?([A-Za-z][A-Za-z0-9_ ]{0,40}?):(?:\s+(.*?))?\s*$")
APPROVAL_LINE = re.compile(r"^([0-9a-f]{64})\s+\*?(.+)$")
VERDICTS = {"PASSED": "PASS", "FAILED": "FAIL", "SKIPPED": "SKIP", "WARNING": "WARN"}
REPORT_HEADER = "ORCHESTRATOR_REPORT"
# What the supervisor reads and the audit checks in an ORCHESTRATOR_REPORT.
REPORT_FIELDS = (
    "kernel",
    "status",
    "workspace",
    "reference",
    "backend",
    "backward",
    "phase_0_knowledge",
    "phase_1_analysis",
    "phase_2_sampler",
    "phase_3_backward",
    "phase_4_kernel",
    "phase_5_archive",
    "phase_6_results",
    "validate_report",
    "correctness",
    "samples_passed",
    "samples_failed",
    "performance",
    "speedup",
    "speedup_target",
    "delta_vs_target",
    "next_action",
    "best_iteration",
    "kernel_function_best",
    "results",
    "failure",
)
REPORT_STATUSES = ("SUCCESS", "FAILED", "NEEDS_APPROVAL")


class ArtifactError(ValueError):
    """A workspace file that does not have the format the skill gives it (one line: file and problem)."""


def verdict(value) -> str:
    """PASS/FAIL/SKIP/WARN/NOT RUN whichever spelling (``PASSED``, ``pass``) a file uses, details after it dropped
    (``SKIP (no GPU ...)``); other text upper-cased."""
    text = str(value or "").strip().upper()
    if text.startswith("NOT RUN"):
        return "NOT RUN"
    word = text.split(" ")[0]
    return VERDICTS.get(word, word)


def _key(text: str) -> str:
    return "_".join(text.lower().split())


def key_values(text: str) -> dict[str, str]:
    """``key: value`` lines of a summary (keys lower-cased, spaces as ``_``; the first occurrence of a key wins)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        match = KEY_LINE.match(line)
        if match:
            found.setdefault(_key(match.group(1)), match.group(2) or "")
    return found


def read_key_values(path: Path) -> dict[str, str]:
    return key_values(Path(path).read_text(encoding="utf-8"))


@dataclass
class Iteration:
    number: int
    speedup: str
    correctness: str
    purity: str
    focus: str
    status: str
    description: str

    @property
    def accepted(self) -> bool:
        return self.status in ACCEPTED

    @property
    def by_tune(self) -> bool:
        """A ``tune`` candidate's row (focus ``baseline`` for the start, ``tiling.FIELD`` for the others), which
        leaves ``summary.md`` as validate wrote it."""
        return self.focus == TUNE_START or self.focus.startswith(TUNE_FOCUS_PREFIX)

    @property
    def speedup_value(self) -> float | None:
        return number(self.speedup)


def number(text) -> float | None:
    """The first number in ``text`` (``1.23x``, ``0.95``), or None (``-``, ``n/a``)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    match = re.search(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", str(text or ""))
    return float(match.group(0)) if match else None


def read_iterations(path: Path) -> list[Iteration]:
    """The rows of ``iterations.tsv``, schema checked: the header, seven cells a row, iterations numbered 1, 2, ...
    and a known status; raises ``ArtifactError`` at the first problem."""
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path.name}: missing")
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines or tuple(lines[0].split("\t")) != COLUMNS:
        raise ArtifactError(
            f"{path.name}: header is {lines[0].split(chr(9)) if lines else []}, expected {list(COLUMNS)}"
        )
    rows = []
    for line_number, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        if len(cells) != len(COLUMNS):
            raise ArtifactError(f"{path.name}:{line_number}: {len(cells)} cells, expected {len(COLUMNS)}")
        if cells[0] != str(len(rows) + 1):
            raise ArtifactError(f"{path.name}:{line_number}: iteration {cells[0]!r}, expected {len(rows) + 1}")
        if cells[5] not in STATUSES:
            raise ArtifactError(f"{path.name}:{line_number}: status {cells[5]!r} is not {', '.join(STATUSES)}")
        rows.append(Iteration(int(cells[0]), *cells[1:]))
    return rows


def read_approvals(path: Path) -> dict[str, set[str]]:
    """``{file name: approved sha256s}`` from ``approvals.sha256`` (``sha256sum`` output lines)."""
    approvals: dict[str, set[str]] = {}
    if not Path(path).is_file():
        return approvals
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        match = APPROVAL_LINE.match(line.strip())
        if match:
            approvals.setdefault(Path(match.group(2).strip()).name, set()).add(match.group(1))
    return approvals


def read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError:
        raise ArtifactError(f"{Path(path).name}: missing") from None
    except ValueError as error:
        raise ArtifactError(f"{Path(path).name}: not JSON ({error})") from None


def parse_orchestrator_report(text: str, source: str) -> dict[str, str]:
    """The fields of the ``ORCHESTRATOR_REPORT`` block in ``text`` (a fenced block or plain lines: the header line,
    then ``key: value`` lines up to the first line that is neither); raises ``ArtifactError``."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == REPORT_HEADER]
    if not starts:
        raise ArtifactError(f"{source}: no {REPORT_HEADER} line")
    fields: dict[str, str] = {}
    for line in lines[starts[-1] + 1 :]:
        match = KEY_LINE.match(line)
        if not match:
            break
        fields.setdefault(_key(match.group(1)), match.group(2) or "")
    return fields
