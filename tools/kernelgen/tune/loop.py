"""The bookkeeping of ``tune``: which candidate next, accept/reject/crash, the best so far and why the loop stopped.

Coordinate descent from the kernel's own configuration: each candidate changes one field of the best so far, the
fields taken in turn with their nearest values first (every field's first value, then every field's second...),
so that a small budget reaches every field; a candidate is accepted when it is correct (purity and the correctness stages PASSED)
and faster than the best so far by more than ``min_gain`` (run-to-run noise is a few percent), and then it is the
best. It stops when the budget is spent, after ``patience`` candidates in a row without an improvement, or when
every one-field change of the best has been tried. A candidate whose rendered ops file is the text of one tried
already (a field the kernel's code does not use, e.g. ``programs_per_sm`` without parameter gradients) is skipped
without a row. Rendering and evaluating are injected, so the logic runs on the CPU under test with fake timings.
"""

from __future__ import annotations

import hashlib

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from tools.kernelgen.tune.space import SearchSpace
from tools.kernelgen.tune.space import describe
from tools.kernelgen.validate.workspace import ACCEPT
from tools.kernelgen.validate.workspace import CRASH
from tools.kernelgen.validate.workspace import PASSED
from tools.kernelgen.validate.workspace import REJECT
from tools.kernelgen.validate.workspace import IterationRow
from tools.kernelgen.validate.workspace import append_row

START = "baseline"
# iterations.tsv's focus of a candidate that changed one tiling field: tiling.FIELD (the start's is START).
FOCUS_PREFIX = "tiling."
BUDGET_SPENT = "budget spent"
NO_IMPROVEMENT = "no improvement"
ALL_TRIED = "all candidates tried"
START_FAILED = "starting kernel failed"
IN_PROGRESS = "in progress"  # the interim summary's reason, while candidates are still being tried


@dataclass(frozen=True)
class Outcome:
    """What evaluating one candidate found. ``correctness``/``purity``: PASSED, FAILED or ``-`` (not run);
    ``crashed``: it could not be built or run; ``eager_ms``: eager PyTorch's time (measured with the first)."""

    correctness: str
    purity: str
    ms: float | None = None
    eager_ms: float | None = None
    crashed: bool = False
    detail: str = ""


@dataclass
class Trial:
    iteration: int
    configuration: dict
    focus: str  # the field this candidate changed, START for the kernel's own configuration
    status: str
    description: str
    outcome: Outcome
    source: str | None = None
    reason: str = ""  # the verdict in a few words (for the summary's rejected directions)


@dataclass
class TuneResult:
    space: SearchSpace
    trials: list[Trial] = field(default_factory=list)
    best: Trial | None = None
    reason: str = ""  # one of the constants above
    detail: str = ""  # the reason in words
    skipped: dict[str, list] = field(default_factory=dict)  # field -> values whose code equals a tried candidate's

    @property
    def start(self) -> Trial | None:
        return self.trials[0] if self.trials else None


def _value(value) -> str:
    return "auto" if value is None else str(value)


class TuneLoop:
    def __init__(
        self,
        space: SearchSpace,
        render: Callable[[dict], str],
        evaluate: Callable[[dict, str, bool], Outcome],
        workspace: Path,
        *,
        budget: int,
        patience: int,
        min_gain: float = 0.02,
        on_trial: Callable[[Trial], None] | None = None,
        on_progress: Callable[[TuneResult], None] | None = None,
    ):
        self.space = space
        self.render = render
        self.evaluate = evaluate
        self.workspace = workspace
        self.budget = budget
        self.patience = patience
        self.min_gain = min_gain
        self.on_trial = on_trial
        self.on_progress = on_progress  # after each candidate is judged, the result so far (best updated)

    def run(self, start: dict) -> TuneResult:
        result = TuneResult(self.space)
        seen: set[str] = set()
        first = self._try(result, dict(start), START, seen)
        if first is None or first.status != ACCEPT:
            result.reason = START_FAILED
            what = first.description if first else "its ops file does not render"
            result.detail = f"the starting kernel is not a correct, running kernel ({what}); fix it before tuning"
            return result
        result.best = first
        self._progress(result)
        since_improvement = 0
        while True:
            improved = False
            for name, value in self.space.moves():
                candidate = {**result.best.configuration, name: value}
                if candidate == result.best.configuration:
                    continue
                source = self._render(result, candidate, name, seen)
                if source is None:
                    continue
                if len(result.trials) >= self.budget:
                    result.reason, result.detail = BUDGET_SPENT, f"budget spent ({self.budget} candidates)"
                    return result
                trial = self._evaluate(result, candidate, name, source)
                if trial.status == ACCEPT:
                    result.best = trial
                    since_improvement = 0
                    improved = True
                else:
                    since_improvement += 1
                self._progress(result)
                if since_improvement >= self.patience:
                    result.reason = NO_IMPROVEMENT
                    result.detail = f"no improvement in {self.patience} candidates in a row"
                    return result
            if not improved:
                result.reason = ALL_TRIED
                result.detail = "all candidates tried (every one-field change of the best configuration)"
                return result

    def _progress(self, result: TuneResult) -> None:
        if self.on_progress is not None:
            self.on_progress(result)

    def _try(self, result: TuneResult, configuration: dict, focus: str, seen: set[str]) -> Trial | None:
        source = self._render(result, configuration, focus, seen)
        return None if source is None else self._evaluate(result, configuration, focus, source)

    def _render(self, result: TuneResult, configuration: dict, focus: str, seen: set[str]) -> str | Exception | None:
        """The candidate's ops file (the exception when it does not render); None when that code was tried."""
        key = repr(sorted(configuration.items(), key=lambda item: item[0]))
        if key in seen:  # tried in an earlier pass
            return None
        seen.add(key)
        try:
            source = self.render(configuration)
        except Exception as error:  # a template that cannot render this configuration: the candidate crashed
            return error
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
        if digest in seen:  # another configuration, the same code: the kernel does not use this field
            result.skipped.setdefault(focus, []).append(configuration.get(focus))
            return None
        seen.add(digest)
        return source

    def _evaluate(self, result: TuneResult, configuration: dict, focus: str, source: str | Exception) -> Trial:
        if isinstance(source, Exception):
            detail = f"does not render: {type(source).__name__}: {source}"
            return self._record(result, configuration, focus, Outcome("-", "-", crashed=True, detail=detail), None)
        outcome = self.evaluate(configuration, source, not result.trials)
        return self._record(result, configuration, focus, outcome, source)

    def _record(self, result, configuration, focus, outcome: Outcome, source) -> Trial:
        best = result.best
        status, text, reason = self._judge(outcome, best, not result.trials)
        if focus == START:
            description = f"starting configuration ({describe(configuration)}): {text}"
        else:
            was = best.configuration[focus] if best else None
            description = f"{focus} {_value(was)} -> {_value(configuration[focus])}: {text}"
        eager = result.trials[0].outcome.eager_ms if result.trials else outcome.eager_ms
        speedup = eager / outcome.ms if eager and outcome.ms else None
        focus_cell = START if focus == START else f"{FOCUS_PREFIX}{focus}"
        row = IterationRow(speedup, outcome.correctness, outcome.purity, focus_cell, status, description)
        iteration = append_row(self.workspace, row)
        trial = Trial(iteration, configuration, focus, status, description, outcome, source, reason)
        result.trials.append(trial)
        if self.on_trial is not None:
            self.on_trial(trial)
        return trial

    def _judge(self, outcome: Outcome, best: Trial | None, first: bool) -> tuple[str, str, str]:
        """(status, description, the reason in a few words)."""
        if outcome.crashed:
            return CRASH, f"crashed: {outcome.detail}", f"crash: {_short(outcome.detail)}"
        if outcome.purity != PASSED or outcome.correctness != PASSED:
            what = "purity" if outcome.purity != PASSED else "correctness"
            verdict = outcome.purity if what == "purity" else outcome.correctness
            detail = outcome.detail or "no details"
            return REJECT, f"incorrect ({what} {verdict}): {detail}", f"incorrect: {_short(detail)}"
        if outcome.ms is None:
            detail = outcome.detail or "no details"
            return CRASH, f"crashed: no time measured ({detail})", "crash: no time measured"
        if first or best is None:
            extra = f" ({outcome.detail})" if outcome.detail else ""
            return ACCEPT, f"{outcome.ms:.4f} ms, correct{extra}", f"{outcome.ms:.4f} ms"
        if outcome.ms < best.outcome.ms * (1.0 - self.min_gain):
            gain = best.outcome.ms / outcome.ms
            text = (
                f"{outcome.ms:.4f} ms, {gain:.3f}x faster than the best so far ({best.outcome.ms:.4f} ms, "
                f"iteration {best.iteration})"
            )
            return ACCEPT, text, f"{outcome.ms:.4f} ms, {gain:.3f}x faster"
        text = (
            f"not faster: {outcome.ms:.4f} ms vs the best {best.outcome.ms:.4f} ms (iteration {best.iteration}; an "
            f"accept needs {100 * self.min_gain:g}% less)"
        )
        return REJECT, text, f"not faster: {outcome.ms:.4f} ms vs {best.outcome.ms:.4f}"


def _short(text: str, limit: int = 90) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
