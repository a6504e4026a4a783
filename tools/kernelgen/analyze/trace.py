"""Trace a loaded reference into an fx graph and find its inputs, hyper-parameters and learnable parameters.

Functions: parameters without a default are tensor inputs; a float default makes a runtime hyper-parameter
that stays a graph input (a symbol in the math), as does an int default written without an annotation that is only
read as a number in tensor arithmetic (``scale=1``: int_scalars.py); bool/str/int defaults are specialised into the
trace (bool and str become constexpr hyper-parameters; an int may pick a dim or an exponent, which classification
and synthesis need as a number) and listed in ``specialized``.

nn.Modules: instantiated with the ``__init__`` defaults (required sizes from the ``init_args`` hint or a small
hidden size); ``nn.Parameter``s become learnable parameters, and float attributes (``self.eps``) are replaced by
fx Proxies for the trace, so they reach the graph as named inputs instead of anonymous constants.

Every node records the reference line that created it (``node.meta["kernelgen_line"]``, read back with
``ops.node_line``), found by walking the Python stack to the reference's file: that works for functions and modules
alike and across torch versions.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import dataclasses
import inspect
import io
import itertools
import math
import operator
import os
import re
import sys
import traceback

from dataclasses import dataclass
from dataclasses import field
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn

from torch.fx.passes.shape_prop import ShapeProp

from tools.kernelgen.analyze.argument_numbers import expression
from tools.kernelgen.analyze.argument_numbers import fit_line
from tools.kernelgen.analyze.argument_numbers import fit_power
from tools.kernelgen.analyze.argument_numbers import hyper_of
from tools.kernelgen.analyze.argument_numbers import numbers_in
from tools.kernelgen.analyze.argument_numbers import numbers_of_argument
from tools.kernelgen.analyze.argument_numbers import other_sizes
from tools.kernelgen.analyze.argument_numbers import replace_number
from tools.kernelgen.analyze.argument_numbers import row_length_of
from tools.kernelgen.analyze.errors import HAND_WRITTEN_PROFILE_HINT
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.groups import regroup_channels
from tools.kernelgen.analyze.held_modules import activation_modules_as_calls
from tools.kernelgen.analyze.held_modules import loss_modules_as_calls
from tools.kernelgen.analyze.held_modules import norm_modules_as_calls
from tools.kernelgen.analyze.initial_values import initial_expression
from tools.kernelgen.analyze.int_scalars import constructor_numbers
from tools.kernelgen.analyze.int_scalars import read_as_numbers
from tools.kernelgen.analyze.load import LoadedReference
from tools.kernelgen.analyze.load import line_in_traceback
from tools.kernelgen.analyze.ops import CAST
from tools.kernelgen.analyze.ops import ELEMENTWISE
from tools.kernelgen.analyze.ops import INDEX_MAP_OPS
from tools.kernelgen.analyze.ops import LAYOUT
from tools.kernelgen.analyze.ops import LINE_KEY
from tools.kernelgen.analyze.ops import META
from tools.kernelgen.analyze.ops import REDUCTION
from tools.kernelgen.analyze.ops import OpCall
from tools.kernelgen.analyze.ops import UnknownOpError
from tools.kernelgen.analyze.ops import descendants
from tools.kernelgen.analyze.ops import node_line
from tools.kernelgen.analyze.ops import normalize
from tools.kernelgen.analyze.optional_tensors import divisor_when_given
from tools.kernelgen.analyze.optional_tensors import numbers_when_absent
from tools.kernelgen.analyze.optional_tensors import read_as_tensors
from tools.kernelgen.analyze.roles import EITHER_TARGET
from tools.kernelgen.analyze.roles import PROBABILITIES
from tools.kernelgen.analyze.roles import target_role
from tools.kernelgen.analyze.shifts import Shift
from tools.kernelgen.analyze.shifts import unshift_targets
from tools.kernelgen.analyze.written import entry_function
from tools.kernelgen.broadcast import ELLIPSIS
from tools.kernelgen.broadcast import INSERTED
from tools.kernelgen.broadcast import KEPT
from tools.kernelgen.broadcast import declared_pattern
from tools.kernelgen.broadcast import declared_tokens
from tools.kernelgen.broadcast import narrowed
from tools.kernelgen.broadcast import pattern_rank
from tools.kernelgen.broadcast import pattern_tokens
from tools.kernelgen.broadcast import shape_for
from tools.kernelgen.broadcast import with_inserted_dims
from tools.kernelgen.profile import RANDOM_INIT
from tools.kernelgen.profile import HyperParameter
from tools.kernelgen.profile import LearnableParameter

DEFAULT_HIDDEN = 8
# The example rows of a loss whose labels are shifted along their tokens: [B, T] of two sequences of three tokens.
_SEQUENCES = (2, 3)
# __init__ arguments that size the hidden dimension: filled with a small value when they have no default.
HIDDEN_SIZE_NAMES = (
    "hidden_size",
    "dim",
    "d_model",
    "n_embd",
    "num_features",
    "normalized_shape",
    "channels",
    "hidden",
    "hidden_dim",
    "ndim",
    "d",
    "model_dim",
    "dim_model",
    "embed_dim",
    "embedding_dim",
    "emb_dim",
    "in_features",
    "features",
    "num_channels",
    "n_features",
    "head_dim",
    "dim_head",
)
# __init__ arguments that count groups of channels (nn.GroupNorm's num_groups): filled, when they have no default, with
# a count that divides the default hidden size.
GROUP_COUNT_NAMES = ("num_groups", "groups", "n_groups")
DEFAULT_GROUPS = 2
_SCALAR_TYPE_NAMES = {bool: "bool", int: "int", float: "float", str: "str"}


@dataclass
class TracedReference:
    loaded: LoadedReference
    graph_module: fx.GraphModule
    tensor_inputs: list[str]
    index_inputs: list[str]  # tensor inputs holding integer indices (class targets, gather indices)
    hyperparameters: list[HyperParameter]
    parameters: list[LearnableParameter]
    parameter_names: dict[str, str]  # get_attr target ("norm.weight") -> profile name ("norm_weight")
    other_parameters: list[str]  # parameters that are neither per-channel nor scalar (matrices)
    init_params: list[HyperParameter]
    calls: dict[fx.Node, OpCall]  # every call node the outputs depend on, in graph order
    outputs: list[fx.Node]
    output_names: list[str]
    hidden: int
    rank: int  # rank of the example inputs used for shape propagation
    shapes_known: bool
    size_param: str = "hidden_size"  # the __init__ argument that sizes per-channel parameters
    placeholder_names: dict[fx.Node, str] = field(default_factory=dict)  # fx renames some; these are the arguments
    specialized: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # A module's str/bool/int attributes set from __init__ arguments of the same name (``self.reduction``): the
    # trace saw their values; a loss makes them hyper-parameters (tiers 1 and 2 leave them to the module).
    module_switches: dict[str, Any] = field(default_factory=dict)
    # Tensor inputs of one value per class ([classes]: class weights), found by how the reference reads them.
    class_inputs: list[str] = field(default_factory=list)
    # Inputs that a module reference holds itself (``self.weight``, a buffer of class weights): input -> attribute.
    attribute_inputs: dict[str, str] = field(default_factory=dict)
    # Inputs whose shape broadcasts against the first input's (``shapes`` hint): input -> pattern (``broadcast``).
    broadcast_inputs: dict[str, str] = field(default_factory=dict)
    # Float tensor inputs of one value per row ([rows] / [B, T]: a per-token weight, an old policy's log-prob),
    # found by the shapes the reference runs with (``_per_row_inputs``) or named by the hint ``per_row``.
    row_inputs: list[str] = field(default_factory=list)
    # Inputs the reference selects by (``torch.where(mask, ...)``, ``masked_fill(pad, ...)``, ``~pad``): booleans.
    conditions: list[str] = field(default_factory=list)
    # Statistics over groups of channels: what analyze/groups.py rewrote the graph for (None: no groups).
    channel_groups: Any = None
    # The least rank of the first input that the reference's unsqueezes and slices spell out (``x[:, :, :, ::2]``:
    # 4), 0 when they do not.
    written_rank: int = 0
    # Targets the reference shifts one token left (a causal LM's labels, analyze/shifts.py): the graph reads them
    # unshifted, the generated Function shifts them on the host.
    shifts: list[Shift] = field(default_factory=list)
    # A loss written for [B, T, V] logits that flattens them into rows itself: its per-row values come as [B*T].
    flat_rows: bool = False

    @property
    def runtime_hyperparameters(self) -> list[str]:
        """Names of the hyper-parameters that stay runtime inputs of the math (not specialised into the trace)."""
        return [h.name for h in self.hyperparameters if h.name not in self.specialized]

    def shape(self, node: Any) -> tuple[int, ...] | None:
        meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
        shape = getattr(meta, "shape", None)
        return tuple(shape) if shape is not None else None

    def dtype(self, node: Any) -> torch.dtype | None:
        meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
        return getattr(meta, "dtype", None)

    @property
    def row_count(self) -> int | None:
        """How many rows the first input's example holds (its dims before the last multiplied), None unknown."""
        first = next((n for n, name in self.placeholder_names.items() if name == self.tensor_inputs[0]), None)
        shape = self.shape(first)
        return math.prod(shape[:-1]) if shape else None


# The dtype a tensor's ``.dtype`` is taken to be where Python control flow compares it (HF's T5LayerNorm: ``if
# self.weight.dtype in [torch.float16, torch.bfloat16]``): a half dtype, the inputs' in training, parameters
# included (the kernels hold parameters in the inputs' dtype). The branch taken rounds to that dtype where the
# other would not, which an fp32 run leaves exact.
_COMPARED_DTYPE = torch.bfloat16


def _compared_dtype(arg: Any) -> torch.dtype | None:
    """A dtype a comparison reads: a literal one, or ``.dtype`` of a traced tensor (taken as ``_COMPARED_DTYPE``)."""
    if isinstance(arg, torch.dtype):
        return arg
    is_dtype_read = (
        isinstance(arg, fx.Node)
        and arg.op == "call_function"
        and arg.target is getattr
        and len(arg.args) == 2
        and arg.args[1] == "dtype"
    )
    return _COMPARED_DTYPE if is_dtype_read else None


class _HyperParameterBranch(Exception):
    """Python control flow decided by run-time hyper-parameters alone (``if alpha == 0``)."""

    def __init__(self, names: list[str], line: int | None):
        super().__init__(", ".join(names))
        self.names, self.line = names, line


class _ReferenceTracer(fx.Tracer):
    """fx tracer that stamps each node with its reference line and can feed module attributes in as inputs."""

    def __init__(
        self,
        filename: str,
        proxied_attributes: dict[str, Any] | None = None,
        module: nn.Module = None,
        input_names: dict[str, str] | None = None,
    ):
        super().__init__()
        self.filename = filename
        self.proxied_attributes = proxied_attributes or {}
        self.traced_module = module
        self.input_names = input_names or {}  # attribute -> the name of the input it is traced as
        self.tensor_inputs: set[str] = set()  # placeholders that are tensors (the others are hyper-parameters)

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        line = self._reference_line()
        if line is None:  # fx makes an attribute's node when it is first used: ``return torch.sort(x).values``
            line = next((a.meta[LINE_KEY] for a in node.all_input_nodes if a.meta.get(LINE_KEY) is not None), None)
        node.meta[LINE_KEY] = line
        return node

    def _reference_line(self) -> int | None:
        """The line of the reference's file the trace is at (the innermost frame of that file), or None."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename != self.filename:
            frame = frame.f_back
        return frame.f_lineno if frame is not None else None

    def to_bool(self, obj: fx.Proxy) -> bool:
        """A dtype compared with another in Python control flow: decided as ``_COMPARED_DTYPE`` makes it."""
        node = obj.node
        if node.op == "call_function" and node.target in (operator.eq, operator.ne) and len(node.args) == 2:
            sides = [_compared_dtype(arg) for arg in node.args]
            if None not in sides:
                return (sides[0] == sides[1]) == (node.target is operator.eq)
        read = _inputs_read(node)
        if read and not read & self.tensor_inputs:
            # ``if self.leak:`` tests the attribute's own input, made before any line of the reference ran.
            raise _HyperParameterBranch(sorted(read), node.meta.get(LINE_KEY) or self._reference_line())
        return super().to_bool(obj)

    def call_module(self, m, forward, args, kwargs):
        """A module built inside the traced code (``nn.KLDivLoss(reduction="batchmean")(a, b)``) is no submodule fx
        can name: one without parameters or buffers is traced through its forward, as its functional call."""
        try:
            self.path_of_module(m)
        except NameError:
            if next(m.parameters(), None) is None and next(m.buffers(), None) is None:
                return forward(*args, **kwargs)
            raise NameError(
                f"nn.{type(m).__name__} is built inside the traced code with parameters or buffers of its own; "
                f"build it in __init__ (self.name = nn.{type(m).__name__}(...))"
            ) from None
        return super().call_module(m, forward, args, kwargs)

    def create_args_for_root(self, root_fn, is_module, concrete_args=None):
        root_fn, args = super().create_args_for_root(root_fn, is_module, concrete_args)
        # Extra placeholders after forward's own arguments; the module reads them back as self.<name>. Each defaults
        # to the attribute's value, as forward's own defaulted arguments before them do (fx's generated forward
        # would otherwise put an argument without a default after them: a SyntaxError).
        for name, value in self.proxied_attributes.items():
            placeholder = self.input_names.get(name, name)
            self.traced_module.__dict__[name] = self.create_proxy("placeholder", placeholder, (value,), {})
        return root_fn, args


def _inputs_read(node: fx.Node) -> set[str]:
    """The placeholders ``node`` is computed from; empty where it also reads the module's parameters."""
    seen, stack, read = set(), [node], set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.op == "get_attr":
            return set()
        if current.op == "placeholder":
            read.add(str(current.target))
        stack += current.all_input_nodes
    return read


class _ValuesPerSequence(Exception):
    """Inputs taken as one value per row met the per-row values as columns: the rows are [batch, tokens]."""

    def __init__(self, first: str, names: list[str]):
        super().__init__(first, names)
        self.first, self.names = first, names


def trace_reference(loaded: LoadedReference, overrides: dict[str, Any] | None = None) -> TracedReference:
    """``overrides``: other values for specialised (bool/str/int) arguments than their defaults, to trace the
    reference as it runs with them (the profile keeps the defaults)."""
    trace = _trace_module if loaded.kind == "module" else _trace_function
    try:
        return trace(loaded, overrides or {})
    except _ValuesPerSequence as found:
        # TRL's ``advantages.unsqueeze(1)`` against per-token values reduced with ``.sum()`` alone: nothing names the
        # token dim, so the rows were taken flat and the [B] input as one value per token (an outer product when
        # run). Traced again as the shapes hint would have it: [B, T, V] rows, one value per sequence.
        listed = ", ".join(repr(name) for name in found.names)
        if "shapes" in loaded.hints:
            raise AnalyzeError(
                f"{listed} meet per-token values as a column ([rows, 1] against [rows]): declare the shapes of "
                f"{found.first!r} and {listed} in the KERNELGEN 'shapes' hint so that they line up",
                origin=loaded.origin,
            ) from None
        shapes = {found.first: "batch seq vocab", **{name: "batch" for name in found.names}}
        hinted = dataclasses.replace(loaded, hints={**loaded.hints, "shapes": shapes})
        return trace(hinted, overrides or {})


def _scalar_type(value: Any) -> str | None:
    return _SCALAR_TYPE_NAMES.get(type(value))


# Names the profile's formulas give their own symbols: the row length (printer.ROW_LENGTH) and the column index
# (synth.rows.COL).
FORMULA_SYMBOLS = ("n_cols", "col")


def _split_signature(loaded: LoadedReference, fn, skip_self: bool):
    """Tensor inputs, runtime float hyper-parameters and the specialised (concrete) arguments of ``fn``."""
    tensors, hypers, concrete = [], [], {}
    parameters = list(inspect.signature(fn).parameters.values())[1 if skip_self else 0 :]
    order = [parameter.name for parameter in parameters]
    optional = [parameter.name for parameter in parameters if parameter.default is None]
    _refuse_optional_divisors(loaded, optional)
    # ``if scale is None: scale = 1.0``: a hyper-parameter of that default, not an optional tensor.
    absent = numbers_when_absent(loaded.source, loaded.entry, loaded.kind, optional) if optional else {}
    optional_tensors = read_as_tensors(loaded.source, loaded.entry, loaded.kind, optional) if optional else set()
    optional_tensors -= set(absent)
    # ``scale=1`` read only as a number in tensor arithmetic: a float written as an int (int_scalars.py).
    unannotated_ints = [
        p.name
        for p in parameters
        if type(absent.get(p.name, p.default)) is int and p.annotation is inspect.Parameter.empty
    ]
    tensor_arguments = [p.name for p in parameters if p.default is inspect.Parameter.empty] + sorted(optional_tensors)
    float_ints = read_as_numbers(
        loaded.source, loaded.entry, loaded.kind, unannotated_ints, tensor_arguments, _namespace(loaded)
    )
    for parameter in parameters:
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise AnalyzeError(
                f"'{loaded.entry}' takes *{parameter.name}; name every tensor input and hyper-parameter",
                origin=loaded.origin,
            )
        default = absent.get(parameter.name, parameter.default)
        if type(default) is int and (parameter.annotation in (float, "float") or parameter.name in float_ints):
            default = float(default)  # ``scale: float = 1``: a float written as an int, not an int switch
        if default is inspect.Parameter.empty and parameter.annotation in (
            int,
            float,
            bool,
            str,
            "int",
            "float",
            "bool",
            "str",
        ):
            raise AnalyzeError(
                f"'{loaded.entry}': '{parameter.name}' is annotated {getattr(parameter.annotation, '__name__', parameter.annotation)} "
                f"but has no default; a hyper-parameter needs one (tensor inputs take none)",
                origin=loaded.origin,
            )
        if default is inspect.Parameter.empty or parameter.name in optional_tensors:
            before = [name for name in order[: order.index(parameter.name)] if name not in tensors]
            if before:
                # The kernel, its tests and the reference's calls pass the tensor inputs first, by position.
                raise AnalyzeError(
                    f"'{loaded.entry}': '{parameter.name}' defaults to None and is read as a tensor after the "
                    f"hyper-parameter '{before[0]}'; put the tensor inputs first "
                    f"({', '.join([*tensors, parameter.name])}, then {before[0]}=...) and give '{parameter.name}' no "
                    "default",
                    origin=loaded.origin,
                )
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
                # The kernel, its tests and the reference's calls pass the tensor inputs by position.
                raise AnalyzeError(
                    f"'{loaded.entry}': the tensor input '{parameter.name}' is keyword-only (after '*'); tensor inputs "
                    f"are passed by position: move '*' after it ({', '.join([*tensors, parameter.name])}, *, ...)",
                    origin=loaded.origin,
                )
            tensors.append(parameter.name)
        elif isinstance(default, float):
            hypers.append(HyperParameter(name=parameter.name, type="float", default=default))
        elif _scalar_type(default) is not None:
            kind = _scalar_type(default)
            hypers.append(HyperParameter(name=parameter.name, type=kind, default=default, constexpr=kind != "int"))
            concrete[parameter.name] = default
        else:
            concrete[parameter.name] = default  # None / tuples: optional arguments left at their default
    # A tensor named like a symbol of the profile's formulas (the row length, a loss's column index) takes another
    # name in the profile; it is passed by position, so the reference is called as before.
    renamed = {}
    for name in tensors:
        if name in FORMULA_SYMBOLS:
            candidate = f"{name}_in"
            while candidate in order or candidate in renamed.values():
                candidate += "_"
            renamed[name] = candidate
    tensors = [renamed.get(name, name) for name in tensors]
    return tensors, hypers, concrete, [renamed.get(name, name) for name in order]


def _namespace(loaded: LoadedReference) -> dict:
    """The globals of the module the reference was loaded into (load.py registers it in sys.modules)."""
    module = sys.modules.get(getattr(loaded.obj, "__module__", ""), None)
    return vars(module) if module is not None else {}


def _refuse_optional_divisors(loaded: LoadedReference, optional: list[str]) -> None:
    """``loss / num_items_in_batch`` when it is given, the mean otherwise: two reductions, one traced."""
    found = divisor_when_given(loaded.source, loaded.entry, loaded.kind, optional) if optional else None
    if found is None:
        return
    name, line = found
    raise AnalyzeError(
        f"'{name}' defaults to None and is divided by when it is given, so the reference computes one thing with it "
        f"and another without, which kernelgen cannot trace both of: give '{name}' a number default that computes as "
        f"the None case, or drop it (a loss divided by Transformers' num_items_in_batch: take reduction: str = "
        f"'mean' instead, with 'sum', and divide the kernel's reduction='sum' loss by {name} where you call it, as "
        f"fixed_cross_entropy does)",
        origin=loaded.origin,
        line=line,
    )


def _trace_function(loaded: LoadedReference, overrides: dict[str, Any]) -> TracedReference:
    tensors, hypers, concrete, order = _split_signature(loaded, loaded.obj, skip_self=False)
    concrete.update({name: value for name, value in overrides.items() if name in concrete})
    tracer = _ReferenceTracer(loaded.filename)
    tracer.tensor_inputs = set(tensors)
    graph = _run_tracer(loaded, lambda: tracer.trace(loaded.obj, concrete_args=concrete or None), concrete)
    graph_module = fx.GraphModule(tracer.root, graph, loaded.entry)
    hidden = int(loaded.hints.get("init_args", {}).get("hidden_size", DEFAULT_HIDDEN))
    return _finish(loaded, graph_module, order, tensors, hypers, concrete, {}, hidden, init_params=list(hypers))


def _instantiate(
    loaded: LoadedReference, overrides: dict[str, Any] | None = None
) -> tuple[nn.Module, list[HyperParameter], dict[str, Any]]:
    """The reference module built from its defaults, the ``init_args`` hint and ``overrides``; its constructor's
    arguments; the values it was built with."""
    hint_args = {**loaded.hints.get("init_args", {}), **(overrides or {})}
    kwargs, init_params = {}, []
    parameters = list(inspect.signature(loaded.obj.__init__).parameters.values())[1:]
    # ``alpha=2`` stored as self.alpha and read only as a number in tensor arithmetic: a float written as an int.
    unannotated_ints = [
        p.name for p in parameters if type(p.default) is int and p.annotation is inspect.Parameter.empty
    ]
    float_ints = constructor_numbers(loaded.source, loaded.entry, unannotated_ints, _namespace(loaded))
    for parameter in parameters:
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if parameter.name in hint_args:
            value = hint_args[parameter.name]
            if not _rebuildable(value):
                # The generated tests and benchmark build the reference at each width from its constructor's
                # numbers; an object (a model config) they cannot build again.
                raise AnalyzeError(
                    f"cannot generate from {loaded.entry}, built from '{parameter.name}' "
                    f"({type(value).__name__}): the generated tests build it at each width from numbers; take "
                    f"what it reads of '{parameter.name}' as arguments (hidden_size, eps, ...) instead",
                    origin=loaded.origin,
                )
        elif parameter.default is not inspect.Parameter.empty:
            value = float(parameter.default) if parameter.name in float_ints else parameter.default
        elif parameter.name in HIDDEN_SIZE_NAMES:
            value = DEFAULT_HIDDEN
        elif parameter.name in GROUP_COUNT_NAMES:
            value = DEFAULT_GROUPS
        else:
            raise AnalyzeError(
                f"cannot instantiate {loaded.entry}: __init__ needs '{parameter.name}'; give it a default or a "
                f"hint KERNELGEN = {{'init_args': {{'{parameter.name}': ...}}}} with a number (a model config object "
                "cannot be rebuilt by the tests: take the numbers it gives as arguments)",
                origin=loaded.origin,
            )
        kwargs[parameter.name] = value
        default = None if parameter.default is inspect.Parameter.empty else parameter.default
        default = float(default) if parameter.name in float_ints else default
        kind = _scalar_type(value) or "str"
        init_params.append(HyperParameter(name=parameter.name, type=kind, default=default))
    try:
        module = _build(loaded, kwargs)
    except Exception as error:  # noqa: BLE001 - user code
        raise AnalyzeError(
            f"instantiating {loaded.entry}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) failed: "
            f"{type(error).__name__}: {error}",
            origin=loaded.origin,
            line=line_in_traceback(error, loaded.filename),
        ) from None
    return module, init_params, kwargs


def _rebuildable(value: Any) -> bool:
    """Whether a constructor argument is a value the generated tests can pass again (numbers, strings, None, tensors
    of class weights, a tuple of sizes), not an object such as a model config."""
    if isinstance(value, (tuple, list)):
        return all(_rebuildable(item) for item in value)
    return value is None or isinstance(value, (str, torch.Tensor)) or _scalar_type(value) is not None


def _build(loaded: LoadedReference, kwargs: dict[str, Any]) -> nn.Module:
    """The reference module built with ``kwargs``; a size that defaults to None (``hidden_size=None``, which a model
    always passes) takes the default hidden size where the module cannot be built without one. ``kwargs`` is
    updated with what built it."""
    try:
        return loaded.obj(**kwargs)
    except Exception:
        unset = {name: DEFAULT_HIDDEN for name, value in kwargs.items() if value is None and name in HIDDEN_SIZE_NAMES}
        if not unset:
            raise
    module = loaded.obj(**{**kwargs, **unset})
    kwargs.update(unset)
    return module


def _trace_module(loaded: LoadedReference, overrides: dict[str, Any], probed=None, raw: bool = False):
    """``probed``: the constructor arguments to give a tensor (None: every one that keeps it as a tensor). ``raw``:
    the graph as fx traced it, nothing followed or checked (to compare with the module built at other sizes)."""
    module, init_params, built_with = _instantiate(loaded, overrides)
    arguments = _tensor_arguments(loaded, init_params, built_with, overrides)
    arguments = {name: held for name, held in arguments.items() if probed is None or name in probed}
    if arguments:
        module, init_params, built_with = _instantiate(loaded, {**overrides, **_probes(arguments)})
    module.eval()
    tensors, hypers, concrete, order = _split_signature(loaded, type(module).forward, skip_self=True)
    concrete.update({name: value for name, value in overrides.items() if name in concrete})
    attributes = {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_") and name != "training" and isinstance(value, float)
    }
    held_tensors = _one_value_tensors(module)
    attributes.update({name: _as_written(value) for name, value in held_tensors.items()})
    taken = {*tensors, *(h.name for h in hypers), *concrete}
    rebuilt = _rebuilt_with(loaded)  # both probes below build the module at the same changed arguments: once each
    input_names = _constructor_names(rebuilt, attributes, init_params, built_with, taken)
    derived, unfollowed = _derived_attributes(
        loaded, rebuilt, attributes, init_params, built_with, {*input_names, *taken}
    )
    tracer = _ReferenceTracer(loaded.filename, attributes, module, input_names)
    tracer.tensor_inputs = set(tensors)
    try:
        graph = _run_tracer(loaded, lambda: tracer.trace(module, concrete_args=concrete or None), concrete)
    finally:
        # The Proxies must not outlive the trace; a buffer is found in the module's buffers again.
        module.__dict__.update({name: value for name, value in attributes.items() if name not in held_tensors})
        for name, value in held_tensors.items():
            if name in module._buffers:
                del module.__dict__[name]
            else:
                module.__dict__[name] = value
    norm_modules_as_calls(graph, module)
    loss_modules_as_calls(graph, module)
    activation_modules_as_calls(graph, module)
    if raw:
        return graph
    indexed = _read_by_constant_indices(graph)
    # Per-channel parameters: [H], or held as [1, ..., 1, H] (LayerScale's (1, 1, H)); their length is the row's.
    vectors = [
        p
        for name, p in module.named_parameters()
        if p.dim() >= 1 and p.numel() > 1 and p.numel() == p.shape[-1] and name not in indexed
    ]
    hidden = int(vectors[0].numel()) if vectors else DEFAULT_HIDDEN
    as_hypers = _follow_constructor_numbers(
        loaded, graph, overrides, probed, init_params, built_with, tensors, attributes, input_names, hidden
    )
    _refuse_unfollowed(loaded, graph, unfollowed, input_names)
    _compute_derived_attributes(graph, derived, attributes, input_names, built_with)
    graph_module = fx.GraphModule(module, graph, loaded.entry)
    proxied = {input_names.get(name, name): value for name, value in attributes.items()}
    hypers = hypers + [HyperParameter(name=name, type="float", default=value) for name, value in proxied.items()]
    order = order + list(proxied)
    holders = {attribute: argument for argument, attribute in arguments.items()}
    traced = _finish(
        loaded,
        graph_module,
        order,
        tensors,
        hypers,
        concrete,
        proxied,
        hidden,
        init_params,
        module,
        holders,
        built_with,
    )
    _refuse_rows_split_by_a_size(loaded, traced, built_with)
    init_names = {ip.name for ip in init_params}
    traced.module_switches = {
        name: value
        for name, value in {**_held_loss_options(module, built_with), **vars(module)}.items()
        if name in init_names and name not in HIDDEN_SIZE_NAMES and _scalar_type(value) in ("str", "bool", "int")
    }
    sizes = [ip.name for ip in init_params if ip.name in HIDDEN_SIZE_NAMES]
    sizes += [ip.name for ip in init_params if ip.type == "int" and ip.name in loaded.hints.get("init_args", {})]
    sizes = [name for name in sizes if name not in as_hypers]
    if sizes:
        traced.size_param = sizes[0]
    _link_constructor_arguments(loaded, module, traced, built_with)
    used = {name for name, held in arguments.items() if held in traced.attribute_inputs.values()}
    if used != set(arguments):  # a tensor argument the loss does not read as class weights: traced as it defaults
        return _trace_module(loaded, overrides, used)
    return traced


_SPLITTING_VIEWS = {"view", "reshape", "unflatten"}


def _refuse_rows_split_by_a_size(loaded: LoadedReference, traced: TracedReference, built_with: dict[str, Any]) -> None:
    """A view that splits each row into pieces of a size argument (``q.view(b, t, -1, self.head_dim)``): traced with
    the size at the row's length it is one piece, but a module built with a smaller size computes per piece (per
    head), which a kernel over whole rows does not: refused, rather than computed over the whole row."""
    sizes = {value for name, value in built_with.items() if name in HIDDEN_SIZE_NAMES and type(value) is int}
    for node in traced.graph_module.graph.nodes:
        splits = (node.op == "call_method" and node.target in _SPLITTING_VIEWS) or (
            node.op == "call_function" and node.target is torch.reshape
        )
        if not splits or not node.args or not isinstance(node.args[0], fx.Node):
            continue
        before, after = traced.shape(node.args[0]), traced.shape(node)
        if not before or not after or len(after) != len(before) + 1 or after[-2] != 1 or after[-1] != before[-1]:
            continue
        numbers = {value for _, value in numbers_in((node.args[1:], node.kwargs)) if type(value) is int}
        if after[-1] in sizes and after[-1] in numbers:
            named = sorted(
                name for name, value in built_with.items() if value == after[-1] and name in HIDDEN_SIZE_NAMES
            )
            raise AnalyzeError(
                f"the reference splits each row into pieces of {named[0]} (a view to [..., -1, {named[0]}]) and computes "
                f"per piece; kernelgen computes over whole rows: take rows of {named[0]} (call it on "
                f"x.view(..., -1, {named[0]}))",
                origin=loaded.origin,
                line=node_line(node),
            )


def _follow_constructor_numbers(
    loaded: LoadedReference,
    graph: fx.Graph,
    overrides: dict[str, Any],
    probed,
    init_params: list[HyperParameter],
    built_with: dict[str, Any],
    tensors: list[str],
    attributes: dict[str, Any],
    input_names: dict[str, str],
    hidden: int,
) -> set[str]:
    """Numbers the module computes from a constructor argument (analyze/argument_numbers.py), found by tracing it
    again at two other values: of a size (``math.sqrt(self.dim)``, ``self.scale = dim ** -0.5``) as ``k * size ** p``
    of the row's length or of the size as a hyper-parameter, any other function of a size refused; of a float a held
    submodule keeps (``nn.LayerNorm(hidden, eps=eps)``) as ``a * value + b`` of the float as a hyper-parameter, any
    other function left held at its default (``module.fixed``). -> the size arguments that became
    hyper-parameters."""
    as_hypers = set()
    defaults = {ip.name: ip.default for ip in init_params}
    followed = []
    for argument, value in built_with.items():
        # Sizes by name only: another int (a hinted num_classes) may be read where an int must stay one
        # (F.one_hot's), and it is held at the value the module was built with, as before.
        is_size = type(value) is int and value > 0 and argument in HIDDEN_SIZE_NAMES
        if not is_size and not isinstance(value, float):
            continue
        values = [value, *other_sizes(value)] if is_size else [value, value * 2.0 + 0.5, value * 3.0 + 0.25]
        try:
            graphs = [graph] + [
                _trace_module(loaded, {**overrides, argument: other}, probed, raw=True) for other in values[1:]
            ]
        except Exception:  # noqa: BLE001 - user code, at values it may not take: traced as it was built
            continue
        found, unfollowed = numbers_of_argument(graphs, values, fit_power if is_size else fit_line, is_size)
        # An attribute __init__ computed (a placeholder) is refused by _refuse_unfollowed, which names it.
        if is_size and unfollowed is not None and unfollowed.op != "placeholder":
            raise AnalyzeError(
                f"the traced forward computes a number from {argument} ({argument}={value}) other than as "
                f"k * {argument} ** p, which the generated kernel cannot follow: the kernel would keep the value at "
                f"{argument}={value}; take that number as a float constructor argument",
                origin=loaded.origin,
                line=node_line(unfollowed),
            )
        if not found or unfollowed is not None:
            continue
        followed.append((argument, value, is_size, found))
    # Replaced once every argument was compared: a graph one argument's numbers were replaced in is no longer the
    # program the other arguments' traces are (a module holding nn.Softplus(beta) and nn.ELU(alpha)).
    replaced: set[tuple[int, tuple]] = set()
    for argument, value, is_size, found in followed:
        numbers = {(id(number.node), number.path) for number in found}
        if numbers & replaced:
            continue  # a number of two arguments (gain / sqrt(dim)): followed for the first, the other held fixed
        replaced |= numbers
        # A size is the row's length where it is the row's: it sizes the per-channel parameters, or was filled in
        # for want of a default (the trace's rows are that long); else it is a hyper-parameter, as a float is.
        is_width = is_size and value == hidden and (defaults.get(argument) is None or hidden != DEFAULT_HIDDEN)
        source_of = row_length_of(graph, tensors[0]) if is_width else hyper_of(graph, argument, value, attributes)
        if is_size and not is_width:
            as_hypers.add(argument)
        for number in found:
            if number.node.op == "placeholder":  # an attribute __init__ computed from the size
                attribute = next(a for a in attributes if input_names.get(a, a) == number.node.target)
                uses = list(number.node.users)
                if uses:
                    first = min(uses, key=lambda user: list(graph.nodes).index(user))
                    computed = expression(graph, source_of(first), number.fit, first, node_line(first))
                    number.node.replace_all_uses_with(computed)
                graph.erase_node(number.node)
                del attributes[attribute]
                input_names.pop(attribute, None)
            else:
                replace_number(number, source_of)
    return as_hypers


def _held_loss_options(module: nn.Module, built_with: dict[str, Any]) -> dict[str, Any]:
    """Constructor arguments a held torch loss module keeps under the same name with the same value
    (``self.ce = nn.CrossEntropyLoss(ignore_index=ignore_index)``): switches of the reference as if it kept them."""
    found = {}
    for held in module.modules():
        if held is module or not isinstance(held, nn.modules.loss._Loss):
            continue
        for name, value in vars(held).items():
            if name in built_with and type(built_with[name]) is type(value) and built_with[name] == value:
                found.setdefault(name, value)
    return found


def _read_by_constant_indices(graph: fx.Graph) -> set[str]:
    """Parameters the forward reads only element by element (``self.weight[0]``): a vector of scalars (PolyNorm's
    three weights), not a per-channel parameter whose length would be the hidden size."""
    found = set()
    for node in graph.nodes:
        if node.op != "get_attr" or not node.users:
            continue
        if all(user.target is operator.getitem and type(user.args[1]) is int for user in node.users):
            found.add(str(node.target))
    return found


def _one_value_tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    """Floating tensors of one value the module holds itself, buffers (``register_buffer("scale", torch.tensor(1.5))``)
    or plain attributes: constants of its math, which become float hyper-parameters like ``self.eps``."""
    held = {name: value for name, value in module.named_buffers(recurse=False) if value is not None}
    held.update({name: value for name, value in vars(module).items() if isinstance(value, torch.Tensor)})
    return {
        name: value
        for name, value in held.items()
        if not name.startswith("_")
        and not isinstance(value, nn.Parameter)
        and value.is_floating_point()
        and value.numel() == 1
    }


def _as_written(value: torch.Tensor) -> float:
    """The shortest decimal that rounds to ``value`` in its dtype: 1e-06, not fp32's 9.999999974752427e-07."""
    exact = value.item()
    for digits in range(1, 18):
        candidate = float(f"{exact:.{digits}g}")
        if torch.tensor(candidate, dtype=value.dtype).item() == exact:
            return candidate
    return exact


def _probes(arguments: dict[str, str]) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {name: torch.rand((DEFAULT_HIDDEN,), generator=generator) + 0.5 for name in arguments}


def _tensor_arguments(
    loaded: LoadedReference, init_params: list[HyperParameter], built_with: dict[str, Any], overrides: dict[str, Any]
) -> dict[str, str]:
    """Constructor arguments that are None by default and that the module keeps as a tensor when given one
    (``weight=None`` stored with ``register_buffer("weight", weight)``, as torch's losses take class weights):
    argument -> the attribute that holds it, proven by building the module with a tensor for it. The module is then
    traced with such a tensor, so the trace sees the loss that reads it."""
    found = {}
    for param in init_params:
        if built_with.get(param.name, 0) is not None or param.name in overrides:
            continue
        if _annotated_a_number(loaded, param.name):
            continue  # ``softcap: Optional[float] = None``: a number when given, never class weights
        probe = _probes({param.name: ""})[param.name]
        try:
            rebuilt, _, _ = _instantiate(loaded, {**overrides, param.name: probe})
        except AnalyzeError:
            continue
        held = [name for name, value in rebuilt.named_buffers() if value is probe]
        held += [name for name, value in vars(rebuilt).items() if value is probe and not name.startswith("_")]
        if held:
            found[param.name] = held[0]
    return found


def _rebuilt_with(loaded: LoadedReference):
    """``(argument, value) -> module``: the reference module built with one constructor argument changed (None where
    it cannot be built), each built once."""
    built: dict[tuple[str, Any], nn.Module | None] = {}

    def rebuilt(argument: str, value: Any) -> nn.Module | None:
        if (argument, value) not in built:
            try:
                built[argument, value] = _instantiate(loaded, {argument: value})[0]
            except AnalyzeError:
                built[argument, value] = None
        return built[argument, value]

    return rebuilt


def _constructor_names(
    rebuilt,
    attributes: dict[str, float],
    init_params: list[HyperParameter],
    built_with: dict[str, Any],
    taken: set[str],
) -> dict[str, str]:
    """Float attributes stored under another name than the constructor argument that sets them
    (``self.variance_epsilon = eps``): attribute -> that argument, proven by building the module again with the
    argument changed. The kernel's hyper-parameter then has the constructor's name, so the reference module, the
    generated module and the tests are all built with ``eps=...``."""
    names: dict[str, str] = {}
    init_names = {ip.name for ip in init_params}
    candidates = [ip.name for ip in init_params if isinstance(built_with.get(ip.name), float) and ip.name not in taken]
    for attribute, value in attributes.items():
        if attribute in init_names:
            continue
        for argument in candidates:
            if argument in names.values():
                continue
            if _stored_as_given(rebuilt, attribute, argument, built_with[argument], value):
                names[attribute] = argument
                break
    return names


# Other values of a float constructor argument ``start`` at which an attribute is compared: above it, negative, far
# above it and a fraction of it, so that ``abs(scale)``, ``min(scale, 5.0)``, ``scale if scale > 0 else 1.0`` and
# ``round(scale, 1)`` show where they leave the line they follow near the default.
def _float_probes(start: float) -> tuple[float, ...]:
    return (start * 2.0 + 0.5, start * 3.0 + 0.25, -(start * 1.5 + 0.75), start * 10.0 + 7.5, start * 0.5 + 0.0625)


def _stored_as_given(rebuilt, attribute: str, argument: str, start: float, value: float) -> bool:
    """Whether ``__init__`` keeps float constructor argument ``argument`` as ``self.<attribute>`` unchanged: the
    attribute is the argument at its default and at every other value the module can be built with."""
    return _first_change(rebuilt, attribute, argument, start, value) is None


def _first_change(rebuilt, attribute: str, argument: str, start: float, value: float) -> tuple[float, Any] | None:
    """The first (argument's value, attribute's value) at which ``self.<attribute>`` is not ``argument`` as given,
    or None where it always is."""
    if value != start:
        return start, value
    for probe in _float_probes(start):
        module = rebuilt(argument, probe)
        if module is not None and getattr(module, attribute, None) != probe:
            return probe, getattr(module, attribute, None)
    return None


def _derived_attributes(
    loaded: LoadedReference,
    rebuilt,
    attributes: dict[str, float],
    init_params: list[HyperParameter],
    built_with: dict[str, Any],
    linked: set[str],
) -> tuple[dict[str, tuple[str, float, float]], dict[str, str]]:
    """Float attributes that ``__init__`` computes from a constructor argument, found by building the module again
    with the argument changed. Traced as a hyper-parameter of its own, such an attribute would keep its default while
    the argument changed. -> (followed, unfollowed): attribute -> (argument, a, b) where attribute = a * argument + b
    for a float argument (timm's ``self.confidence = 1.0 - smoothing``), proven at two other values; attribute -> why
    not, where the relation is no straight line or the argument an int the generated module takes at any value (a
    size: ScaleNorm's ``self.scale = dim ** -0.5``); an int argument with a default is held at it (``module.fixed``)."""
    followed: dict[str, tuple[str, float, float]] = {}
    unfollowed: dict[str, str] = {}
    init_names = {ip.name for ip in init_params}
    hinted = set(loaded.hints.get("init_args", {}))
    defaults = {ip.name: ip.default for ip in init_params}
    for attribute, value in attributes.items():
        if attribute in init_names and isinstance(built_with.get(attribute), float) and isinstance(value, float):
            # ``self.eps = max(eps, 1e-2)``: an attribute of the argument's name that is not the argument as given
            # would be traced as that argument, at its default and at every other value.
            change = _first_change(rebuilt, attribute, attribute, built_with[attribute], value)
            if change is not None:
                at, got = change
                unfollowed[attribute] = (
                    f"__init__ computes self.{attribute} from {attribute} ({got!r} at {attribute}={at!r}) and keeps "
                    f"it under the argument's own name; kernelgen takes "
                    f"self.{attribute} to be {attribute} as given: keep self.{attribute} = {attribute} and compute the "
                    "rest in forward"
                )
            continue
        if attribute in init_names or attribute in linked or not isinstance(value, float):
            continue
        for argument, start in built_with.items():
            is_float = isinstance(start, float)
            if not is_float and type(start) is not int:
                continue
            probes = _float_probes(start) if is_float else (start * 2 + 1,)
            points = [(start, value)]
            for probe in probes:
                module = rebuilt(argument, probe)
                if module is not None:  # a value the module cannot be built with proves nothing
                    points.append((probe, getattr(module, attribute, None)))
            if len(points) < (3 if is_float else 2) or not all(isinstance(y, float) for _, y in points):
                continue
            if all(y == value for _, y in points[1:]):
                continue
            line = f"__init__ computes self.{attribute} from {argument} ({value:.6g} at {argument}={start})"
            if not is_float:
                held = defaults.get(argument) is not None and argument not in {*HIDDEN_SIZE_NAMES, *hinted}
                if not held:
                    unfollowed[attribute] = (
                        f"{line} other than as k * {argument} ** p; the generated module would keep that value for "
                        f"any {argument}: take {attribute} as a constructor argument (self.{attribute} = {attribute})"
                    )
                break
            (x0, y0), (x1, y1) = points[:2]
            a = (y1 - y0) / (x1 - x0)
            b = y0 - a * x0
            if all(math.isclose(a * x + b, y, rel_tol=1e-9, abs_tol=1e-12) for x, y in points[2:]):
                followed[attribute] = (argument, a, b)
            else:
                unfollowed[attribute] = (
                    f"{line} other than as a * {argument} + b, which kernelgen cannot follow: keep "
                    f"self.{argument} = {argument} and compute {attribute} from it in forward"
                )
            break
    return followed, unfollowed


def _refuse_unfollowed(
    loaded: LoadedReference, graph: fx.Graph, unfollowed: dict[str, str], input_names: dict[str, str]
) -> None:
    """The first attribute of ``unfollowed`` that the traced forward reads, refused in one line."""
    read = {node.target for node in graph.nodes if node.op == "placeholder" and node.users}
    for attribute, message in unfollowed.items():
        if input_names.get(attribute, attribute) in read:
            raise AnalyzeError(message, origin=loaded.origin, line=_assignment_line(loaded.obj.__init__, attribute))


def _assignment_line(function, attribute: str) -> int | None:
    """The file line of ``self.<attribute> = ...`` in ``function``, or None."""
    try:
        lines, start = inspect.getsourcelines(function)
    except (OSError, TypeError):
        return None
    pattern = re.compile(rf"\s*self\.{re.escape(attribute)}\s*(:[^=]*)?=[^=]")
    return next((start + index for index, text in enumerate(lines) if pattern.match(text)), None)


def _compute_derived_attributes(
    graph: fx.Graph,
    derived: dict[str, tuple[str, float, float]],
    attributes: dict[str, float],
    input_names: dict[str, str],
    built_with: dict[str, Any],
) -> None:
    """Each derived attribute's input replaced by its value computed from the constructor argument's (a * argument +
    b after the inputs): the argument's own input where the module also keeps it (``self.smoothing``), else the
    attribute's input renamed to the argument and defaulted to its value. ``attributes`` follows."""
    placeholders = {node.target: node for node in graph.nodes if node.op == "placeholder"}
    for attribute, (argument, a, b) in derived.items():
        own = placeholders[input_names.get(attribute, attribute)]
        source = placeholders.get(argument)
        if source is None:
            own.target, own.args = argument, (built_with[argument],)
            own._rename(argument)
            placeholders[argument] = source = own
        line = next((user.meta.get(LINE_KEY) for user in own.users), None)
        with graph.inserting_after(list(placeholders.values())[-1]):
            if a == -1.0:  # 1.0 - smoothing, as written
                scaled = value = graph.call_function(operator.sub, (b, source))
            else:
                scaled = graph.call_function(operator.mul, (source, a)) if a != 1.0 else source
        if a != -1.0:
            with graph.inserting_after(scaled):
                value = graph.call_function(operator.add, (scaled, b)) if b != 0.0 else scaled
        for node in {scaled, value} - {source}:
            node.meta[LINE_KEY] = line
        own.replace_all_uses_with(value, delete_user_cb=lambda user: user is not scaled and user is not value)
        if source is not own:
            graph.erase_node(own)
        del attributes[attribute]
        attributes.setdefault(argument, built_with[argument])
        input_names.pop(attribute, None)


def _link_constructor_arguments(
    loaded: LoadedReference, module: nn.Module, traced: TracedReference, built_with: dict[str, Any]
) -> None:
    """Which constructor arguments shape the learnable parameters, found by building the module again with one
    argument changed: a float argument a constant parameter starts at (``init_alpha``) becomes its ``init_arg``; a
    bool argument that, switched off, removes a parameter whose absence computes as its initial value (``beta``)
    becomes its ``enabled_by``. Anything the probes cannot establish is left unlinked."""
    by_target = {p.attribute or p.name: p for p in traced.parameters}
    size_names = set(HIDDEN_SIZE_NAMES) | {traced.size_param}
    for name, value in built_with.items():
        if name in size_names or name in {h.name for h in traced.hyperparameters}:
            continue
        if isinstance(value, float):
            probe = value + 0.375
            rebuilt = _rebuild(loaded, {name: probe})
            for target, param in by_target.items():
                if _initial_value(param) != _in_float32(value) or param.description or rebuilt is None:
                    continue
                tensor = dict(rebuilt.named_parameters()).get(target)
                if tensor is not None and bool((tensor.detach() == probe).all()):
                    param.init, param.init_arg, param.init_value = "constant", name, None
        elif value is True:
            rebuilt = _rebuild(loaded, {name: False})
            if rebuilt is None:
                continue
            present = dict(rebuilt.named_parameters())
            # Removed parameters, each with a known initial value (a non-uniform one has a description).
            removed = [p for target, p in by_target.items() if target not in present and not p.description]
            if removed and _absent_is_initial(loaded, module, rebuilt):
                for param in removed:
                    param.enabled_by = name
    _link_size_following_values(loaded, traced, built_with, by_target)


def _link_size_following_values(
    loaded: LoadedReference, traced: TracedReference, built_with: dict[str, Any], by_target: dict
) -> None:
    """A constant parameter that starts elsewhere when the module is built at another size (``dim ** 0.5``) gets
    the reference's own expression of its value (``initial_values``); one written otherwise is refused, naming it:
    a module starting it at the traced size's value would start every other size wrong."""
    size = traced.size_param
    constants = {t: p for t, p in by_target.items() if p.init == "constant" and not p.init_arg and not p.description}
    if not constants or not size or not isinstance(built_with.get(size), int) or isinstance(built_with[size], bool):
        return
    rebuilt = _rebuild(loaded, {size: built_with[size] * 2})
    if rebuilt is None:
        return
    present = dict(rebuilt.named_parameters())
    constructor = set(built_with)
    for target, param in constants.items():
        tensor = present.get(target)
        if tensor is None or tensor.numel() == 0 or _in_float32(tensor.reshape(-1)[0].item()) == _initial_value(param):
            continue
        written = initial_expression(loaded.source, loaded.entry, target, constructor)
        if written is None:
            raise AnalyzeError(
                f"the parameter '{target}' starts at {param.init_value:g} when the module is built with "
                f"{size}={built_with[size]} and elsewhere at other sizes: kernelgen copies such a starting value "
                f"only from `self.{target} = nn.Parameter(EXPRESSION)` in __init__, reading the constructor's "
                "arguments, torch and math; write it so",
                origin=loaded.origin,
            )
        param.init_expr = written


def _initial_value(param: LearnableParameter) -> float | None:
    """The value a uniformly initialised parameter starts at, as fp32 holds it."""
    values = {"ones": 1.0, "zeros": 0.0, "constant": param.init_value}
    value = values.get(param.init)
    return None if value is None else _in_float32(value)


def _in_float32(value: float) -> float:
    return torch.tensor(float(value), dtype=torch.float32).item()


def _rebuild(loaded: LoadedReference, overrides: dict[str, Any]) -> nn.Module | None:
    try:
        return _instantiate(loaded, overrides)[0]
    except AnalyzeError:
        return None


def _absent_is_initial(loaded: LoadedReference, full: nn.Module, reduced: nn.Module) -> bool:
    """Whether the module without some parameters computes what the full one computes with them at their initial
    values: the shared parameters get the same random values, the missing ones keep their initial ones."""
    generator = torch.Generator().manual_seed(0)
    full = copy.deepcopy(full).eval()
    reduced = copy.deepcopy(reduced).eval()
    shared = dict(reduced.named_parameters())
    try:
        with torch.no_grad():
            for target, tensor in full.named_parameters():
                if target in shared:
                    tensor.copy_(torch.rand(tensor.shape, generator=generator) + 0.5)
                    shared[target].copy_(tensor)
            arguments = _signature_tensors(loaded, full, generator)
            expected, actual = full(*arguments), reduced(*arguments)
    except Exception:  # noqa: BLE001 - user code; an unanswered probe links nothing
        return False
    expected, actual = _as_tensors(expected), _as_tensors(actual)
    return len(expected) == len(actual) and all(
        e.shape == a.shape and torch.allclose(e, a, rtol=1e-6, atol=1e-6) for e, a in zip(expected, actual)
    )


def _annotation_text(loaded: LoadedReference, name: str) -> str:
    """Constructor argument ``name``'s annotation as written (``typing.Optional[float]``, ``float | None``), or ''."""
    parameter = inspect.signature(loaded.obj.__init__).parameters.get(name)
    if parameter is None or parameter.annotation is inspect.Parameter.empty:
        return ""
    return parameter.annotation if isinstance(parameter.annotation, str) else repr(parameter.annotation)


def _annotated_kinds(loaded: LoadedReference, name: str) -> set[str]:
    """The number types and ``Tensor`` that constructor argument ``name``'s annotation names (``Optional[float]``:
    {"float"}), each as a whole word."""
    return set(re.findall(r"\b(float|int|bool|Tensor)\b", _annotation_text(loaded, name)))


def _annotated_a_number(loaded: LoadedReference, name: str) -> bool:
    """Whether constructor argument ``name`` is annotated as a number (``Optional[float]``, ``int``), not a tensor."""
    kinds = _annotated_kinds(loaded, name)
    return bool(kinds) and "Tensor" not in kinds


def _numbers_for_none(loaded: LoadedReference, name: str) -> list[Any]:
    """Values to probe constructor argument ``name`` (default None) with: numbers of its annotation's type
    (``Optional[float]``: 2.5, 0.5 and -0.5, so that a bound inside the inputs' range is seen; ``Optional[int]``:
    3, 1, 0; ``Optional[bool]``: True), floats unannotated."""
    kinds = _annotated_kinds(loaded, name)
    if "float" not in kinds and "bool" in kinds:
        return [True]
    if "float" not in kinds and "int" in kinds:
        return [3, 1, 0]
    return [2.5, 0.5, -0.5]


def _other_values(value: Any) -> list[Any]:
    """Values other than a constructor argument's default ``value`` to probe it with, the usual one first: its
    opposite for a bool; for an int ``2 * value + 1`` and the small class indices 0, 1 and 2 (an ``ignore_index`` the
    probe's targets hold); for a float the attribute probes' values (``_float_probes``: a sign or a bound the first
    one does not cross); none for a str."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        candidates = [value * 2 + 1, 0, 1, 2]
    elif isinstance(value, float):
        candidates = list(_float_probes(value))
    else:
        return []
    return [v for v in dict.fromkeys(candidates) if v != value]


def changes_the_output(loaded: LoadedReference, name: str, value: Any, class_indices: tuple[str, ...] = ()) -> bool:
    """Whether building the reference module with another value of constructor argument ``name`` than ``value``
    changes what it computes (the same random inputs and parameters; the forward's ``class_indices`` inputs drawn as
    small class indices, the others as rows). True where that cannot be shown otherwise (a str has no other value to
    try, the probe fails): ``inplace=False`` changes nothing, a submodule's option does. An argument of default None
    (``softcap: Optional[float] = None`` read under ``if self.softcap is not None``) is probed with numbers; where no
    probe builds the module it is not taken to change anything (``device=None``, ``dtype=None``)."""
    others = _numbers_for_none(loaded, name) if value is None else _other_values(value)
    if not others:
        return True
    full = _rebuild(loaded, {})
    if full is None:
        return value is not None
    full = full.eval()
    built_any = False
    for other in others:
        changed = _rebuild(loaded, {name: other})
        if changed is None:
            continue
        built_any = True
        changed = changed.eval()
        generator = torch.Generator().manual_seed(0)
        try:
            with torch.no_grad():
                changed.load_state_dict(full.state_dict())
                arguments = _signature_tensors(loaded, full, generator, class_indices)
                expected, actual = _as_tensors(full(*arguments)), _as_tensors(changed(*arguments))
        except Exception:  # noqa: BLE001 - user code; an unanswered probe keeps the argument fixed
            if value is not None:
                return True
            continue
        if len(expected) != len(actual) or not all(
            e.shape == a.shape and torch.allclose(e, a, rtol=1e-6, atol=1e-6, equal_nan=True)
            for e, a in zip(expected, actual)
        ):
            return True
    return value is not None and not built_any


def changes_the_parameters(loaded: LoadedReference, name: str, value: Any, linked: set[str]) -> bool:
    """Whether building the reference module with another value of constructor argument ``name`` than ``value``
    changes a learnable parameter other than ``linked`` (those it is the ``init_arg`` or ``enabled_by`` of): its
    initial values (xIELU's ``log(expm1(alpha_p_init))``, ``torch.ones(1) / order``), its shape or whether it learns
    (StarReLU's ``requires_grad=scale_learnable``). ``changes_the_output`` cannot see these: it gives both modules
    the same parameters. Both are built from the same seed; False where the probe cannot tell."""
    others = _other_values(value)
    if not others:
        return False
    other = others[0]
    built = []
    for overrides in ({}, {name: other}):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            built.append(_rebuild(loaded, overrides))
    full, changed = built
    if full is None or changed is None:
        return False
    present = dict(changed.named_parameters())
    for target, tensor in full.named_parameters():
        if target in linked:
            continue
        other_tensor = present.get(target)
        if other_tensor is None:
            return True
        if other_tensor.shape != tensor.shape or other_tensor.requires_grad != tensor.requires_grad:
            return True
        if not torch.equal(other_tensor.detach(), tensor.detach()):
            return True
    return False


def _signature_tensors(
    loaded: LoadedReference, module: nn.Module, generator: torch.Generator, class_indices: tuple[str, ...] = ()
) -> list[Any]:
    """Random rows for each forward argument without a default (the tensor inputs); defaults for the rest. With
    ``class_indices`` (a loss's targets) the rows are a flat [6, hidden] batch and those inputs one class index per
    row among the first four classes, so that an ``ignore_index`` probed at 0, 1 or 2 meets one."""
    vectors = [p for p in module.parameters() if p.dim() == 1 and p.numel() > 1]
    hidden = int(vectors[0].numel()) if vectors else DEFAULT_HIDDEN
    rows = (6,) if class_indices else (2, 3)
    arguments = []
    for parameter in list(inspect.signature(type(module).forward).parameters.values())[1:]:
        if parameter.name in class_indices:
            arguments.append(torch.randint(0, min(4, hidden), rows, generator=generator))
        elif parameter.default is inspect.Parameter.empty:
            arguments.append(torch.randn((*rows, hidden), generator=generator))
        else:
            arguments.append(parameter.default)
    return arguments


def _as_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [item for item in value if isinstance(item, torch.Tensor)] if isinstance(value, (tuple, list)) else []


@contextlib.contextmanager
def _len_as_size(loaded: LoadedReference):
    """``len(x)`` of a traced tensor as ``x.size(0)`` (fx cannot record ``len``): while tracing, the reference's
    module namespace holds a ``len`` that records the size for a traced value."""
    function = loaded.obj.forward if loaded.kind == "module" else loaded.obj
    namespace = getattr(function, "__globals__", None)
    if namespace is None or "len" in namespace:
        yield
        return

    def traced_len(value):
        return value.size(0) if isinstance(value, fx.Proxy) else builtins.len(value)

    namespace["len"] = traced_len
    try:
        yield
    finally:
        del namespace["len"]


def _run_tracer(loaded: LoadedReference, trace, concrete: dict[str, Any]) -> fx.Graph:
    """``concrete``: the arguments traced at their defaults (an argument that defaults to None is traced as None)."""
    try:
        with _len_as_size(loaded):
            return trace()
    except AnalyzeError:
        raise
    except _HyperParameterBranch as branch:
        listed = ", ".join(f"'{name}'" for name in branch.names)
        raise AnalyzeError(
            f"Python control flow on the hyper-parameter {listed}, which the kernel takes at run time: compute both "
            "sides with torch.where, or decide it by a bool or str argument (the kernel is then specialised on its value)",
            origin=loaded.origin,
            line=branch.line,
        ) from None
    except Exception as error:  # noqa: BLE001 - fx and user code raise anything
        text = str(error).split("\n")[0]
        optional = _none_defaults(loaded)
        if "control flow" in text and optional:
            # ``eps = eps or 1e-6``: an argument that defaults to None is traced as an optional tensor input.
            listed = ", ".join(f"'{name}'" for name in optional)
            why = (
                f"Python control flow on a traced value: {listed} defaults to None and is traced as an optional tensor "
                f"input (a hyper-parameter needs a number default, eps: float = 1e-6; a branch on values, torch.where)"
            )
        elif distribution := _distribution_in_traceback(error):
            # ``Categorical(logits=x).entropy()``: torch.distributions checks and branches on the values it is built
            # from, which a trace does not have.
            why = (
                f"torch.distributions.{distribution} cannot be traced (it checks and branches on the values it is "
                "built from); write its math with the tensors: log_softmax for its log-probabilities, "
                "-(p * log_p).sum(-1) for its entropy "
            )
            why += HAND_WRITTEN_PROFILE_HINT
        elif "iterated" in text:
            # ``x.view(*x.shape[:-1], heads, -1)``: unpacking a traced shape.
            why = (
                "a traced value cannot be unpacked or iterated (`*x.shape[:-1]`, `for d in x.shape`); index it "
                "(x.shape[-1]) or reshape with -1 "
            )
            why += HAND_WRITTEN_PROFILE_HINT
        elif "control flow" in text or "len(" in text:
            why = f"data-dependent Python control flow cannot be traced ({text}); use torch.where "
            why += HAND_WRITTEN_PROFILE_HINT
        elif "finfo" in text:
            # ``torch.finfo(x.dtype).eps`` (an HF RMSNorm's default): the traced dtype is no floating-point type.
            why = (
                "torch.finfo(x.dtype) cannot be traced (the traced dtype is no floating-point type); take eps as a "
                "float hyper-parameter (eps: float = 1e-6) "
            )
            why += HAND_WRITTEN_PROFILE_HINT
        elif "__cuda_array_interface__" in text or "__array" in text:
            # torch.tensor(eps) / torch.as_tensor of an argument: torch reads the traced value as array data
            why = (
                "a tensor made from an argument (torch.tensor(eps), torch.as_tensor) cannot be traced; compute with "
                "the number itself (math.sqrt(eps), eps ** 0.5) "
            )
            why += HAND_WRITTEN_PROFILE_HINT
        elif "does not support item assignment" in text:
            # ``labels[labels == -100] = 0`` (TRL's get_batch_logps): fx proxies take no __setitem__.
            why = (
                "an item assignment (`x[mask] = value`) cannot be traced; write it out of place: "
                "`x = torch.where(mask, value, x)` (`labels = torch.where(labels == -100, 0, labels)`) "
            )
            why += HAND_WRITTEN_PROFILE_HINT
        elif "NoneType" in text and (absent := [name for name, value in concrete.items() if value is None]):
            # An optional tensor (gate=None) the forward uses anyway: the trace ran it as None.
            listed = ", ".join(f"'{name}'" for name in absent)
            verb = "defaults" if len(absent) == 1 else "default"
            why = (
                f"tracing failed: {type(error).__name__}: {text}: {listed} {verb} to None and is traced so; a tensor "
                "input takes no default"
            )
        else:
            why = f"tracing failed: {type(error).__name__}: {text}"
        raise AnalyzeError(why, origin=loaded.origin, line=line_in_traceback(error, loaded.filename)) from None


def _distribution_in_traceback(error: BaseException) -> str | None:
    """The torch.distributions class whose code raised ``error`` (``Categorical``), or None."""
    found = None
    for frame, _ in traceback.walk_tb(error.__traceback__):
        if f"torch{os.sep}distributions{os.sep}" in frame.f_code.co_filename and "self" in frame.f_locals:
            found = found or type(frame.f_locals["self"]).__name__
    return found


def _entry_syntax(loaded: LoadedReference) -> ast.FunctionDef | None:
    """The entry's function (a module's forward) as written, or None where the source does not show it."""
    try:
        return entry_function(ast.parse(loaded.source), loaded.entry, loaded.kind)
    except SyntaxError:
        return None


def _none_defaults(loaded: LoadedReference) -> list[str]:
    """The entry's arguments (a module's forward's) that default to None."""
    function = _entry_syntax(loaded)
    if function is None:
        return []
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    pairs = list(zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults))
    pairs += [(argument, default) for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default]
    return [a.arg for a, d in pairs if isinstance(d, ast.Constant) and d.value is None]


_VIEWS = {"view", "reshape", "transpose", "permute", "expand", "narrow", "select", "squeeze", "unsqueeze", "flatten"}


def _is_view(node: fx.Node) -> bool:
    """A tensor that shares another's storage: a view method or an indexing (``x[:, :3]``)."""
    return node.target in _VIEWS or node.target is operator.getitem


def _functionalize_in_place_ops(loaded: LoadedReference, graph: fx.Graph) -> None:
    """``z.mul_(2.0)`` as ``z = z.mul(2.0)``: fx records the in-place call, but later uses of ``z`` still name the
    tensor before it, so the mutation would be lost. Each in-place method's later users read its result instead,
    and it becomes the out-of-place op. Writing into a reference's input or into a view (which would write through
    to another tensor) is refused."""
    order = {node: index for index, node in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        name = node.target if node.op == "call_method" else None
        if not (isinstance(name, str) and name.endswith("_") and not name.startswith("_")):
            continue
        base = node.args[0]
        line = node.meta.get(LINE_KEY)
        if not isinstance(base, fx.Node) or base.op == "placeholder" or _is_view(base):
            what = (
                f"input '{base.target}'" if getattr(base, "op", None) == "placeholder" else "a view of another tensor"
            )
            raise AnalyzeError(
                f"`.{name}` writes in place into {what}; compute a new tensor instead (x = x.{name[:-1]}(...))",
                origin=loaded.origin,
                line=line,
            )
        for user in list(base.users):
            if user is not node and order[user] > order[node]:
                user.replace_input_with(base, node)
        node.target = name[:-1]


def _refuse_augmented_assignments_to_inputs(loaded: LoadedReference, tensors) -> None:
    """``x += y`` on a tensor input ``x`` writes into the caller's tensor (torch's ``__iadd__``), which fx traces as an
    out-of-place ``x + y``: refused as ``x.add_(y)`` is, before a leaf input that requires grad makes the reference
    itself fail where it runs."""
    function = _entry_syntax(loaded)
    if function is None:
        return
    inputs = set(tensors)
    rebound = set()
    statements = sorted(
        (n for n in ast.walk(function) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for statement in statements:
        if isinstance(statement, ast.AugAssign):
            target = statement.target
            if isinstance(target, ast.Name) and target.id in inputs and target.id not in rebound:
                op = ast.unparse(ast.AugAssign(target=target, op=statement.op, value=ast.Name("y"))).split()[1]
                raise AnalyzeError(
                    f"`{target.id} {op} ...` writes in place into input '{target.id}'; compute a new tensor instead "
                    f"({target.id} = {target.id} {op[:-1]} ...)",
                    origin=loaded.origin,
                    line=statement.lineno,
                )
            continue
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        for target in targets:
            rebound.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))


# NumPy's spellings that torch's reductions also take (torch.mean(x, axis=-1, keepdims=True)).
_NUMPY_KEYWORDS = {"axis": "dim", "keepdims": "keepdim"}


def _numpy_keywords_as_torch(graph: fx.Graph) -> None:
    """Each call's NumPy-style keywords under torch's names, which every later reading of a call's dims uses."""
    for node in graph.nodes:
        if node.op in ("call_function", "call_method") and any(key in _NUMPY_KEYWORDS for key in node.kwargs):
            node.kwargs = {_NUMPY_KEYWORDS.get(key, key): value for key, value in node.kwargs.items()}


def _reachable(graph: fx.Graph) -> set[fx.Node]:
    output = next(node for node in graph.nodes if node.op == "output")
    seen, stack = set(), [output]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(node.all_input_nodes)
    return seen


# Ops that repeat or move elements between positions: no derivative rule would help, only inputs laid out already.
_REARRANGING_OPS = {"repeat", "tile", "roll", "index_select", "take_along_dim", "scatter"}


def _normalize_all(loaded: LoadedReference, graph_module: fx.GraphModule, live: set[fx.Node]) -> dict:
    calls = {}
    for node in graph_module.graph.nodes:
        if node not in live or node.op not in ("call_function", "call_method", "call_module"):
            continue
        try:
            call = normalize(node, graph_module)
        except UnknownOpError as error:
            if error.label.rsplit(".", 1)[-1].removesuffix("()") in _REARRANGING_OPS:
                raise AnalyzeError(
                    f"`{error.label}` repeats or moves elements to other positions, which kernelgen takes only as "
                    f"index maps within the row (slices, chunk/split, cat, flip, stack(..., -1).flatten(-2), "
                    f"repeat_interleave(r, dim=-1)); pass the kernel its inputs laid out already, or write the map "
                    f"with those ops",
                    origin=loaded.origin,
                    line=node_line(node),
                ) from None
            raise AnalyzeError(
                f"`{error.label}` is not an op kernelgen knows (it has no derivative rule for it); "
                f"express it with supported ops (e.g. torch.where, clamp, exp, log, sigmoid, tanh) "
                f"{HAND_WRITTEN_PROFILE_HINT}",
                origin=loaded.origin,
                line=node_line(node),
            ) from None
        node.meta["kernelgen_family"] = call.family
        calls[node] = call
    return calls


def _output_nodes(graph_module: fx.GraphModule, loaded: LoadedReference) -> tuple[list[fx.Node], list[str]]:
    output = next(node for node in graph_module.graph.nodes if node.op == "output")
    value = output.args[0]
    if isinstance(value, dict):
        # The generated Function, module and tests return tensors as a tuple: a dict would be another API.
        raise AnalyzeError(
            f"'{loaded.entry}' returns a dict ({', '.join(map(str, value))}); return its tensors instead "
            f"(`return {', '.join(map(str, value))}`)",
            origin=loaded.origin,
        )
    if isinstance(value, (tuple, list)):
        names = _returned_names(loaded, len(value)) or [f"y{index + 1}" for index in range(len(value))]
        return list(value), names
    return [value], ["y"]


def _returned_names(loaded: LoadedReference, count: int) -> list[str] | None:
    """The variable names of ``return a, b`` in the entry (a module's forward), when every returned value is one."""
    function = _entry_syntax(loaded)
    if function is None:
        return None
    returns = [node for node in ast.walk(function) if isinstance(node, ast.Return)]
    if len(returns) != 1 or not isinstance(returns[0].value, ast.Tuple):
        return None
    names = [element.id if isinstance(element, ast.Name) else None for element in returns[0].value.elts]
    return names if len(names) == count and None not in names and len(set(names)) == count else None


def _finish(
    loaded,
    graph_module,
    order,
    tensors,
    hypers,
    concrete,
    attributes,
    hidden,
    init_params,
    module=None,
    arguments=None,
    built_with=None,
):
    _functionalize_in_place_ops(loaded, graph_module.graph)
    _refuse_augmented_assignments_to_inputs(loaded, tensors)
    _numpy_keywords_as_torch(graph_module.graph)
    arguments_in_order = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    tensor_nodes = {node: name for node, name in zip(arguments_in_order, order) if name in tensors}
    shifts = unshift_targets(graph_module.graph, tensor_nodes, loaded.origin)
    # Statistics over groups of channels: the graph rewritten as the row program over a group (analyze/groups.py).
    # A constructor argument without a default (nn.GroupNorm's num_groups) counts at the value the module was built with.
    argument_values = {h.name: h.default for h in init_params}
    argument_values.update({k: v for k, v in (built_with or {}).items() if argument_values.get(k, 0) is None})
    argument_values = {**argument_values, **{h.name: h.default for h in hypers}, **concrete}
    argument_values.update(
        {k: v for k, v in (vars(module) if module is not None else {}).items() if k in argument_values}
    )
    channel_groups = regroup_channels(
        loaded,
        graph_module.graph,
        dict(zip(order, (node for node in graph_module.graph.nodes if node.op == "placeholder"))),
        tensors,
        list(argument_values.items()),
        hidden,
        module,
    )
    graph_module.recompile()
    live = _reachable(graph_module.graph)
    calls = _normalize_all(loaded, graph_module, live)
    attribute_inputs = {}
    if module is not None:
        taken = (set(order) | {h.name for h in hypers} | {ip.name for ip in init_params}) - set(
            (arguments or {}).values()
        )
        attribute_inputs = _class_attributes_as_inputs(
            graph_module, module, calls, taken, arguments or {}, loaded.origin
        )
        if attribute_inputs:
            tensors, order = tensors + list(attribute_inputs), order + list(attribute_inputs)
            live = _reachable(graph_module.graph)
            calls = _normalize_all(loaded, graph_module, live)
    # fx renames specialised placeholders (``approximate_1``), so they are matched to arguments by position.
    placeholders = dict(zip(order, (node for node in graph_module.graph.nodes if node.op == "placeholder")))
    outputs, output_names = _output_nodes(graph_module, loaded)
    if any(not isinstance(node, fx.Node) for node in outputs):
        raise AnalyzeError(f"'{loaded.entry}' must return tensors computed from its inputs", origin=loaded.origin)
    if not tensors:
        raise AnalyzeError(
            f"'{loaded.entry}' takes no tensor input (annotated scalars are hyper-parameters): a kernel needs one",
            origin=loaded.origin,
        )
    taken = set(tensors) | {h.name for h in hypers}
    output_names = [name if name not in taken else f"{name}_out" for name in output_names]

    # A float hyper-parameter nothing reads (init_alpha, only used to build a parameter) is not one of the op.
    hypers = [h for h in hypers if h.name in concrete or placeholders.get(h.name) in live]
    decisions = _target_roles(loaded, module, calls, tensors)
    probability_targets = {id(call) for call, decision in decisions if decision.role == PROBABILITIES}
    index_calls = {node: call for node, call in calls.items() if id(call) not in probability_targets}
    index_inputs = _index_inputs(index_calls, tensors, _ignored_values(hypers, concrete))
    _refuse_shifted_values(loaded, shifts, index_inputs)
    class_inputs = _class_inputs(calls, tensors, index_inputs)
    class_inputs += [name for name in attribute_inputs if name not in class_inputs + index_inputs]
    hinted = loaded.hints.get("per_class", [])  # read only along the classes (a one-hot row times them)
    unknown = sorted(set(hinted) - (set(tensors) - set(index_inputs)))
    if unknown:
        raise AnalyzeError(
            f"KERNELGEN hint 'per_class' names {unknown}, which are no tensor inputs of real numbers",
            origin=loaded.origin,
        )
    class_inputs = [name for name in tensors if name in class_inputs or name in hinted]

    parameters, parameter_names, others = [], {}, []
    used_targets = {node.target for node in live if node.op == "get_attr"}
    for node in live:
        if node.op == "call_module":
            used_targets.update(
                f"{node.target}.{name}" for name, _ in graph_module.get_submodule(node.target).named_parameters()
            )
    if module is not None:
        for target, tensor in module.named_parameters():
            if target not in used_targets:
                continue
            name = target.replace(".", "_")
            parameter_names[target] = name
            learnable = _learnable(name, tensor, hidden)
            elements = _indexed_elements(tensor, calls, live, target) if learnable is None else None
            if elements:
                for index in elements:
                    element = _learnable(f"{name}_{index}", tensor[index], hidden)
                    element.attribute = element_target(target, index)
                    parameter_names[element.attribute] = element.name
                    parameters.append(element)
            elif learnable is None:
                others.append(f"{name} {list(tensor.shape)}")
            else:
                if learnable.shape == "channel":
                    _refuse_channels_off_the_row(loaded, graph_module, live, target, tensor.detach())
                learnable.attribute = target if target != name else ""
                parameters.append(learnable)

    # Example inputs: rows of ``hidden`` values; a class target or gather index is one per row, so inputs
    # that come with one are a flat (6, hidden) batch, as are the inputs of a loss over rows (``x.shape[0]`` is
    # then the row count); others (2, 3, hidden).
    flat = index_inputs or _reduces_rows_to_a_loss(calls) or names_dim_one(calls)
    # A reference that names dim k >= 2 (TRL's ``logits.log_softmax(-1).gather(dim=2, ...)``) is written for inputs
    # of k + 1 dims ([B, T, V]): its rows span k dims.
    named = _highest_named_dim(calls)
    rows_shape = (6,) if flat and named < 2 else (2,) * (max(named, 2) - 1) + (3,)
    rows = [name for name in tensors if name not in index_inputs + class_inputs]
    if tensors and not rows:
        raise AnalyzeError(
            f"no input holds rows of values: {', '.join(tensors)} are read only as indices or at them (a value per "
            f"class taken at a class index); kernelgen's kernels compute over the rows of a floating-point input",
            origin=loaded.origin,
        )
    broadcast_inputs = declared_broadcasts(loaded, tensors, index_inputs + class_inputs)
    first_rank = max(len(rows_shape) + 1, declared_rank(loaded.hints.get("shapes", {}).get(rows[0] if rows else "")))
    # ``cos.unsqueeze(2)`` is written for a first input of at least 4 dims ([batch, seq, heads, dim]): at rank 3 the
    # inserted dim would be the last one (one value per row).
    first_rank = max(first_rank, _highest_unsqueeze_dim(calls) + 2)
    # Indexing that writes out every dim (GPT-J's ``x[:, :, :, ::2]``) gives the examples that rank, broadcast or not;
    # so does unpacking the first input's shape (``B, T, V = logits.shape``, a GroupNorm's ``B, C, H, W = x.shape``:
    # a grouped norm's rows are the groups, whatever the dims after the channels).
    unpacked_rank = _unpacked_rank(loaded, rows[0]) if rows else 0
    written_rank = max(_rank_spelled_out(calls), unpacked_rank if unpacked_rank >= 3 else 0)
    first_rank = max(first_rank, written_rank)
    grouped_rank = unpacked_rank if channel_groups is not None else 0
    first_rank = max(first_rank, grouped_rank)
    flat_rows = False
    # A loss's logits made rows by flatten(0, 1) or view(-1, V) come [B, T, V] (a row kernel takes any rank as is).
    flattened_rank = max(unpacked_rank, _flattened_rank(loaded, rows[0]) if rows else 0)
    if len(rows_shape) == 1 and flattened_rank >= 3:
        # A loss written for [B, T, V] logits that flattens them itself: its examples have those dims.
        rows_shape, flat_rows = (2,) * (flattened_rank - 2) + (3,), True
    if len(rows_shape) == 1 and shifts:
        # Labels shifted along their tokens: examples of several sequences, each with a last token, where the
        # reference takes [B, T, V] logits (it flattens them itself).
        example = (graph_module, order, tensors, index_inputs, {name: (hidden,) for name in class_inputs})
        if _propagate_shapes(*example, _SEQUENCES, calls, hypers, concrete, attributes, hidden, [], record=False):
            rows_shape, flat_rows = _SEQUENCES, True
    broadcast_inputs.update(_unsqueezed_inputs(placeholders, calls, rows, broadcast_inputs, first_rank))
    broadcast_inputs.update(_affine_inputs(placeholders, calls, rows, broadcast_inputs))
    loss_like = bool(index_inputs) or _reduces_rows_to_a_loss(calls)
    hinted = {**loaded.hints.get("shapes", {}), **broadcast_inputs}  # a whole shape declared is no pattern
    per_column = _per_column_inputs(placeholders, calls, rows, hinted, loss_like)
    broadcast_inputs.update(per_column)
    # A per-channel input of grouped rows: [channels] against [batch, channels, rest] (read at each element's channel);
    # the rewritten graph reads it as one value per column of its example rows.
    grouped_inputs = sorted(channel_groups.inputs) if channel_groups is not None else []
    broadcast_inputs.update({name: with_inserted_dims([KEPT], [1]) for name in grouped_inputs})
    broadcast_ranks = list(map(pattern_rank, broadcast_inputs.values()))
    deepest = max([first_rank, *broadcast_ranks]) if broadcast_ranks else max(grouped_rank, written_rank)
    rows_shape = (2,) * (deepest - 1 - len(rows_shape)) + rows_shape  # each broadcast pattern fits the examples
    # Example shapes other than rows of ``hidden`` values: per-class inputs, inputs that broadcast against the rows.
    shaped = {name: (hidden,) for name in class_inputs}
    shaped.update({name: shape_for(p, rows_shape + (hidden,)) for name, p in broadcast_inputs.items()})
    shaped.update({name: (hidden,) for name in grouped_inputs})
    example = (graph_module, order, tensors, index_inputs, shaped, rows_shape, calls, hypers, concrete)
    conditions = _condition_inputs(graph_module.graph, {node: name for name, node in placeholders.items()})
    example += (attributes, hidden, conditions)
    # A loss's input that the reference unsqueezes into [rows, 1] (``w.unsqueeze(-1)``) holds one value per row.
    unsqueezed_rows = [n for n in broadcast_inputs if loss_like and shaped[n] == rows_shape] if rows_shape else []
    for name in unsqueezed_rows:
        del broadcast_inputs[name], shaped[name]
    shaped_apart = [*index_inputs, *class_inputs, *broadcast_inputs]
    row_inputs = _per_row_inputs(loaded, example, shaped_apart, loss_like, unsqueezed_rows)
    shapes_known = _propagate_shapes(*example, row_inputs=row_inputs)
    # After an op that regroups the row, an input of shorter rows than the first's can meet it (GPT-J's half-width
    # sin and cos repeated inside the function).
    if not shapes_known and not loss_like and any(call.name in INDEX_MAP_OPS for call in calls.values()):
        narrower = [name for name in rows[1:] if name not in row_inputs and name not in grouped_inputs]
        for name, factor in _narrower_inputs(example, narrower, broadcast_inputs, row_inputs).items():
            broadcast_inputs[name] = narrowed(broadcast_inputs.get(name, ""), factor)
            shaped[name] = shape_for(broadcast_inputs[name], rows_shape + (hidden,))
            shapes_known = True
        if shapes_known:
            shapes_known = _propagate_shapes(*example, row_inputs=row_inputs)
    if flat_rows and shapes_known:
        # Per-row values viewed back to [B, T] (``loss.view(B, T)``) are not flat; a loss reduced at its traced
        # reduction cannot view them back, so its reduction none gives them as it computed them, [B*T].
        flat_rows = all(len(getattr(output.meta.get("tensor_meta"), "shape", ())) < 2 for output in outputs)
    per_sequence = [name for name in unsqueezed_rows if name in row_inputs]
    if shapes_known and per_sequence and len(rows_shape) == 1 and _crosses_rows(graph_module, rows_shape):
        raise _ValuesPerSequence(rows[0], per_sequence)
    specialized = {name: value for name, value in concrete.items() if _scalar_type(value) is not None}
    traced = TracedReference(
        loaded=loaded,
        graph_module=graph_module,
        tensor_inputs=tensors,
        index_inputs=index_inputs,
        hyperparameters=hypers,
        parameters=parameters,
        parameter_names=parameter_names,
        other_parameters=others,
        init_params=init_params,
        calls=calls,
        outputs=outputs,
        output_names=output_names,
        hidden=hidden,
        rank=len(rows_shape) + 1,
        shapes_known=shapes_known,
        placeholder_names={node: name for name, node in placeholders.items()},
        specialized=specialized,
        class_inputs=class_inputs,
        attribute_inputs=attribute_inputs,
        broadcast_inputs=broadcast_inputs,
        row_inputs=row_inputs,
        conditions=conditions,
        channel_groups=channel_groups,
        written_rank=written_rank,
        shifts=shifts,
        flat_rows=flat_rows,
    )
    traced.notes.extend(decision.remark(call.name) for call, decision in decisions)
    traced.notes.extend(
        f"shape: {name} is one value per column ([hidden]), as a norm's {name} is; "
        f'KERNELGEN = {{"shapes": {{"{rows[0]}": "batch seq hidden", "{name}": "batch seq hidden"}}}} if it is whole'
        for name in per_column
    )
    if not shapes_known:
        traced.notes.append("running the reference on example inputs failed; dims were read from the arguments")
    return traced


def _crosses_rows(graph_module: fx.GraphModule, rows_shape: tuple[int, ...]) -> bool:
    """Whether a value of the graph, as ``_propagate_shapes`` recorded it, holds rows x rows elements."""
    crossed = tuple(rows_shape) * 2
    return any(
        tuple(getattr(node.meta.get("tensor_meta"), "shape", ())) == crossed for node in graph_module.graph.nodes
    )


def declared_broadcasts(loaded: LoadedReference, tensors: list[str], not_rows: list[str]) -> dict[str, str]:
    """The broadcast pattern of each tensor input the hint ``KERNELGEN = {"shapes": {...}}`` declares with a shape
    other than the first input's (see ``tools.kernelgen.broadcast``)."""
    declared = loaded.hints.get("shapes", {})
    if not isinstance(declared, dict):
        raise AnalyzeError(
            f"KERNELGEN hint 'shapes' must map input names to shapes, got {declared!r}", origin=loaded.origin
        )
    rows = [name for name in tensors if name not in not_rows]
    unknown = sorted(set(declared) - set(rows))
    if unknown:
        raise AnalyzeError(
            f"KERNELGEN hint 'shapes' names {unknown}, which are no tensor inputs of rows ({', '.join(rows)})",
            origin=loaded.origin,
        )
    patterns = {}
    for name, shape in declared.items():
        if name == rows[0]:
            continue
        try:
            pattern = declared_pattern(shape, declared.get(rows[0]))
        except ValueError as error:
            raise AnalyzeError(f"KERNELGEN hint 'shapes': {name}: {shape!r} {error}", origin=loaded.origin) from None
        if pattern:
            patterns[name] = pattern
    first = declared.get(rows[0])
    if isinstance(first, str) and "1" in declared_tokens(first):
        raise AnalyzeError(
            f"KERNELGEN hint 'shapes': {rows[0]} is the first input, whose shape the others broadcast against: it "
            f"cannot broadcast itself (put a full input first)",
            origin=loaded.origin,
        )
    if isinstance(first, str):
        # Megatron's bias_gelu(bias, y): a first input declared with fewer dims than another broadcasts against it.
        dims = set(declared_tokens(first))
        for name, shape in declared.items():
            if name == rows[0] or not isinstance(shape, str):
                continue
            tokens = declared_tokens(shape)
            # (a shorter row, "dim/2", is a row of the first input's "dim")
            named = [token.split("/")[0] for token in tokens if token not in ("1", ELLIPSIS)]
            # "..." stands for the first input's leading dims: more than it has where the first has none of its own.
            leading = ELLIPSIS in tokens and ELLIPSIS not in dims and len(named) >= len(dims - {ELLIPSIS})
            if set(named) - dims or leading:
                raise AnalyzeError(
                    f"KERNELGEN hint 'shapes': {rows[0]} ({first!r}) is the first input, whose shape the others "
                    f"broadcast against, and {name} ({shape!r}) has dims it lacks: put a full input first "
                    f"({name}, then {rows[0]})",
                    origin=loaded.origin,
                )
    return patterns


def declared_rank(declared: Any) -> int:
    """The rank a ``shapes`` hint's entry gives (0: none or ``...``)."""
    if isinstance(declared, str):
        tokens = declared_tokens(declared)
        return 0 if ELLIPSIS in tokens else len(tokens)
    return len(declared) if isinstance(declared, (tuple, list)) else 0


def _unsqueezed_inputs(
    placeholders: dict[str, fx.Node], calls: dict, rows: list[str], declared: dict[str, str], first_rank: int
) -> dict[str, str]:
    """Inputs other than the first that the reference only reads through one and the same ``unsqueeze`` (or
    ``[:, None]``): they broadcast against the first input with the dims it inserts (DiT's ``scale.unsqueeze(1)``).
    Each has the first input's rank less the inserted dims unless the ``shapes`` hint says otherwise; -> pattern."""
    found = {}
    others = {placeholders[name] for name in rows if name in placeholders}
    for name in rows[1:]:
        node = placeholders.get(name)
        unsqueezes = _unsqueezes_of(node, calls, others - {node}) if node is not None else []
        if not unsqueezes:
            continue
        own = pattern_tokens(declared[name]) if name in declared else None
        if own is not None and (ELLIPSIS in own or INSERTED in own):
            continue
        results = {
            _inserted_positions(user, source, len(own) if own else None, first_rank) for user, source in unsqueezes
        }
        inserted = results.pop() if len(results) == 1 else None
        if not inserted:
            continue
        own = own or [KEPT] * (first_rank - len(inserted))
        if len(own) + len(inserted) <= first_rank:
            found[name] = with_inserted_dims(own, list(inserted))
    return found


def _affine_inputs(placeholders: dict[str, fx.Node], calls: dict, rows: list[str], declared: dict[str, str]) -> dict:
    """Inputs passed as the weight or bias of ``F.rms_norm`` / ``F.layer_norm``: one value per column of the
    normalized (last) dim, which torch requires them to be (``[hidden]``: pattern ``*``)."""
    nodes = {placeholders[name]: name for name in rows[1:] if name in placeholders and name not in declared}
    found = {}
    for call in calls.values():
        if call.name not in ("layer_norm", "rms_norm"):
            continue
        for key in ("weight", "bias"):
            operand = call.options.get(key)
            if isinstance(operand, fx.Node) and operand in nodes:
                found[nodes[operand]] = KEPT
    return found


# What a norm's per-column weight and bias are called.
PER_COLUMN_NAMES = ("weight", "w", "gamma", "beta", "bias")


def _per_column_inputs(
    placeholders: dict[str, fx.Node], calls: dict, rows: list[str], declared: dict[str, str], loss_like: bool
) -> dict:
    """Inputs of a row reduction (a norm) named as a norm's weight or bias that no reduction reads, directly or
    through other values: one value per column (pattern ``*``). Torch broadcasts either shape; the reference's
    callers pass a norm's weight as ``[hidden]``, which a kernel of full-shape inputs would refuse."""
    if loss_like or not any(call.family == REDUCTION for call in calls.values()):
        return {}
    found = {}
    for name in rows[1:]:
        if name in declared or name.lower() not in PER_COLUMN_NAMES or name not in placeholders:
            continue
        reduced = any(user in calls and calls[user].family == REDUCTION for user in descendants(placeholders[name]))
        if not reduced:
            found[name] = KEPT
    return found


def _unsqueezes_of(node: fx.Node, calls: dict, others: set[fx.Node]) -> list[tuple[fx.Node, fx.Node]]:
    """``(unsqueeze, its operand)`` of each unsqueeze the input ``node`` reaches through element-wise ops of itself
    alone (``torch.sigmoid(gate)[..., None]``), when every path from it meets one before anything else; else empty."""
    found, own, stack = [], {node}, list(node.users)
    while stack:
        user = stack.pop()
        call = calls.get(user)
        if user in own:
            continue
        if call is None:
            return []
        if call.name == "unsqueeze" or _ones_view(user) is not None:
            found.append((user, next(n for n in user.all_input_nodes if n in own)))
            continue
        inputs = [n for n in user.all_input_nodes if n not in own]
        if call.family not in (ELEMENTWISE, CAST) or any(n in others or n.op != "placeholder" for n in inputs):
            return []  # it meets another input, a parameter or a computed value before it is unsqueezed
        own.add(user)
        stack.extend(user.users)
    return found


def _view_dims(user: fx.Node) -> list | None:
    """The target shape of a ``view`` / ``reshape`` method call (None for any other node)."""
    if user.op != "call_method" or user.target not in ("view", "reshape"):
        return None
    return list(user.args[1] if len(user.args) == 2 and isinstance(user.args[1], (tuple, list)) else user.args[1:])


def _ones_view(user: fx.Node) -> tuple[int, ...] | None:
    """The positions of literal 1s in the target shape of a ``view`` / ``reshape`` (``scale.view(b, 1, h)``, the
    other dims read from the first input's shape): the dims it inserts; None for any other op or no literal 1."""
    dims = _view_dims(user)
    ones = tuple(position for position, dim in enumerate(dims or []) if type(dim) is int and dim == 1)
    return ones or None


def _inserted_positions(user: fx.Node, node: fx.Node, own_rank: int | None, first_rank: int) -> tuple[int, ...]:
    """The dims of ``user``'s result (an unsqueeze of ``node``, or a view that only adds dims of 1) that it inserts,
    for an ``own_rank``-dim input (None: the first input's rank less the dims inserted); empty when that cannot be
    told."""
    ones = _ones_view(user)
    if ones is not None:
        kept = len(_view_dims(user)) - len(ones)
        return ones if kept > 0 and own_rank in (None, kept) else ()
    if any(isinstance(a, fx.Node) and a is not node for a in [*user.args, *user.kwargs.values()]):
        return ()

    def apply(rank: int) -> torch.Tensor | None:
        # Distinct sizes above 1 tell the input's dims from inserted ones.
        probe = torch.empty(tuple(range(2, 2 + rank)), device="meta")
        args = [probe if a is node else a for a in user.args]
        try:
            if user.op == "call_method":
                return getattr(args[0], user.target)(*args[1:], **user.kwargs)
            return user.target(*args, **user.kwargs)
        except Exception:  # noqa: BLE001 - a use it cannot replay is no evidence
            return None

    if own_rank is None:
        probed = apply(first_rank)
        own_rank = first_rank - (probed.dim() - first_rank) if probed is not None else 0
    result = apply(own_rank) if own_rank > 0 else None
    if result is None:
        return ()
    return tuple(position for position, size in enumerate(result.shape) if size == 1)


def _target_roles(loaded, module, calls: dict[fx.Node, OpCall], tensors: list[str]) -> list:
    """``(call, RoleDecision)`` of each loss whose target may be class indices or probabilities (see ``roles``),
    where the target comes from one tensor input."""
    fn = type(module).forward if module is not None else loaded.obj
    decisions = []
    for call in calls.values():
        if call.name not in EITHER_TARGET or len(call.operands) < 2 or not isinstance(call.operands[1], fx.Node):
            continue
        target = call.operands[1]
        leaves = _leaves_behind([target], lambda node: node.all_input_nodes)
        names = [node.target for node in leaves if node.op == "placeholder" and node.target in tensors]
        if len(names) == 1:
            decisions.append((call, target_role(loaded, fn, names[0], target)))
    return decisions


# The index a causal LM's labels mark ignored rows with (torch's ignore_index default).
IGNORED_LABEL = -100


def _ignored_values(hypers: list[HyperParameter], concrete: dict[str, Any]) -> set[int]:
    """The integers a label compared with them marks rows by: -100 and the negative values of int hyper-parameters
    (an ignore index is no class; a 0 or 1 a float mask is compared with would make the mask an index)."""
    ints = {concrete.get(hp.name, hp.default) for hp in hypers if hp.type == "int"}
    return {v for v in ints if isinstance(v, int) and not isinstance(v, bool) and v < 0} | {IGNORED_LABEL}


def _index_inputs(calls: dict[fx.Node, OpCall], tensors: list[str], ignored: frozenset[int] = frozenset()) -> list[str]:
    """Tensor inputs an index operand is computed from (``target``, ``target.unsqueeze(-1)``,
    ``target.clamp(min=0)``), and labels compared with an ignored index (``labels != ignore_index``): integers
    that mask rows without picking a class are labels too, whatever ignored index the caller passes."""
    starts = [operand for call in calls.values() for operand in call.index_operands if isinstance(operand, fx.Node)]
    for call in calls.values():
        if call.name in ("eq", "ne") and len(call.operands) == 2:
            node, value = call.operands if isinstance(call.operands[0], fx.Node) else call.operands[::-1]
            if isinstance(node, fx.Node) and type(value) is int and value in ignored:
                starts.append(node)
    # Sizes are no data: ``labels.view(B * T, 1)`` with ``B, T, V = logits.shape`` reads logits' shape, not values.
    names = {node.target for node in _leaves_behind(starts, lambda node: _values_read(node))}
    return [name for name in tensors if name in names]


def _refuse_shifted_values(loaded: LoadedReference, shifts: list[Shift], index_inputs: list[str]) -> None:
    """A shift pads with a class index that no row picks: of the labels only, not of the rows' values."""
    for shift in shifts:
        if shift.input not in index_inputs:
            raise AnalyzeError(
                f"'{shift.input}' is shifted one token left as a causal LM's labels are, but it is no class-index "
                "target: kernelgen shifts only the labels of a loss (the logits stay where they are)",
                origin=loaded.origin,
                line=shift.line,
            )


def _values_read(node: fx.Node) -> list[fx.Node]:
    """The nodes whose values ``node`` computes with: its inputs but those that read a shape (``x.shape``,
    ``x.size(0)``, arithmetic on them)."""
    return [operand for operand in node.all_input_nodes if operand.meta.get("kernelgen_family") != META]


def _class_inputs(calls: dict[fx.Node, OpCall], tensors: list[str], index_inputs: list[str]) -> list[str]:
    """Tensor inputs of one value per class (see ``_class_leaves``). A reference that only multiplies rows by them
    (``one_hot(t) * w``) names them in the hint ``KERNELGEN = {"per_class": ["w"]}``: their shape is not in the
    code."""
    names = {node.target for node in _class_leaves(calls) if node.op == "placeholder"}
    return [name for name in tensors if name in names and name not in index_inputs]


def _class_leaves(calls: dict[fx.Node, OpCall]) -> set[fx.Node]:
    """The placeholders and module attributes (``get_attr``) read as one value per class: a library loss's
    ``weight``, or what is picked from by a class index alone (``w[target]``, ``w.gather(0, target)``,
    ``w.index_select(0, target)``, ``torch.take(w, target)``), cast or reshaped on the way (``w.float()[target]``)."""
    sources = []
    for call in calls.values():
        if call.name in ("cross_entropy", "nll_loss") and isinstance(call.options.get("weight"), fx.Node):
            sources.append(call.options["weight"])
        picks_classes = (
            call.name == "take"
            or (call.name == "index" and isinstance(call.node.args[1], fx.Node))  # w[target], not x[rows, target]
            or (call.name in ("gather", "index_select") and call.options.get("dim") == 0)
        )
        if picks_classes and call.operands and isinstance(call.operands[0], fx.Node):
            sources.append(call.operands[0])

    def cast_or_reshaped(node: fx.Node) -> list[fx.Node]:
        call = calls.get(node)
        if call is None or call.family not in (CAST, LAYOUT) or not call.operands:
            return []
        return [operand for operand in call.operands[:1] if isinstance(operand, fx.Node)]

    return _leaves_behind(sources, cast_or_reshaped)


def _leaves_behind(starts: list[fx.Node], follow) -> set[fx.Node]:
    """The placeholders and attributes reached from ``starts`` going back along ``follow(node)`` (what it reads)."""
    leaves, seen, stack = set(), set(), list(starts)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op in ("placeholder", "get_attr"):
            leaves.add(node)
        else:
            stack.extend(follow(node))
    return leaves


def _class_attributes_as_inputs(
    graph_module: fx.GraphModule, module: nn.Module, calls: dict, taken: set[str], arguments: dict[str, str], origin
) -> dict[str, str]:
    """Tensors of one value per class the module holds (a buffer or a tensor attribute, ``self.weight``), read by
    the loss as class weights: each becomes a tensor input of the graph, after the others, named after the
    constructor argument that sets it (``arguments``: attribute -> argument) or the attribute. Returns ``{input:
    attribute}``."""
    holders = {id(value): name for name, value in module.named_buffers() if value is not None}
    for name, value in vars(module).items():
        if isinstance(value, torch.Tensor) and not name.startswith("_"):
            holders.setdefault(id(value), name)
    graph = graph_module.graph
    last = [node for node in graph.nodes if node.op == "placeholder"][-1]
    found: dict[str, str] = {}
    leaves = _class_leaves(calls)
    if _reduces_rows_to_a_loss(calls):
        # A loss's vector buffer read beside the logits (a logit adjustment's log prior, ``logits + tau *
        # self.log_prior``): one value per class as well, which takes no gradient.
        leaves |= {
            node
            for node in graph.nodes
            if node.op == "get_attr"
            and isinstance(value := _attribute(graph_module, node.target), torch.Tensor)
            and not isinstance(value, nn.Parameter)
            and value.dim() == 1
            and value.numel() > 1
        }
    for node in sorted(leaves, key=lambda n: n.name):
        if node.op != "get_attr":
            continue
        value = _attribute(graph_module, node.target)
        if isinstance(value, nn.Parameter):
            raise AnalyzeError(
                f"`self.{node.target}` is an nn.Parameter read as class weights (one value per class), which take no "
                f"gradient in a tier-3 kernel: hold them in a buffer (register_buffer), which the kernel takes as an "
                f"input",
                origin=origin,
                line=next((node_line(user) for user in node.users), None),
            )
        if not isinstance(value, torch.Tensor) or id(value) not in holders:
            continue
        holder = holders[id(value)]
        name = arguments.get(holder, holder.replace(".", "_"))
        if name in taken or name in found:
            continue  # the attribute keeps its refusal as a parameter kernelgen cannot take
        # The path the forward reads where it names the tensor (``self.crit.weight``, a held loss module's copy of
        # ``self.class_weight``): the tests set the class weights there, where the reference reads them.
        attribute = node.target if _attribute(module, str(node.target)) is value else holder
        with graph.inserting_after(last):
            last = graph.placeholder(name, default_value=None)  # after defaulted placeholders: one itself
        node.replace_all_uses_with(last)
        graph.erase_node(node)
        found[name] = attribute
    if found:
        graph_module.recompile()
    return found


def _attribute(root: nn.Module, target: str):
    value = root
    for part in target.split("."):
        value = getattr(value, part, None)
    return value


_LOSSES = ("cross_entropy", "nll_loss", "kl_div", "one_hot")


def _reduces_rows_to_a_loss(calls: dict[fx.Node, OpCall]) -> bool:
    """A library loss, or a sum/mean over every dim (``x.sum()``): the reference reduces its rows to a loss."""
    for call in calls.values():
        if call.name in _LOSSES:
            return True
        if call.name in ("sum", "mean") and call.options.get("dim") in (None, (), []):
            return True
    return False


def _unpacked_rank(loaded: LoadedReference, name: str) -> int:
    """The number of names ``name``'s shape is unpacked into (``B, C, H, W = x.shape`` or ``x.size()``), else 0."""
    function = _entry_syntax(loaded)
    if function is None:
        return 0
    for node in ast.walk(function):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)):
            continue
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size":
            value = value.func if not value.args else None
        if isinstance(value, ast.Attribute) and value.attr in ("shape", "size"):
            if isinstance(value.value, ast.Name) and value.value.id == name:
                return len(node.targets[0].elts)
    return 0


def _flattened_rank(loaded: LoadedReference, name: str) -> int:
    """The rank ``name``'s leading dims flattened into rows tell (``logits.flatten(0, 1)``, ``torch.flatten(x, 0, -2)``,
    ``x.flatten(end_dim=1)``: [B, T, V], 3), else 0."""
    function = _entry_syntax(loaded)
    if function is None:
        return 0
    found = 0
    lengths = _row_length_locals(function, name)
    for node in ast.walk(function):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr in ("view", "reshape") and _rows_of_any_rank(node, name, lengths):
            found = max(found, 3)  # x.view(-1, x.size(-1)): the rows of [B, T, V] as well as of [rows, V]
            continue
        if node.func.attr != "flatten":
            continue
        args = list(node.args)
        if isinstance(node.func.value, ast.Name) and node.func.value.id == name:
            pass
        elif args and isinstance(args[0], ast.Name) and args[0].id == name and ast.unparse(node.func.value) == "torch":
            args = args[1:]
        else:
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        start = args[0] if args else keywords.get("start_dim")
        end = args[1] if len(args) > 1 else keywords.get("end_dim")
        try:
            start_dim = ast.literal_eval(start) if start is not None else 0
            end_dim = ast.literal_eval(end) if end is not None else -1
        except ValueError:
            continue
        if start_dim == 0 and isinstance(end_dim, int) and end_dim >= 1:
            found = max(found, end_dim + 2)  # the dims up to end_dim become rows, the last stays the classes
        elif start_dim == 0 and end_dim == -2:
            found = max(found, 3)
    return found


def _rows_of_any_rank(call: ast.Call, name: str, lengths: set[str] = frozenset()) -> bool:
    """``name.view(-1, name.size(-1))`` / ``name.reshape(-1, name.shape[-1])`` (or a local assigned that length,
    ``V = name.shape[-1]``, in ``lengths``): every leading dim made rows."""
    if not (isinstance(call.func.value, ast.Name) and call.func.value.id == name and len(call.args) == 2):
        return False
    first, last = (ast.unparse(arg).replace(" ", "") for arg in call.args)
    return first == "-1" and (last in (f"{name}.size(-1)", f"{name}.shape[-1]") or last in lengths)


def _row_length_locals(function: ast.AST, name: str) -> set[str]:
    """Locals the function assigns ``name``'s row length to (``V = logits.shape[-1]``, ``V = logits.size(-1)``)."""
    return {
        node.targets[0].id
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and ast.unparse(node.value).replace(" ", "") in (f"{name}.size(-1)", f"{name}.shape[-1]")
    }


def _highest_unsqueeze_dim(calls: dict[fx.Node, OpCall]) -> int:
    """The highest non-negative dim an ``unsqueeze`` inserts at (-1 when none does)."""
    highest = -1
    for node, call in calls.items():
        if call.name != "unsqueeze" or node.target is operator.getitem:
            continue
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        if isinstance(dim, int) and not isinstance(dim, bool):
            highest = max(highest, dim)
    return highest


def _rank_spelled_out(calls: dict[fx.Node, OpCall]) -> int:
    """The rank that the reference's indexing spells out, every dim written (0 when none does): Mistral's
    ``cos[:, None, :, :]`` makes a 4-dim value, GPT-J's ``x[:, :, :, ::2]`` slices the last of 4 dims."""
    rank = 0
    for node, call in calls.items():
        index = node.args[1] if node.op == "call_function" and node.target is operator.getitem else None
        if not isinstance(index, tuple) or Ellipsis in index:
            continue
        if call.name == "unsqueeze":
            rank = max(rank, len(index))
        elif call.name == "slice" and isinstance(index[-1], slice) and all(i == slice(None) for i in index[:-1]):
            rank = max(rank, len(index))
    return rank


def _highest_named_dim(calls: dict[fx.Node, OpCall]) -> int:
    """The highest non-negative dim any op names as its ``dim`` (-1 when none does)."""
    highest = -1
    for call in calls.values():
        named = call.options.get("dim")
        for dim in named if isinstance(named, (tuple, list)) else (named,):
            if isinstance(dim, int) and not isinstance(dim, bool):
                highest = max(highest, dim)
    return highest


def names_dim_one(calls: dict[fx.Node, OpCall]) -> bool:
    """A reduction along ``dim=1`` (``x.pow(2).mean(dim=1, keepdim=True)``): the reference is written for
    [rows, columns] inputs, where dim 1 is the row; traced on 3-d examples it would reduce another dim."""
    return names_dim(calls, 1)


def names_dim(calls: dict[fx.Node, OpCall], dim: int) -> bool:
    """Whether a reduction names ``dim`` by its position (``softmax(x, dim=2)``, the row of 3-d inputs only)."""
    for call in calls.values():
        if call.family != "reduction":
            continue
        named = call.options.get("dim")
        dims = named if isinstance(named, (tuple, list)) else (named,)
        if dim in dims:
            return True
    return False


def element_target(target: str, index: int) -> str:
    """How the reference reads one element of a parameter vector (``weight[0]``): its attribute path and index."""
    return f"{target}[{index}]"


def _indexed_elements(tensor: torch.Tensor, calls: dict, live: set, target: str) -> list[int] | None:
    """The constant indices a 1-d parameter is read at (``self.weight[0]``, ``self.weight[2]``), when it is read only
    so: each such element is a scalar parameter of the kernel, its gradient a sum over every element of the rows."""
    if tensor.dim() != 1:
        return None
    indices = set()
    for node in live:
        if node.op != "get_attr" or node.target != target:
            continue
        for user in node.users:
            call = calls.get(user)
            if call is None or call.name != "parameter_element":
                return None
            indices.add(call.options["index"] % tensor.shape[0])
    return sorted(indices) or None


def _refuse_channels_off_the_row(
    loaded: LoadedReference, graph_module: fx.GraphModule, live: set, target: str, tensor: torch.Tensor
) -> None:
    """A per-channel parameter reshaped so that its values lie along another dim than the last (BigVGAN's Snake on
    ``[batch, channels, time]``: ``alpha.unsqueeze(0).unsqueeze(-1)``, ``w[None, :, None]``) is one line: the
    kernel reads per-channel parameters along the row, and dropping the view would compute another function (where
    the shapes differ, the generated module only fails its smoke run, blaming the reference)."""
    values = {node: tensor for node in live if node.op == "get_attr" and node.target == target}
    pending = list(values)
    while pending:
        node = pending.pop()
        for user in node.users:
            if user not in live or not _is_view(user) or not user.args or user.args[0] is not node:
                continue
            operands = []
            fx.node.map_arg((user.args[1:], user.kwargs), operands.append)
            if operands:
                continue
            try:
                if user.op == "call_method":
                    result = getattr(values[node], user.target)(*user.args[1:], **user.kwargs)
                else:
                    result = user.target(values[node], *user.args[1:], **user.kwargs)
            except Exception:  # noqa: BLE001 - a view the probe cannot replay is left to the other checks
                continue
            if not isinstance(result, torch.Tensor):
                continue
            if result.numel() == tensor.numel() and result.dim() > 1 and result.shape[-1] != tensor.numel():
                raise AnalyzeError(
                    f"the parameter '{target}' of {tensor.numel()} channels is laid out as "
                    f"{tuple(result.shape)}, along dim {list(result.shape).index(tensor.numel())} rather than the "
                    f"last: kernelgen's per-channel parameters run along the last dim; write the reference for "
                    f"channels-last input ([batch, time, channels], the parameter read as [channels]) and transpose "
                    f"where it is called",
                    origin=loaded.origin,
                    line=user.meta.get(LINE_KEY),
                )
            values[user] = result
            pending.append(user)


def _learnable(name: str, tensor: torch.Tensor, hidden: int) -> LearnableParameter | None:
    """``tensor`` (a module's parameter) as a profile parameter, None where it is no channel vector or scalar; a
    frozen one (``nn.Parameter(..., requires_grad=False)``) stays frozen in the generated module."""
    parameter = _learnable_start(name, tensor.detach(), hidden)
    if parameter is not None:
        parameter.requires_grad = bool(tensor.requires_grad)
    return parameter


def _learnable_start(name: str, tensor: torch.Tensor, hidden: int) -> LearnableParameter | None:
    if tensor.numel() == 1 and tensor.dim() <= 1:
        shape = "scalar"  # [1] or 0-d
    elif tensor.dim() >= 1 and tensor.shape[-1] == hidden and tensor.numel() == hidden:
        # [H], or [1, ..., 1, H] (LayerScale's (1, 1, H)): the same values per column, broadcast over any rows.
        shape = "channel"
    else:
        return None
    rank = None if tensor.dim() == 1 else tensor.dim()  # held otherwise than [H] / [1]: the module keeps it so
    first = _as_written(tensor.reshape(-1)[0])
    if bool((tensor == first).all()):
        if first == 1.0:
            return LearnableParameter(name=name, shape=shape, rank=rank, init="ones")
        if first == 0.0:
            return LearnableParameter(name=name, shape=shape, rank=rank, init="zeros")
        return LearnableParameter(name=name, shape=shape, rank=rank, init="constant", init_value=first)
    # Random initialisation has no profile spelling; ones keeps the generated module usable and says so.
    return LearnableParameter(
        name=name,
        shape=shape,
        rank=rank,
        init="ones",
        description=RANDOM_INIT,
    )


def _condition_inputs(graph: fx.Graph, names: dict[fx.Node, str]) -> list[str]:
    """Inputs the reference selects by: the condition of ``torch.where`` / ``x.where``, a ``masked_fill``'s mask or
    the operand of a logical not (``~desirable``)."""
    found = []
    for node in graph.nodes:
        operands = []
        if node.op == "call_function" and node.target is torch.where and node.args:
            operands = [node.args[0]]
        elif node.op == "call_method" and node.target in ("where", "masked_fill") and len(node.args) > 1:
            operands = [node.args[1]]
        elif node.target in (operator.invert, torch.logical_not, "logical_not"):
            operands = [node.args[0]]
        for operand in operands:
            if isinstance(operand, fx.Node) and operand.op == "placeholder" and names[operand] not in found:
                found.append(names[operand])
    return found


# The most input-and-factor choices tried for a reference that does not run with every row as long as the first's.
_NARROWER_TRIES = 256


def _narrower_inputs(example: tuple, candidates: list[str], patterns: dict[str, str], row_inputs) -> dict[str, int]:
    """For a reference that does not run with every input's rows as long as the first input's: the fewest of
    ``candidates``, each with rows the least factor (2, 4, 8) shorter, that make it run (input -> factor); empty
    where none does. ``patterns``: the broadcast patterns found so far, which keep their other dims."""
    shaped, rows_shape, hidden = example[4], example[5], example[-2]
    tries = 0
    for count in range(1, len(candidates) + 1):
        for chosen in itertools.combinations(candidates, count):
            factors = sorted(itertools.product((2, 4, 8), repeat=count), key=lambda f: (max(f), f))
            for choice in factors:
                if any(hidden % factor for factor in choice):
                    continue
                tries += 1
                if tries > _NARROWER_TRIES:
                    return {}
                trial = dict(shaped)
                for name, factor in zip(chosen, choice):
                    trial[name] = shape_for(narrowed(patterns.get(name, ""), factor), rows_shape + (hidden,))
                if _propagate_shapes(*example[:4], trial, *example[5:], row_inputs=row_inputs, record=False):
                    return dict(zip(chosen, choice))
    return {}


def _per_row_inputs(
    loaded, example: tuple, shaped_apart: list[str], loss_like: bool, found: list[str] = ()
) -> list[str]:
    """The float inputs that hold one value per row (``[rows]``, ``[B, T]``): those the hint ``KERNELGEN =
    {"per_row": ["w"]}`` names, and, for a reference that reads class indices or reduces its rows to a loss, the
    fewest other float inputs (never the first, the rows themselves) that make the reference run on the example
    inputs when it does not run with every input ``[rows, hidden]``: ``logp * w`` of a gathered log-probability
    ``[rows]`` broadcasts against ``w`` of ``[rows]``, not of ``[rows, hidden]``. ``shaped_apart``: inputs of other
    shapes (class indices, per-class values, broadcast inputs); ``found``: per-row inputs known already."""
    hinted = list(loaded.hints.get("per_row", []))
    floats = [name for name in example[2] if name not in shaped_apart]
    unknown = sorted(set(hinted) - set(floats[1:]))
    if unknown:
        raise AnalyzeError(
            f"KERNELGEN hint 'per_row' names {unknown}, which are no tensor inputs of real numbers after the first",
            origin=loaded.origin,
        )
    hinted += [name for name in found if name not in hinted]
    if not loss_like or _propagate_shapes(*example, row_inputs=hinted, record=False):
        return [name for name in floats if name in hinted]
    candidates = [name for name in floats[1:] if name not in hinted][:_MOST_ROW_CANDIDATES]
    for count in range(1, len(candidates) + 1):
        for chosen in itertools.combinations(candidates, count):
            if _propagate_shapes(*example, row_inputs=[*hinted, *chosen], record=False):
                return [name for name in floats if name in hinted or name in chosen]
    return [name for name in floats if name in hinted]


# Float inputs tried as per-row values (every subset of them, fewest first): a loss takes a handful.
_MOST_ROW_CANDIDATES = 6


def _propagate_shapes(
    graph_module,
    order,
    tensors,
    index_inputs,
    shaped,
    rows_shape,
    calls,
    hypers,
    concrete,
    attributes,
    hidden,
    conditions,
    row_inputs=(),
    record=True,
) -> bool:
    """Run the graph on small float32 examples (``rows_shape + (hidden,)``, ``shaped``'s shape for the inputs it
    names, ``rows_shape`` for a per-row one) to record every node's shape (best effort); ``record=False`` only tells
    whether it runs, leaving the graph's shapes as they were."""
    gather_like = {
        operand.target
        for call in calls.values()
        # not w.gather(0, target), nor x[torch.arange(rows), target]: one index per row, not [rows, 1]
        if call.name == "gather" and call.options.get("dim") != 0 and call.options.get("rows") is None
        for operand in call.index_operands
        if isinstance(operand, fx.Node)
    }
    generator = torch.Generator().manual_seed(0)
    values: dict[str, Any] = {}
    for name in tensors:
        if name in index_inputs:
            shape = rows_shape + ((1,) if name in gather_like else ())
            values[name] = torch.randint(0, hidden, shape, generator=generator)
        elif name in shaped:
            values[name] = torch.rand(shaped[name], generator=generator) + 0.5
        elif name in row_inputs:
            values[name] = torch.rand(rows_shape, generator=generator) + 0.5
        else:
            values[name] = torch.rand(rows_shape + (hidden,), generator=generator) + 0.5
        if name in conditions:
            values[name] = values[name] > 1.0  # a mask the reference selects by (``torch.where(mask, ...)``)
    values.update({h.name: h.default for h in hypers})
    values.update(concrete)
    values.update(attributes)
    args = [values.get(name) for name in order]
    try:
        # ShapeProp prints the traceback of a failing node before re-raising: the failure is handled here.
        with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
            if record:
                ShapeProp(graph_module).propagate(*args)
            else:
                fx.Interpreter(graph_module).run(*args)
    except Exception:  # noqa: BLE001 - shapes are a refinement; classification falls back to the dim arguments
        return False
    return True


__all__ = ["TracedReference", "changes_the_output", "changes_the_parameters", "trace_reference"]
