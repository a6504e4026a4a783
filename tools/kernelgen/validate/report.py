"""What every stage hands back, and how the command prints it."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.repo import LigerRepo

PASS = "PASS"
FAIL = "FAIL"
SKIP = "SKIP"
WARN = "WARN"  # ran and passed its gates, with a figure worth a look (slower than eager PyTorch)
NOT_RUN = "NOT RUN"


@dataclass
class Target:
    """The kernel under validation: checkout, name, its files by role and the profile of its reference.

    ``call``: how the workers call a kernel that is not checked against its own generation record (its functional,
    arguments by name; see ``harness.KernelUnderTest.call_kernel``), None for one that is. ``reference``: where the
    reference came from, in words. ``recorded``: the kernel has a generation record (kernelgen wrote it)."""

    repo: LigerRepo
    name: str
    paths: dict[str, str]
    profile: KernelProfile
    workspace: Path
    call: dict | None = None
    reference: str = "its generation record"
    recorded: bool = True
    grad_names: list[str] | None = None  # the kernel's names of what needs a gradient (purity), when not the profile's
    samples: Path | None = None  # a test-case sampler (``validate --samples``) the correctness stages also run


@dataclass
class StageResult:
    """``crashed``: the stage could not run what it checks (the kernel does not import, a worker died, the kernel
    raised), as opposed to running it and finding it wrong; iterations.tsv calls such a run a crash."""

    stage: str
    verdict: str
    summary: str
    figures: dict = field(default_factory=dict)
    crashed: bool = False

    @property
    def failed(self) -> bool:
        return self.verdict == FAIL


def header(index: int, total: int, stage: str) -> str:
    return f"== [{index}/{total}] {stage} " + "=" * max(3, 60 - len(stage))


def verdict_line(result: StageResult) -> str:
    return f"{result.stage}: {result.verdict} ({result.summary})"
