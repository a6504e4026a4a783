"""Give a hand-written kernel the new hyper-parameters of a new reference, by targeted edits of its own files.

``plan_retrofit`` finds the math delta (``delta``: affine maps around the kernel's existing math), plans where it
goes and how the new hyper-parameters reach it (``anatomy``) and applies the edits (``edits``, libcst). The new
texts compile, add no ruff finding, and are ruff-formatted only where the original file was. Nothing is written
here; ``RetrofitError`` says in one line why the change cannot be made safely.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

from tools.kernelgen.formatting import FormatError
from tools.kernelgen.formatting import added_lint_findings
from tools.kernelgen.formatting import format_snippet
from tools.kernelgen.generate import compile_problem
from tools.kernelgen.hostapi import ArgumentMap
from tools.kernelgen.hostapi import KernelApi
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import MONKEY_PATCH
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.retrofit.anatomy import NotUnderstood
from tools.kernelgen.retrofit.anatomy import Threader
from tools.kernelgen.retrofit.delta import MathDelta
from tools.kernelgen.retrofit.delta import NotDerivable
from tools.kernelgen.retrofit.delta import math_delta
from tools.kernelgen.retrofit.edits import EditError
from tools.kernelgen.retrofit.edits import apply_edits


class RetrofitError(ValueError):
    """The new hyper-parameters cannot be threaded into the kernel safely; nothing was changed."""


@dataclass
class Retrofit:
    delta: MathDelta
    texts: dict[str, str] = field(default_factory=dict)  # path -> new text
    changes: dict[str, list[str]] = field(default_factory=dict)  # path -> what changed, in words
    notes: list[str] = field(default_factory=list)


def plan_retrofit(repo: LigerRepo, name: str, profile: KernelProfile, api: KernelApi, mapping: ArgumentMap) -> Retrofit:
    """The new texts of the kernel's ops, module and functional files with ``mapping.new_hypers`` threaded in."""
    try:
        delta = math_delta(profile, mapping.new_hypers)
    except NotDerivable as error:
        raise RetrofitError(f"the math is not derivable: {error}") from None
    if delta.empty:
        raise RetrofitError(
            f"{', '.join(mapping.new_hypers)} do(es) not change what the reference computes: nothing to thread"
        )
    paths = kernel_paths(name)
    # monkey_patch.py is read, never edited: how it puts the module's forward on a model's modules.
    files = {"ops": paths["ops"], "module": paths["module"], "functional": FUNCTIONAL, "patch": MONKEY_PATCH}
    sources = {path: repo.read(path) for path in files.values() if repo.exists(path)}
    try:
        plan = Threader(profile, api, mapping, delta, files, sources).plan()
    except NotUnderstood as error:
        raise RetrofitError(f"the kernel's shape is not understood: {error}") from None
    result = Retrofit(delta, changes=plan.changes, notes=plan.notes)
    for path, edits in plan.edits.items():
        original = sources[path]
        try:
            text = apply_edits(original, edits, path)
        except EditError as error:
            raise RetrofitError(f"internal: {error}") from None
        text = _formatted_like(original, text, repo, path)
        problem = compile_problem(path, text)
        if problem:
            raise RetrofitError(f"internal: the edited {path} does not compile ({problem})")
        added = added_lint_findings(original, text, repo.root, path)
        if added:
            raise RetrofitError(f"the edits would add a ruff finding to {path}: {added[0]}")
        result.texts[path] = text
    return result


def _formatted_like(original: str, text: str, repo: LigerRepo, path: str) -> str:
    """``text`` through ruff format when ``original`` was already formatted (so only the edits move); as is
    otherwise (reformatting a hand-styled file would rewrite it)."""
    try:
        if format_snippet(original, repo.root, path) != original:
            return text
        return format_snippet(text, repo.root, path)
    except FormatError:
        return text


__all__ = ["Retrofit", "RetrofitError", "plan_retrofit"]
