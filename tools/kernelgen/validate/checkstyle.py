"""Stage 1: ``ruff check`` and ``ruff format --check`` on the kernel's files, with the target checkout's config."""

from __future__ import annotations

from tools.kernelgen.formatting import lint_findings
from tools.kernelgen.formatting import ruff_available
from tools.kernelgen.validate.report import FAIL
from tools.kernelgen.validate.report import PASS
from tools.kernelgen.validate.report import SKIP
from tools.kernelgen.validate.report import StageResult
from tools.kernelgen.validate.report import Target

ROLES = ("ops", "module", "test", "benchmark")


def run(target: Target) -> StageResult:
    if not ruff_available():
        # Not a finding in each file: the lint is run where ruff is (the checkout the kernel was generated in).
        return StageResult(
            "checkstyle", SKIP, "ruff is not installed here (pip install ruff): the files were not linted"
        )
    findings = []
    for role in ROLES:
        path = target.paths[role]
        if not target.repo.exists(path):
            findings.append(f"{path}: missing (every kernel has its {role} file)")
            continue
        findings.extend(lint_findings(target.repo.read(path), target.repo.root, path))
    for finding in findings:
        print(f"  {finding}")
    if findings:
        return StageResult("checkstyle", FAIL, f"{len(findings)} finding(s); first: {findings[0]}")
    return StageResult("checkstyle", PASS, f"{len(ROLES)} files ruff-clean", {"files": len(ROLES)})
