"""``phase_4_summary.md``: what ``tune`` tried, what it kept, why it stopped, and the profile change it proposes."""

from __future__ import annotations

import datetime

from pathlib import Path

from tools.kernelgen.tune.loop import FOCUS_PREFIX
from tools.kernelgen.tune.loop import IN_PROGRESS
from tools.kernelgen.tune.loop import START
from tools.kernelgen.tune.loop import TuneResult
from tools.kernelgen.tune.space import describe
from tools.kernelgen.validate.workspace import ACCEPT

SUMMARY = "phase_4_summary.md"


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"


def _value(value) -> str:
    return "auto" if value is None else str(value)


def rejected_directions(result: TuneResult) -> list[str]:
    """Per field, the values that did not win: ``num_warps: 16 (reject: not faster ...), 32 (crash)``."""
    lines = []
    for name in result.space.fields:
        tried = [t for t in result.trials if t.focus == name and t.status != ACCEPT]
        parts = [f"{_value(t.configuration[name])} ({t.reason}; iteration {t.iteration})" for t in tried]
        skipped = result.skipped.get(name)
        if skipped:
            parts.append(
                f"{', '.join(_value(v) for v in skipped)} not run: the same ops file as a candidate already tried "
                f"(this kernel's code does not use {name} there)"
            )
        if parts:
            lines.append(f"- {name}: " + "; ".join(parts))
    return lines or ["- none: every candidate tried was accepted"]


def speedup_over_start(result: TuneResult) -> float | None:
    start, best = result.start, result.best
    if start is None or best is None or not start.outcome.ms or not best.outcome.ms:
        return None
    return start.outcome.ms / best.outcome.ms


def write_summary(
    workspace: Path,
    result: TuneResult,
    *,
    name: str,
    headline: list[str],
    profile_change: list[str],
    ncu_block: str | None = None,
) -> Path:
    """Write the summary beside ``iterations.tsv``; ``headline``: the kernel/checkout/settings lines;
    ``profile_change``: what happens to the profile (applied, left as a file with the command, or none)."""
    best, start = result.best, result.start
    if best is None:
        title = f"# tune {name}: stopped ({result.reason})"
    else:
        gain = speedup_over_start(result)
        so_far = " so far" if result.reason == IN_PROGRESS else ""
        title = f"# tune {name}: best{so_far} at iteration {best.iteration}" + (
            f" ({gain:.3f}x the starting kernel)" if gain else ""
        )
    eager = start.outcome.eager_ms if start else None
    lines = [title, "", *headline]
    lines.append(f"- written: {datetime.datetime.now().isoformat(timespec='seconds')}")
    if best is not None:
        speedup = f", {eager / best.outcome.ms:.2f}x eager PyTorch" if eager and best.outcome.ms else ""
        lines.append(
            f"- accepted iteration: {best.iteration} ({describe(best.configuration)}): {_ms(best.outcome.ms)} ms"
            f"{speedup}; its ops file is `kernel_function_best.py`"
        )
    lines.append(f"- convergence: {result.detail}; {len(result.trials)} candidate(s) evaluated")
    lines.extend(["", "## Profile change", "", *profile_change])
    lines.extend(
        [
            "",
            "## Candidates (rows of iterations.tsv)",
            "",
            "| iter | focus | configuration | ms | speedup vs eager | status | description |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
    )
    for trial in result.trials:
        ms = trial.outcome.ms
        speedup = f"{eager / ms:.3f}" if eager and ms else "-"
        focus = START if trial.focus == START else f"{FOCUS_PREFIX}{trial.focus}"
        lines.append(
            f"| {trial.iteration} | {focus} | {describe(trial.configuration)} | {_ms(ms)} | {speedup} | "
            f"{trial.status} | {trial.description.replace('|', '/')} |"
        )
    lines.extend(["", "## Rejected directions", "", *rejected_directions(result)])
    if ncu_block:
        lines.extend(["", "## Nsight Compute (the best candidate)", "", "```", ncu_block, "```"])
    path = workspace / SUMMARY
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
