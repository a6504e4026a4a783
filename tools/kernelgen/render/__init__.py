"""Render stage: a validated profile -> the source text of a kernel's files (Jinja2 templates, StrictUndefined).

``views.build_views`` decides everything a file needs; the templates in ``tools/kernelgen/templates`` only lay it
out. Output is unformatted: the pipeline formats it with the target repository's ruff.
"""

from __future__ import annotations

import ast
import dataclasses
import re

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jinja2

from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.render.fused_linear import fused_linear_views
from tools.kernelgen.render.fused_staged import fused_staged_views
from tools.kernelgen.render.hygiene import kernel_side_names
from tools.kernelgen.render.hygiene import renamed_profile
from tools.kernelgen.render.staged import is_staged
from tools.kernelgen.render.text import single_line_imports
from tools.kernelgen.render.text import split_reference
from tools.kernelgen.render.text import wrap_docstring
from tools.kernelgen.render.views import build_views
from tools.kernelgen.render.views import group_parameters_as_inputs
from tools.kernelgen.render.views import kernel_view
from tools.kernelgen.render.views import launches_by_row_blocks
from tools.kernelgen.render.views import test_view

TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "templates"
OPS_TEMPLATES = {
    "elementwise": "ops_tier1.py.j2",
    "rows": "ops_tier2.py.j2",
    "rows_handwritten": "ops_tier2_handwritten.py.j2",
    "loss": "ops_tier3.py.j2",
}
# Templates of the other kernel languages (the profile's ``backend``), where they differ from the Triton ones.
BACKEND_OPS_TEMPLATES = {("tilelang", "elementwise"): "ops_tier1_tilelang.py.j2"}


def ops_template(profile: KernelProfile) -> str:
    """The template of the kernel's ops file: its tier's, in its kernel language."""
    if is_staged(profile):
        return "ops_tier3_staged.py.j2"
    if launches_by_row_blocks(profile):
        return "ops_tier1_rows.py.j2"
    return BACKEND_OPS_TEMPLATES.get((profile.backend, profile.template), OPS_TEMPLATES[profile.template])


@dataclass
class RenderedKernel:
    """Every file of a new kernel plus the pieces the inserter registers in existing files."""

    files: dict[str, str]
    functional_source: str


@cache
def template_environment() -> jinja2.Environment:
    """The one environment of the process: it keeps each template compiled (compiling them is most of a render's
    time) and recompiles one whose file changed since (the loader's ``auto_reload``)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["pyrepr"] = repr
    return env


# The benchmark script's template for each harness style (tools/kernelgen/harness.py).
BENCHMARK_TEMPLATES = {
    "sweeps": "benchmark.py.j2",
    "upstream": "benchmark_upstream.py.j2",
    "upstream_models": "benchmark_upstream.py.j2",
    "upstream_builders": "benchmark_upstream.py.j2",
}


def render_kernel(profile: KernelProfile, benchmark_style: str = "sweeps") -> RenderedKernel:
    """Render every file of the kernel. ``benchmark_style``: the harness the target's ``benchmark/scripts/utils.py``
    implements."""
    env = template_environment()
    context = {
        **build_views(profile).context(),
        "model_registry": benchmark_style in ("upstream_models", "upstream_builders"),
        "builders": benchmark_style == "upstream_builders",
    }
    paths = kernel_paths(profile.operation_name)
    tier = profile.tier
    staged = is_staged(profile)
    files = {
        paths["ops"]: _ops_text(
            profile,
            lambda p: env.get_template(ops_template(p)).render(
                _named_as_the_user_does(build_views(group_parameters_as_inputs(p)).context(), context)
            ),
        ),
        paths["module"]: env.get_template("module.py.j2").render(context),
        paths["test"]: env.get_template("test_tier3_staged.py.j2" if staged else f"test_tier{tier}.py.j2").render(
            context
        ),
        paths["benchmark"]: env.get_template(BENCHMARK_TEMPLATES[benchmark_style]).render(context),
    }
    functional = env.get_template("functional.py.j2").render(context)
    return RenderedKernel(files=files, functional_source=functional)


def _named_as_the_user_does(ops_context: dict, user_context: dict) -> dict:
    """The ops file's context (rendered from the kernel-side names, ``hygiene``) with the refusals of inputs that
    take no gradient naming each input as the functional and the module take it (``mask``, not ``mask_in``)."""
    user_names = getattr(user_context.get("ops"), "gradient_free", None)
    if user_names is not None:
        ops_context["ops"] = dataclasses.replace(ops_context["ops"], gradient_free=user_names)
    return ops_context


def _ops_text(profile: KernelProfile, render_ops) -> str:
    """The ops file, the user's names that clash with its own renamed there (see ``hygiene``); the messages it raises
    name them as the user does."""
    mapping = kernel_side_names(profile, render_ops)
    return _messages_in_user_names(render_ops(renamed_profile(profile, mapping)), mapping)


def _messages_in_user_names(text: str, mapping: dict[str, str]) -> str:
    """``text`` with the literal parts of the messages its ``raise`` statements build naming each renamed input as
    the user does (``mask has shape ...``, not ``mask_in``): the functional and the module take the user's names."""
    inverse = {kernel: user for user, kernel in mapping.items() if kernel != user}
    if not inverse:
        return text
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:  # ast counts columns in UTF-8 bytes
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode(errors="ignore"))

    spans = [
        (offset(part.lineno, part.col_offset), offset(part.end_lineno, part.end_col_offset))
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Raise) and node.exc is not None
        for part in ast.walk(node.exc)
        if isinstance(part, ast.JoinedStr) or (isinstance(part, ast.Constant) and isinstance(part.value, str))
    ]
    words = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(inverse, key=len, reverse=True))) + r")(?!\w)")
    for begin, end in sorted(set(spans), reverse=True):
        # Only the literal text: the {expressions} of an f-string keep the ops file's names.
        pieces = re.split(r"(\{[^{}]*\})", text[begin:end])
        literal = "".join(
            piece if piece.startswith("{") else words.sub(lambda m: inverse[m.group(1)], piece) for piece in pieces
        )
        text = text[:begin] + literal + text[end:]
    return text


def render_fused_linear(profile: KernelProfile, benchmark_style: str = "sweeps") -> RenderedKernel:
    """The files of ``profile.fused_linear_name``, the loss fused with the linear layer before it (a loss profile with
    ``fused_linear.enabled``). Its benchmark is written for this repository's harness; an upstream checkout's
    (``benchmark_style`` "upstream") has its own fused-linear benchmarks, so none is written there."""
    env = template_environment()
    staged = is_staged(profile)  # a loss in two stages: its own templates (render/fused_staged.py)
    views = fused_staged_views if staged else fused_linear_views
    suffix = "_staged" if staged else ""
    context = views(profile).context()
    paths = kernel_paths(profile.fused_linear_name)
    files = {
        paths["ops"]: _ops_text(
            profile,
            lambda p: env.get_template(f"ops_fused_linear{suffix}.py.j2").render(
                _named_as_the_user_does(views(p).context(), context)
            ),
        ),
        paths["module"]: env.get_template("module.py.j2").render(context),
        paths["test"]: env.get_template(f"test_fused_linear{suffix}.py.j2").render(context),
    }
    if benchmark_style == "sweeps" and not staged:  # a staged one: benchmark/scripts/compare_post_training.py
        files[paths["benchmark"]] = env.get_template("benchmark_fused_linear.py.j2").render(context)
    functional = env.get_template("functional.py.j2").render(context)
    return RenderedKernel(files=files, functional_source=functional)


__all__ = [
    "RenderedKernel",
    "render_fused_linear",
    "kernel_view",
    "render_kernel",
    "single_line_imports",
    "split_reference",
    "template_environment",
    "test_view",
    "wrap_docstring",
]
