"""The agentic workflow's deterministic half: the workspace request (``workspace``) and the audit (``audit``).

The skill ``.claude/skills/liger-kernel-gen/`` runs a supervisor, an orchestrator and phase workers on top of the
CLI; they pass data through the workspace ``.kernelgen-work/NAME/`` (``artifacts.py`` lists its files). ``audit``
is what the supervisor believes instead of any agent's word: the static checks of ``static_checks.py`` and the
re-run of ``runtime.py``, printed as a checklist followed by ``AUDIT_PASSED`` or by ``AUDIT_FAILURE`` /
``RUNTIME_FAILURE`` blocks that a fresh orchestrator takes as its retry context.
"""

from __future__ import annotations

from pathlib import Path

from tools.kernelgen.workflow.request import WorkflowError

EXIT_FAILED = 1


def _phase_number(phase: str) -> int:
    return int(phase) if phase.isdigit() else 0


def failure_block(title: str, name: str, workspace: Path, failed: list) -> list[str]:
    lines = [
        title,
        f"kernel: {name}",
        f"workspace: {workspace}",
        f"failed_checks: {', '.join(check.name for check in failed)}",
        f"redo_from_phase: {min(_phase_number(check.phase) for check in failed)}",
    ]
    lines += [f"- {check.name} (phase {check.phase}): {check.evidence}" for check in failed]
    return lines


def render(name: str, workspace: Path, checks: list, static_only: bool) -> str:
    from tools.kernelgen.workflow.static_checks import FAIL

    width = max(len(check.name) for check in checks)
    lines = [f"AUDIT_CHECKLIST {name} (workspace {workspace})"]
    lines += [f"[{c.verdict}] {c.name:<{width}}  phase {c.phase:<2} {c.evidence}" for c in checks]
    static = [c for c in checks if c.verdict == FAIL and not c.runtime]
    runtime = [c for c in checks if c.verdict == FAIL and c.runtime]
    if static:
        lines += failure_block("AUDIT_FAILURE", name, workspace, static)
    if runtime:
        lines += failure_block("RUNTIME_FAILURE", name, workspace, runtime)
    if not static and not runtime:
        lines.append(
            "AUDIT_PASSED"
            + (" (static checks only: --static; the runtime re-check did not run)" if static_only else "")
        )
    return "\n".join(lines)


def audit(
    name: str,
    *,
    repo: str | None = None,
    workspace: str | None = None,
    report: str | None = None,
    static_only: bool = False,
) -> int:
    """Print the audit of kernel ``name``'s workflow run; 0 when every check passes, 1 otherwise."""
    from tools.kernelgen.layout import check_kernel_name
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.validate.workspace import default_workspace
    from tools.kernelgen.workflow.artifacts import ArtifactError
    from tools.kernelgen.workflow.artifacts import parse_orchestrator_report
    from tools.kernelgen.workflow.request import read_request
    from tools.kernelgen.workflow.static_checks import SKIP
    from tools.kernelgen.workflow.static_checks import Check
    from tools.kernelgen.workflow.static_checks import Workspace
    from tools.kernelgen.workflow.static_checks import run_static

    check_kernel_name(name)
    checkout = LigerRepo.open(repo)
    folder = Path(workspace).resolve() if workspace else default_workspace(checkout.root, name)
    if not folder.is_dir():
        raise WorkflowError(f"--workspace {folder}: no such folder")
    request = read_request(folder)
    if request.kernel != name:
        raise WorkflowError(f"{folder}/request.json is the request for '{request.kernel}', not '{name}'")
    fields = None
    if report:
        path = Path(report)
        if not path.is_file():
            raise WorkflowError(f"--report {report}: no such file")
        try:
            fields = parse_orchestrator_report(path.read_text(encoding="utf-8"), report)
        except ArtifactError as error:
            raise WorkflowError(str(error)) from None
    ws = Workspace(checkout, name, folder, request, fields)
    checks = run_static(ws)
    if static_only:
        checks.append(Check("runtime_validate", "4", SKIP, "--static", runtime=True))
    else:
        from tools.kernelgen.workflow.runtime import check_runtime

        checks.append(check_runtime(ws))
    print(render(name, folder, checks, static_only))
    return EXIT_FAILED if any(check.failed for check in checks) else 0


__all__ = ["WorkflowError", "audit"]
