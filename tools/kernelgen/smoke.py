"""The smoke run ``new`` makes before it writes anything: the generated kernel, imported from a scratch copy of the
checkout with the change set applied, runs forward and backward once on a tiny CPU input under the Triton
interpreter, against the reference's float64 autograd.

It runs in this process (torch is imported already; a new interpreter would cost more than the run itself), with
the scratch copy's ``src`` first on ``sys.path`` and ``TRITON_INTERPRET=1`` while it lasts; afterwards
``sys.path``, the ``liger_kernel`` modules and the environment are as they were. Inputs are drawn as the generated
tests draw them, by each input's role: class indices, one value per class, distributions over each row, positive
or real values.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings

from pathlib import Path

import torch

from tools.kernelgen.broadcast import first_input_dims
from tools.kernelgen.broadcast import shape_for
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import group_count
from tools.kernelgen.profile import shape_of
from tools.kernelgen.profile import written_for_sequences
from tools.kernelgen.render.vectors import hold_vectors_whole
from tools.kernelgen.render.vectors import parameter_shape
from tools.kernelgen.scratch import changed_library_modules
from tools.kernelgen.scratch import library_imports_from
from tools.kernelgen.scratch import scratch_folder
from tools.kernelgen.scratch import stage_checkout

ROWS, COLS = 3, 7
LOSS_COLS = 9
# Loose on purpose: the smoke run catches kernels that crash or compute something else, not the last digits (the
# generated tests check those).
ATOL, RTOL = 1e-3, 1e-2
NO_CPU_RUN = {"tilelang": "TileLang kernels run on CUDA GPUs only"}


class SmokeFailure(RuntimeError):
    """The generated kernel does not run, or computes something other than its reference: one line saying what."""


def skip_reason(profile: KernelProfile) -> str | None:
    """Why the smoke run cannot run this profile's kernel here (its backend has no CPU interpreter; Triton was
    imported into this process without its interpreter), or None."""
    if profile.backend in NO_CPU_RUN:
        return NO_CPU_RUN[profile.backend]
    if not _interpreter_possible():
        return "Triton was imported into this process without its interpreter"
    return None


def _interpreter_possible() -> bool:
    """Triton's own jit helpers (``tl.sum``'s combine function) are interpreted only when Triton was imported with
    ``TRITON_INTERPRET=1``; a process that imported it otherwise cannot interpret kernels that reduce."""
    standard = sys.modules.get("triton.language.standard")
    if standard is None:
        return True
    from triton.runtime.jit import JITFunction

    return not any(isinstance(value, JITFunction) for value in vars(standard).values())


def smoke_run(repo_root: Path, profile: KernelProfile, changes: dict[str, str]) -> None:
    """Raise ``SmokeFailure`` unless every changed ``liger_kernel`` module imports and the kernel's forward and
    backward match the reference on a tiny input."""
    with scratch_folder("kernelgen-smoke-") as folder:
        stage_checkout(repo_root, folder, changes)
        # The interpreter computes with numpy, which warns where masked-off lanes divide by zero: not findings.
        with library_imports_from(folder / "src"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            broken = _import_failures(changed_library_modules(changes), folder / "src")
            ops = f"liger_kernel.ops.{profile.operation_name}"
            function = None if broken else getattr(importlib.import_module(ops), profile.function_class_name)
            if function is not None:
                _compare(profile, function)
        if broken:
            # What failed the same way before the change (a checkout whose library was broken already) is not the
            # change's finding; then the kernel cannot be run here either.
            src = Path(repo_root) / "src"
            existing = [module for module, _ in broken if _module_file(src, module).exists()]
            with library_imports_from(src):
                before = {error for _, error in _import_failures(existing, src)}
            new = [(module, error) for module, error in broken if error not in before]
            if new:
                raise SmokeFailure(f"{new[0][0]} does not import: {new[0][1]}")


def _import_failures(modules: list[str], src: Path) -> list[tuple[str, str]]:
    """``(module, why)`` of each module that does not import from ``src``, each tried on its own (``why`` names
    files relative to ``src``, so that two copies' failures compare)."""
    failures = []
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as error:  # whatever a module raises on import is why it does not import
            failures.append((module, _one_line(error).replace(f"{src}{os.sep}", "")))
    return failures


def _module_file(src: Path, module: str) -> Path:
    path = src.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _inputs(profile: KernelProfile, generator: torch.Generator) -> tuple[list[torch.Tensor], int]:
    cols = LOSS_COLS if profile.tier == 3 else COLS
    if any(spec.sequence_shape for spec in profile.inputs):
        return _sequence_inputs(profile, generator), cols
    if profile.math.lanes is not None:  # rows of whole lanes, each COLS long
        cols *= profile.math.lanes.count
    scale = float(profile.test.input_scale)
    # Inputs that broadcast against the first one are drawn in their own shape, rows of the first one grouped in as
    # many dims as their patterns name (each leading one over 1, so that every broadcast dim repeats).
    patterns = [spec.broadcast for spec in profile.inputs if spec.broadcast]
    full = first_input_dims(patterns, ROWS, cols, rank=profile.example_rank())
    if profile.math.groups:  # [batch, channels, rest], two channels a group
        extra = max(0, len(profile.test.cpu_shapes[0]) - 3) if profile.test.cpu_shapes else 0
        full = (ROWS, 2 * group_count(profile), *[2] * extra, cols)
    # A loss written for [B, T, V] logits runs on two sequences of rows.
    rows = (2, ROWS) if written_for_sequences(profile) else (ROWS,)
    if len(rows) == 2:
        full = (*rows, cols)
    drawn = []
    for spec in profile.inputs:
        domain = spec.domain or profile.test.input_domain
        shape = shape_for(spec.broadcast, full) if spec.broadcast else full
        if spec.dtype == "int64":
            value = torch.randint(0, cols, rows, generator=generator)
        elif spec.per_class:
            value = torch.rand(cols, generator=generator) + 0.1
        elif spec.per_row and spec.dtype == "bool":
            # A mask of rows, true and false at least once each (as the generated tests draw it): a row counts
            # under either polarity (mask, ~mask).
            value = torch.rand(rows, generator=generator) < 0.7
            value.view(-1)[:2] = torch.tensor([True, False])
        elif spec.per_row:
            value = torch.randn(rows, generator=generator) * scale
            value = value.abs() + 0.1 if domain == "positive" else value
        elif domain in ("probabilities", "log_probabilities"):
            value = torch.randn(*rows, cols, generator=generator).log_softmax(-1)
            value = value.exp() if domain == "probabilities" else value
        elif domain == "positive":
            value = torch.rand(shape, generator=generator) * scale + 0.1
        else:
            value = torch.randn(shape, generator=generator) * scale
        drawn.append(value)
    return drawn, cols


def _sequence_inputs(profile: KernelProfile, generator: torch.Generator) -> list[torch.Tensor]:
    """A loss in two stages: [B, T, V] logits of two pairs of sequences, class indices per token, and the inputs
    only its sequence stage reads in their own shapes (``sequence_shape``)."""
    batch, tokens = 4, ROWS
    drawn = []
    for spec in profile.inputs:
        if spec.dtype == "int64":
            drawn.append(torch.randint(0, LOSS_COLS, (batch, tokens), generator=generator))
        elif spec.sequence_shape:
            value = torch.randn(shape_of(spec.sequence_shape, batch, tokens), generator=generator)
            drawn.append(value > 0 if spec.dtype == "bool" else value)
        else:
            drawn.append(torch.randn(batch, tokens, LOSS_COLS, generator=generator))
    return drawn


def _compare(profile: KernelProfile, function) -> None:
    from tools.kernelgen.validate.harness import Case
    from tools.kernelgen.validate.harness import ReferenceRunner

    generator = torch.Generator().manual_seed(0)
    inputs, cols = _inputs(profile, generator)
    # Channel parameters in the shape the reference holds them ([1, 1, H] widens the outputs to its rank), scalars 0-d.
    group = inputs[0].shape[1] if profile.math.groups else cols
    shapes = [parameter_shape(p, cols, group) for p in hold_vectors_whole(profile).parameters]
    params = [torch.rand(shape, generator=generator) + 0.5 for shape in shapes]
    try:
        runner = ReferenceRunner(profile, "cpu")
    except Exception as error:  # whatever the user's module raises when it is executed
        raise SmokeFailure(f"the reference does not load: {_one_line(error)}") from None
    case = Case(inputs, params, dict(runner.defaults), seed=0, label="smoke")
    try:
        expected = runner.run_reference(case, torch.float64)
    except Exception as error:
        raise SmokeFailure(f"the reference does not run on the smoke input: {_one_line(error)}") from None
    leaves = [runner.leaf(x, spec.requires_grad) for x, spec in zip(inputs, profile.inputs)]
    param_leaves = [runner.leaf(p, True) for p in params]
    hypers = [case.hyper[hp.name] for hp in profile.hyperparameters]
    try:
        outputs = function.apply(*leaves, *param_leaves, *hypers)
        got = runner._finish(_tensors(outputs), leaves, param_leaves, case.seed, True)
    except Exception as error:
        raise SmokeFailure(f"{profile.function_class_name} raises: {_one_line(error)}") from None
    pairs = [(f"output {i}", k, r) for i, (k, r) in enumerate(zip(got.outputs, expected.outputs))]
    pairs += [(f"the gradient of {name}", got.grads[name], r) for name, r in expected.grads.items()]
    if len(got.outputs) != len(expected.outputs):
        raise SmokeFailure(f"{len(got.outputs)} output(s), the reference has {len(expected.outputs)}")
    for what, kernel, reference in pairs:
        kernel, reference = kernel.detach().double(), reference.detach().double()
        if kernel.shape != reference.shape:
            raise SmokeFailure(f"{what}: shape {tuple(kernel.shape)}, the reference's {tuple(reference.shape)}")
        # The tolerance scales with the reference's finite values: a nan or inf of its own (log of a negative
        # draw) is compared as a value, not taken as the scale.
        finite = reference[reference.isfinite()]
        atol = ATOL * (1.0 + float(finite.abs().max())) if finite.numel() else ATOL
        if not torch.allclose(kernel, reference, atol=atol, rtol=RTOL, equal_nan=True):
            worst = float((kernel - reference).abs().nan_to_num(float("inf")).max())
            raise SmokeFailure(f"{what} differs from the reference's by up to {worst:.3g}")


def _tensors(result) -> list[torch.Tensor]:
    values = result if isinstance(result, (tuple, list)) else (result,)
    return [value for value in values if isinstance(value, torch.Tensor)]


def _one_line(error: BaseException) -> str:
    text = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


__all__ = ["SmokeFailure", "skip_reason", "smoke_run"]
