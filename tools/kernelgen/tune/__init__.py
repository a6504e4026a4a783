"""``python -m tools.kernelgen tune NAME``: the optimization loop of a generated kernel's launch settings, on a GPU.

It sweeps the tiling fields the kernel's ops template reads (``space.py``) by coordinate descent from the kernel's
own configuration (``loop.py``); each candidate is rendered from the kernel's record with that tiling and checked
in a scratch copy of the checkout: purity, the five correctness stages, then the timing (``candidates.py``). Each
candidate appends a row to ``WORKSPACE/iterations.tsv`` (status accept, reject or crash), the best one's ops file
is kept as ``kernel_function_best.py`` and ``phase_4_summary.md`` says what was accepted, what was rejected and
why the loop stopped. When the best is not the kernel's own tiling, the profile with the new tiling is written
as ``tuned_profile.yaml`` and the kernel is regenerated from it through ``modify`` (so the generation record
stays true) where libcst and ruff are installed; elsewhere (a GPU machine with a copy of the checkout) the file
and the command that applies it are left for the checkout it came from.

Exit status: 0 when the loop ran (with or without an improvement) and also when there is no GPU (one ``SKIP``
line, nothing written: CPU-only CI passes, as validate's GPU stages do); 1 when the kernel as it is fails a
check (nothing to tune from); 2 for bad input, one line: not a checkout, unknown kernel, a hand-written kernel
(no generation record: tune re-tiles generated kernels only), an ops file edited since generation.
"""

from __future__ import annotations

import dataclasses

from pathlib import Path

EXIT_START_FAILED = 1
BEST = "kernel_function_best.py"
TUNED_PROFILE = "tuned_profile.yaml"
NO_GPU = "no GPU: tune times every candidate on a CUDA device; nothing written"


class TuneError(ValueError):
    """Bad input to ``tune``: one line, nothing written."""


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def open_kernel(name: str, repo_path: str | None):
    """The checkout, the kernel's recorded profile and its search space; raises ``TuneError`` for what tune
    cannot re-tile."""
    from tools.kernelgen.layout import check_kernel_name
    from tools.kernelgen.layout import kernel_paths
    from tools.kernelgen.record import content_hash
    from tools.kernelgen.record import find_record
    from tools.kernelgen.record import read_record
    from tools.kernelgen.record import read_record_text
    from tools.kernelgen.record import record_key
    from tools.kernelgen.record import recorded_hashes
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.tune.space import search_space

    check_kernel_name(name)
    repo = LigerRepo.open(repo_path)
    ops = kernel_paths(name)["ops"]
    if not repo.exists(ops):
        raise TuneError(f"no kernel '{name}' in {repo.root} ({ops} is missing)")
    found = find_record(repo.root, name)
    record = record_key(repo.root, name, found)
    if found is None:
        raise TuneError(
            f"'{name}' has no generation record ({record}): it is hand-written, and tune re-tiles generated kernels "
            f"only (it renders each candidate from the record); change its launch settings by hand and check them "
            f"with: validate {name}"
        )
    recorded = recorded_hashes(read_record_text(repo.root, name)).get(ops)
    if recorded is not None and recorded != content_hash(repo.read(ops)):
        raise TuneError(
            f"{ops} was edited since kernelgen generated it: tune renders candidates from {record} and would drop "
            f"the edit; fold it into the profile (modify {name} --profile FILE) or tune by hand"
        )
    profile = read_record(repo.root, name)
    space = search_space(profile)
    if not space.fields:
        raise TuneError(f"nothing to tune: the {profile.template} template of '{name}' reads no tiling field")
    return repo, profile, space


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def generation_tools_missing() -> list[str]:
    """What ``modify`` needs that this machine lacks."""
    from tools.kernelgen.formatting import ruff_available

    try:
        import libcst  # noqa: F401
    except ImportError:
        missing = ["libcst"]
    else:
        missing = []
    return missing + ([] if ruff_available() else ["ruff"])


def write_profile_change(repo, profile, result, workspace: Path, apply: bool) -> list[str]:
    """Leave the best tiling as a profile (and apply it when asked and possible); the summary's lines about it."""
    from tools.kernelgen.profile import dump_yaml
    from tools.kernelgen.tune.candidates import with_tiling
    from tools.kernelgen.tune.space import describe

    best, start = result.best, result.start
    if best is None:
        return ["- none: the loop stopped before it had a best candidate"]
    if best.configuration == start.configuration:
        return [f"- none: the kernel's own tiling ({describe(start.configuration)}) was the best; its profile stays"]
    changed = ", ".join(
        f"{field} {start.configuration[field] or 'auto'} -> {best.configuration[field] or 'auto'}"
        for field in best.configuration
        if best.configuration[field] != start.configuration[field]
    )
    path = workspace / TUNED_PROFILE
    command = f"python -m tools.kernelgen modify {profile.operation_name} --profile {_relative(path, repo.root)}"
    header = f"# tune {profile.operation_name}: iteration {best.iteration} ({changed}); apply with: {command}\n"
    path.write_text(header + dump_yaml(with_tiling(profile, best.configuration)), encoding="utf-8")
    lines = [f"- tiling: {changed}", f"- profile: `{TUNED_PROFILE}` beside this file", f"- apply: `{command}`"]
    missing = generation_tools_missing()
    if not apply:
        lines.append("- not applied (--no-apply)")
    elif missing:
        lines.append(
            f"- not applied here: regeneration needs {' and '.join(missing)}; run the command in the checkout "
            f"this one was copied from, with {TUNED_PROFILE} copied there"
        )
    else:
        lines.extend(_apply(repo, profile.operation_name, path, workspace / BEST))
    return lines


def _apply(repo, name: str, profile_path: Path, best_path: Path) -> list[str]:
    """Regenerate the kernel from the tuned profile as ``modify NAME --profile FILE`` does (the normal path: a
    three-way merge that keeps hand edits, and the record updated with the new tiling)."""
    from tools.kernelgen.checkout_lock import checkout_lock

    print(f"applying {TUNED_PROFILE}: modify {name} --profile {profile_path}", flush=True)
    with checkout_lock(repo, f"tune {name}"):  # from reading the kernel's files to writing them
        return _apply_locked(repo, name, profile_path, best_path)


def _apply_locked(repo, name: str, profile_path: Path, best_path: Path) -> list[str]:
    from tools.kernelgen.layout import kernel_paths
    from tools.kernelgen.modify import ModifyError
    from tools.kernelgen.modify import plan_modify
    from tools.kernelgen.modify import profile_for_modify
    from tools.kernelgen.modify import verify_plan
    from tools.kernelgen.writer import write_all

    try:
        profile = profile_for_modify(repo, name, profile_path=str(profile_path))
        plan = plan_modify(repo, name, profile)
        if plan.conflicted:
            return [f"- not applied: modify found {plan.conflict_count} conflict(s); run the command above by hand"]
        if plan.verify is not None:
            verify_plan(repo, plan)
    except ModifyError as error:
        return [f"- not applied: {error}"]
    print(plan.report_text(), end="")
    write_all(repo.root, plan.changes.changes, journal=repo.state_dir())
    ops = repo.read(kernel_paths(name)["ops"])
    same = ops == best_path.read_text(encoding="utf-8")
    return [
        f"- applied: modify regenerated '{name}' and its record from it; the ops file "
        + ("is kernel_function_best.py" if same else "differs from kernel_function_best.py (formatting)")
    ]


def run(
    name: str,
    *,
    repo: str | None = None,
    workspace: str | None = None,
    budget: int = 16,
    patience: int = 6,
    min_gain: float = 0.02,
    profile_ncu: bool = False,
    apply: bool = True,
) -> int:
    from tools.kernelgen.tune.candidates import CandidateRunner
    from tools.kernelgen.tune.loop import IN_PROGRESS
    from tools.kernelgen.tune.loop import TuneLoop
    from tools.kernelgen.tune.space import describe
    from tools.kernelgen.tune.summary import write_summary
    from tools.kernelgen.validate.workspace import create_workspace
    from tools.kernelgen.validate.workspace import default_workspace

    if budget < 1 or patience < 1:
        raise TuneError(f"--budget and --patience take a positive number of candidates (got {budget}, {patience})")
    if not 0.0 <= min_gain < 1.0:
        raise TuneError(f"--min-gain is a fraction in [0, 1) (got {min_gain})")
    checkout, profile, space = open_kernel(name, repo)
    if not cuda_available():
        print(f"tune {name}: SKIP ({NO_GPU})")
        return 0
    folder = create_workspace(Path(workspace).resolve() if workspace else default_workspace(checkout.root, name))
    start = space.configuration(profile)
    print(f"kernelgen tune '{name}' in {checkout.root} (workspace {folder})", flush=True)
    print(f"start: {describe(start)}; budget {budget}, patience {patience}, min gain {100 * min_gain:g}%")
    for field in space.fields:
        print(f"  {field}: {', '.join('auto' if v is None else str(v) for v in space.values[field])}")
    ncu_block = None

    def headline(result, formatted: bool = True) -> list[str]:
        return [
            f"- kernel: `{profile.function_class_name}` (tier {profile.tier}, {profile.template} template), checkout "
            f"`{checkout.root}`",
            f"- measured: {result.start.outcome.detail if result.start else '-'}, forward+backward, median of "
            f"CUDA-event timings (validate's performance worker)",
            "- space: " + "; ".join(f"{f} {{{', '.join(_shown(v) for v in space.values[f])}}}" for f in space.fields),
            f"- settings: budget {budget}, patience {patience}, min gain {100 * min_gain:g}%"
            + ("" if formatted else "; candidates rendered without ruff (the same program, unformatted)"),
        ]

    def interim_summary(result) -> None:
        """The summary so far, rewritten after each candidate: a run stopped from outside (a step's timeout) still
        leaves the best so far and what was rejected, beside the rows of iterations.tsv."""
        so_far = dataclasses.replace(
            result,
            reason=IN_PROGRESS,
            detail=f"{IN_PROGRESS}: {len(result.trials)} candidate(s) so far (rewritten after each, and at the end)",
        )
        write_summary(folder, so_far, name=name, headline=headline(so_far), profile_change=["- none yet"])

    with CandidateRunner(checkout, name, profile, folder) as runner:
        loop = TuneLoop(
            space,
            runner.render,
            runner.evaluate,
            folder,
            budget=budget,
            patience=patience,
            min_gain=min_gain,
            on_trial=lambda trial: print(f"[{trial.iteration}] {trial.status:<6} {trial.description}", flush=True),
            on_progress=interim_summary,
        )
        result = loop.run(start)
        if result.best is not None:
            (folder / BEST).write_text(result.best.source, encoding="utf-8")
            if profile_ncu:
                ncu_block = _profile_best(runner, result.best)
        formatted = runner.formatted
    changes = write_profile_change(checkout, profile, result, folder, apply)
    summary = write_summary(
        folder, result, name=name, headline=headline(result, formatted), profile_change=changes, ncu_block=ncu_block
    )
    print("=" * 70)
    for line in changes:
        print(line.removeprefix("- "))
    print(f"tune {name}: {result.detail} (summary: {summary})")
    return 0 if result.best is not None else EXIT_START_FAILED


def _shown(value) -> str:
    return "auto" if value is None else str(value)


def _profile_best(runner, best) -> str | None:
    from tools.kernelgen.validate import ncu
    from tools.kernelgen.validate.ncu_stage import run as ncu_run

    runner.install(best.source)
    result = ncu_run(runner.target, cuda=True, label=f"iteration {best.iteration}")
    if not result.figures.get("kernels"):
        print(f"ncu: SKIP ({result.summary})")
        return f"ncu: skipped ({result.summary})"
    return ncu.block(result.figures["kernels"], f"iteration {best.iteration}")


__all__ = ["TuneError", "run"]
