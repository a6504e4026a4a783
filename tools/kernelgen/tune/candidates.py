"""Rendering and checking ``tune``'s candidates in a scratch copy of the checkout, on a GPU.

A candidate is the kernel's recorded profile with another tiling. Its ops file is rendered by the generator's
render step (Jinja2 templates; ``ruff`` formats it where ruff is installed, and it runs the same unformatted), so
tuning needs neither libcst nor ruff on the GPU machine. The scratch copy holds the checkout's ``src/`` and the
kernel's record; each candidate replaces the ops file there (and its stale bytecode), then runs validate's own
workers against it: the purity rules on its text, the correctness stages (``correctness_worker``), and only if
they pass the timing (``performance_worker``, the kernel alone after the first: GPU-side wait before each timed
step, median of CUDA events). Their JSON reports land in ``WORKSPACE/tune/``.
"""

from __future__ import annotations

import copy
import shutil
import tempfile

from pathlib import Path

from tools.kernelgen.formatting import ruff_available
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.record import read_record_text
from tools.kernelgen.record import record_file
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.tune.loop import Outcome
from tools.kernelgen.validate.report import Target
from tools.kernelgen.validate.workspace import FAILED
from tools.kernelgen.validate.workspace import PASSED

PERFORMANCE_TIMEOUT_S = 600


def with_tiling(profile: KernelProfile, configuration: dict) -> KernelProfile:
    candidate = copy.deepcopy(profile)
    for field, value in configuration.items():
        setattr(candidate.tiling, field, value)
    candidate.fill_defaults()
    return candidate


def render_ops(repo: LigerRepo, profile: KernelProfile, formatted: bool) -> str:
    """The ops file the generator writes for ``profile`` in ``repo`` (``formatted``: through ruff, as ``new``
    writes it; otherwise the template's text, the same program)."""
    from tools.kernelgen.render import render_kernel

    profile.validate(f"tiling candidate for {profile.operation_name}")
    path = kernel_paths(profile.operation_name)["ops"]
    text = render_kernel(profile).files[path]
    if formatted:
        from tools.kernelgen.formatting import format_source

        text = format_source(text, repo.root, path)
    return text


def stage_scratch(repo: LigerRepo, name: str, folder: Path) -> LigerRepo:
    """A checkout in ``folder`` with ``repo``'s library and the kernel's record, enough for validate's workers."""
    shutil.copytree(repo.root / "src", folder / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    record = record_file(folder, name)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(read_record_text(repo.root, name), encoding="utf-8")
    for part in ("test", "benchmark/scripts"):
        (folder / part).mkdir(parents=True, exist_ok=True)
    return LigerRepo(folder)


class CandidateRunner:
    """Renders candidates for the kernel ``name`` of ``repo`` and evaluates them in a scratch copy (a context
    manager: the copy is removed on exit)."""

    def __init__(self, repo: LigerRepo, name: str, profile: KernelProfile, workspace: Path):
        self.repo = repo
        self.name = name
        self.profile = profile
        self.reports = workspace / "tune"
        self.formatted = ruff_available()
        self.folder: Path | None = None
        self.target: Target | None = None

    def __enter__(self) -> CandidateRunner:
        self.folder = Path(tempfile.mkdtemp(prefix=f"kernelgen-tune-{self.name}-"))
        scratch = stage_scratch(self.repo, self.name, self.folder)
        self.reports.mkdir(parents=True, exist_ok=True)
        self.target = Target(
            repo=scratch, name=self.name, paths=kernel_paths(self.name), profile=self.profile, workspace=self.reports
        )
        return self

    def __exit__(self, *exc) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def render(self, configuration: dict) -> str:
        return render_ops(self.repo, with_tiling(self.profile, configuration), self.formatted)

    def install(self, source: str) -> None:
        """Put ``source`` in the scratch copy as the kernel's ops file (its cached bytecode goes: a candidate of the
        same size written within the same second would otherwise run the previous one's)."""
        path = self.target.repo.root / self.target.paths["ops"]
        path.write_text(source, encoding="utf-8")
        for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            cached.unlink()

    def evaluate(self, configuration: dict, source: str, first: bool) -> Outcome:
        from tools.kernelgen.validate.correctness import WORKER as CORRECTNESS
        from tools.kernelgen.validate.correctness import result_of
        from tools.kernelgen.validate.performance import WORKER as PERFORMANCE
        from tools.kernelgen.validate.purity import check_source
        from tools.kernelgen.validate.workers import WorkerFailed
        from tools.kernelgen.validate.workers import run_worker

        grads = [t.name for t in self.profile.inputs if t.requires_grad] + [p.name for p in self.profile.parameters]
        findings = check_source(source, self.target.paths["ops"], grads)
        if findings:
            return Outcome("-", FAILED, detail=f"{len(findings)} purity finding(s); first: {findings[0]}")
        self.install(source)
        try:
            report = run_worker(CORRECTNESS, self.target, "correctness.json")
        except WorkerFailed as error:
            return Outcome("-", PASSED, crashed=True, detail=f"the correctness run crashed: {error}")
        checked = result_of(report)
        if checked.failed:
            return Outcome(FAILED, PASSED, crashed=checked.crashed, detail=checked.summary)
        providers = "liger,torch" if first else "liger"
        try:
            timing = run_worker(
                PERFORMANCE, self.target, "performance.json", PERFORMANCE_TIMEOUT_S, ("--providers", providers)
            )
        except WorkerFailed as error:
            return Outcome(PASSED, PASSED, crashed=True, detail=f"the timing run crashed: {error}")
        if "skipped" in timing:
            return Outcome(PASSED, PASSED, crashed=True, detail="the timing run found no GPU")
        liger = timing["providers"]["liger"]
        if "ms" not in liger:
            return Outcome(PASSED, PASSED, crashed=True, detail=f"at the benchmark shape: {liger['error']}")
        eager = timing["providers"].get("torch", {}).get("ms")
        shape = "x".join(str(n) for n in timing["shape"])
        detail = f"{shape} {timing['dtype']}, {timing.get('bandwidth_tb_s', 0):.2f} TB/s"
        return Outcome(PASSED, PASSED, ms=liger["ms"], eager_ms=eager, detail=detail)
