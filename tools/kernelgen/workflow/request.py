"""The request a workflow run serves, kept in its workspace: ``.kernelgen-work/NAME/request.json``.

The supervisor creates the workspace with ``python -m tools.kernelgen workspace NAME --reference REF`` before it
starts the orchestrator; the file says what was asked (kernel name, the reference file and its sha256, whether a
backward is wanted, framework and backend) and is what ``audit`` holds the results to: the reference must still be
the file it was, and the kernel must have been generated from it.
"""

from __future__ import annotations

import datetime
import hashlib
import json

from dataclasses import asdict
from dataclasses import dataclass
from pathlib import Path

from tools.kernelgen.analyze.load import split_symbol
from tools.kernelgen.analyze.references import builtin_reference_path
from tools.kernelgen.analyze.references import list_builtin_references
from tools.kernelgen.validate.workspace import default_workspace
from tools.kernelgen.validate.workspace import ignore_work_dir
from tools.kernelgen.writer import write_all

REQUEST = "request.json"
FRAMEWORK = "pytorch"


class WorkflowError(ValueError):
    """Bad input to ``workspace`` or ``audit``: one line naming what and where."""


@dataclass
class Request:
    kernel: str
    reference: str  # as the commands take it: file.py, file.py:Symbol (absolute) or a built-in name
    reference_file: str  # the file whose bytes are the reference (a built-in's module file)
    reference_sha256: str
    backward: bool
    backend: str
    framework: str = FRAMEWORK
    created: str = ""


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def resolve_reference(reference: str) -> tuple[str, Path]:
    """REF as stored in the request (files made absolute) and the file holding it; raises ``WorkflowError``."""
    target, symbol = split_symbol(reference.strip())
    if target == "-":
        raise WorkflowError("--reference -: the workflow keeps the reference as a file; save the source to a .py file")
    if symbol is None and target in list_builtin_references():
        return target, builtin_reference_path(target)
    path = Path(target).expanduser().resolve()
    if not path.is_file():
        raise WorkflowError(f"--reference {reference}: no such file (and no built-in reference of that name)")
    return str(path) + (f":{symbol}" if symbol else ""), path


def request_path(workspace: Path) -> Path:
    return Path(workspace) / REQUEST


def read_request(workspace: Path) -> Request:
    path = request_path(workspace)
    if not path.is_file():
        raise WorkflowError(
            f"{path}: no request in this workspace; the supervisor creates it with "
            f"python -m tools.kernelgen workspace NAME --reference REF"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Request(**data)
    except (ValueError, TypeError) as error:
        raise WorkflowError(f"{path}: not a request written by the workspace command ({error})") from None


def create_workspace(
    repo_root: Path,
    name: str,
    reference: str,
    *,
    backward: bool,
    backend: str,
    workspace: str | None = None,
    force: bool = False,
) -> tuple[Path, Request, str]:
    """The workspace folder, its request and what happened (``created``, ``unchanged``, ``replaced``).

    An existing request for the same reference bytes and options is kept; a different one is refused unless
    ``force`` (the artifacts already there then belong to the old request; the audit's checks find them stale)."""
    stored, path = resolve_reference(reference)
    folder = Path(workspace).resolve() if workspace else default_workspace(repo_root, name)
    request = Request(
        kernel=name,
        reference=stored,
        reference_file=str(path),
        reference_sha256=file_sha256(path),
        backward=backward,
        backend=backend,
        created=datetime.datetime.now().isoformat(timespec="seconds"),
    )
    outcome = "created"
    if request_path(folder).exists():
        old = read_request(folder)
        same = {k: v for k, v in asdict(old).items() if k != "created"} == {
            k: v for k, v in asdict(request).items() if k != "created"
        }
        if same:
            return folder, old, "unchanged"
        if not force:
            raise WorkflowError(
                f"{request_path(folder)} holds another request (reference {old.reference}, sha256 "
                f"{old.reference_sha256[:12]}, backward {old.backward}, backend {old.backend}); --force replaces it"
            )
        outcome = "replaced"
    write_all(folder, {REQUEST: json.dumps(asdict(request), indent=2) + "\n"})
    ignore_work_dir(folder)
    return folder, request, outcome
