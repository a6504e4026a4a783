"""What each generated file needs from a profile, computed once, in Python, with real names.

Templates hold layout; every decision (what a kernel loads, saves, returns, which cases a test sweeps) is made
here. ``kernel`` is shared by every file; ``ops`` (per tier), ``module``, ``test`` and ``bench`` belong to one file
each.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import textwrap

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import sympy

from tools.kernelgen.analyze.initial_values import reads_math
from tools.kernelgen.broadcast import first_input_dims
from tools.kernelgen.broadcast import group_dims
from tools.kernelgen.broadcast import group_shape_expression
from tools.kernelgen.broadcast import inserted_dims
from tools.kernelgen.broadcast import own_rank
from tools.kernelgen.broadcast import pattern_rank
from tools.kernelgen.broadcast import shape_expression
from tools.kernelgen.broadcast import shape_for
from tools.kernelgen.derivation import elementwise_math
from tools.kernelgen.derivation import loss_math
from tools.kernelgen.derivation import row_math
from tools.kernelgen.float64_casts import KEEP_FLOAT64_SOURCE
from tools.kernelgen.formatting import REFERENCE_TITLE
from tools.kernelgen.lane_maps import parse_lane
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import BATCH_SHARE
from tools.kernelgen.profile import LOSS_REDUCTIONS
from tools.kernelgen.profile import HyperParameter
from tools.kernelgen.profile import InitParameter
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import LearnableParameter
from tools.kernelgen.profile import TensorSpec
from tools.kernelgen.profile import TestSpec
from tools.kernelgen.profile import benchmark_dimension
from tools.kernelgen.profile import benchmark_grad_inputs
from tools.kernelgen.profile import benchmark_size
from tools.kernelgen.profile import group_count
from tools.kernelgen.profile import hyper_cases
from tools.kernelgen.profile import shifted_targets
from tools.kernelgen.render import tier1
from tools.kernelgen.render.dtensor import DTensorRefusal
from tools.kernelgen.render.dtensor import DTensorView
from tools.kernelgen.render.dtensor import dtensor_refusal
from tools.kernelgen.render.dtensor import dtensor_view
from tools.kernelgen.render.group_walk import GroupKernelView
from tools.kernelgen.render.group_walk import group_kernels
from tools.kernelgen.render.lanes import LaneOpsView
from tools.kernelgen.render.lanes import lane_ops
from tools.kernelgen.render.lanes import lanes_held
from tools.kernelgen.render.reference_hypers import forward_hypers
from tools.kernelgen.render.reference_hypers import module_call_keywords
from tools.kernelgen.render.reference_hypers import reference_hypers
from tools.kernelgen.render.staged import StagedLossOpsView
from tools.kernelgen.render.staged import is_staged
from tools.kernelgen.render.staged import sequence_returns_tuple
from tools.kernelgen.render.staged import staged_loss_ops
from tools.kernelgen.render.test_shapes import MODEL_SIZED
from tools.kernelgen.render.test_shapes import ShapeParams
from tools.kernelgen.render.test_shapes import loss_shape_params
from tools.kernelgen.render.test_shapes import row_shape_params
from tools.kernelgen.render.text import Defaulted
from tools.kernelgen.render.text import banner
from tools.kernelgen.render.text import fstring_chunks
from tools.kernelgen.render.text import signature
from tools.kernelgen.render.text import split_reference
from tools.kernelgen.render.text import wrap_docstring
from tools.kernelgen.render.vectors import held_vectors
from tools.kernelgen.render.vectors import hold_vectors_whole
from tools.kernelgen.render.vectors import vectors_taken_whole
from tools.kernelgen.synth import parse_formula
from tools.kernelgen.synth.printer import INPUT_DTYPE
from tools.kernelgen.synth.printer import TAKE_HELPER
from tools.kernelgen.synth.printer import TAKE_HELPER_SOURCE
from tools.kernelgen.synth.printer import jit_helpers_called
from tools.kernelgen.synth.printer import print_torch
from tools.kernelgen.synth.rows import without_dead_temporaries

# An MLP's (hidden, intermediate) sizes when benchmark.fixed_config leaves them out (Llama 2 7B's).
DEFAULT_MLP_SIZES = (4096, 11008)
# Channels per group of a grouped kernel's benchmark inputs (upstream's group_norm benchmark takes 4 per group).
BENCHMARK_GROUP_CHANNELS = 4
# How generated files name each kernel language (the profile's ``backend``).
BACKEND_NAMES = {"triton": "Triton", "tilelang": "TileLang"}


@dataclass(frozen=True)
class KernelView:
    """Names and signatures every file of the kernel shares."""

    name: str
    tier: int
    backend: str  # the kernel language (profile.backend)
    backend_name: str  # ... as generated files name it: Triton, TileLang
    function_class: str
    module_class: str
    functional: str
    inputs: list[str]
    outputs: list[str]
    grad_inputs: list[str]
    params: list[LearnableParameter]
    channel_params: list[LearnableParameter]
    # Channel parameters held with more dims than [H] (LayerScale's (1, 1, H)), and the rank outputs of inputs with
    # fewer dims broadcast to, as the reference's do (0: none)
    widening_params: list[str]
    output_rank: int
    param_names: list[str]
    frozen_params: list[str]  # parameters the reference holds with requires_grad=False
    # Parameters the Function takes as None (``enabled_by``): name -> the literal they compute as when absent
    optional: dict[str, str]
    param_args: list[str]  # the parameters as launch arguments: an absent one passes a placeholder pointer
    hypers: list[HyperParameter]
    hyper_names: list[str]
    signature: str  # of the Function's forward and of the functional: tensors, parameters, hyper-parameters
    call_args: list[str]
    docstring: str  # the autograd Function's
    functional_docstring: str
    reference_imports: list[str]
    reference_body: str
    reference_origin: str
    reference_banner: str  # the comment above the reference in tests and benchmarks
    reference_entry: str
    reference_kind: str
    reference_inputs: list[str]  # the inputs the reference is called with
    reference_attributes: list[tuple[str, str]]  # (attribute, input): what a module reference holds itself
    broadcast: dict[str, str]  # inputs whose shape broadcasts against the first input's -> pattern (broadcast.py)
    broadcast_inserted: dict[str, str]  # ... those the reference unsqueezes -> the dims, as broadcast_rows takes them
    groups: str = ""  # tier 2: the int hyper-parameter whose groups of channels are the rows (profile math.groups)
    input_rank: int = 0  # tier 2: the only rank the first input may have (profile math.input_rank; 0: any)


@dataclass(frozen=True)
class ElementwiseOpsView:
    """Tier 1: the forward and backward kernels over 2-D tiles."""

    forward: list[str]  # the forward's statements, its named constants first
    backward: list[str]
    backward_constants: list[str]  # named constants above the backward's row loop (kernels with parameters)
    forward_inputs: list[str]  # loaded by the forward kernel
    forward_params: list[LearnableParameter]
    backward_inputs: list[str]
    backward_params: list[LearnableParameter]
    backward_grad_outputs: list[str]
    grad_outputs: list[str]
    grad_input_names: list[str]
    partial_names: list[str]
    partial_args: list[str]  # the partial-sum buffers as launch arguments (a placeholder for an absent parameter)
    utils_imports: list[str]  # names the ops file imports from liger_kernel.ops.utils
    in_place: bool
    precision_note: list[str]
    gradient_note: list[str]  # the derived gradient formulas, as comment lines above the backward math
    # The forward wrapper's parameters and the Function's arguments to it: the tensors and the hyper-parameters
    # the wrapper reads (``forward_hypers``; the Function refuses values of the others the math was not derived at)
    forward_signature: str
    forward_call_args: list[str]
    forward_hypers: list[str]
    backward_signature: str
    backward_call_args: list[str]
    outputs_viewed: list[str]
    backward_returns: list[str]
    backward_return_exprs: list[str]
    apply_returns: list[str]
    sums_broadcast_gradients: bool  # apply_returns sums a broadcast input's gradient (layout_utils.broadcast_sum)
    block_elements: int
    max_block_cols: int
    programs_per_sm: int
    num_warps: int | None
    backward_num_warps: int | None  # the backward's own warps (profile), else those of its tile
    # The backward launches with its own tile (``trig_tile_settings``): it calls sin or cos and the profile
    # leaves the warps to the template
    trig_backward_tile: bool
    dtensor: DTensorView | None  # None: the kernel takes no DTensors (dtensor_refusal says why)
    dtensor_refusal: DTensorRefusal | None
    # Lines of the kernels and wrappers (render/tier1.py), each list at one indentation level
    forward_param_loads: list[str]
    forward_channel_params: list[str]  # per-channel parameters the forward reads (by column: it walks rows)
    backward_param_loads: list[str]
    forward_pointer_moves: list[str]  # to the program's tile
    backward_pointer_moves: list[str]  # to the program's first tile
    backward_pointer_steps: list[str]  # from tile to tile of a kernel with parameters
    accumulator_inits: list[str]
    accumulations: list[str]
    partial_stores: list[str]
    contiguous_params: list[str]  # in the host functions (TileLang, whose scalars become one-element vectors)
    function_contiguous_params: list[str]  # in the Function's forward, once, so the backward gets them saved (Triton)
    flag_args: list[str]
    gradient_buffers: list[str]
    partial_buffers: list[str]
    parameter_gradients: list[str]  # the parameters' gradients: the partial sums added up, in the parameters' dtypes
    narrow_block_cols: int  # the other slice width of long rows
    backward_loads: list[str]  # the tensors the backward kernel loads, upstream gradients first
    forward_launch_tail: str  # the forward launch's arguments after the strided inputs
    forward_returns: str  # what the forward wrapper returns (inputs as rows, outputs in their shape)
    forward_results: str  # ... as the Function unpacks it
    backward_launch_strided: list[str]  # tensors the backward launch passes with their row strides
    backward_launch_tail: str  # its arguments after those
    broadcast_saves: list[str]  # what the Function keeps of broadcast inputs to reduce their gradients to
    output_shape_saves: list[str]  # ... and of the outputs of further row groups
    # the shape each broadcast input is laid out against, in the forward and the backward wrapper: the first input's
    # (an index map's input of shorter rows: that shape with shorter rows)
    broadcast_against: dict[str, str]
    backward_broadcast_against: dict[str, str]
    saved: list[str]  # what ctx saves
    saved_unpacked: str  # the unpacking of ctx.saved_tensors
    lanes: LaneOpsView | None  # an index map within the row (profile math.lanes)
    # Launched by blocks of a row with no shared layout module (ops_tier1_rows.py.j2): see ``launches_by_row_blocks``
    row_blocks: bool
    # ... and then the lines that pick the forward's and the backward's block size and warps (tier1.row_block_settings)
    row_block_forward: list[str]
    row_block_backward: list[str]

    @property
    def tile_args(self) -> str:
        """The profile's tiling, as the arguments of ``tile_settings`` after the launch's rows and columns."""
        warps = f", num_warps={self.num_warps}" if self.num_warps else ""
        return f"block_elements={self.block_elements}, max_block_cols={self.max_block_cols}{warps}"

    @property
    def backward_tile_call(self) -> str:
        """The call the backward wrapper takes its tile and warps from, but for the launch's rows and columns."""
        if self.trig_backward_tile:
            return f"trig_tile_settings({{}}, block_elements={self.block_elements})"
        return f"tile_settings({{}}, {self.tile_args})"

    @property
    def forward_walks_flat(self) -> bool:
        """The forward may walk contiguous tensors as one row (``launch_shape``): it reads no per-channel
        parameter, which is indexed by column, and no index map (whose lanes are positions within a row)."""
        return not self.forward_channel_params and self.lanes is None

    @property
    def backward_walks_flat(self) -> bool:
        """The backward may walk contiguous tensors as one row: it has no parameter gradients (those walk row tiles
        of one column block, summing per column)."""
        return not self.partial_names

    @property
    def backward_doubles_warps(self) -> bool:
        """A flat-walking backward launches twice the forward's warps on its tile, unless the profile or the sin/cos
        tile sets them."""
        return self.backward_walks_flat and not self.trig_backward_tile and not self.num_warps

    @property
    def reads_col_strides(self) -> bool:
        """Whether the kernels read a broadcast input's column stride: an index map's lanes read whole rows of it at
        unit stride (the host checks that its rows are as long as the first input's), the others read one value
        per row (stride 0) or a row of values."""
        return self.lanes is None

    def forward_reads(self, name: str) -> bool:
        """Whether the Triton forward kernel's statements read ``name`` (a hyper-parameter): a kernel takes the
        hyper-parameters it reads, no others."""
        lines = [*self.forward, *self.forward_param_loads, *self.forward_pointer_moves]
        if self.lanes:
            lines += [*self.lanes.forward_loads, *self.lanes.forward_stores]
        return _any_reads(lines, name)

    def backward_reads(self, name: str) -> bool:
        """Whether the Triton backward kernel's statements read ``name``, as ``forward_reads``."""
        lines = [*self.backward, *self.backward_constants, *self.backward_param_loads, *self.accumulator_inits]
        lines += [*self.accumulations, *self.partial_stores, *self.backward_pointer_moves, *self.backward_pointer_steps]
        if self.lanes:
            lines += [*self.lanes.backward_loads, *self.lanes.backward_stores]
        return _any_reads(lines, name)

    def backward_saves(self, name: str) -> bool:
        """Whether the Function's backward reads ``ctx.{name}``: its forward keeps the hyper-parameters the backward
        reads (those the backward wrapper takes, those a broadcast input's gradient is summed by), no others."""
        lines = [*self.backward_call_args, *self.apply_returns]
        lines += self.lanes.missing_grad_outputs if self.lanes else []
        lines += [*self.dtensor.local_grads, self.dtensor.wrap_grads] if self.dtensor else []
        return _any_reads(lines, f"ctx.{name}")


@dataclass(frozen=True)
class TileLangProgram:
    """One TileLang program of a tier-1 kernel: what its builder is compiled for and what its launch passes.

    ``settings`` are the builder's arguments, compiled in (dtypes, the width, row strides, flags, the tile), with the
    host expressions that give them (``setting_values``); ``buffers`` are the program's tensors with their TileLang
    types (``{name}_global``), ``scalars`` its runtime numbers; ``call_args`` what the wrapper passes, in order."""

    settings: list[str]
    setting_values: list[str]
    buffers: list[tuple[str, str]]
    scalars: list[tuple[str, str]]
    call_args: list[str]


@dataclass(frozen=True)
class TileLangOpsView(ElementwiseOpsView):
    """Tier 1 in TileLang (``backend: tilelang``): the same math and host code, TileLang programs for the kernels."""

    forward_program: TileLangProgram
    backward_program: TileLangProgram
    first_partial: str  # the partial-sum buffer always allocated: it carries the number of row programs


@dataclass(frozen=True)
class RowKernelView:
    """One Triton kernel of a derived tier-2 kernel (templates/_tier2_kernels.j2): what it takes, loads, computes
    and stores. ``row_pass`` kernels take ``element_args`` (tensors read as tiles), ``param_args``, ``row_args``
    (one value per row) and store ``element_stores``, ``row_output_stores`` and fp32 ``row_stores``;
    ``gradient_pass`` kernels take gradients of per-element outputs (``element_args``), of per-row outputs
    (``row_grad_args``), the inputs (``input_args``), the parameters they load and per-row values, and write
    ``grad_{name}`` of ``element_stores`` plus per-program parameter-gradient partials."""

    name: str
    lines: list[str]
    width: str = "n_cols"  # the kernel argument holding the tile's real columns (the math's n_cols is the row's)
    element_args: list[str] = field(default_factory=list)
    param_args: list[str] = field(default_factory=list)
    row_args: list[str] = field(default_factory=list)
    row_grad_args: list[str] = field(default_factory=list)
    input_args: list[str] = field(default_factory=list)
    element_loads: list[str] = field(default_factory=list)
    param_loads: list[LearnableParameter] = field(default_factory=list)
    row_loads: list[str] = field(default_factory=list)
    element_stores: list[str] = field(default_factory=list)
    row_output_stores: list[str] = field(default_factory=list)
    row_stores: list[str] = field(default_factory=list)
    row_store_note: str = ""
    channel_grads: list[str] = field(default_factory=list)
    scalar_grads: list[str] = field(default_factory=list)
    reduces: bool = False
    intro: list[str] = field(default_factory=list)  # comment lines above the kernel body
    notes: list[str] = field(default_factory=list)  # comment lines above the loads or the loop
    dtype_source: str = ""  # the pointer whose element type is the inputs' dtype, when the math rounds to it
    # A fused kernel that is also the split path's last pass (its SPLIT mode): there it reduces nothing, loading the
    # reductions the passes before it computed (``split_loads``) and storing no statistics; a gradient pass's
    # second grid axis then splits the columns into blocks.
    has_split_mode: bool = False
    fills: dict[str, str] = field(default_factory=dict)  # element loads' ``other`` where it is not 0.0
    holds_narrow: bool = False  # the fused backward: rows held across its reductions in their storage dtype

    @property
    def split_loads(self) -> list[str]:
        """With ``has_split_mode``: the row reductions of ``lines``, which a SPLIT launch loads."""
        if not self.has_split_mode:
            return []
        return [match.group(1) for line in self.lines if (match := _REDUCTION_STATEMENT.match(line))]

    @property
    def split_pointers(self) -> list[str]:
        """The per-row buffers a SPLIT launch alone passes (None otherwise): its loads but the statistics it stores."""
        return [name for name in self.split_loads if name not in self.row_stores]

    @property
    def per_element(self) -> bool:
        """Whether the kernel touches the tile's elements (loads, stores or reduces them): a split pass that only
        combines per-row values (a logsumexp's output from its all-reduced max and sum) has no columns."""
        channel_loads = any(p.shape == "channel" for p in self.param_loads)  # a scalar's load needs no columns
        return bool(self.element_loads or self.element_stores or channel_loads or self.last_reduction >= 0)

    def reads(self, name: str) -> bool:
        """Whether the kernel's math or its loads' fills read ``name`` (a hyper-parameter, the row length): the
        kernel takes what it reads and nothing else."""
        return any(_reads_name(line, name) for line in [*self.lines, *self.fills.values()])

    def takes_n_cols(self, gradient: bool) -> bool:
        """Whether the kernel takes the row length: its column mask compares with it (a gradient pass always masks
        columns, a row pass when it touches elements), or its math reads it."""
        return ((gradient or self.per_element) and self.width == "n_cols") or self.reads("n_cols")

    @property
    def last_reduction(self) -> int:
        """The index in ``lines`` of the last row reduction (-1: none)."""
        found = [i for i, line in enumerate(self.lines) if _REDUCTION_STATEMENT.match(line)]
        return found[-1] if found else -1

    @property
    def rewidened(self) -> list[str]:
        """With ``holds_narrow``: the per-element tensors read both up to the last reduction and after it. Each is
        kept as loaded (16-bit for bf16) and widened again after the reduction (``widen_to_fp32``, exact), so a
        thread holds its rows through the reduction in half the registers of fp32 copies (softmax's backward at
        16384 x 14336 bf16 on an H200: 82 -> 64 registers, 356 -> 325 us). The template does so everywhere but in
        a pipelined row walk (``PIPELINE_LOADS``), where it measured slower."""
        last = self.last_reduction
        if not self.holds_narrow or last < 0:
            return []

        def reads(lines: list[str], name: str) -> bool:
            return any(_reads_name(line, name) for line in lines)

        before, after = self.lines[: last + 1], self.lines[last + 1 :]
        return [n for n in self.element_args + self.input_args if reads(before, n) and reads(after, n)]

    @property
    def param_loads_by_line(self) -> list[list[LearnableParameter]]:
        """Per statement, the parameters it reads first: each is loaded just before its first use."""
        return _first_uses(self.lines, self.param_loads)

    @property
    def accumulates(self) -> bool:
        """A gradient pass with parameter gradients: a persistent grid summing them over the rows it walks (the walk
        pipelined or not: ``tiles_per_program``, ``PIPELINE_LOADS``)."""
        return bool(self.channel_grads or self.scalar_grads)

    @property
    def reloads_parameters(self) -> bool:
        """A persistent gradient pass that reads parameters: it holds them across row tiles or re-reads them per
        tile (``HOLD_PARAMETERS``, chosen at launch from the tile size)."""
        return bool(self.param_loads) and self.accumulates


@dataclass(frozen=True)
class RowProgramOpsView:
    """Tier 2, derived: tiles of whole rows, the per-row statistics the backward reads saved in fp32."""

    forward: list[str]
    backward: list[str]
    inputs: list[str]  # every tensor input (loaded as [BLOCK_ROWS, BLOCK_COLS] tiles)
    element_outputs: list[str]
    row_outputs: list[str]  # one value per row
    row_output_shapes: dict[str, str]  # output -> the expression of its shape, keepdim or not
    saved: list[str]  # statistics stored by forward, loaded by backward
    forward_inputs: list[str]
    forward_params: list[LearnableParameter]
    backward_inputs: list[str]
    backward_params: list[LearnableParameter]
    backward_element_grads: list[str]  # grad_{output} of per-element outputs the backward loads
    backward_row_grads: list[str]  # grad_{output} of per-row outputs the backward loads
    grad_outputs: list[str]  # every grad_{output}, in output order (the backward's arguments)
    grad_inputs: list[str]  # inputs that get a gradient
    stored_grads: list[str]  # inputs whose gradient the backward kernel writes (the others alias one of them)
    channel_grads: list[str]  # grad_{parameter} per element, summed over rows
    scalar_grads: list[str]  # grad_{parameter} per row, summed over rows
    saved_tensors: list[str]  # what ctx saves: the inputs the backward reads, every parameter, the statistics
    backward_results: list[str]  # what the backward wrapper returns: grad_{input}, then grad_{parameter}
    backward_call_args: list[str]  # what the autograd Function's backward passes it
    # The hyper-parameters the forward and backward wrappers take: those their kernels read, a broadcast input's
    # unsqueeze dim, the groups' count (the Function refuses values of the others the math was not derived at)
    forward_hypers: list[str]
    forward_signature: str  # of the forward wrappers (fused and split)
    forward_call_args: list[str]
    backward_hypers: list[str]
    gradient_aliases: dict[str, str]  # grad_{input} -> the stored gradient it equals
    in_place: bool  # the first input's gradient may take the first output's gradient buffer (reusable_gradient)
    utils_imports: list[str]  # names the ops file imports from liger_kernel.ops.utils
    uses_cast: bool
    precision_note: list[str]
    gradient_note: list[str]  # the derived gradient formulas, as comment lines above the backward math
    apply_returns: list[str]
    sums_broadcast_gradients: bool  # apply_returns sums a broadcast input's gradient (layout_utils.broadcast_sum)
    broadcast_saves: list[str]  # what the Function keeps of broadcast inputs to reduce their gradients to
    block_elements: int
    programs_per_sm: int
    num_warps: int | None
    backward_rows_held: int  # full tiles a fused backward thread keeps live: accumulators and loaded rows
    dtensor: DTensorView | None  # None: the kernel takes no DTensors (dtensor_refusal says why)
    dtensor_refusal: DTensorRefusal | None
    forward_kernel: RowKernelView  # the fused kernels
    backward_kernel: RowKernelView
    # The same math for rows whose columns are spread over ranks, too long for a backward's registers, or (grouped
    # rows) cut into chunks of whole channels; grouped rows without per-column or scalar parameters take its passes
    # into the walk of their group_kernels instead
    split: SplitRowsView | None
    # Parameter vectors the interface takes whole (vector -> the kernels' element parameters): the host wrappers
    # take the vector, hand the kernels its elements and sum their partial gradients from one buffer.
    vectors: dict[str, list[str]] = field(default_factory=dict)
    # Rows the fused backward cannot hold, on one device: swept whole by neighbouring programs (_sweep_gradient.j2)
    sweep: SweepView | None = None
    # Grouped rows without per-column or scalar parameters: the forward and backward kernels that walk each group in
    # one program (render/group_walk.py), in place of the fused kernels and the split path.
    group_kernels: tuple[GroupKernelView, GroupKernelView] | None = None
    # Rows longer than one program holds go through the split path in pieces of consecutive columns (its reduce
    # combining each row's pieces): kernels with a split path and nothing read per column or per row besides the
    # row itself (no per-channel parameter, broadcast input or per-row output).
    long_rows: bool = False

    @property
    def forward_names(self) -> list[str]:
        """The forward wrappers' parameter names, in order."""
        return [a.arg for a in ast.parse(f"def f({self.forward_signature}): pass").body[0].args.args]

    @property
    def backward_arguments(self) -> list[str]:
        """The backward wrappers' parameters, in order: the output gradients, what ctx saved, then the shape, the
        gradients' dtype, the hyper-parameters read and in_place where they take them."""
        return [
            *self.grad_outputs,
            *self.saved_tensors,
            "shape",
            *(["dtype"] if self.allocates_gradients else []),
            *self.backward_hypers,
            *(["in_place"] if self.in_place else []),
        ]

    def long_rows_forward_call(self, inputs: list[str]) -> list[str]:
        """The split forward's arguments for rows cut into ``chunks`` pieces (``long_rows``): each input viewed as
        the pieces' rows."""
        return [f"{name}.view(-1, shape[-1] // chunks)" if name in inputs else name for name in self.forward_names]

    @property
    def long_rows_backward_call(self) -> list[str]:
        """The split backward's arguments for rows cut into pieces: row-shaped tensors viewed as the pieces' rows
        (``pieces``, also the shape passed), the per-row statistics one per piece already."""
        rows = set(self.grad_outputs) | set(self.backward_inputs)
        return ["pieces" if n == "shape" else f"{n}.view(pieces)" if n in rows else n for n in self.backward_arguments]

    def backward_saves(self, name: str) -> bool:
        """Whether the Function's backward reads ``ctx.{name}``: its forward keeps the hyper-parameters the backward
        reads, no others."""
        lines = [*self.backward_call_args, *self.apply_returns]
        lines += [*self.dtensor.local_grads, self.dtensor.wrap_grads] if self.dtensor else []
        return _any_reads(lines, f"ctx.{name}")

    @property
    def unvectored_scalar_grads(self) -> list[str]:
        """The scalar parameter gradients that are no element of a vector taken whole (one partial buffer each)."""
        inside = {f"grad_{name}" for elements in self.vectors.values() for name in elements}
        return [name for name in self.scalar_grads if name not in inside]

    @property
    def allocates_gradients(self) -> bool:
        """Whether the backward allocates a gradient buffer (in the inputs' dtype, its ``dtype`` argument): also
        where its stored gradient may take the output gradient's buffer, which is not always free."""
        return bool(self.stored_grads)

    @property
    def backward_load_bytes(self) -> str:
        """The bytes a backward tile loads per element, as wrapper code (``x.element_size() + ...``)."""
        return " + ".join(f"{name}.element_size()" for name in self.backward_inputs + self.backward_element_grads)

    @property
    def backward_load_count(self) -> int:
        """How many tensors of the row's shape a backward tile loads (``backward_load_bytes``' terms)."""
        return len(self.backward_inputs + self.backward_element_grads)


@dataclass(frozen=True)
class SweepView:
    """Tier 2: the backward of rows too long for the fused kernel, on one device, as a sweep
    (``_sweep_gradient.j2``): neighbouring programs walk the same rows, each summing every row whole, block by block
    (the split path's row-sum pass), then writing the gradients of its own block (the fused backward's statements
    after those sums). Each step is the parameters first read there, loaded before it, and the statement."""

    name: str  # the sweep kernel's
    sums: RowKernelView  # the split path's row-sum pass: its loads
    sum_steps: list[tuple[list[LearnableParameter], str]]  # its statements, each sum added to its running total
    gradient_steps: list[tuple[list[LearnableParameter], str]]  # the fused backward's, its sums left out
    hypers: list[str]  # the hyper-parameters either reads
    param_bytes: str  # the bytes of the parameters a sweep loads per element, as wrapper code
    param_count: int  # how many parameters it loads (``param_bytes``' terms)


@dataclass(frozen=True)
class SplitPassView:
    """One pass of the split path: its kernel and, for a reduction pass, the per-row buffers it fills, grouped by
    how the ranks combine them (``sum``, ``max``, ``min``): ``(op, buffer, names)``, one all-reduce per group;
    ``buffer`` is None for a group of one (the statistic's own tensor is reduced)."""

    kernel: RowKernelView
    groups: list[tuple[str, str | None, list[str]]]


@dataclass(frozen=True)
class SplitRowsView:
    """Tier 2 for columns split over ranks (a DTensor sharded along its last dim): the reduction passes of the
    forward and the backward (all-reduced in between) and the kernels of their last passes."""

    forward_passes: list[SplitPassView]
    forward: RowKernelView | None  # the fused forward, launched in its SPLIT mode (None: no split forward)
    backward_passes: list[SplitPassView]
    backward: RowKernelView  # the fused backward, launched in its SPLIT mode

    def forward_head(self, reduce: str, row_length: str) -> str:
        """The split forward's first arguments: ``reduce``, and the whole row's length when a pass reads it."""
        kernels = [step.kernel for step in self.forward_passes] + [self.forward]
        return f"{reduce}, {row_length}" if any(k.reads("n_cols") for k in kernels) else reduce

    def backward_head(self, reduce: str, row_length: str) -> str:
        """The split backward's first arguments, as ``forward_head``."""
        kernels = [step.kernel for step in self.backward_passes] + [self.backward]
        return f"{reduce}, {row_length}" if any(k.reads("n_cols") for k in kernels) else reduce


@dataclass(frozen=True)
class RowOpsView:
    """Tier 2 with hand-written math: one program per row, the saved per-row statistics."""

    x: str
    y: str
    stats: list[str]
    row_statistics: list[str]
    forward: list[str]
    backward: list[str]
    # The hyper-parameters each kernel's statements read: a kernel takes those, the backward wrapper and the
    # Function's saves those of the backward
    forward_hypers: list[str]
    backward_hypers: list[str]
    in_place: bool
    backward_signature: str
    backward_call_args: list[str]
    saved: list[str]
    apply_returns: list[str]
    utils_imports: list[str]  # names the ops file imports from liger_kernel.ops.utils
    programs_per_sm: int
    num_warps: int | None


@dataclass(frozen=True)
class LossReductionView:
    """One way the rows become the loss: ``kind`` mean, sum or none; for a mean, the torch expression of its
    denominator (``row_formula``: summed over rows; otherwise the same for every row, times ``n_rows``)."""

    value: str
    kind: str
    denominator: str
    row_formula: bool
    reads_batch_share: bool = False  # the denominator counts the batch (batch_share: size(0) / rows)
    floor: float | None = None  # the denominator over rows is taken at least this (``.clamp(min=...)``)
    # a row formula that is 1 where a condition holds, else 0: the condition (its rows are counted)
    counted: str | None = None

    @property
    def over_rows(self) -> str:
        """The denominator over every row as host code (``n_rows``: the rows' count)."""
        if self.row_formula:
            total = f"({self.counted if self.counted else self.denominator}).sum()"
            return total if self.floor is None else f"{total}.clamp(min={self.floor!r})"
        total = f"n_rows * {self.denominator}"
        return total if self.floor is None else f"max({total}, {self.floor!r})"


@dataclass(frozen=True)
class LossOpsView:
    """Tier 3, derived: one program per row, chunked passes over the classes (see ``synth/losses.py``)."""

    element_inputs: list[str]  # [rows, n_cols] tensors
    row_inputs: list[str]  # one class index per row
    row_values: list[str]  # one float per row ([rows] / [B, T]: a per-token weight), no gradient
    row_masks: list[str]  # of those, booleans the reference selects rows by (``torch.where(mask, ...)``)
    class_inputs: list[str]  # [n_cols] tensors shared by every row (class weights; None: 1 for every class)
    picks: list[LossPickView]  # per-class values at a class index, loaded once per row
    kernel_hypers: list[str]  # the numbers the formulas read
    grad_inputs: list[str]
    grad_names: list[str]  # grad_{input}
    # (index, name) of the float inputs without a derived gradient: the Function refuses them requiring grad
    gradient_free: list[tuple[int, str]]
    in_place: str | None  # the input whose buffer takes its own gradient
    # inputs whose buffers take their gradients when the caller says they are dead (``overwrite_inputs``: a fused
    # linear loss's chunk of logits, which it made itself); empty: the loss takes no such keyword
    overwritable: list[str]
    outputs: list[str]
    loss: str
    output_dtype: str  # "torch.float32" where the reference upcasts, else "" (the inputs' dtype)
    init: list[str]
    passes: list[tuple[list[str], list[str], list[str]]]  # (inputs, per-class inputs loaded, statements) per pass
    outputs_block: list[str]
    adjoints: list[str]
    gradient: list[str]
    gradient_loads: list[str]
    gradient_class_loads: list[str]
    gradient_pass: int | None
    gate: str | None
    skipped: str | None  # the gate's negation: the row does not count
    chooser: str | None  # the str hyper-parameter that picks the reduction
    checked_choices: list[HyperParameter]  # other hyper-parameters the math was derived for some values of
    reductions: list[LossReductionView]
    # Means over different counts added: each count (``value``: the name its scale, 1 / the count, has in the math)
    scales: list[LossReductionView]
    # none / sum (a mean's rows come divided by its denominator: summed too), each with the values that pick it
    reduction_kinds: list[tuple[str, list[str]]]
    batch_share: bool  # a mean's denominator reads batch_share (size(0) / rows of the inputs as passed)
    mean_value: str | None  # a value of the reduction that is a mean (tests give it a denominator)
    mean_denominator: str  # ... and that mean's denominator over the whole batch, as test code
    mean_denominator_names: list[str]  # the names that code reads (inputs, hyper-parameters, n_rows, n_cols)
    scale_denominators: list[str]  # tests: each count's over the whole batch, as test code
    scale_denominator_names: list[str]  # the names that code reads
    ignored: dict[str, str]  # class-index input -> the hyper-parameter whose value marks a row that does not count
    domains: list[tuple[str, str]]  # every input with what tests draw for it
    apply_returns: list[str]
    utils_imports: list[str]  # names the ops file imports from liger_kernel.ops.utils
    host_helpers: list[str]  # sources of the wrapper's helpers (_take of a denominator that reads class weights)
    precision_note: list[str]
    gradient_note: list[str]  # the derived gradient formulas, as comment lines above the backward math
    block_elements: int
    num_warps: int | None
    # Tests: the module built with the per-class inputs (``arguments``: the inputs) and called with the others
    module_call: str | None
    # (class-index input, pad value) of each target the reference shifts one token left: the Function shifts it
    shifted: list[tuple[str, str]] = field(default_factory=list)
    # The reference flattens [B, T, V] logits into rows itself: reduction none gives [B*T] values, as it does
    flat_rows: bool = False

    @property
    def means(self) -> list[LossReductionView]:
        """The reductions that are means: the kernel divides each row by their denominator."""
        return [r for r in self.reductions if r.kind == "mean"]

    @property
    def split_denominator_names(self) -> list[str]:
        """What the counts a test of rows split in two hands each half read: the means' counts (``scales``) or the
        mean's denominator."""
        return self.scale_denominator_names if self.scales else self.mean_denominator_names

    @property
    def split_keyword(self) -> str:
        """The forward's keyword taking those counts."""
        return "denominators" if self.scales else "denominator"

    @property
    def mean_optional(self) -> bool:
        """Some values of the reduction are means and some are not: the kernel takes MEAN, the host a None
        denominator for the others."""
        return 0 < len(self.means) < len(self.reductions)

    @property
    def overwrite_note(self) -> str:
        """The forward docstring's clause on ``overwrite_inputs`` (empty when the loss takes no such keyword)."""
        if not self.overwritable:
            return ""
        takes = "its buffer takes its gradient" if len(self.overwritable) == 1 else "their buffers take their gradients"
        names = " and ".join(self.overwritable)
        return f"; ``overwrite_inputs``: {names} are dead after the loss (the fused\n    linear loss's chunk of logits): {takes}"


@dataclass(frozen=True)
class LossPickView:
    """``name = values[index]`` of a per-class input at a class index (``weight_target``), 0 outside the classes."""

    name: str
    values: str
    index: str  # the index as a name: a row input, or ``index_line``'s target
    index_line: str | None  # ``NAME_index = <expression>`` when the index is computed


@dataclass(frozen=True)
class ModuleView:
    kind: str
    init_params: list[InitParameter | HyperParameter]
    init_signature: str
    # constructor arguments kept as attributes (not a flag named like its parameter): (name, what it holds)
    attributes: list[tuple[str, str]]
    # constructor arguments kept as buffers: per-class inputs (class weights), as torch's losses; (name, what it
    # is built from where none is given: the reference's expression, or None)
    buffers: list[tuple[str, str | None]]
    forward_signature: str  # the module's forward arguments (the kernel's tensors, then forward_keywords)
    forward_keywords: list[str]  # hyper-parameters the reference module's forward takes, with their defaults
    apply_inputs: list[str]  # the kernel's tensors as forward passes them on (a buffer as self.<name>)
    param_init: dict[str, str]  # each parameter the module holds (a vector read by index once) -> its initial value
    self_params: list[str]
    self_hypers: list[str]
    # Constructor arguments nothing of the kernel reads, traced at their value (a submodule's option, an int the
    # reference computes with): (name, its value written out, the test that refuses another value)
    traced_at: list[tuple[str, str, str]]
    repr_fields: str
    docstring: str
    variants: list[str]  # mlp: model-specific subclasses (profile.MLP_VARIANTS)
    # The kernel's parameters as the module holds them: ``weight[0]`` for an element of a vector the module holds
    # whole (as the reference does), ``norm.weight`` where the reference holds it there, else its own name
    held: dict[str, str] = field(default_factory=dict)
    # Submodules that only hold parameters, made before them: a reference's ``self.norm = nn.LayerNorm(...)`` keeps
    # its ``norm.weight`` there, so the reference's state_dict loads into the module.
    containers: list[str] = field(default_factory=list)
    function: ReferenceFunction | None = None  # module.function: the reference's own signature
    reads_math: bool = False  # a starting value written as the reference does reads ``math``: the file imports it


@dataclass(frozen=True)
class ReferenceFunction:
    name: str
    signature: str  # the reference's arguments as it writes them, defaults included
    fixed: list[tuple[str, str]]  # arguments the kernel does not take: (name, default as written)
    call_args: list[str]  # the Function's arguments


@dataclass(frozen=True)
class TestView:
    cpu_shapes: list[tuple]
    gpu_shapes: list[tuple]
    shapes: ShapeParams  # both as the tests parametrize them (bsz, seq_len, hidden_size; B, T, V for a loss)
    tol: dict[str, list[float]]
    hyper_cases: list[dict]
    hyper_values: list[str]  # one HYPERPARAMETERS case passed positionally to .apply
    hyper_keywords: list[str]  # ... and by keyword to the functional
    # The same as argument-list tails (", hyper['eps']"), and the ", hyper" a helper takes and passes on; all empty for
    # a kernel without hyper-parameters, whose test has no HYPERPARAMETERS.
    hyper_args: str
    hyper_kwargs: str
    hyper_param: str
    # What makes one output a tuple like several: "(" and ",)" around a single output's expression
    tuple_open: str
    tuple_close: str
    # Signatures and calls of the generated test's helpers (tiers 1 and 2)
    module_switches: str  # ", **switches" where optional parameters can be switched off
    module_signature: str  # _make_reference_module(...)
    module_call: str  # ... as _assert_matches_reference calls it
    module_test_call: str  # ... as the module test does (fp32)
    reference_params: list[str]  # the reference's parameters in the kernel's order (getattr for optional ones)
    reference_signature: str  # _reference_outputs(...)
    reference_call: str  # its body: the reference called
    module_reference_args: str  # the module test's call of _reference_outputs
    exact_reference_args: str  # the same call in float64
    run_args: str  # _reference_run(run_dtype, ...)
    check_signature: str  # _assert_matches_reference(...)
    tensors: str  # the functional test's tensors: inputs (+ params)
    liger_tensors: str  # the kernel's tensors in _assert_matches_reference
    gradients: list[str]  # "(index, 'name', terms summed)" of each gradient compared, index into inputs + params
    gradients_by_index: list[str]  # "(index, 'name')" of the same, for kernels where every count is 1
    module_case: int  # the HYPERPARAMETERS case the module test builds with
    eager_error_factor: int
    positive_domain: bool
    # Element-wise inputs drawn as a distribution over each row (a binary cross entropy's target, a KL's operands)
    input_domains: dict[str, str]
    # Inputs (indices into them) of which one row holds its maximum and its minimum twice each: a kernel taking a
    # row max or min passes its gradient as torch does at ties (x.max(dim).values to the first, amax split evenly),
    # which random rows, tie-free, never show
    tied_inputs: list[int]
    input_scaling: str  # what follows a random draw to scale it: " * 3.0", or nothing for 1.0
    normal_draw: str  # an input drawn from N(0, input_scale**2) in fp32, rounded to the dtype under test
    reference_module_args: str
    # A module reference: the hyper-parameters its __init__ sets without an argument (set by _hold_hyperparameters on
    # the built module), the module built from a case (``Entry(**hyper)``) and the keywords its forward takes.
    held_hypers: list[str]
    # The DTensor test: its whole tensors' shape, the placement that shards the columns, the (inputs, per-channel
    # parameters) placements it runs (3-d tensors; [rows, columns] for a reference written for them).
    dtensor_shape: tuple[int, ...]
    column_shard: str
    dtensor_cases: list[str]
    dtensor_placements: list[str]  # the inputs' placements of a kernel without parameters
    # Each parameter's placement in a DTensor case (``param_placement``: the case's Shard(0) or Replicate()): a
    # channel parameter held as [1, ..., H] is sharded along its last dim
    param_placements: list[str]
    reference_module: str
    reference_forward_keywords: str
    liger_module_args: str
    liger_forward_keywords: str  # the generated module's call: the hyper-parameters its forward takes
    # What runs the reference's backward: one of several outputs may be made of comparisons alone (no gradient), so
    # those go through the test's _backward_where_differentiable
    reference_backward: str
    hidden_act: str
    mlp_shapes: list[tuple]
    switches_off: str  # constructor arguments that build the reference without its optional parameters
    # Inputs that broadcast against the first one -> the expression of their shape from the first one's ``shape``
    input_shapes: dict[str, str]
    long_rows_shapes: str  # the split-path test's shapes of rows over three column blocks
    whole_tile_shapes: str  # tier 1: shapes the tiles divide (unmasked loads and stores)
    # The reference casts and has parameters: the class under which its float64 run keeps its float32 casts at
    # float64 (float64_casts.py), else empty
    keep_float64_source: str


@dataclass(frozen=True)
class BenchmarkView:
    size_key: str
    size_name: str
    sweep_size: bool
    sweep_description: str
    reference_init_args: str
    providers: list[str]
    sizes: dict[str, int]  # the model sizes an upstream-style script runs at (benchmark.fixed_config, else defaults)
    grad_inputs: list[str]  # the inputs a step differentiates (a loss: its first; profile.benchmark_grad_inputs)
    test_module: str  # the generated test, which the benchmark imports the reference from
    # Each input's shape as code of num_tokens and size where some broadcast against the first (else empty)
    input_shapes: dict[str, str]


@dataclass(frozen=True)
class KernelViews:
    kernel: KernelView
    ops: ElementwiseOpsView | TileLangOpsView | RowProgramOpsView | RowOpsView | LossOpsView | StagedLossOpsView
    module: ModuleView
    test: TestView
    bench: BenchmarkView

    def context(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "ops": self.ops, "module": self.module, "test": self.test, "bench": self.bench}


def build_views(profile: KernelProfile) -> KernelViews:
    """Every view of ``profile`` (validated)."""
    ops_builders = {
        "elementwise": _elementwise_ops,
        "rows": _row_program_ops,
        "rows_handwritten": _row_ops,
        "loss": _loss_ops,
    }
    if profile.template not in ops_builders:
        raise ValueError(f"tier {profile.tier} has no templates")
    if profile.backend == "tilelang":
        ops_builders["elementwise"] = _tilelang_ops
    if is_staged(profile):  # a loss in two stages (math.loss.sequence)
        ops_builders["loss"] = lambda p: staged_loss_ops(p, _precision_note, _gradient_note)
    return KernelViews(
        kernel=kernel_view(profile),
        ops=ops_builders[profile.template](group_parameters_as_inputs(profile)),
        module=module_view(profile),
        test=test_view(profile),
        bench=_benchmark_view(profile),
    )


def group_parameters_as_inputs(profile: KernelProfile) -> KernelProfile:
    """``profile`` as its ops file sees it: a ``group`` parameter ([channels], one value per channel of a grouped
    kernel) is an input that broadcasts against the first input's ``[batch, channels, rest]`` (``* _``), read at
    each element's channel and its gradient summed over the batch and the rest; the module still owns it. Other
    profiles are returned as they are."""
    grouped = [prm for prm in profile.parameters if prm.shape == "group"]
    if not grouped:
        return profile
    inputs = list(profile.inputs) + [TensorSpec(name=prm.name, broadcast="* _") for prm in grouped]
    parameters = [prm for prm in profile.parameters if prm.shape != "group"]
    return dataclasses.replace(profile, inputs=inputs, parameters=parameters)


# Names fx gives what a reference left unnamed: a formula that shows them reads as a trace, not as math.
_TRACED_NAMES = re.compile(
    r"\b(?:getitem|getattr|floordiv|sum|mul|sub|add|truediv)_\d+\b|\bsize_arithmetic\b|\bslice\("
)


def docstring_formula(profile: KernelProfile) -> str:
    """What the generated docstrings say a kernel computes: the reference's formula where it reads as math; else
    the reference's name, and for a loss in two stages where each stage runs."""
    entry = f"``{profile.reference.entry or profile.operation_name}``"
    if is_staged(profile):
        statistics = ", ".join(f"``{t.name}``" for t in profile.outputs)
        return (
            f"{entry} in two stages: its per-token statistics ({statistics}) in Triton, the rest in "
            f"``_{profile.operation_name}_sequence`` (the reference's own PyTorch)"
        )
    formula = profile.forward_computation or profile.operation_name
    return entry if _TRACED_NAMES.search(formula) else formula


def kernel_view(profile: KernelProfile) -> KernelView:
    imports, body = split_reference(profile.reference.source, profile.reference.entry)
    inputs = [t.name for t in profile.inputs]
    params = hold_vectors_whole(profile).parameters  # the interface's: a held vector whole
    hyper_names = [hp.name for hp in profile.hyperparameters]
    formula = docstring_formula(profile)
    # What it computes and where, not where the reference came from (``builtin:NAME``, a file outside the checkout:
    # nothing a reader of the target can open; the generation record keeps it).
    if is_staged(profile):  # the formula says where each stage runs
        docstring = f"{formula}."
    else:
        docstring = f"{formula}: forward and backward in {BACKEND_NAMES[profile.backend]}."
    optional = {prm.name: repr(_initial_value(prm)) for prm in params if prm.enabled_by}
    return KernelView(
        name=profile.operation_name,
        tier=profile.tier,
        backend=profile.backend,
        backend_name=BACKEND_NAMES[profile.backend],
        function_class=profile.function_class_name,
        module_class=profile.module_class_name,
        functional=profile.functional_name,
        inputs=inputs,
        outputs=[t.name for t in profile.outputs],
        grad_inputs=[t.name for t in profile.inputs if t.requires_grad],
        params=params,
        channel_params=[prm for prm in params if prm.shape == "channel"],
        widening_params=[prm.name for prm in params if prm.widens_outputs],
        output_rank=max((prm.held_rank for prm in params if prm.widens_outputs), default=0),
        param_names=[prm.name for prm in params],
        frozen_params=[prm.name for prm in params if not prm.requires_grad],
        optional=optional,
        param_args=[
            f"{prm.name} if {prm.name} is not None else {inputs[0]}" if prm.name in optional else prm.name
            for prm in params
        ],
        hypers=profile.hyperparameters,
        hyper_names=hyper_names,
        signature=signature(_tensor_arguments(profile) + [prm.name for prm in params] + profile.hyperparameters),
        call_args=inputs + [prm.name for prm in params] + hyper_names,
        docstring=wrap_docstring(docstring + overwrite_note(profile)),
        functional_docstring=wrap_docstring(
            f"{formula}; see ``{profile.function_class_name}``.{overwrite_note(profile)}"
        ),
        reference_imports=imports,
        reference_body=body,
        reference_origin=profile.reference.origin,
        reference_banner=banner(f"{REFERENCE_TITLE} ({profile.reference.origin or 'profile'})"),
        reference_entry=profile.reference.entry,
        reference_kind=profile.reference.kind,
        reference_inputs=[t.name for t in profile.inputs if not t.attribute],
        reference_attributes=[(t.attribute, t.name) for t in profile.inputs if t.attribute],
        broadcast={t.name: t.broadcast for t in profile.inputs if t.broadcast},
        # ... and the rank the reference unsqueezes it at: the arguments broadcast_rows takes after the shape
        # (an unsqueeze at a hyper-parameter's dim: that dim, inserted as torch does at any rank)
        broadcast_inserted={
            t.name: f"({t.unsqueeze},)" if t.unsqueeze else f"{inserted_dims(t.broadcast)!r}, {own_rank(t.broadcast)}"
            for t in profile.inputs
            if t.broadcast and inserted_dims(t.broadcast)
        },
        groups=profile.math.groups,
        input_rank=profile.math.input_rank,
    )


def _tensor_arguments(profile: KernelProfile) -> list:
    """The inputs as arguments: per-class ones (class weights) after the last other tensor default to None, as
    torch's ``weight=None``."""
    arguments: list = [t.name for t in profile.inputs]
    for index in reversed(range(len(profile.inputs))):
        if not profile.inputs[index].per_class:
            break
        arguments[index] = Defaulted(profile.inputs[index].name, None)
    return arguments


def _initial_value(prm: LearnableParameter) -> float:
    """What a parameter's elements start at, which is also what an absent optional parameter computes as."""
    return {"ones": 1.0, "zeros": 0.0}.get(prm.init, float(prm.init_value or 0.0))


# Ops -------------------------------------------------------------------------------------------------------
def _overwritable(profile: KernelProfile, element: list[str], grad_inputs: list[str], in_place: bool) -> list[str]:
    """The element inputs a fused linear loss may let take their gradients: each chunk's logits are the fused
    kernel's own product, dead after the loss, and the kernel reads each tile before it writes the tile's gradient
    (the gradient is written in the row's last pass). Only a loss generated with its fused kernel takes the keyword."""
    if not profile.fused_linear.enabled:
        return []
    taken = grad_inputs[:1] if in_place else []
    return [name for name in grad_inputs if name in element and name not in taken]


def _loss_in_place(profile: KernelProfile) -> bool:
    """Whether a loss kernel writes its gradient over its first input with a gradient: by default where it scores
    logits against class indices (dead after the loss, as Liger's cross entropy takes them)."""
    if profile.backward.in_place_gradients is None:
        return any(t.dtype == "int64" for t in profile.inputs)
    return profile.backward.in_place_gradients


def overwrite_note(profile: KernelProfile) -> str:
    """The docstrings' warning where a loss writes its gradient over its caller's input in the forward, else ''."""
    if profile.tier != 3 or is_staged(profile) or not _loss_in_place(profile):
        return ""
    grad_inputs = [t.name for t in profile.inputs if t.requires_grad]
    if not grad_inputs:
        return ""
    name = grad_inputs[0]
    return (
        f" The forward writes the gradient over ``{name}`` (as Liger's cross entropy does: one [rows, classes] buffer "
        f"less): read nothing from ``{name}`` after the call, or pass ``{name}.clone()``; a profile with "
        "``backward.in_place_gradients: false`` generates a kernel that leaves them alone. The backward scales that "
        "gradient in place: a second backward of one forward (retain_graph) scales it again."
    )


def _in_place_gradients(profile: KernelProfile) -> bool:
    """Gradients overwrite the saved inputs only where the inputs are dead: by default when the module itself
    made them (the gate/up projections of an MLP), as Liger's swiglu does; never for user-owned tensors."""
    if profile.backward.in_place_gradients is None:
        return profile.module.kind == "mlp"
    return profile.backward.in_place_gradients


def _precision_note(ops: list[str], rounding: str = "once") -> list[str]:
    text = "fp32 math"
    if ops:
        text += f" ({', '.join(ops)}: precision-sensitive in bf16/fp16)"
    if rounding == "per_op":
        text += ", each op's result rounded to the inputs' dtype as eager PyTorch rounds it."
    else:
        text += ", rounded once, on store."
    return textwrap.wrap(text, width=110)


# A row reduction as rows.py prints it: ``name = tl.sum(...)`` (or max, min; a mean divides it by n_cols).
_REDUCTION_STATEMENT = re.compile(r"^(\w+) = tl\.(sum|max|min)\(")


# Host-side integer math of every tier's launch settings (grids, tiles), from ops/utils.py (kernel_helpers.py).
HOST_INTEGER_HELPERS = ("ceil_div", "next_power_of_2")


def _utils_imports(statements: list[str], used: list[str]) -> list[str]:
    """What an ops file imports from ``liger_kernel.ops.utils``: ``used`` by its template and the jit helpers its
    statements call."""
    return sorted({*used, *jit_helpers_called(statements)})


def _loop_body(statements: list[str], constants: list[str], looped) -> list[str]:
    """The backward's statements without their leading named constants when they run in a loop over row tiles
    (kernels with parameter gradients to accumulate): the template defines those above the loop."""
    return statements[len(constants) :] if looped else statements


def _rounds_to_input_dtype(statements: list[str]) -> bool:
    return any(f"{INPUT_DTYPE})" in line for line in statements)


def _reads_name(statement: str, name: str) -> bool:
    """Whether ``statement`` reads the variable ``name`` (not an attribute or a longer name that contains it)."""
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", statement) is not None


def _any_reads(statements: list[str], name: str) -> bool:
    return any(_reads_name(statement, name) for statement in statements)


def _with_input_dtype(statements: list[str], first_input: str) -> list[str]:
    """Statements that round to the inputs' dtype (``math.rounding: per_op``) read it from the first input."""
    if not _rounds_to_input_dtype(statements):
        return statements
    return [f"{INPUT_DTYPE} = {first_input}_ptr.dtype.element_ty", *statements]


def _scaling(scale: float) -> str:
    return "" if scale == 1.0 else f" * {scale}"


def _normal_draw(scale: float) -> str:
    draw = f"torch.randn(shape, device=device, dtype=torch.float32){_scaling(scale)}"
    return f"{draw}.to(dtype)" if scale == 1.0 else f"({draw}).to(dtype)"


def _gradient_note(formulas: dict[str, str]) -> list[str]:
    """The comment above the backward math: where it comes from, in a sentence (the formulas themselves are the
    statements below it; the profile's ``notes.gradient_formulas`` keeps them whole)."""
    if not formulas:
        return []
    return ["Derived from the reference by the chain rule; forward values are recomputed, not saved."]


def _tanh_note(forward: list[str], backward: list[str]) -> list[str]:
    """Why the backward's tanh is not the forward's, where they differ (``synth/derive.py``'s default choice)."""
    if _any_reads(forward, "tanh") and _any_reads(backward, "tanh_from_exp") and not _any_reads(backward, "tanh"):
        return [
            "tanh from one exponential (tanh_from_exp): libdevice's tanh, which the forward calls as its only",
            "transcendental, takes registers the rest of the backward's math needs.",
        ]
    return []


def _calls_sin_or_cos(statements: list[str]) -> bool:
    return any(re.search(r"\btl\.(sin|cos)\(", line) for line in statements)


def _elementwise_ops(profile: KernelProfile) -> ElementwiseOpsView:
    fields = _elementwise_fields(profile)
    if profile.math.lanes is not None:
        fields = _with_lanes(fields, profile, elementwise_math(profile))
    view = ElementwiseOpsView(**fields)
    return _wrappers_taking_read_hypers(view, profile, view.forward_reads, view.backward_reads)


def _wrappers_taking_read_hypers(
    view: ElementwiseOpsView,
    profile: KernelProfile,
    forward_reads: Callable[[str], bool],
    backward_reads: Callable[[str], bool],
) -> ElementwiseOpsView:
    """``view`` whose forward and backward wrappers take (and whose Function passes) the hyper-parameters their
    kernels read (``forward_reads``, ``backward_reads``) or their own lines read (an unsqueeze's dim a broadcast
    input's layout is taken at), no others."""
    unsqueezed = {t.name: t.unsqueeze for t in profile.inputs if t.broadcast and t.unsqueeze}
    strided = set(view.backward_launch_strided)
    forward_host = [*unsqueezed.values(), *view.contiguous_params]
    backward_host = [*view.gradient_buffers, *view.backward_return_exprs, *view.contiguous_params]
    backward_host += [dim for name, dim in unsqueezed.items() if name in strided]
    if view.lanes:
        groups = view.lanes.groups
        forward_host += [*view.lanes.host_checks, *view.lanes.output_allocations]
        forward_host += [*groups.host_checks, *groups.forward_host] if groups else []
        backward_host += [view.lanes.backward_lane_length, *view.lanes.grad_output_rows, *view.lanes.layer_sums]
        backward_host += groups.backward_shapes if groups else []
    names = [hp.name for hp in profile.hyperparameters]
    forward = [name for name in names if forward_reads(name) or _any_reads(forward_host, name)]
    unread = {name for name in names if not backward_reads(name) and not _any_reads(backward_host, name)}
    taken = [prm.name for prm in hold_vectors_whole(profile).parameters]
    return dataclasses.replace(
        view,
        forward_signature=signature(
            _tensor_arguments(profile) + taken + [hp for hp in profile.hyperparameters if hp.name in forward]
        ),
        forward_call_args=[t.name for t in profile.inputs] + taken + forward,
        forward_hypers=forward,
        backward_signature=", ".join(
            part for part in view.backward_signature.split(", ") if part.split("=")[0] not in unread
        ),
        backward_call_args=[arg for arg in view.backward_call_args if arg.removeprefix("ctx.") not in unread],
    )


def _elementwise_fields(profile: KernelProfile) -> dict[str, Any]:
    """The fields of ``ElementwiseOpsView``: the statements in the profile's kernel language, the host code's names."""
    math = elementwise_math(profile)
    triton = profile.backend == "triton"
    inputs = [t.name for t in profile.inputs]
    outputs = [t.name for t in profile.outputs]
    grad_inputs = [t.name for t in profile.inputs if t.requires_grad]
    params = profile.parameters
    param_names = [prm.name for prm in params]
    hyper_names = [hp.name for hp in profile.hyperparameters]
    forward_reads, backward_reads = set(math.forward_uses), set(math.backward_uses)
    grad_outputs = [f"grad_{name}" for name in outputs]
    tiling = profile.tiling
    optional = {prm.name: repr(_initial_value(prm)) for prm in params if prm.enabled_by}
    forward_inputs = [name for name in inputs if name in forward_reads]
    forward_params = [prm for prm in params if prm.name in forward_reads]
    backward_params = [prm for prm in params if prm.name in backward_reads]
    forward_channel = [prm.name for prm in forward_params if prm.shape == "channel"]
    grad_input_names = [f"grad_{name}" for name in grad_inputs]
    refusal = dtensor_refusal(profile)
    # The parameters and their partial-sum buffers as launch arguments: an absent optional one passes a placeholder
    param_args = [
        f"{prm.name} if {prm.name} is not None else {inputs[0]}" if prm.enabled_by else prm.name for prm in params
    ]
    partial_args = [
        f"grad_{prm.name}_partial if {prm.name} is not None else {inputs[0]}"
        if prm.enabled_by
        else f"grad_{prm.name}_partial"
        for prm in params
    ]
    # The backward loads these, upstream gradients first: each pointer moves with its tile.
    backward_reads_first = [name for name in grad_outputs if name in backward_reads] + [
        name for name in inputs if name in backward_reads
    ]
    backward = _loop_body(math.backward, math.backward_constants, params)
    # The backward kernel takes the tensors and parameters it reads (the first input also for its dtype, when the
    # math rounds to it), nothing else.
    backward_tensors = set(backward_reads_first) | ({inputs[0]} if _rounds_to_input_dtype(backward) else set())
    # Inputs that broadcast against the first one are read at their own rows (no pointer moves with the tile).
    broadcast = {t.name for t in profile.inputs if t.broadcast}
    row_blocks = launches_by_row_blocks(profile)
    # Gradients written over their inputs' buffers (ops/utils.py's own_buffer; the row-block launch tests it inline).
    own_buffers = (
        not row_blocks
        and profile.math.lanes is None  # lanes write their gradients through their own buffers (_with_lanes)
        and _in_place_gradients(profile)
        and any(name not in broadcast for name in grad_inputs)
    )
    trig_backward = (
        triton and tiling.num_warps is None and tiling.backward_num_warps is None and _calls_sin_or_cos(math.backward)
    )
    row_block_forward, row_block_backward = (
        tier1.row_block_settings(tiling.max_block_cols, tiling.num_warps, tiling.backward_num_warps, trig_backward)
        if row_blocks
        else ([], [])
    )
    moved_forward = [name for name in forward_inputs if name not in broadcast]
    moved_backward = [name for name in backward_reads_first if name not in broadcast]
    backward_param_args = [arg for prm, arg in zip(params, param_args) if prm.name in backward_reads]
    return dict(
        # TileLang programs take the inputs' dtype as an argument; Triton kernels read it from a pointer.
        forward=_with_input_dtype(math.forward, inputs[0]) if triton else math.forward,
        backward=_with_input_dtype(backward, inputs[0]) if triton else backward,
        backward_constants=math.backward_constants if params else [],
        forward_inputs=forward_inputs,
        forward_params=forward_params,
        backward_inputs=[name for name in inputs if name in backward_reads],
        backward_params=backward_params,
        backward_grad_outputs=[name for name in grad_outputs if name in backward_reads],
        grad_outputs=grad_outputs,
        grad_input_names=grad_input_names,
        partial_names=[f"grad_{name}_partial" for name in param_names],
        partial_args=partial_args,
        utils_imports=_utils_imports(
            math.forward + math.backward if triton else [],
            [*HOST_INTEGER_HELPERS, *(["get_num_sms"] if params else []), *(["own_buffer"] if own_buffers else [])],
        ),
        in_place=_in_place_gradients(profile),
        precision_note=_precision_note(math.precision_sensitive_ops, profile.math.rounding),
        gradient_note=_gradient_note(math.gradient_formulas) + _tanh_note(math.forward, math.backward),
        # (the wrappers' hyper-parameters are narrowed to those they read: _wrappers_taking_read_hypers)
        forward_signature=signature(_tensor_arguments(profile) + param_names + profile.hyperparameters),
        forward_call_args=inputs + param_names + hyper_names,
        forward_hypers=hyper_names,
        backward_signature=", ".join(inputs + param_names + grad_outputs + hyper_names),
        backward_call_args=inputs + param_names + grad_outputs + [f"ctx.{name}" for name in hyper_names],
        outputs_viewed=[f"{name}.view(*shape)" for name in outputs],
        backward_returns=[f"grad_{name}" for name in grad_inputs] + [f"grad_{name}" for name in param_names],
        backward_return_exprs=[f"grad_{name}.view(*shape)" for name in grad_inputs]
        + [f"grad_{name}" for name in param_names],
        sums_broadcast_gradients=sums_broadcast_gradients(profile),
        apply_returns=broadcast_gradients(profile, [f"grad_{name}" for name in grad_inputs])
        + [f"grad_{name}" for name in param_names]
        + ["None"] * len(hyper_names),
        broadcast_saves=broadcast_saves(profile),
        output_shape_saves=output_shape_saves(profile),
        broadcast_against={t.name: f"{inputs[0]}.shape" for t in profile.inputs if t.broadcast},
        backward_broadcast_against={t.name: "shape" for t in profile.inputs if t.broadcast},
        block_elements=tiling.block_elements,
        max_block_cols=tiling.max_block_cols,
        programs_per_sm=tiling.programs_per_sm,
        num_warps=tiling.num_warps,
        backward_num_warps=tiling.backward_num_warps,
        trig_backward_tile=trig_backward,
        dtensor=None if refusal else dtensor_view(profile, grad_inputs, grad_outputs),
        dtensor_refusal=refusal,
        forward_param_loads=tier1.param_loads(forward_params, optional),
        backward_param_loads=tier1.param_loads(backward_params, optional),
        forward_channel_params=forward_channel,
        forward_pointer_moves=tier1.pointer_moves(moved_forward, outputs, "row_start", "col_start", forward_channel),
        # A backward with parameters walks row tiles of one column block (cols: the block's columns).
        backward_pointer_moves=tier1.pointer_moves(
            moved_backward, grad_input_names, "row_start", "" if params else "col_start"
        ),
        backward_pointer_steps=tier1.pointer_moves(moved_backward, grad_input_names, "row_step"),
        accumulator_inits=tier1.accumulator_inits(params, optional),
        accumulations=tier1.accumulations(params, optional),
        partial_stores=tier1.partial_stores(params, optional),
        contiguous_params=[] if triton else tier1.contiguous_params(params, optional, flat_scalars=True),
        function_contiguous_params=tier1.contiguous_params(params, optional) if triton else [],
        flag_args=tier1.flag_args(optional),
        gradient_buffers=tier1.row_gradient_buffers(grad_inputs, _in_place_gradients(profile))
        if row_blocks
        else tier1.gradient_buffers(grad_inputs, _in_place_gradients(profile), broadcast),
        row_blocks=row_blocks,
        row_block_forward=row_block_forward,
        row_block_backward=row_block_backward,
        partial_buffers=tier1.partial_buffers(params, optional, inputs[0]),
        parameter_gradients=tier1.parameter_gradients(params, optional),
        narrow_block_cols=tiling.max_block_cols // 2,
        backward_loads=backward_reads_first,
        forward_launch_tail=", ".join(param_args + outputs),
        forward_returns=", ".join(inputs + [f"{name}.view(*shape)" for name in outputs]),
        forward_results=", ".join(inputs + outputs),
        backward_launch_strided=[name for name in grad_outputs + inputs if name in backward_tensors],
        backward_launch_tail=", ".join(backward_param_args + grad_input_names + partial_args),
        lanes=None,
        saved=inputs + param_names,
        saved_unpacked=", ".join(inputs + param_names) + ("," if len(inputs + param_names) == 1 else ""),
    )


def launches_by_row_blocks(profile: KernelProfile) -> bool:
    """Whether a tier-1 kernel is launched as upstream's element-wise kernels are, by blocks of a row with masks for
    the last one and no shared layout module (ops_tier1_rows.py.j2): a Triton kernel whose inputs all have the first
    one's shape and which reads no parameter and no index map. The others walk 2-D tiles (ops_tier1.py.j2), whose
    layout helpers (broadcast rows, lanes, parameter-gradient partial sums) live in ``ops/layout_utils.py``."""
    return (
        profile.template == "elementwise"
        and profile.backend == "triton"
        and not profile.parameters
        and not any(t.broadcast for t in profile.inputs)
        and profile.math.lanes is None
        and not profile.math.groups
    )


def _with_lanes(fields: dict[str, Any], profile: KernelProfile, math) -> dict[str, Any]:
    """The fields of a kernel whose profile has lanes: loads, stores, pointers and host shapes by lane; no
    DTensors (a shard of the row's columns splits its lanes)."""
    lanes = lane_ops(profile, set(math.forward_uses), set(math.backward_uses))
    held = lanes_held(profile)
    inputs = [t.name for t in profile.inputs]
    outputs = [t.name for t in profile.outputs]
    lane_tensors = {name: parse_lane(text).tensor for name, text in profile.math.lanes.inputs.items()}
    reads = {lane_tensors.get(name, name) for name in math.backward_uses}
    rounds = _rounds_to_input_dtype(fields["backward"])
    strided = [
        f"grad_{name}"
        for name in outputs
        if any(f"grad_{lane}" in math.backward_uses for lane in _lanes_of(profile, name))
    ]
    strided += [name for name in inputs if name in reads or (rounds and name == inputs[0])]
    groups = lanes.groups
    grouped_broadcast = []  # (gradient of a broadcast input over a further row group, the input, the group's index)
    if groups is not None:  # each further group's tensors beside the first group's, which the kernels swap in
        renamings = profile.math.lanes.groups
        strided += [f"grad_{group[name[5:]]}" for group in renamings for name in strided if name[5:] in group]
        strided += [group[name] for group in renamings for name in strided if name in group]
        grouped_broadcast = [
            (f"grad_{t.name}_{index}", t.name, index)
            for index in range(1, len(renamings) + 1)
            for t in profile.inputs
            if t.broadcast and t.requires_grad
        ]
    tail = [*fields["grad_input_names"], *lanes.layer_buffers, *(groups.backward_launch_args if groups else [])]
    tail += lanes.store_flag_args
    names = [t.name for t in profile.inputs]
    needed = [f"ctx.needs_input_grad[{names.index(flag[len('store_grad_') :])}]" for flag in lanes.store_flag_args]
    return {
        **fields,
        "lanes": lanes,
        "in_place": False,
        "forward_pointer_moves": lanes.forward_pointer_moves,
        "backward_pointer_moves": lanes.backward_pointer_moves,
        "gradient_buffers": lanes.gradient_buffers + (groups.backward_host if groups else []),
        "backward_launch_strided": strided,
        "backward_launch_tail": ", ".join(tail),
        "forward_launch_tail": ", ".join(
            [fields["forward_launch_tail"], *(groups.forward_launch_args if groups else [])]
        ),
        "backward_returns": fields["backward_returns"] + [gradient for gradient, _, _ in grouped_broadcast],
        "backward_signature": ", ".join([fields["backward_signature"], *(f"{f}=True" for f in lanes.store_flag_args)]),
        "backward_call_args": fields["backward_call_args"] + needed,
        "backward_return_exprs": lanes.gradients_viewed
        + [
            f"{gradient}.view(*shape_{index}[:-1], {held[name]} * n_cols) if store_grad_{name} else None"
            for gradient, name, index in grouped_broadcast
        ],
        "outputs_viewed": lanes.outputs_viewed,
        "forward_returns": ", ".join(inputs + lanes.outputs_viewed),
        "broadcast_against": lanes.against,
        "backward_broadcast_against": lanes.backward_against,
    }


def _lanes_of(profile: KernelProfile, output: str) -> list[str]:
    return [name for name, text in profile.math.lanes.outputs.items() if parse_lane(text).tensor == output]


def _tilelang_ops(profile: KernelProfile) -> TileLangOpsView:
    fields = _elementwise_fields(profile)
    math = elementwise_math(profile)
    inputs = [t.name for t in profile.inputs]
    params = profile.parameters
    first = inputs[0]
    optional = [prm.name for prm in params if prm.enabled_by]
    constants = [
        hp.name for hp in profile.hyperparameters if hp.constexpr and hp.name in profile.formula_hyperparameters
    ]
    runtime = [name for name in profile.formula_hyperparameters if name not in constants]

    def param_settings(read: list[LearnableParameter], reads: set[str]) -> tuple[list[str], list[str]]:
        read_constants = [name for name in constants if name in reads]  # a program is built for those it reads
        names = [f"{prm.name}_dtype" for prm in read] + [f"HAS_{name.upper()}" for name in optional] + read_constants
        values = [
            f"{prm.name}.dtype if {prm.name} is not None else {first}.dtype" if prm.enabled_by else f"{prm.name}.dtype"
            for prm in read
        ]
        values += [f"{name} is not None" for name in optional] + read_constants
        return names, values

    def rows_type(name: str, strided: bool) -> str:
        stride = f"{name}_row_stride" if strided else "n_cols"
        return f"T.StridedTensor((n_rows, n_cols), ({stride}, 1), {INPUT_DTYPE})"

    def param_buffers(read: list[LearnableParameter]) -> list[tuple[str, str]]:
        shapes = {"channel": "(n_cols,)", "scalar": "(1,)"}
        return [(f"{prm.name}_global", f"T.Tensor({shapes[prm.shape]}, {prm.name}_dtype)") for prm in read]

    def program(strided: list[str], written: list[str], reads: set[str], partials: list[str]) -> TileLangProgram:
        # A program takes the tensors and parameters its math reads, nothing else.
        strided = [name for name in strided if name in reads]
        read_params = [prm for prm in params if prm.name in reads]
        names, values = param_settings(read_params, reads)
        buffers = [(f"{name}_global", rows_type(name, True)) for name in strided]
        buffers += param_buffers(read_params)
        buffers += [(f"{name}_global", f"T.Tensor((n_rows, n_cols), {INPUT_DTYPE})") for name in written]
        buffers += [(name, 'T.Tensor((n_partial_rows, n_cols), "float32")') for name in partials]
        scalars = [(name, "T.float32") for name in runtime if name in reads]
        return TileLangProgram(
            settings=[INPUT_DTYPE, "n_cols", *(f"{name}_row_stride" for name in strided), *names]
            + ["block_rows", "block_cols", "threads"],
            setting_values=[f"{first}.dtype", "n_cols", *(f"{name}.stride(0)" for name in strided), *values]
            + ["block_rows", "block_cols", "threads"],
            buffers=buffers,
            scalars=scalars,
            call_args=[name.removesuffix("_global") for name, _ in buffers] + [name for name, _ in scalars],
        )

    outputs = [t.name for t in profile.outputs]
    grad_outputs = [f"grad_{name}" for name in outputs]
    partials = [f"grad_{prm.name}_partial" for prm in params]
    backward_program = program(grad_outputs + inputs, fields["grad_input_names"], set(math.backward_uses), partials)
    view = TileLangOpsView(
        **fields,
        forward_program=program(inputs, outputs, set(math.forward_uses), []),
        backward_program=backward_program,
        first_partial=partials[0] if partials else "",
    )
    forward_program = view.forward_program
    forward_passed = {*forward_program.call_args, *forward_program.setting_values}
    backward_passed = {*backward_program.call_args, *backward_program.setting_values}
    return _wrappers_taking_read_hypers(
        view, profile, lambda name: name in forward_passed, lambda name: name in backward_passed
    )


def _first_uses(lines: list[str], params: list[LearnableParameter]) -> list[list[LearnableParameter]]:
    """For each statement, the parameters no earlier statement reads: where the kernel loads them."""
    loads, pending = [], list(params)
    for line in lines:
        used = [p for p in pending if re.search(rf"\b{p.name}\b", line)]
        pending = [p for p in pending if p not in used]
        loads.append(used)
    if pending:
        raise AssertionError(f"parameters {[p.name for p in pending]} are read by no statement")
    return loads


def _row_program_ops(profile: KernelProfile) -> RowProgramOpsView:
    math = row_math(profile)
    inputs = [t.name for t in profile.inputs]
    grad_inputs = [t.name for t in profile.inputs if t.requires_grad]
    outputs = [t.name for t in profile.outputs]
    params = profile.parameters
    param_names = [p.name for p in params]  # the kernels' (a held vector's elements)
    interface = hold_vectors_whole(profile)
    refusal = dtensor_refusal(interface)
    taken = [p.name for p in interface.parameters]  # the Function's and the host wrappers' (a held vector whole)
    reads = set(math.backward_reads)
    # Tensors the backward loads per element: inputs, and outputs it reads instead of recomputing (saved alike).
    backward_inputs = [name for name in inputs if name in reads] + list(math.reused_outputs)
    backward_params = [p for p in params if p.name in reads]
    keepdim = {t.name: t.keepdim for t in profile.outputs}
    statements = math.forward + math.backward
    uses_cast = _rounds_to_input(statements)
    # Each kernel reads the inputs' dtype only where its own lines round to it (a forward's cast can be gone from a
    # derived backward).
    forward_casts, backward_casts = _rounds_to_input(math.forward), _rounds_to_input(math.backward)
    element_outputs = [name for name in outputs if name not in math.row_outputs]
    backward_element_grads = [
        f"grad_{name}" for name in outputs if f"grad_{name}" in reads and name not in math.row_outputs
    ]
    backward_row_grads = [f"grad_{name}" for name in math.row_outputs if f"grad_{name}" in reads]
    stored_grads = [name for name in grad_inputs if f"grad_{name}" not in math.gradient_aliases]
    channel_grads = [f"grad_{p.name}" for p in params if p.shape == "channel"]
    scalar_grads = [f"grad_{p.name}" for p in params if p.shape == "scalar"]
    gradient_note = _gradient_note(math.gradient_formulas)
    # The split path serves DTensors sharded along the row (in kernels that take DTensors), a GroupNorm's groups too
    # long for one program (cut into chunks of whole channels; without per-column or scalar parameters its passes are
    # those each program walks its group in, group_kernels below) and, in the backward, rows too long for its
    # registers beside the parameter gradients' accumulators. A kernel that needs none of these carries no split code.
    split_forward = refusal is None or bool(profile.math.groups)
    split_backward = split_forward or bool(channel_grads or scalar_grads)
    forward_kernel = RowKernelView(
        name=f"_{profile.operation_name}_forward_kernel",
        lines=math.forward,
        element_args=inputs,
        param_args=param_names,
        element_loads=[name for name in inputs if name in math.forward_reads],
        fills=dict(math.forward_fills),
        param_loads=[p for p in params if p.name in math.forward_reads],
        element_stores=element_outputs,
        row_output_stores=list(math.row_outputs),
        row_stores=list(math.saved),
        row_store_note="One fp32 value per row spares the backward these reductions.",
        reduces=True,
        intro=[
            "A tile is addressed from each tensor's 64-bit row pointer plus 32-bit offsets within the tile: the",
            "per-element address arithmetic stays 32-bit, which keeps registers for the row itself.",
        ],
        notes=_precision_note(math.precision_sensitive_ops),
        dtype_source=inputs[0] if forward_casts else "",
        width="shard_cols" if split_forward else "n_cols",
        has_split_mode=split_forward,
    )
    backward_kernel = RowKernelView(
        name=f"_{profile.operation_name}_backward_kernel",
        lines=math.backward,
        element_args=backward_element_grads,
        row_grad_args=backward_row_grads,
        input_args=backward_inputs,
        param_loads=backward_params,
        row_loads=list(math.saved),
        element_stores=stored_grads,
        channel_grads=channel_grads,
        scalar_grads=scalar_grads,
        notes=gradient_note,
        dtype_source=f"grad_{stored_grads[0]}" if backward_casts and stored_grads else "",
        holds_narrow=True,
        width="shard_cols" if split_backward else "n_cols",
        has_split_mode=split_backward,
    )
    split = (
        _split_rows(profile, math, forward_kernel if split_forward else None, backward_kernel)
        if split_backward
        else None
    )
    # Grouped rows whose backward sums no per-column or scalar parameter gradient walk each group in one program.
    walks_groups = bool(profile.math.groups) and not (channel_grads or scalar_grads)
    broadcast = {t.name for t in profile.inputs if t.broadcast}
    # Every tile of the backward reads its rows of the output gradients before it writes the same rows of the input
    # gradients, so the first input gradient may take the first output gradient's buffer whenever autograd alone
    # holds it (checked as it runs); a profile can still say no. A broadcast input's gradient is written per element
    # in fp32 and summed over its broadcast dims after: never into the output gradient's buffer.
    in_place = profile.backward.in_place_gradients is not False and bool(stored_grads) and bool(element_outputs)
    in_place = in_place and stored_grads[0] not in broadcast
    split = (
        _split_rows(profile, math, forward_kernel if split_forward else None, backward_kernel)
        if split_backward
        else None
    )
    forward_kernels = [forward_kernel, *(step.kernel for step in split.forward_passes)] if split else [forward_kernel]
    backward_kernels = (
        [backward_kernel, *(step.kernel for step in split.backward_passes)] if split else [backward_kernel]
    )
    unsqueezed = {t.name: t.unsqueeze for t in profile.inputs if t.broadcast and t.unsqueeze}
    forward_hypers = _hypers_read(profile, forward_kernels, set(unsqueezed.values()))
    backward_hypers = _hypers_read(
        profile, backward_kernels, {dim for name, dim in unsqueezed.items() if name in backward_inputs}
    )
    rows_held = len(channel_grads) + len(backward_element_grads) + len(backward_inputs)
    return RowProgramOpsView(
        forward=math.forward,
        backward=math.backward,
        inputs=inputs,
        element_outputs=element_outputs,
        row_outputs=list(math.row_outputs),
        row_output_shapes={name: "(*shape[:-1], 1)" if keepdim[name] else "shape[:-1]" for name in math.row_outputs},
        saved=list(math.saved),
        forward_inputs=[name for name in inputs if name in math.forward_reads],
        forward_params=[p for p in params if p.name in math.forward_reads],
        backward_inputs=backward_inputs,
        backward_params=backward_params,
        backward_element_grads=backward_element_grads,
        backward_row_grads=backward_row_grads,
        grad_outputs=[f"grad_{name}" for name in outputs],
        grad_inputs=grad_inputs,
        stored_grads=stored_grads,
        channel_grads=channel_grads,
        scalar_grads=scalar_grads,
        saved_tensors=backward_inputs + taken + list(math.saved),
        backward_results=[f"grad_{name}" for name in grad_inputs + taken],
        backward_call_args=[f"grad_{name}" for name in outputs]
        + backward_inputs
        + taken
        + list(math.saved)
        + ["ctx.shape"]
        + (["ctx.dtype"] if stored_grads else [])
        + [f"ctx.{name}" for name in backward_hypers]
        + (["in_place"] if in_place else []),
        forward_hypers=forward_hypers,
        forward_signature=signature(
            _tensor_arguments(interface) + taken + [hp for hp in profile.hyperparameters if hp.name in forward_hypers]
        ),
        forward_call_args=inputs + taken + forward_hypers,
        backward_hypers=backward_hypers,
        gradient_aliases=dict(math.gradient_aliases),
        in_place=in_place,
        utils_imports=_utils_imports(
            statements,
            ["ensure_contiguous"]
            + ([] if walks_groups else ["ceil_div"])
            + (["get_num_sms"] if params else [])
            + (["widen_to_fp32"] if backward_kernel.rewidened and not walks_groups else []),
        ),
        uses_cast=uses_cast,
        precision_note=_precision_note(math.precision_sensitive_ops),
        gradient_note=gradient_note,
        sums_broadcast_gradients=sums_broadcast_gradients(profile),
        apply_returns=broadcast_gradients(profile, [f"grad_{name}" for name in grad_inputs])
        + [f"grad_{name}" for name in taken]
        + ["None"] * len(profile.hyperparameters),
        broadcast_saves=broadcast_saves(profile),
        block_elements=profile.tiling.block_elements,
        programs_per_sm=profile.tiling.programs_per_sm,
        num_warps=profile.tiling.num_warps,
        backward_rows_held=rows_held,
        dtensor=None
        if refusal
        else dtensor_view(interface, grad_inputs, [f"grad_{name}" for name in outputs], tuple(math.row_outputs)),
        dtensor_refusal=refusal,
        forward_kernel=forward_kernel,
        backward_kernel=backward_kernel,
        split=split,
        vectors=vectors_taken_whole(profile),
        sweep=_sweep(profile, split, backward_kernel, rows_held, walks_groups),
        group_kernels=group_kernels(
            {"forward_kernel": forward_kernel, "backward_kernel": backward_kernel, "split": split},
            {t.name for t in profile.inputs if t.broadcast},
            [hp.name for hp in profile.hyperparameters],
        )
        if walks_groups
        else None,
        long_rows=bool(split and split.forward)
        and not profile.math.groups
        and not broadcast
        and not math.row_outputs
        and not any(p.shape == "channel" or p.widens_outputs for p in params),
    )


def _live_steps(steps: list[tuple[list, str]], read_after: set[str]) -> list[tuple[list, str]]:
    """``(parameter loads, line)`` steps without the temporaries only the row sums read (they moved to the sweep's
    sums pass), each dropped line's loads passed on to the next line kept. ``read_after``: what the kernel reads
    after the steps (the gradients it stores or accumulates)."""
    lines = [line for _, line in steps]
    live = set(without_dead_temporaries(lines, read_after))
    kept, pending = [], []
    for params, line in steps:
        pending += params
        if line in live:
            kept.append((pending, line))
            pending = []
    return kept


def _sweep(profile: KernelProfile, split, fused: RowKernelView, rows_held: int, walks_groups: bool):
    """The sweep of the fused backward's too-long rows, where one applies: per-column parameter gradients (no scalar
    ones, no vectors, none optional), no inputs that broadcast or groups, a fused backward holding over three tiles
    (with three it splits only past 16384 columns, where three stages of a sweep's loads do not fit shared memory),
    and a split backward of one pass of sums that none of its statements reads, which are what the fused backward's
    SPLIT mode loads. None otherwise: the split path's passes run."""
    if split is None or walks_groups or profile.math.groups or any(t.broadcast for t in profile.inputs):
        return None
    if rows_held <= 3 or not fused.channel_grads or fused.scalar_grads or vectors_taken_whole(profile):
        return None
    if len(split.backward_passes) != 1 or any(prm.enabled_by or prm.shape != "channel" for prm in fused.param_loads):
        return None
    sums = split.backward_passes[0].kernel
    reductions = {m.group(1): m.group(2) for line in sums.lines if (m := _REDUCTION_STATEMENT.match(line))}
    right_sides = [line.split(" = ", 1)[1] for line in sums.lines]
    if (
        set(reductions.values()) != {"sum"}
        or any(_any_reads(right_sides, name) for name in reductions)
        or sorted(reductions) != sorted(fused.split_loads)
        or sums.element_stores
        or sums.row_output_stores
        or not set(sums.element_loads) <= {*fused.element_args, *fused.input_args}
        or not set(sums.row_loads) <= set(fused.row_loads)
        or not {prm.name for prm in sums.param_loads} <= {prm.name for prm in fused.param_loads}
    ):
        return None
    swept = {prm.name for prm in sums.param_loads}
    sum_steps = [
        (params, f"{target} += {value}" if target in reductions else line)
        for params, line in zip(sums.param_loads_by_line, sums.lines)
        for target, value in [line.split(" = ", 1)]
    ]
    gradient_steps = [
        ([prm for prm in params if prm.name not in swept], line)
        for params, line in zip(fused.param_loads_by_line, fused.lines)
        if line.split(" = ", 1)[0] not in reductions
    ]
    stored = {f"grad_{name}" for name in fused.element_stores} | set(fused.channel_grads)
    gradient_steps = _live_steps(gradient_steps, stored)
    return SweepView(
        name=fused.name.replace("_backward_kernel", "_sweep_backward_kernel"),
        sums=sums,
        sum_steps=sum_steps,
        gradient_steps=gradient_steps,
        hypers=[hp.name for hp in profile.hyperparameters if fused.reads(hp.name) or sums.reads(hp.name)],
        param_bytes=" + ".join(f"{name}.element_size()" for name in sorted(swept)) or "0",
        param_count=len(swept),
    )


def _hypers_read(profile: KernelProfile, kernels: list[RowKernelView], host_reads: set[str]) -> list[str]:
    """The hyper-parameters a row wrapper takes: those its ``kernels`` read, those its own lines read
    (``host_reads``: a broadcast input's unsqueeze dim), and the groups' count, which shapes the rows."""
    return [
        hp.name
        for hp in profile.hyperparameters
        if any(k.reads(hp.name) for k in kernels) or hp.name in host_reads or hp.name == profile.math.groups
    ]


def broadcast_saves(profile: KernelProfile) -> list[str]:
    """The Function's forward lines that keep the shape and dtype of each broadcast input with a gradient, before
    the forward (which may hand such an input back laid out otherwise)."""
    return [
        f"ctx.{t.name}_shape, ctx.{t.name}_dtype = {t.name}.shape, {t.name}.dtype"
        for t in profile.inputs
        if t.broadcast and t.requires_grad
    ]


def output_shape_saves(profile: KernelProfile) -> list[str]:
    """The Function's forward lines that keep the shape of each output of a further row group, for zeros where
    autograd passes it no gradient."""
    groups = profile.math.lanes.groups if profile.math.lanes is not None else []
    grouped = [t.name for t in profile.outputs if any(t.name in group.values() for group in groups)]
    return [f"ctx.{name}_shape = {name}.shape" for name in grouped]


def sums_broadcast_gradients(profile: KernelProfile) -> bool:
    """Whether ``broadcast_gradients`` sums some input's gradient to its broadcast shape."""
    return any(t.broadcast and t.requires_grad for t in profile.inputs)


def broadcast_gradients(profile: KernelProfile, gradients: list[str]) -> list[str]:
    """The Function's backward results for the inputs, given the backward wrapper's ``gradients`` of those with one:
    a broadcast input's, per element of the first input in fp32, summed over its broadcast dims to its own shape."""
    given = dict(zip([t.name for t in profile.inputs if t.requires_grad], gradients))
    results = []
    for tensor in profile.inputs:
        gradient = given.get(tensor.name, "None")
        if tensor.broadcast and tensor.requires_grad:
            inserted = inserted_dims(tensor.broadcast)
            held = tensor.unsqueeze if tensor.unsqueeze.lstrip("-").isdigit() else f"ctx.{tensor.unsqueeze}"
            tail = f", ({held},)" if tensor.unsqueeze else f", {inserted!r}" if inserted else ""
            groups = range(len(profile.math.lanes.groups) if profile.math.lanes is not None else 0)
            # one per row group (HF RoPE's cos: q's rows and k's read it), added up in fp32 and rounded once (each
            # part rounded to bf16 first loses the sum where q's and k's parts cancel)
            parts = [gradient, *(f"{gradient}_{index + 1}" for index in groups)]
            dtype = "torch.float32" if len(parts) > 1 else f"ctx.{tensor.name}_dtype"
            gradient = " + ".join(f"broadcast_sum({part}, ctx.{tensor.name}_shape, {dtype}{tail})" for part in parts)
            if len(parts) > 1:
                gradient = f"({gradient}).to(ctx.{tensor.name}_dtype)"
            if profile.math.lanes is not None:  # the lanes' kernels store it only where autograd asks for it
                index = [t.name for t in profile.inputs].index(tensor.name)
                gradient = f"({gradient}) if ctx.needs_input_grad[{index}] else None"
        results.append(gradient)
    return results


# How the ranks combine one rank's part of a per-row reduction (a mean's part is already divided by the row's n_cols).
_ALL_REDUCE = {"sum": "sum", "mean": "sum", "max": "max", "min": "min"}


def _split_rows(
    profile: KernelProfile, math, fused_forward: RowKernelView | None, fused_backward: RowKernelView
) -> SplitRowsView:
    """The split path's reduction passes (synth/rows.py RowPass): each loads the tensors, parameters and per-row
    values its statements read and stores its reductions for the host to all-reduce; the last passes are the
    fused kernels' SPLIT modes. No ``fused_forward``: the backward alone has a split path."""
    name = profile.operation_name
    inputs = [t.name for t in profile.inputs]
    params = profile.parameters
    outputs = [t.name for t in profile.outputs]
    element_grads = [f"grad_{o}" for o in outputs if o not in math.row_outputs]
    row_grads = [f"grad_{o}" for o in math.row_outputs]

    def passes(split, element_names: list[str], direction: str) -> list[SplitPassView]:
        per_row = [s.name for s in profile.math.statistics] + row_grads
        views = []
        for index, row_pass in enumerate(split[:-1]):
            kernel = _split_row_pass(
                f"_{name}_split_{direction}_pass{index}_kernel",
                row_pass,
                element_names,
                per_row,
                params,
                row_stores=[n for n, _ in row_pass.reductions],
                row_store_note="This rank's part of each row's reductions: the host combines the ranks' parts.",
                reduces=True,
            )
            by_op: dict[str, list[str]] = {}
            for reduction, kind in row_pass.reductions:
                by_op.setdefault(_ALL_REDUCE[kind], []).append(reduction)
            groups = [
                (op, f"{direction}{index}_{op}" if len(names) > 1 else None, names) for op, names in by_op.items()
            ]
            views.append(SplitPassView(kernel=kernel, groups=groups))
            per_row += [n for n, _ in row_pass.reductions if n not in per_row]
        return views

    forward_passes = passes(math.split_forward, inputs, "forward") if fused_forward else []
    loaded = inputs + list(math.reused_outputs)
    backward_passes = passes(math.split_backward, element_grads + loaded, "backward")
    # The last passes are the fused kernels' SPLIT modes.
    return SplitRowsView(forward_passes, fused_forward, backward_passes, fused_backward)


def _split_row_pass(name, row_pass, element_names, per_row, params, **stores) -> RowKernelView:
    """A reduction pass of the split path: it takes and loads what ``row_pass`` reads and stores ``stores``."""
    reads = set(row_pass.reads)
    element = [n for n in element_names if n in reads]
    rows = [n for n in per_row if n in reads]
    read_params = [p for p in params if p.name in reads]
    return RowKernelView(
        name=name,
        lines=row_pass.lines,
        width="shard_cols",
        element_args=element,
        param_args=[p.name for p in read_params],
        row_args=rows,
        element_loads=element,
        param_loads=read_params,
        row_loads=rows,
        dtype_source=next(iter(element), "") if _rounds_to_input(row_pass.lines) else "",
        **stores,
    )


def _rounds_to_input(lines: list[str]) -> bool:
    """Whether ``lines`` round a value to the inputs' dtype (they then read ``input_dtype``)."""
    return any(f"{INPUT_DTYPE})" in line for line in lines)


def _row_ops(profile: KernelProfile) -> RowOpsView:
    written = profile.math.triton
    x = profile.inputs[0].name
    y = profile.outputs[0].name
    param_names = [prm.name for prm in profile.parameters]
    forward_statements = [*written.row_statistics, *written.forward]
    forward_hypers = [hp.name for hp in profile.hyperparameters if _any_reads(forward_statements, hp.name)]
    backward_hypers = [hp.name for hp in profile.hyperparameters if _any_reads(written.backward, hp.name)]
    stats = list(written.saved_row_statistics)
    return RowOpsView(
        x=x,
        y=y,
        stats=stats,
        row_statistics=written.row_statistics,
        forward=written.forward,
        backward=written.backward,
        forward_hypers=forward_hypers,
        backward_hypers=backward_hypers,
        in_place=bool(profile.backward.in_place_gradients),
        backward_signature=", ".join(
            [f"grad_{y}", x] + param_names + stats + ["BLOCK_SIZE", "num_warps"] + backward_hypers
        ),
        backward_call_args=[f"grad_{y}", x]
        + param_names
        + stats
        + ["ctx.BLOCK_SIZE", "ctx.num_warps"]
        + [f"ctx.{name}" for name in backward_hypers],
        saved=[x] + param_names + stats,
        apply_returns=[f"grad_{x}"]
        + [f"grad_{name}" for name in param_names]
        + ["None"] * len(profile.hyperparameters),
        utils_imports=_utils_imports(
            [*written.row_statistics, *written.forward, *written.backward],
            ["calculate_settings", "ensure_contiguous"] + (["get_num_sms"] if param_names else []),
        ),
        programs_per_sm=profile.tiling.programs_per_sm,
        num_warps=profile.tiling.num_warps,
    )


def _loss_ops(profile: KernelProfile) -> LossOpsView:
    math = loss_math(profile)
    element = [t.name for t in profile.inputs if t.dtype != "int64" and not t.per_class and not t.per_row]
    per_class = [t.name for t in profile.inputs if t.per_class]
    grad_inputs = [t.name for t in profile.inputs if t.requires_grad]
    in_place = _loss_in_place(profile)
    statements = math.init + [line for lines in math.passes for line in lines] + math.outputs_block + math.gradient
    picks = [_loss_pick(name, values, index) for name, values, index in math.picks]
    # The kernel takes the numbers its statements, row gate and class-index picks read (the host checks the others)
    kernel_lines = [*statements, *math.adjoints, math.skipped or "", *(pick.index_line or "" for pick in picks)]
    reductions = loss_reductions(profile)
    scales = loss_scales(profile)
    mean = next((r for r in loss_reductions(profile, flat=True) if r.kind == "mean"), None)
    flat_scales = [scale.over_rows for scale in loss_scales(profile, flat=True)]
    denominators = " ".join(r.denominator for r in [*reductions, *scales])
    denominator_candidates = (
        [t.name for t in profile.inputs] + list(profile.formula_hyperparameters) + ["n_rows", "n_cols"]
    )
    # The input whose buffer takes its gradient, and whether a caller may let the inputs be overwritten: both
    # through own_buffer.
    in_place_input = grad_inputs[0] if in_place and grad_inputs else None
    overwritable = _overwritable(profile, element, grad_inputs, in_place)
    return LossOpsView(
        element_inputs=element,
        row_inputs=[t.name for t in profile.inputs if t.dtype == "int64"],
        row_values=[t.name for t in profile.inputs if t.per_row],
        row_masks=[t.name for t in profile.inputs if t.per_row and t.dtype == "bool"],
        class_inputs=per_class,
        picks=picks,
        kernel_hypers=[name for name in profile.formula_hyperparameters if _any_reads(kernel_lines, name)],
        grad_inputs=grad_inputs,
        grad_names=[f"grad_{name}" for name in grad_inputs],
        gradient_free=[
            (index, t.name)
            for index, t in enumerate(profile.inputs)
            if t.dtype != "int64" and t.name not in grad_inputs
        ],
        in_place=in_place_input,
        overwritable=overwritable,
        outputs=[t.name for t in profile.outputs],
        loss=profile.outputs[0].name,
        output_dtype="torch.float32" if profile.outputs[0].dtype == "float32" else "",
        init=math.init,
        passes=[
            ([n for n in element if n in reads], [n for n in per_class if n in reads], lines)
            for reads, lines in zip(math.pass_reads, math.passes)
        ],
        outputs_block=math.outputs_block,
        adjoints=math.adjoints,
        gradient=math.gradient,
        gradient_loads=[name for name in element if name in math.gradient_reads],
        gradient_class_loads=[name for name in per_class if name in math.gradient_reads],
        gradient_pass=math.gradient_pass,
        gate=math.gate,
        skipped=math.skipped,
        chooser=profile.math.loss.reduction if profile.math.loss.reduction not in LOSS_REDUCTIONS else None,
        reductions=reductions,
        scales=scales,
        checked_choices=[hp for hp in profile.hyperparameters if hp.choices and hp.name != profile.math.loss.reduction],
        batch_share=any(r.reads_batch_share for r in [*reductions, *scales]),
        mean_value=mean.value if mean else None,
        mean_denominator=mean.over_rows if mean else "",
        mean_denominator_names=[name for name in denominator_candidates if mean and _reads_name(mean.over_rows, name)],
        scale_denominators=flat_scales,
        scale_denominator_names=[name for name in denominator_candidates if _any_reads(flat_scales, name)],
        ignored=_ignored(profile, math),
        domains=[
            (t.name, "class indices" if t.dtype == "int64" else t.domain or profile.test.input_domain)
            for t in profile.inputs
        ],
        module_call=_loss_module_call(profile) if per_class else None,
        reduction_kinds=[
            (kind, values)
            for kind, values in (
                ("none", [r.value for r in reductions if r.kind == "none"]),
                ("sum", [r.value for r in reductions if r.kind != "none"]),
            )
            if values
        ],
        apply_returns=[f"grad_{name}" if name in grad_inputs else "None" for name in [t.name for t in profile.inputs]]
        + ["None"] * len(profile.hyperparameters),
        utils_imports=_utils_imports(
            statements,
            ["ensure_contiguous", "next_power_of_2", "scale_by_grad_output"]
            + (["own_buffer"] if in_place_input or overwritable else []),
        ),
        host_helpers=[TAKE_HELPER_SOURCE] if f"{TAKE_HELPER}(" in denominators else [],
        precision_note=_precision_note(math.precision_sensitive_ops),
        gradient_note=_gradient_note(math.gradient_formulas),
        block_elements=profile.tiling.block_elements or _loss_block_elements(math),
        num_warps=profile.tiling.num_warps,
        shifted=shifted_targets(profile),
        flat_rows=profile.math.loss.flat_rows,
    )


def _loss_pick(name: str, values: str, index: str) -> LossPickView:
    if index.isidentifier():
        return LossPickView(name, values, index, None)
    return LossPickView(name, values, f"{name}_index", f"{name}_index = {index}")


def _loss_module_call(profile: KernelProfile) -> str:
    """The generated loss module as tests call it: per-class inputs (class weights) given to the constructor, the
    other inputs to forward, from a list ``arguments`` of every input."""
    positions = {t.name: index for index, t in enumerate(profile.inputs)}
    init = [f"{t.name}=arguments[{positions[t.name]}]" for t in profile.inputs if t.per_class]
    constructor_keywords, forward_keywords = module_call_keywords(profile)
    init += constructor_keywords
    forward = [f"arguments[{positions[t.name]}]" for t in profile.inputs if not t.per_class] + forward_keywords
    return f"{profile.module_class_name}({', '.join(init)})({', '.join(forward)})"


def _loss_block_elements(math) -> int:
    """Classes per chunk when the profile leaves it to the template. Measured on an H200 (BT 8192, V 128256, bf16):
    a sweep that also computes and stores the gradient holds more per element and is fastest with 4096-class
    chunks (KL: 1.82 ms, 2.03 at 16384); cross entropy's statistics sweep streams one input and is fastest with
    16384 (1.90 ms, 2.02 at 8192)."""
    return 4096 if math.gradient_pass is not None else 16384


def _ignored(profile: KernelProfile, math) -> dict[str, str]:
    """Class-index inputs the row gate, or a count a mean of the loss divides by, compares with an int
    hyper-parameter (``target != ignore_index``)."""
    counts = [scale.denominator for scale in profile.math.loss.scales]

    def reads(name: str) -> bool:
        return (math.gate is not None and name in math.gate_reads) or _any_reads(counts, name)

    indices = [t.name for t in profile.inputs if t.dtype == "int64" and reads(t.name)]
    ints = [hp.name for hp in profile.hyperparameters if hp.type == "int" and reads(hp.name)]
    return {name: ints[0] for name in indices} if ints else {}


def loss_reductions(
    profile: KernelProfile, renames: dict[str, str] | None = None, flat: bool = False
) -> list[LossReductionView]:
    """The reductions a loss offers; ``renames``: other names of inputs where the denominators are printed (a fused
    linear kernel's ``class_weight``); ``flat``: printed for [rows, classes] inputs, where ``batch_share`` is 1 (a
    fused linear kernel's hidden states, tests' flattened rows)."""
    loss = profile.math.loss
    listed = {choice.value: choice for choice in loss.choices}
    if loss.reduction in LOSS_REDUCTIONS:
        values = [loss.reduction]
    else:
        chooser = next(hp for hp in profile.hyperparameters if hp.name == loss.reduction)
        values = list(chooser.choices or [chooser.default])
    views = []
    for value in values:
        kind, denominator = (listed[value].reduction, listed[value].denominator) if value in listed else (value, "")
        floor = loss.denominator_min if kind == "mean" else None
        views.append(_count_view(profile, value, kind, denominator or loss.denominator, floor, renames, flat))
    return views


def loss_scales(
    profile: KernelProfile, renames: dict[str, str] | None = None, flat: bool = False
) -> list[LossReductionView]:
    """The counts of a loss that adds means over different counts (``math.loss.scales``), each a mean's denominator
    named after its scale; ``renames`` and ``flat`` as ``loss_reductions`` takes them."""
    return [
        _count_view(profile, scale.name, "mean", scale.denominator, scale.denominator_min, renames, flat)
        for scale in profile.math.loss.scales
    ]


def _count_view(profile: KernelProfile, value, kind, denominator, floor, renames, flat) -> LossReductionView:
    """A reduction's view of the per-row ``denominator`` formula, printed as torch code."""
    row_inputs = {t.name for t in profile.inputs if t.dtype == "int64" or t.per_class or t.per_row}
    names = [*row_inputs, *profile.formula_hyperparameters, "n_cols", BATCH_SHARE]
    expr = sympy.sympify(parse_formula(denominator, names))
    expr = expr.xreplace(
        {sympy.Symbol(old, real=True): sympy.Symbol(new, real=True) for old, new in (renames or {}).items()}
    )
    share = sympy.Symbol(BATCH_SHARE, real=True)
    reads_batch_share = share in expr.free_symbols
    if flat:
        expr = expr.xreplace({share: sympy.S.One})
    return LossReductionView(
        value=value,
        kind=kind,
        denominator=print_torch(expr),
        row_formula=any(symbol.name in row_inputs for symbol in expr.free_symbols),
        counted=_counted(expr),
        reads_batch_share=reads_batch_share,
        floor=floor,
    )


def _counted(expr: sympy.Basic) -> str | None:
    """The condition of an indicator (1 where it holds, else 0) as torch code: summing it counts rows in one launch
    fewer than summing the 1.0 / 0.0 it selects."""
    if isinstance(expr, sympy.Piecewise) and len(expr.args) == 2:
        (then, condition), (otherwise, rest) = expr.args
        if then == 1 and otherwise == 0 and rest == sympy.true:
            return print_torch(condition)
    return None


# Module ----------------------------------------------------------------------------------------------------
def _held_names(profile: KernelProfile) -> dict[str, str]:
    """Each parameter's expression on the module: ``weight[0]`` for an element of a held vector, else its name (a
    vector the interface takes whole: its own name too)."""
    held = {prm.name: _module_path(profile, prm) for prm in profile.parameters}
    if profile.reference.kind == "module":
        for vector, elements in held_vectors(profile.parameters).items():
            held.update({prm.name: f"{vector}[{index}]" for index, prm in enumerate(elements)})
    held.update({vector: vector for vector in vectors_taken_whole(profile)})
    return held


def _module_path(profile: KernelProfile, prm: LearnableParameter) -> str:
    """Where the module holds ``prm``: where the reference module does (``norm.weight`` of a held nn.LayerNorm),
    else under its own name."""
    return prm.attribute if profile.reference.kind == "module" and prm.attribute else prm.name


def _containers(param_init: dict[str, str]) -> list[str]:
    """The submodules the dotted parameter paths pass through, outer first (``a``, ``a.b`` for ``a.b.weight``)."""
    containers: list[str] = []
    for path in param_init:
        parts = path.split(".")[:-1]
        for depth in range(1, len(parts) + 1):
            prefix = ".".join(parts[:depth])
            if prefix not in containers:
                containers.append(prefix)
    return containers


# Constructor arguments of torch modules that say where and in what dtype the parameters are made.
FACTORY_ARGUMENTS = ("device", "dtype")


def _param_init(profile: KernelProfile, size_param: str, factory: str = "") -> dict[str, str]:
    """Each parameter's ``nn.Parameter(...)`` as the reference holds it; ``factory``: ``, device=device, dtype=dtype``
    where the constructor takes them."""
    inits = {}
    vectors = held_vectors(profile.parameters) if profile.reference.kind == "module" else {}
    for vector, elements in vectors.items():
        values = ", ".join(repr(_initial_value(prm)) for prm in elements)
        frozen = "" if any(prm.requires_grad for prm in elements) else ", requires_grad=False"
        inits[vector] = f"nn.Parameter(torch.tensor([{values}]{factory}){frozen})"
    in_vectors = {prm.name for elements in vectors.values() for prm in elements}
    for prm in profile.parameters:
        if prm.name in in_vectors:
            continue
        # The shape the reference holds it in: [H], [1, ..., 1, H] (LayerScale), [1] or a 0-d scalar.
        sized = prm.shape in ("channel", "group")
        dims = ["1"] * (prm.held_rank - 1) + [size_param] if sized else ["1"] * prm.held_rank
        sizes = ", ".join(dims) if dims else "()"  # torch.ones(1, 1, H), torch.ones(())
        shape = f"({dims[0]},)" if len(dims) == 1 else f"({sizes})" if dims else "()"  # torch.full's tuple
        if prm.init_expr:
            value = prm.init_expr  # the reference's own, following its constructor's arguments
        elif prm.init == "ones":
            value = f"torch.ones({sizes}{factory})"
        elif prm.init == "zeros":
            value = f"torch.zeros({sizes}{factory})"
        elif prm.init_arg:
            value = f"torch.full({shape}, float({prm.init_arg}){factory})"
        else:
            value = f"torch.full({shape}, {float(prm.init_value)!r}{factory})"
        path = _module_path(profile, prm)
        inits[path] = f"nn.Parameter({value})" if prm.requires_grad else f"nn.Parameter({value}, requires_grad=False)"
        if prm.enabled_by:
            inits[path] += f" if {prm.enabled_by} else None"
    return inits


def module_view(profile: KernelProfile, renames: dict[str, str] | None = None) -> ModuleView:
    """The module's view; ``renames``: other names of per-class inputs (a fused linear kernel's ``class_weight``)."""
    params = profile.parameters
    # Per-class inputs (class weights) come first, as torch's and Liger's losses take ``weight=None``.
    per_class = [(renames or {}).get(t.name, t.name) for t in profile.inputs if t.per_class]
    built = {(renames or {}).get(t.name, t.name) for t in profile.inputs if t.per_class and t.init_expr}
    # Class weights a caller gives come first, as torch's and Liger's losses take weight=None; those the reference
    # builds itself from its constructor's arguments go after them, so the reference's arguments keep their places.
    init_params = [InitParameter(name=name, default=None) for name in per_class if name not in built]
    own_names = {t.name for t in profile.inputs if t.per_class}  # a module reference's weight=None argument
    init_params += [ip for ip in profile.module.init_params if ip.name not in own_names | set(per_class)]
    init_params += [InitParameter(name=name, default=None) for name in per_class if name in built]
    init_names = {ip.name for ip in init_params}
    size_param = profile.module.size_param
    sized = any(p.shape in ("channel", "group") for p in params)  # per-channel parameters: the module needs the size
    if sized and size_param not in init_names:
        init_params.insert(0, InitParameter(name=size_param, default=None))
    # A module reference's forward arguments stay the forward's (``def forward(self, x, alpha=1.5)``): the module
    # is called as the reference is. A function reference's go to the constructor, as Liger's modules take them.
    in_forward = set(forward_hypers(profile))
    for hp in profile.hyperparameters:
        if hp.name not in init_names | in_forward and profile.module.kind != "mlp":
            init_params.append(hp)
            init_names.add(hp.name)
    hyper_names = [hp.name for hp in profile.hyperparameters]
    forward_keywords = [f"{hp.name}={hp.default!r}" for hp in profile.hyperparameters if hp.name in in_forward]
    # extra_repr's fields: an MLP's sizes come from its HF config; other modules show their __init__ arguments.
    # torch's factory arguments (nn.LayerNorm's device=None, dtype=None, kept by a subclass's signature): where the
    # parameters are made, not attributes of the module.
    factory = [name for name in FACTORY_ARGUMENTS if name in init_names]
    if profile.module.kind == "mlp":
        fields = ["hidden_size", "intermediate_size"] + hyper_names
    else:
        fields = [ip.name for ip in init_params if ip.name not in [p.name for p in params] + per_class + factory]
    required = {
        ip.name
        for ip in profile.module.init_params
        if ip.default is None and not ip.optional and ip.name not in per_class
    }
    # The size is required where the reference gives it no number (a default of None, or none at all); one it
    # defaults keeps its default and its place, so the module is called as the reference is, positionally too.
    if sized and next((ip.default for ip in init_params if ip.name == size_param), None) is None:
        required.add(size_param)
    param_init = _param_init(profile, size_param, "".join(f", {name}={name}" for name in factory))
    # An argument nothing of the module reads (CohereLayerNorm's bias=False, which its __init__ ignores) is taken, as
    # the reference takes it, and not held: an attribute named bias holding False breaks HF's weight initialization.
    reads = " ".join([*param_init.values(), *(t.init_expr for t in profile.inputs if t.per_class and t.init_expr)])
    roles = set(hyper_names) | {size_param} | {p.name for p in params} | set(per_class) | set(factory)
    unheld = {
        ip.name
        for ip in init_params
        if profile.module.kind != "mlp" and ip.name not in roles and not re.search(rf"\b{re.escape(ip.name)}\b", reads)
    }
    fields = [name for name in fields if name not in unheld]
    return ModuleView(
        kind=profile.module.kind,
        init_params=init_params,
        init_signature=signature(init_params, frozenset(required)),
        attributes=[
            (ip.name, _held_value(ip, profile))
            for ip in init_params
            if ip.name not in {p.name for p in params} | set(per_class) | set(factory) | unheld
        ],
        buffers=[(name, t.init_expr or None) for name, t in zip(per_class, [t for t in profile.inputs if t.per_class])],
        forward_signature=", ".join([t.name for t in profile.inputs if not t.per_class] + forward_keywords),
        forward_keywords=forward_keywords,
        apply_inputs=[f"self.{t.name}" if t.per_class else t.name for t in profile.inputs],
        param_init=param_init,
        containers=_containers(param_init),
        self_params=[f"self.{_held_names(profile)[prm.name]}" for prm in hold_vectors_whole(profile).parameters],
        self_hypers=[name if name in in_forward else f"self.{name}" for name in hyper_names],
        traced_at=_traced_at(profile),
        repr_fields=fstring_chunks([f"{name}={{self.{name}}}" for name in fields]),
        docstring=wrap_docstring(
            f"{docstring_formula(profile)} as a module, computed by ``{profile.function_class_name}``."
            + overwrite_note(profile)
        ),
        variants=list(profile.module.variants),
        held=_held_names(profile),
        function=_reference_function(profile),
        reads_math=any(prm.init_expr and reads_math(prm.init_expr) for prm in profile.parameters),
    )


def _held_value(init: InitParameter | HyperParameter, profile: KernelProfile) -> str:
    """What the module holds of a constructor argument: the argument, or, for one that defaults to None (``optional``)
    and is a hyper-parameter of a number (``if temperature is None: temperature = 2.0`` in a module's ``__init__``),
    that number where None is given."""
    number = next((hp.default for hp in profile.hyperparameters if hp.name == init.name), None)
    if getattr(init, "optional", False) and isinstance(number, (int, float)) and not isinstance(number, bool):
        return f"{number!r} if {init.name} is None else {init.name}"
    return init.name


def _reference_function(profile: KernelProfile) -> ReferenceFunction | None:
    """``module.function``: the reference function's own arguments, passed on to the Function by name."""
    if not profile.module.function:
        return None
    tree = ast.parse(profile.reference.source)
    entry = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == profile.reference.entry)
    positional = entry.args.args
    defaults = [None] * (len(positional) - len(entry.args.defaults)) + list(entry.args.defaults)
    taken = {t.name for t in profile.inputs} | {hp.name for hp in profile.hyperparameters}
    written = [
        arg.arg if default is None else f"{arg.arg}={ast.unparse(default)}"
        for arg, default in zip(positional, defaults)
    ]
    fixed = [
        (arg.arg, ast.unparse(default))
        for arg, default in zip(positional, defaults)
        if arg.arg not in taken and default is not None
    ]
    return ReferenceFunction(
        name=profile.module.function,
        signature=", ".join(written),
        fixed=fixed,
        call_args=[t.name for t in profile.inputs] + [hp.name for hp in profile.hyperparameters],
    )


def _traced_at(profile: KernelProfile) -> list[tuple[str, str, str]]:
    """``module.fixed`` as (name, default written out, the test that refuses another value)."""
    defaults = {ip.name: ip.default for ip in profile.module.init_params}
    fixed = [
        (name, defaults[name])
        for name in profile.module.fixed
        if name in defaults and (defaults[name] is None or isinstance(defaults[name], (bool, int, float, str)))
    ]
    return [
        (name, repr(value), f"{name} {'is not' if value is None or isinstance(value, bool) else '!='} {value!r}")
        for name, value in fixed
    ]


def _holding(held: list[str], built: str) -> str:
    """``built``, a module reference's constructor call, with the hyper-parameters it holds set on it."""
    return f"_hold_hyperparameters({built}, hyper)" if held else built


def takes_size(profile: KernelProfile) -> bool:
    """Whether the modules are built with the size (``hidden_size=``): they size parameters, or the reference's
    constructor asks for it though nothing uses it (an ``nn.Module`` written to sit in a model's layer list)."""
    channel = any(p.shape in ("channel", "group") for p in profile.parameters)
    return channel or profile.module.size_param in {ip.name for ip in profile.module.init_params}


# Test ------------------------------------------------------------------------------------------------------
# How many times eager PyTorch's own fp32 error (against float64) an fp32 kernel may be off, where that is more than
# the fixed tolerance: an ill-conditioned reference (sin(30 * x)) loses digits to fp32 whatever computes it.
EAGER_ERROR_FACTOR = 4


def test_view(profile: KernelProfile) -> TestView:
    # Printed into the tests as literals: floats whatever the YAML held (validated as two finite numbers >= 0).
    tolerances = {
        str(key): [float(value) for value in pair]
        for key, pair in {**TestSpec().tolerances, **profile.test.tolerances}.items()
    }
    size_param = profile.module.size_param
    hyper_names = [hp.name for hp in profile.hyperparameters]
    module_reference = profile.reference.kind == "module"
    places = reference_hypers(profile)
    constructor_keywords = [f"{name}=hyper[{name!r}]" for name in places.constructor]
    reference_sized = size_param in {ip.name for ip in profile.module.init_params}
    reference_module_args = ([f"{size_param}=n_cols"] if reference_sized else []) + constructor_keywords
    forward_keywords = places.forward_keywords()
    # A grouped kernel's parameters hold one value per channel (dim 1), others one per column.
    size_dim = "1" if profile.math.groups else "-1"
    liger_module_args = [f"{size_param}=shape[{size_dim}]"] if takes_size(profile) else []
    liger_constructor_keywords, liger_forward_keywords = module_call_keywords(profile)
    liger_module_args += liger_constructor_keywords
    inputs = [t.name for t in profile.inputs]
    grad_inputs = [t.name for t in profile.inputs if t.requires_grad]
    params = hold_vectors_whole(profile).parameters
    hypers = bool(hyper_names)
    hyper_param = ", hyper" if hypers else ""
    switches = ", **switches" if any(p.enabled_by for p in params) else ""
    # A loss in two stages returns what its sequence stage returns, not one value per statistic (profile.outputs).
    single = not sequence_returns_tuple(profile.math.loss.sequence) if is_staged(profile) else len(profile.outputs) == 1
    entry = profile.reference.entry
    # Every hyper-parameter an argument of the constructor: built with **hyper, as the reference takes them.
    all_in_constructor = not places.forward and not places.held
    constructor = ["**hyper"] if hypers and all_in_constructor else constructor_keywords
    # Built where a case ``hyper`` is in scope (tier-3 and appended tests): **hyper even when it is empty.
    reference_module = _holding(
        places.held, f"{entry}({', '.join(['**hyper'] if all_in_constructor else constructor)})"
    )
    if params:
        reference_call = f"reference(*inputs{forward_keywords})"
    elif module_reference:
        sized = [f"{size_param}=inputs[0].shape[{size_dim}]"] if takes_size(profile) else []
        built = _holding(places.held, f"{entry}({', '.join(sized + constructor)})")
        reference_call = f"{built}(*inputs{forward_keywords})"
    else:
        reference_call = f"{entry}(*inputs, **hyper)" if hypers else f"{entry}(*inputs)"
    # 3 rows on 2 ranks and 7 columns on 2 ranks: uneven shards (2 + 1, 4 + 3) along every sharded dim.
    # A reference written for more dims (``B, H, T, D = x.shape``) gets them: (3, 2, 2, 7).
    matrix = all(len(shape) == 2 for shape in profile.test.cpu_shapes)
    dtensor_shape = (3, 7) if matrix else (3,) + (2,) * (max(profile.written_rank(), 3) - 2) + (7,)
    column_shard = f"Shard({len(dtensor_shape) - 1})"
    dtensor_cases = [f"({column_shard}, Shard(0))"] if any(p.shape == "channel" for p in params) else []
    dtensor_cases += [f"(Shard({dim}), Replicate())" for dim in range(len(dtensor_shape))] + [
        "(Replicate(), Replicate())"
    ]
    param_placements = [
        "Replicate()"
        if p.shape != "channel"
        else f"Shard({p.held_rank - 1}) if param_placement == Shard(0) else param_placement"
        if p.widens_outputs
        else "param_placement"
        for p in params
    ]
    terms = {
        "channel": "n_rows",
        "scalar": "n_rows * inputs[0].shape[-1]",
        "vector": "n_rows * inputs[0].shape[-1]",  # each element a scalar
        "group": "n_rows * inputs[0].shape[-1] // inputs[0].shape[1]",  # a channel's elements in every sample
    }
    broadcast = {t.name: t.broadcast for t in profile.inputs if t.broadcast}
    # A broadcast input's gradient sums as many terms as the first input has elements per element of it.
    gradients = [
        f"({index}, {name!r}, {f'inputs[0].numel() // inputs[{index}].numel()' if name in broadcast else 1})"
        for index, name in enumerate(inputs)
        if name in grad_inputs
    ]
    # Dims beyond [rows, cols] that a broadcast pattern needs or the reference is written for (GPT-J's x[:, :, :, ::2]).
    written = profile.example_rank()
    lead = max([written if written >= 3 else 0, *map(pattern_rank, broadcast.values())]) - 1
    # Small shapes for every device, model-sized ones skipped on the CPU (as the shape parameters: test_shapes.py).
    cpu_rows, gpu_rows = (3, 4500), (64, 5000)
    cpu_tiles, gpu_tiles = [(8, 256), (4, 2, 512)], [(64, 4096), (2, 32, 2048)]
    if lead > 0:
        cpu_rows, gpu_rows = (2,) * lead + (4500,), (4,) * (lead - 1) + (16, 5000)
        cpu_tiles = [(2,) * (lead - 1) + (4, 256), (4,) * (lead - 1) + (2, 512)]
        gpu_tiles = [(4,) * (lead - 1) + (16, 4096), (2,) * (lead - 1) + (32, 2048)]
    long_rows = f"{cpu_rows}, pytest.param({gpu_rows}, marks={MODEL_SIZED})"
    whole_tiles = (
        "[" + ", ".join([*map(str, cpu_tiles), *(f"pytest.param({s}, marks={MODEL_SIZED})" for s in gpu_tiles)]) + "]"
    )
    # A frozen parameter (requires_grad=False) has no gradient on either side: nothing to compare.
    gradients += [f"({len(inputs) + i}, {p.name!r}, {terms[p.shape]})" for i, p in enumerate(params) if p.requires_grad]
    return TestView(
        hyper_args="".join(f", hyper[{name!r}]" for name in hyper_names),
        hyper_kwargs="".join(f", {name}=hyper[{name!r}]" for name in hyper_names),
        hyper_param=hyper_param,
        tuple_open="(" if single else "",
        tuple_close=",)" if single else "",
        module_switches=switches,
        module_signature=f"n_cols, dtype{hyper_param}, randomized=True{switches}",
        module_call=f"inputs[0].shape[{size_dim}], dtype{hyper_param}{switches}",
        module_test_call=f"shape[{size_dim}], torch.float32{hyper_param}",
        reference_params=[
            f"getattr(reference, {(p.attribute or p.name)!r}, None)"
            if p.enabled_by
            else f"reference.{p.attribute or p.name}"
            for p in params
        ],
        reference_signature=f"reference, inputs{hyper_param}" if params else f"inputs{hyper_param}",
        reference_call=reference_call,
        module_reference_args=f"reference, ref_inputs{hyper_param}" if params else f"ref_inputs{hyper_param}",
        exact_reference_args=(
            f"copy.deepcopy(reference).double(), exact_inputs{hyper_param}" if params else f"exact_inputs{hyper_param}"
        ),
        run_args=f"inputs, grads{', reference' if params else ''}{hyper_param}",
        check_signature=f"inputs, dtype, atol, rtol{hyper_param}, only_finite=False{switches}",
        tensors="inputs + params" if params else "inputs",
        liger_tensors="liger_inputs + liger_params" if params else "liger_inputs",
        gradients=gradients,
        gradients_by_index=[f"({index}, {name!r})" for index, name in enumerate(inputs) if name in grad_inputs],
        module_case=0 if params else -1,
        eager_error_factor=EAGER_ERROR_FACTOR,
        cpu_shapes=[tuple(int(d) for d in s) for s in profile.test.cpu_shapes],
        gpu_shapes=[tuple(int(d) for d in s) for s in profile.test.gpu_shapes],
        shapes=(loss_shape_params if profile.tier == 3 else row_shape_params)(
            [tuple(int(d) for d in s) for s in profile.test.cpu_shapes],
            [tuple(int(d) for d in s) for s in profile.test.gpu_shapes],
        ),
        tol=tolerances,
        hyper_cases=hyper_cases(profile),
        hyper_values=[f"hyper[{name!r}]" for name in hyper_names],
        hyper_keywords=[f"{name}=hyper[{name!r}]" for name in hyper_names],
        positive_domain=profile.test.input_domain == "positive",
        input_domains={t.name: t.domain for t in profile.inputs if t.domain in ("probabilities", "log_probabilities")},
        tied_inputs=_tied_inputs(profile),
        input_scaling=_scaling(float(profile.test.input_scale)),
        normal_draw=_normal_draw(float(profile.test.input_scale)),
        reference_module_args=", ".join(reference_module_args if module_reference else []),
        held_hypers=places.held,
        dtensor_shape=dtensor_shape,
        column_shard=column_shard,
        dtensor_cases=dtensor_cases,
        dtensor_placements=[f"Shard({dim})" for dim in range(len(dtensor_shape))] + ["Replicate()"],
        param_placements=param_placements,
        reference_module=reference_module,
        reference_forward_keywords=forward_keywords,
        liger_module_args=", ".join(liger_module_args),
        liger_forward_keywords="".join(f", {keyword}" for keyword in liger_forward_keywords),
        reference_backward="_backward_where_differentiable" if len(profile.outputs) > 1 else "torch.autograd.backward",
        hidden_act=profile.module.hidden_act or profile.operation_name,
        mlp_shapes=[tuple(int(d) for d in s) for s in profile.test.mlp_shapes],
        switches_off=", ".join(
            f"{flag}=False" for flag in dict.fromkeys(p.enabled_by for p in profile.parameters if p.enabled_by)
        ),
        input_shapes={name: shape_expression(pattern) for name, pattern in broadcast.items()}
        | _group_input_shapes(profile),
        long_rows_shapes=long_rows,
        whole_tile_shapes=whole_tiles,
        # A loss's float64 truth keeps its casts at float64 too: a float32 cast of the logits (common in loss
        # references) would make it eager fp32 exactly, and the fp32 tolerance floor (eager's own error) nil.
        keep_float64_source=KEEP_FLOAT64_SOURCE if profile.notes.casts and (params or profile.tier == 3) else "",
    )


def _tied_inputs(profile: KernelProfile) -> list[int]:
    """The inputs of a row kernel with a max or min statistic that hold whole rows (not broadcast, not drawn as a
    distribution), by index; none for other kernels, whose draws stay as they were."""
    extremes = any(s.reduce in ("max", "min") for s in profile.math.statistics)
    if profile.tier != 2 or not extremes or profile.math.groups or profile.math.lanes is not None:
        return []
    distributions = ("probabilities", "log_probabilities")
    return [index for index, t in enumerate(profile.inputs) if not t.broadcast and t.domain not in distributions]


def _group_input_shapes(profile: KernelProfile) -> dict[str, str]:
    """The shape tests draw each input of a further row group in (other leading dims than the first group's)."""
    if profile.math.lanes is None or not profile.math.lanes.groups:
        return {}
    patterns = [t.broadcast for t in profile.inputs if t.broadcast]
    rank = min(len(shape) for shape in [*profile.test.cpu_shapes, *profile.test.gpu_shapes])
    inputs = {t.name for t in profile.inputs}
    expression = group_shape_expression(patterns, rank)
    return {
        renamed: expression for group in profile.math.lanes.groups for renamed in group.values() if renamed in inputs
    }


# Benchmark -------------------------------------------------------------------------------------------------
def _benchmark_view(profile: KernelProfile) -> BenchmarkView:
    """Which model dimension the benchmark sweeps: vocabulary for losses, intermediate size for gated MLP
    activations, hidden size otherwise."""
    size_key, size_name = benchmark_dimension(profile)
    # Grouped rows: BT tokens as samples of BENCHMARK_GROUP_CHANNELS channels each, ``size`` elements per channel.
    channels = f"{BENCHMARK_GROUP_CHANNELS * group_count(profile)}" if profile.math.groups else "size"
    init_args = [f"{profile.module.size_param}={channels}"] if takes_size(profile) else []
    # The reference at its defaults: only constructor arguments are passed (forward's keep their defaults).
    constructor = set(reference_hypers(profile).constructor)
    init_args += [f"{hp.name}={hp.default!r}" for hp in profile.hyperparameters if hp.name in constructor]
    # Losses sweep BT only: a vocabulary sweep says little about a kernel that streams one row at a time.
    sweep_size = profile.tier != 3
    if sweep_size:
        sweep_description = f"Sweeps the token count BT at the model's {size_name}, then the {size_name} at a fixed BT."
    else:
        sweep_description = f"Sweeps the token count BT at the model's {size_name}."
    return BenchmarkView(
        size_key=size_key,
        size_name=size_name,
        sweep_size=sweep_size,
        sweep_description=sweep_description,
        reference_init_args=", ".join(init_args),
        providers=list(profile.benchmark.providers),
        sizes=_benchmark_sizes(profile),
        grad_inputs=benchmark_grad_inputs(profile.tier, profile.inputs),
        test_module=kernel_paths(profile.operation_name)["test"].removesuffix(".py").replace("/", "."),
        input_shapes=_benchmark_input_shapes(profile),
    )


def _benchmark_input_shapes(profile: KernelProfile) -> dict[str, str]:
    """The benchmark's input shapes when some input broadcasts against the first: the tokens grouped in sequences
    of ``num_tokens // 4`` where a pattern needs more dims, each broadcast input in its own shape."""
    patterns = [t.broadcast for t in profile.inputs if t.broadcast]
    written = profile.example_rank()  # a reference's own rank (GPT-J's 4, B, T, H = x.shape beside a weight: 3)
    if profile.math.groups:
        channels = BENCHMARK_GROUP_CHANNELS * group_count(profile)
        first = (f"max(1, num_tokens // {channels})", str(channels), "size")
    elif not patterns and written <= 2:
        return {}
    else:
        first = first_input_dims(patterns, "num_tokens", "size", group=4, rank=written)
    shapes = {
        t.name: ", ".join(str(d) for d in (shape_for(t.broadcast, first) if t.broadcast else first))
        for t in profile.inputs
    }
    # A further row group's input with a quarter of the first's heads (grouped-query attention's k beside q).
    over = group_dims(patterns, len(first))
    grouped = [f"max(1, {d} // 4)" if index in over else str(d) for index, d in enumerate(first)]
    groups = profile.math.lanes.groups if profile.math.lanes is not None else []
    shapes.update({renamed: ", ".join(grouped) for group in groups for renamed in group.values() if renamed in shapes})
    return shapes


def _benchmark_sizes(profile: KernelProfile) -> dict[str, int]:
    """Model sizes for a script that sweeps BT alone: the swept dimension's (``benchmark_size``), with an MLP's
    hidden size beside its intermediate one."""
    key, size = benchmark_size(profile)
    if profile.module.kind != "mlp":
        return {key: size}
    fixed = profile.benchmark.fixed_config
    return {
        "hidden_size": int(fixed.get("hidden_size", DEFAULT_MLP_SIZES[0])),
        key: int(fixed.get(key, DEFAULT_MLP_SIZES[1])),
    }
