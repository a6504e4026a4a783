"""``validate --ncu``: Nsight Compute's per-kernel figures for one step (``ncu.py``), before the performance stage
so that its ``next_action`` can name the bottleneck. Informational: a skip (no GPU, no ncu, no counters) is one
line, and the stage never fails validation."""

from __future__ import annotations

import json

from tools.kernelgen.validate import ncu
from tools.kernelgen.validate.report import PASS
from tools.kernelgen.validate.report import SKIP
from tools.kernelgen.validate.report import StageResult
from tools.kernelgen.validate.report import Target
from tools.kernelgen.validate.workers import spec_file
from tools.kernelgen.validate.workers import worker_env


def run(target: Target, cuda: bool, label: str = "") -> StageResult:
    from tools.kernelgen.repo import default_repo_root

    spec = spec_file(target)
    kernels, skipped = ncu.profile(
        str(target.repo.root),
        target.name,
        cuda,
        str(spec) if spec else None,
        env=worker_env(),
        cwd=default_repo_root(),
    )
    if skipped:
        return StageResult("ncu", SKIP, skipped)
    print(ncu.block(kernels, label))
    (target.workspace / "ncu.json").write_text(json.dumps(kernels, indent=2), encoding="utf-8")
    longest = kernels[0]
    return StageResult(
        "ncu",
        PASS,
        f"{len(kernels)} kernel(s) profiled; longest {longest['name'][:40]}: {longest['bottleneck']} bound",
        {"kernels": kernels},
    )
