"""The profile's math, derived: formulas (``math.outputs``) become the forward and backward statements the ops
templates print, in the profile's kernel language (``backend``: Triton, or TileLang for tier 1); hand-written
``math.triton`` statements are taken as they are.

Both analysis (to report the gradients and fail early) and rendering ask for the same derivation; it is cached,
so a command derives each kernel's math once (and prints it once per kernel language). The ops file rendered with
every user name replaced by a probe (``render/hygiene.py``) takes its tier-1 math from that derivation, renamed
(``derived_by_renaming``), instead of simplifying the same expressions again over other symbols.
"""

from __future__ import annotations

import ast
import contextlib
import functools

from tools.kernelgen.lane_maps import parse_lane
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import ProfileError
from tools.kernelgen.profile import loaded_from
from tools.kernelgen.synth import ElementwiseMath
from tools.kernelgen.synth import parse_formula
from tools.kernelgen.synth.derive import ElementwiseDerivation
from tools.kernelgen.synth.derive import derive_elementwise
from tools.kernelgen.synth.derive import print_elementwise
from tools.kernelgen.synth.derive import renamed_derivation
from tools.kernelgen.synth.losses import COL
from tools.kernelgen.synth.losses import LossMath
from tools.kernelgen.synth.losses import synthesize_loss
from tools.kernelgen.synth.printer import PRINTERS
from tools.kernelgen.synth.renaming import renamed_names
from tools.kernelgen.synth.rows import N_COLS
from tools.kernelgen.synth.rows import RowMath
from tools.kernelgen.synth.rows import RowProgramError
from tools.kernelgen.synth.rows import synthesize_rows


def elementwise_math(profile: KernelProfile, source: str | None = None) -> ElementwiseMath:
    """The tier-1 forward and backward statements, in the profile's kernel language, with the names each reads."""
    written = profile.math.triton
    if written is not None:
        return ElementwiseMath(
            forward=list(written.forward),
            backward=list(written.backward),
            forward_uses=sorted(names_read(written.forward)),
            backward_uses=sorted(names_read(written.backward)),
        )
    try:
        libraries = (profile.tiling.forward_math, profile.tiling.backward_math)
        return _printed_elementwise(*_elementwise_key(profile), profile.backend, libraries)
    except _FormulaError as error:
        raise ProfileError(_where(profile, source), [str(error)]) from None


def _elementwise_key(profile: KernelProfile) -> tuple:
    """What a tier-1 derivation depends on: (formulas, inputs, parameters, hyper-parameters, rounded tensors)."""
    # Inputs that take no gradient are constants of the math, as the hyper-parameters are.
    inputs = tuple(t.name for t in profile.inputs if t.requires_grad)
    parameters = tuple((p.name, p.shape) for p in profile.parameters)
    constants = [t.name for t in profile.inputs if not t.requires_grad]
    tensors = tuple(t.name for t in profile.inputs) + tuple(p.name for p in profile.parameters)
    if profile.math.lanes is not None:  # an index map: the formulas read the inputs' lanes
        inputs, constants, tensors = _lane_names(profile)
    hyperparameters = tuple(constants + profile.formula_hyperparameters)
    rounded = tensors if profile.math.rounding == "per_op" else ()
    return tuple(profile.math.outputs.items()), inputs, parameters, hyperparameters, rounded


def _lane_names(profile: KernelProfile) -> tuple[tuple[str, ...], list[str], tuple[str, ...]]:
    """The lanes formulas read: of inputs that take a gradient, of the others (constants), all of them."""
    differentiable = {t.name for t in profile.inputs if t.requires_grad}
    lanes = {name: parse_lane(text).tensor for name, text in profile.math.lanes.inputs.items()}
    inputs = tuple(name for name, tensor in lanes.items() if tensor in differentiable)
    return inputs, [name for name in lanes if name not in inputs], tuple(lanes)


class _FormulaError(ValueError):
    pass


# Derivations kept per process (each a few kilobytes): more than the kernels a long session generates again and
# again (a test run generates a few hundred, many of them several times), as one may take seconds of sympy.
DERIVATIONS_KEPT = 1024


# Derivation key of a renamed profile -> (the original profile's key, {original name: new name}), while
# ``derived_by_renaming`` lasts.
_RENAMED: dict[tuple, tuple[tuple, dict[str, str]]] = {}


@contextlib.contextmanager
def derived_by_renaming(profile: KernelProfile, renamed: KernelProfile, mapping: dict[str, str]):
    """Inside: the tier-1 math of ``renamed`` (``profile`` with its names renamed by ``mapping``; ``grad_{name}``
    follows its name) is ``profile``'s derivation with its symbols renamed, printed anew. The same expressions over
    other names simplify to the same math, but sympy would take as long again to find it; the printed statements
    may order operands otherwise (sympy sorts them by name), with the same names. A row or loss program is derived
    again over the new names, its slowest steps (simplified outputs, adjoints) taken from ``profile``'s derivation
    renamed (``synth/renaming.py``)."""
    if profile.math.triton is not None or renamed is profile:
        yield
        return
    if profile.template != "elementwise":
        with renamed_names(mapping):
            yield
        return
    key = _elementwise_key(renamed)
    _RENAMED[key] = (_elementwise_key(profile), dict(mapping))
    try:
        yield
    finally:
        _RENAMED.pop(key, None)


@functools.lru_cache(maxsize=DERIVATIONS_KEPT)
def _printed_elementwise(
    formulas, inputs, parameters, hyperparameters, rounded, backend, libraries=(None, None)
) -> ElementwiseMath:
    key = (formulas, inputs, parameters, hyperparameters, rounded)
    if key in _RENAMED:
        original, mapping = _RENAMED[key]
        derivation = renamed_derivation(_derive_elementwise(*original), mapping)
    else:
        derivation = _derive_elementwise(*key)
    forward_math, backward_math = libraries
    return print_elementwise(derivation, PRINTERS[backend], forward_math, backward_math)


@functools.lru_cache(maxsize=DERIVATIONS_KEPT)
def _derive_elementwise(formulas, inputs, parameters, hyperparameters, rounded=()) -> ElementwiseDerivation:
    names = [*inputs, *(name for name, _ in parameters), *hyperparameters]
    outputs = {}
    for name, text in formulas:
        try:
            outputs[name] = parse_formula(text, names, rounded)
        except (ValueError, TypeError) as error:
            raise _FormulaError(f"math.outputs.{name}: {error}") from None
    try:
        return derive_elementwise(outputs, list(inputs), dict(parameters), list(hyperparameters))
    except ValueError as error:
        raise _FormulaError(f"math.outputs: {error}") from None


def row_math(profile: KernelProfile, source: str | None = None) -> RowMath:
    """The tier-2 forward and backward statements (2-D tiles, see ``synth/rows.py``) derived from the formulas."""
    inputs = tuple(t.name for t in profile.inputs if t.requires_grad)
    constants = tuple(t.name for t in profile.inputs if not t.requires_grad)
    parameters = tuple((p.name, p.shape) for p in profile.parameters)
    statistics = tuple((s.name, s.reduce, s.of) for s in profile.math.statistics)
    try:
        return _derive_rows(
            statistics,
            tuple(profile.math.outputs.items()),
            inputs,
            constants,
            parameters,
            tuple(profile.formula_hyperparameters),
        )
    except _FormulaError as error:
        raise ProfileError(_where(profile, source), [str(error)]) from None


@functools.lru_cache(maxsize=DERIVATIONS_KEPT)
def _derive_rows(statistics, formulas, inputs, constants, parameters, hyperparameters) -> RowMath:
    names = [*inputs, *constants, *(name for name, _ in parameters), *hyperparameters, COL, N_COLS]
    parsed, outputs = _parse_program(statistics, formulas, names)
    try:
        return synthesize_rows(parsed, outputs, list(inputs), dict(parameters), list(hyperparameters), list(constants))
    except RowProgramError as error:
        raise _FormulaError(f"math: {error}") from None


def loss_math(profile: KernelProfile, source: str | None = None) -> LossMath:
    """The tier-3 chunked forward (gradient included) derived from the formulas (see ``synth/losses.py``)."""
    kernel_inputs = [t for t in profile.inputs if not t.sequence_shape]  # the others only the sequence stage reads
    element = [t for t in kernel_inputs if t.dtype != "int64" and not t.per_row]
    statistics = tuple((s.name, s.reduce, s.of) for s in profile.math.statistics)
    # Each count's scale (1 / a mean's count over the batch) is a number of every row, as a hyper-parameter is.
    scales = tuple(scale.name for scale in profile.math.loss.scales) if profile.math.loss else ()
    try:
        return _derive_loss(
            statistics,
            tuple(profile.math.outputs.items()),
            tuple(t.name for t in element if t.requires_grad),
            tuple(t.name for t in element if not t.requires_grad),
            tuple(t.name for t in kernel_inputs if t.dtype == "int64"),
            (*profile.formula_hyperparameters, *scales),
            tuple(hp.name for hp in profile.hyperparameters if hp.type == "int"),
            tuple(t.name for t in element if t.per_class),
            tuple(t.name for t in kernel_inputs if t.per_row),
            staged=bool(profile.math.loss and profile.math.loss.sequence),
        )
    except _FormulaError as error:
        raise ProfileError(_where(profile, source), [str(error)]) from None


@functools.lru_cache(maxsize=DERIVATIONS_KEPT)
def _derive_loss(
    statistics,
    formulas,
    inputs,
    constants,
    row_inputs,
    hyperparameters,
    integers,
    class_inputs=(),
    row_values=(),
    staged=False,
) -> LossMath:
    names = [*inputs, *constants, *row_inputs, *row_values, *hyperparameters, COL, N_COLS]
    parsed, outputs = _parse_program(statistics, formulas, names)
    try:
        return synthesize_loss(
            parsed,
            outputs,
            list(inputs),
            list(hyperparameters),
            list(constants),
            list(row_inputs),
            list(integers),
            list(class_inputs),
            list(row_values),
            staged=staged,
        )
    except RowProgramError as error:
        raise _FormulaError(f"math: {error}") from None


def _parse_program(statistics, formulas, names: list[str]):
    names = list(names)
    parsed = []
    for index, (name, reduce, text) in enumerate(statistics):
        try:
            parsed.append((name, reduce, parse_formula(text, names)))
        except (ValueError, TypeError) as error:
            raise _FormulaError(f"math.statistics[{index}].of: {error}") from None
        names.append(name)
    outputs = {}
    for name, text in formulas:
        try:
            outputs[name] = parse_formula(text, names)
        except (ValueError, TypeError) as error:
            raise _FormulaError(f"math.outputs.{name}: {error}") from None
    return parsed, outputs


def names_read(statements: list[str]) -> set[str]:
    """Names a list of hand-written statements reads before (or without) assigning them."""
    assigned: set[str] = set()
    read: set[str] = set()
    for statement in statements:
        tree = ast.parse(statement)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in assigned:
                read.add(node.id)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                assigned.add(node.id)
    return read


def _where(profile: KernelProfile, source: str | None) -> str:
    """What an error line names: the caller's source, else the profile's file, else the kernel the profile is of."""
    return source or loaded_from(profile) or f"for {profile.operation_name}"
