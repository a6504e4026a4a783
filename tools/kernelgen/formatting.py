"""Format and lint generated code with ruff, using the *target* repository's configuration."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys

from collections import OrderedDict
from pathlib import Path

from tools.kernelgen.long_lines import wrap_long_lines


class FormatError(ValueError):
    """Generated code that ruff cannot format or that still has findings after formatting."""


def _ruff_binary() -> str | None:
    """ruff's own binary, from its Python package or on PATH (None when neither is there)."""
    try:
        from ruff.__main__ import find_ruff_bin

        return find_ruff_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("ruff")


@functools.cache
def _ruff_executable() -> list[str]:
    """ruff's own binary: a new kernel takes a couple of dozen ruff runs, and ``python -m ruff`` would start a Python
    interpreter for each (~50 ms against ~5 ms)."""
    binary = _ruff_binary()
    return [binary] if binary else [sys.executable, "-m", "ruff"]


def ruff_available() -> bool:
    """Whether ruff can run here (a GPU machine may have torch and Triton but not the generator's tools)."""
    return _ruff_binary() is not None


# Files ruff takes its settings from, in the linted file's folder and each one above it.
CONFIGURATION_FILES = ("pyproject.toml", "ruff.toml", ".ruff.toml")
# Ruff's answers by (arguments, text, file and the settings that govern it), the latest kept: kernels registered one
# after another lint each registration file's text twice, as one kernel's new text and the next one's original.
_ANSWERS: OrderedDict[tuple, subprocess.CompletedProcess] = OrderedDict()
_ANSWERS_KEPT = 64


def _ruff(args: list[str], source: str, repo_root: Path, relative_path: str) -> subprocess.CompletedProcess:
    settings = _settings(repo_root, relative_path)
    key = None if settings is None else (tuple(args), source, str(repo_root.resolve()), relative_path, settings)
    if key in _ANSWERS:
        _ANSWERS.move_to_end(key)
        return _ANSWERS[key]
    # --stdin-filename makes ruff pick the configuration that governs that path in the target checkout.
    command = [*_ruff_executable(), *args, "--stdin-filename", relative_path, "-"]
    try:
        answer = subprocess.run(command, input=source, capture_output=True, text=True, cwd=repo_root, check=False)
    except FileNotFoundError as error:  # pragma: no cover - python itself missing
        raise FormatError(f"cannot run ruff: {error}") from None
    if key is not None:
        _ANSWERS[key] = answer
        if len(_ANSWERS) > _ANSWERS_KEPT:
            _ANSWERS.popitem(last=False)
    return answer


def _configuration_files(repo_root: Path, relative_path: str) -> list[Path]:
    """The configuration files ruff may read for ``relative_path``: in its folder and each one above, nearest first."""
    folder = (repo_root / relative_path).resolve().parent
    return [
        directory / name
        for directory in (folder, *folder.parents)
        for name in CONFIGURATION_FILES
        if (directory / name).is_file()
    ]


def _settings(repo_root: Path, relative_path: str) -> tuple | None:
    """What ruff's answer for ``relative_path`` depends on besides the text: the contents of every configuration
    file from its folder up, and ruff's environment variables; None (no answer kept) where none is found (ruff's user
    configuration applies) or one extends another file."""
    found = [(str(path), path.read_bytes()) for path in _configuration_files(repo_root, relative_path)]
    if not found or any(b"extend" in content for _, content in found):
        return None
    environment = tuple(sorted((name, value) for name, value in os.environ.items() if name.startswith("RUFF_")))
    return tuple(found), environment


def line_length(repo_root: Path, relative_path: str) -> int | None:
    """The line length ruff keeps ``relative_path`` to: ``line-length`` of the nearest configuration file that
    configures ruff (ruff's default, 88, where it leaves it out); None where no file does, or it cannot be read."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        return None
    for path in _configuration_files(repo_root, relative_path):
        try:
            settings = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return None
        if path.name == "pyproject.toml":
            settings = settings.get("tool", {}).get("ruff")
            if settings is None:
                continue
        value = settings.get("line-length", 88)
        return value if isinstance(value, int) else None
    return None


def format_source(source: str, repo_root: Path, relative_path: str) -> str:
    """isort-style fixes (``ruff check --fix``) then ``ruff format``, docstrings and lone string literals wrapped at
    the line length (ruff leaves them long, ``long_lines.py``); raises if findings remain."""
    fixed = _ruff(["check", "--fix", "--quiet", "--exit-zero"], source, repo_root, relative_path)
    if fixed.returncode != 0:
        raise FormatError(f"{relative_path}: ruff check --fix failed: {_first_line(fixed.stderr)}")
    formatted = _ruff(["format", "--quiet"], fixed.stdout, repo_root, relative_path)
    if formatted.returncode != 0:
        raise FormatError(f"{relative_path}: ruff format failed: {_first_line(formatted.stderr)}")
    text = formatted.stdout
    width = line_length(repo_root, relative_path)
    wrapped = text if width is None else wrap_long_lines(text, width)
    if wrapped != text:  # a split string's parts may sit better after ruff lays the call out again
        formatted = _ruff(["format", "--quiet"], wrapped, repo_root, relative_path)
        if formatted.returncode != 0:
            raise FormatError(f"{relative_path}: ruff format failed: {_first_line(formatted.stderr)}")
        text = formatted.stdout
    findings = _check_findings(text, repo_root, relative_path)  # formatted just now: no format check
    if findings:
        marked = _noqa_in_reference(text, findings)
        if marked != text:
            text, findings = marked, _check_findings(marked, repo_root, relative_path)
    if findings:
        raise FormatError(f"{relative_path}: generated code has ruff findings: {findings[0]}")
    return text


# The user's reference, carried verbatim into a generated test between its banner (render.text.banner of this
# title) and a closing rule of dashes.
REFERENCE_TITLE = "PyTorch reference"
REFERENCE_START = f"# --- {REFERENCE_TITLE}"
REFERENCE_END = re.compile(r"^# -+$")
FINDING = re.compile(r"^[^:]+:(\d+):\d+: ([A-Z]+\d+) ")


def _noqa_in_reference(text: str, findings: list[str]) -> str:
    """``text`` with a ``# noqa`` on each line of the embedded reference that a finding names (a local computed and
    never read, ``acc = (logits.argmax(-1) == target).float().mean()``; a name like ``l`` where the target's rules
    flag it): the reference is kept as its author wrote it. Findings outside it are left for the caller to raise."""
    lines = text.split("\n")
    inside, start = set(), None
    for number, line in enumerate(lines, 1):
        if line.startswith(REFERENCE_START):
            start = number
        elif start is not None and REFERENCE_END.match(line):
            inside |= set(range(start + 1, number))
            start = None
    codes: dict[int, list[str]] = {}
    for finding in findings:
        match = FINDING.match(finding)
        if match and int(match.group(1)) in inside and match.group(2) not in codes.get(int(match.group(1)), []):
            codes.setdefault(int(match.group(1)), []).append(match.group(2))
    for number, names in codes.items():
        lines[number - 1] += f"  # noqa: {', '.join(names)} - as the reference has it"
    return "\n".join(lines)


def sort_imports(source: str, repo_root: Path, relative_path: str) -> str:
    """``source`` with its imports sorted as the target's isort settings want (``ruff check --select I --fix``)."""
    fixed = _ruff(["check", "--select", "I", "--fix", "--quiet", "--exit-zero"], source, repo_root, relative_path)
    if fixed.returncode != 0:
        raise FormatError(f"{relative_path}: ruff check --fix failed: {_first_line(fixed.stderr)}")
    return fixed.stdout


def format_snippet(source: str, repo_root: Path, relative_path: str) -> str:
    """``ruff format`` alone, for a piece of code that is inserted into an existing file."""
    formatted = _ruff(["format", "--quiet"], source, repo_root, relative_path)
    if formatted.returncode != 0:
        raise FormatError(f"{relative_path}: ruff format failed: {_first_line(formatted.stderr)}")
    return formatted.stdout


def lint_findings(source: str, repo_root: Path, relative_path: str) -> list[str]:
    """``ruff check`` and ``ruff format --check`` findings for one file's text, as one line each."""
    findings = _check_findings(source, repo_root, relative_path)
    fmt = _ruff(["format", "--check", "--quiet"], source, repo_root, relative_path)
    if fmt.returncode != 0:
        findings.append(f"{relative_path}: not formatted as ruff format would")
    return findings


def _check_findings(source: str, repo_root: Path, relative_path: str) -> list[str]:
    """``ruff check`` findings alone, one line each."""
    check = _ruff(["check", "--output-format", "concise", "--quiet"], source, repo_root, relative_path)
    if check.returncode == 0:
        return []
    findings = [line for line in check.stdout.splitlines() if line.strip()]
    if check.stderr.strip():
        findings.append(_first_line(check.stderr))
    return findings


def added_lint_findings(original: str, updated: str, repo_root: Path, relative_path: str) -> list[str]:
    """Findings ``updated`` has that ``original`` had not (a finding that only moved lines is not new)."""
    before = {_without_location(f) for f in lint_findings(original, repo_root, relative_path)}
    return [f for f in lint_findings(updated, repo_root, relative_path) if _without_location(f) not in before]


def _without_location(finding: str) -> str:
    # "path:12:5: F401 ..." -> "F401 ..."
    parts = finding.split(": ", 1)
    return parts[1] if len(parts) == 2 else finding


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "no output"
