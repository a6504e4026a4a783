"""Stage 2: the purity rules of ``purity.py`` applied to the kernel's ops file."""

from __future__ import annotations

from tools.kernelgen.render.vectors import hold_vectors_whole
from tools.kernelgen.validate.purity import check_source
from tools.kernelgen.validate.report import FAIL
from tools.kernelgen.validate.report import PASS
from tools.kernelgen.validate.report import WARN
from tools.kernelgen.validate.report import StageResult
from tools.kernelgen.validate.report import Target


def run(target: Target) -> StageResult:
    path = target.paths["ops"]
    profile = target.profile
    grad_names = target.grad_names
    if grad_names is None:
        parameters = hold_vectors_whole(profile).parameters  # as the Function takes them: a held vector whole
        grad_names = [t.name for t in profile.inputs if t.requires_grad] + [p.name for p in parameters]
    findings = check_source(target.repo.read(path), path, grad_names)
    for finding in findings:
        print(f"  {finding}")
    if findings and not target.recorded:
        # The rules describe what kernelgen generates; a hand-written kernel's host-side checks are reported only.
        return StageResult(
            "purity", WARN, f"{len(findings)} finding(s) in hand-written code, not a gate; first: {findings[0]}"
        )
    if findings:
        return StageResult("purity", FAIL, f"{len(findings)} violation(s); first: {findings[0]}")
    language = "TileLang" if profile.backend == "tilelang" else "Triton"
    return StageResult("purity", PASS, f"{path}: kernels are pure {language}, wrappers allocate/reshape/launch only")
