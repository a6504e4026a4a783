"""The kernel profile: the typed, human-editable checkpoint between analysis and rendering.

analyze -> profile (YAML a person reviews and may edit) -> render (synthesis of the math, templates) -> insert.

Every field of a profile changes what kernelgen generates (or, for ``benchmark.fixed_config``, what ``validate``
measures), except the ``notes`` section, which only informs a person (why this tier, the derived gradients, which
kernel to read for patterns). The math is held as formulas over named values (``math.statistics`` and
``math.outputs``, written with the op names of ``tools/kernelgen/synth/rules.py``): rendering derives the forward
and backward Triton from them, so editing a formula changes the kernel. ``math.triton`` instead holds hand-written
Triton statements (an override for math kernelgen cannot derive):
- tier 1 (element-wise): every input and learnable parameter by its name, hyper-parameters by name; ``forward``
  assigns every output; ``backward`` reads ``grad_{output}`` and assigns ``grad_{input}`` for each input that
  requires a gradient and ``grad_{parameter}`` for each learnable parameter (the element-wise contribution: the
  template sums it over rows).
- tier 2 (row reduction): ``x`` (the row, masked with ``mask``), ``n_cols``, parameters and hyper-parameters
  by name; ``row_statistics`` assigns every name in ``saved_row_statistics``; ``forward`` assigns ``y``;
  ``backward`` reads ``grad_y`` and the statistics and assigns ``grad_x`` and ``grad_{parameter}``.
Either may call ``tanh(u)`` and ``pow(x, y)``, which the ops file imports from ``liger_kernel.ops.utils`` (libdevice's
when compiled, core-op formulas under the interpreter; added to a target's utils that lacks them).
Tier 3 (a loss over a long row of classes) is formulas only: per-row statistics and per-row outputs as in tier 2,
plus ``math.loss``, which says how the rows' values become the loss.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import keyword
import re
import types
import typing

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

import yaml

from tools.kernelgen.broadcast import broadcast_pattern_problem
from tools.kernelgen.broadcast import narrowing
from tools.kernelgen.broadcast import pattern_rank
from tools.kernelgen.lane_maps import lane_problems
from tools.kernelgen.lane_maps import parse_lane
from tools.kernelgen.layout import MAX_KERNEL_NAME
from tools.kernelgen.layout import SNAKE_CASE
from tools.kernelgen.profile_values import ATTRIBUTE_PATH
from tools.kernelgen.profile_values import check_values
from tools.kernelgen.profile_values import triton_statement_problem
from tools.kernelgen.reference_text import names_the_entry_takes
from tools.kernelgen.reference_text import reference_source_problems

PROFILE_VERSION = 2
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TIER_DESCRIPTIONS = {
    1: "element-wise: every output element depends only on the input elements at the same position",
    2: "row reduction: each output row depends on a reduction (sum, mean, max) over its input row",
    3: "fused / complex: multi-pass over long rows, losses over a class dimension, gathers by index",
}
CLOSEST_KERNEL_BY_TIER = {1: "swiglu", 2: "rms_norm", 3: "cross_entropy"}
MODULE_KINDS = ("mlp", "elementwise", "norm", "loss")
LOSS_REDUCTIONS = ("mean", "sum", "none")
INPUT_DOMAINS = ("", "real", "positive", "probabilities", "log_probabilities", "mask")
SCALAR_TYPES = ("float", "int", "bool", "str")
PARAMETER_SHAPES = ("channel", "scalar", "group")
INIT_KINDS = ("ones", "zeros", "constant")
# Model-specific subclasses an mlp module can come with (``module.variants``), by the suffix of their class name.
MLP_VARIANTS = {"gemma4": "ForGemma4"}
DTYPES = ("same", "float32", "int64", "int32", "bool")
REDUCE_KINDS = ("sum", "mean", "max", "min")
# math.rounding: fp32 throughout and one rounding at the store, or every op rounded as eager PyTorch does.
ROUNDING_MODES = ("once", "per_op")
# The kernel language the ops file is written in: Triton, or TileLang (tier 1, from derived formulas only).
BACKENDS = ("triton", "tilelang")
DERIVED_NAMES = ("function_class_name", "module_class_name", "functional_name")  # from operation_name
# Names a formula may use besides the profile's own: the row length and pi.
FORMULA_CONSTANTS = ("n_cols", "pi", "inf")
# An element's column index: tier 3's class index (class-index targets), tier 2's column (``x.max(dim).values``
# gives its gradient to the first column holding the maximum).
COLUMN_INDEX = "col"
MAX_FORMULA_CHARS = 4000  # longer is no formula a person reviews; its derivative would not fit a kernel either

# Fields of profile format 1 that moved or went away: such a profile gets one line per field saying where.
RETIRED_FIELDS = {
    "inputs[].shape": "removed in profile format 2 (did nothing: the tier sets the layout)",
    "outputs[].shape": "removed in profile format 2 (did nothing: the tier sets the layout)",
    "outputs[].requires_grad": "removed in profile format 2 (did nothing: every output is differentiable)",
    "module.init_params[].type": "removed in profile format 2 (a constructor argument is its name and default)",
    "module.init_params[].constexpr": "removed in profile format 2 (a constructor argument is its name and default)",
    "module.init_params[].choices": "removed in profile format 2 (a constructor argument is its name and default)",
    "tier_description": "removed in profile format 2 (it is the fixed description of the tier)",
    "tier_reason": "moved to notes.tier_reason in profile format 2",
    "closest_existing_kernel": "moved to notes.closest_existing_kernel in profile format 2",
    "precision_sensitive_ops": "removed in profile format 2 (derived from the math when rendering)",
    "backward.saved_tensors": "removed in profile format 2 (the template saves what the backward reads)",
    "backward.recompute": "removed in profile format 2 (the backward recomputes every element-wise value)",
    "backward.gradient_formulas": "moved to notes.gradient_formulas in profile format 2",
    "backward.saved_row_statistics": "moved to math.triton.saved_row_statistics in profile format 2",
    "tiling.grid": "removed in profile format 2 (did nothing; tiling now holds the launch settings templates read)",
    "tiling.block_size_source": "removed in profile format 2 (did nothing; see tiling.block_elements)",
    "tiling.needs_sm_parallelism": "removed in profile format 2 (did nothing; see tiling.programs_per_sm)",
    "benchmark.variable": "removed in profile format 2 (did nothing: the benchmark sweeps BT, then the size)",
    "benchmark.x_label": "removed in profile format 2 (did nothing: the benchmark sweeps BT, then the size)",
    "benchmark.x_values": "removed in profile format 2 (did nothing: the model config sets the sweep)",
    "math.forward": "moved to math.triton.forward in profile format 2 (or write math.outputs formulas)",
    "math.backward": "moved to math.triton.backward in profile format 2 (or write math.outputs formulas)",
    "math.row_statistics": "moved to math.triton.row_statistics in profile format 2 (or write math.statistics)",
    "math.synthesized": "removed in profile format 2 (math.outputs are derived, math.triton is hand-written)",
    "math.extra": "removed in profile format 2 (hidden_act: module.hidden_act, mlp_cases_cpu: test.mlp_shapes, "
    "the rest: notes)",
}


class ProfileError(ValueError):
    """A profile that cannot be used; ``problems`` lists every one of them with its YAML path."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        # A profile analysed from a reference: what it cannot take is the reference's, not a YAML file's.
        what = "the profile analysed from" if re.search(r"\.py(:\w+)?$", str(source)) else "invalid profile"
        super().__init__(f"{what} {source}: " + "; ".join(problems))


def pascal_case(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


@dataclass
class TensorSpec:
    """A tensor input: ``[..., n_cols]`` rows; tier 3 also takes class indices, one per row (``dtype: int64``), and
    ``per_class`` tensors of ``[n_cols]`` values shared by every row (class weights), which formulas read at each
    column by name or at a class index with ``take(NAME, index)``; they take no gradient, and None computes as 1 for
    every class; and ``per_row`` tensors of one number per row (``[rows]``, or the leading dims of the first input:
    a per-token weight, an old policy's log-probability), loaded once per row, which take no gradient. ``requires_grad: false`` makes it a constant of the math (no gradient is derived, stored or
    returned). ``domain``: what the tests draw for it (empty: ``test.input_domain``; ``probabilities`` and
    ``log_probabilities``: a distribution over each row, as losses between distributions expect). ``attribute``: a
    module reference holds this input itself (``weight`` for ``self.weight``): tests and benchmarks set it there
    instead of passing it to forward. ``broadcast`` (tiers 1 and 2, not the first input): its shape against the
    first input's, aligned at the last dim as torch broadcasts: ``*`` a dim of the first input's size, ``1`` a
    broadcast one, a leading ``...`` every dim of the first input before them (``* 1 *``: one row per sequence of
    ``[batch, seq, hidden]``; ``*``: ``[hidden]``; ``... 1``: one value per row; a last ``/2``, ``/4`` or ``/8``:
    rows that many times shorter, which index maps read, ``... /2`` GPT-J's half-width sin); empty: the first input's
    shape. ``sequence_shape`` (tier 3 with ``math.loss.sequence``): an input only the sequence stage
    reads, its shape in the leading dims ``B, T`` of ``[B, T, V]`` logits (``B, T`` a value per token, ``B`` per
    sequence, ``B // 2`` per pair of sequences whose first half is chosen); it takes no gradient.
    ``unsqueeze`` (with a broadcast pattern of one ``_``): the dim the reference unsqueezes it at, an int or the int
    hyper-parameter passed there (HF RoPE's ``cos.unsqueeze(unsqueeze_dim)``): the kernels insert that dim as torch
    does, at the rank the input comes in, instead of the position the pattern gives. ``shift`` (tier 3, class
    indices): the reference shifts this target one token left, as a causal LM's loss does (``F.pad(labels, (0, 1),
    value=ignore_index)[..., 1:]``), and this is the pad value its last token of each sequence reads: an int or the
    int hyper-parameter passed there; the Function shifts it so before the kernel."""

    name: str
    dtype: str = "same"
    requires_grad: bool = True
    domain: str = ""
    per_class: bool = False
    per_row: bool = False
    attribute: str = ""
    # A held per-class input the reference builds in __init__ from its constructor's arguments
    # (``torch.linspace(0.5, 1.5, num_classes)``): the module builds it so where none is given.
    init_expr: str = ""
    broadcast: str = ""
    sequence_shape: str = ""
    unsqueeze: str = ""
    shift: str = ""
    description: str = ""


@dataclass
class OutputSpec:
    """A tensor output (the math gives its formula under ``math.outputs.NAME``). An output with one value per row
    (tier 2: a formula of statistics alone, such as rstd) keeps the reduced dimension as size 1 (``keepdim``) or
    drops it."""

    name: str
    dtype: str = "same"
    keepdim: bool = True
    description: str = ""


@dataclass
class HyperParameter:
    """A scalar argument of the op (eps, negative_slope, ...): a runtime float unless ``constexpr``."""

    name: str
    type: str = "float"
    default: Any = None
    constexpr: bool = False
    choices: list[Any] | None = None
    description: str = ""


@dataclass
class InitParameter:
    """An argument of the module's constructor (sizes, ``init_alpha``): ``default: null`` makes it required, unless
    ``optional``: an argument that defaults to None (``dtype=None``, ``device=None``)."""

    name: str
    default: Any = None
    optional: bool = False
    description: str = ""


# The description of a parameter the reference initialises at random (no profile spelling: the module starts it at
# ones, and ``new`` says so).
RANDOM_INIT = "initialised non-uniformly in the reference"


@dataclass
class LearnableParameter:
    """An ``nn.Parameter`` the module owns: ``channel`` broadcasts over rows (shape [H]); ``scalar`` is one value;
    ``group`` (with ``math.groups``) is one value per channel of the grouped dim 1 (shape [C], a GroupNorm's affine),
    read at each element's channel."""

    name: str
    shape: str = "channel"
    # The dims the module holds it with, where not [H] (channel) or [1] (scalar): a channel parameter of rank r is
    # [1] * (r - 1) + [H] (LayerScale's (1, 1, H) is 3), a scalar of rank 0 is a 0-d tensor. The kernel reads the
    # same values; the module's state dict is the reference's, and inputs of fewer dims than a channel parameter
    # give outputs of its rank, as torch broadcasts.
    rank: int | None = None
    init: str = "ones"
    init_value: float | None = None
    # A constructor argument every element starts at (``init_alpha``), for ``init: constant`` without init_value.
    init_arg: str = ""
    # The reference's own expression of its starting value where that follows the constructor's arguments otherwise
    # than as one of them (``torch.ones(1) * dim ** 0.5``): the module writes it as the reference does.
    init_expr: str = ""
    # A bool constructor argument that creates it (``beta``): built without it, the module holds None, and the
    # Function and functional take None for it, which computes as its initial value and gets no gradient.
    enabled_by: str = ""
    attribute: str = ""  # where the reference module holds it, when not ``self.<name>`` (``norm.weight``)
    description: str = ""
    # False: the reference holds it frozen (``nn.Parameter(..., requires_grad=False)``); the module holds it so.
    requires_grad: bool = True

    @property
    def held_rank(self) -> int:
        return 1 if self.rank is None else self.rank

    @property
    def widens_outputs(self) -> bool:
        """A channel parameter of more than one dim: outputs of inputs with fewer dims broadcast to its rank."""
        return self.shape == "channel" and self.held_rank > 1


@dataclass
class Statistic:
    """A per-row reduction along the last dimension: ``name = reduce(of)`` over each row's columns (``mean``
    divides the sum by ``n_cols``). ``of`` is a formula over the inputs, parameters, hyper-parameters and the
    statistics listed before this one."""

    name: str
    reduce: str = "sum"
    of: str = ""


@dataclass
class HandWrittenMath:
    """Triton statements a person wrote instead of formulas kernelgen derives (names: see the module docstring)."""

    forward: list[str] = field(default_factory=list)
    backward: list[str] = field(default_factory=list)
    row_statistics: list[str] = field(default_factory=list)
    saved_row_statistics: list[str] = field(default_factory=list)


@dataclass
class Lanes:
    """Tier 1: an index map within the row (``tools/kernelgen/lane_maps.py``). Each input row is ``count`` lanes of
    ``n_cols`` elements; ``inputs`` names the lanes the formulas read (``x_0: x[2 * cols]``), ``outputs`` the lanes
    ``math.outputs`` gives formulas for and where each is stored (``y_0: y[cols]``); an output's row is as many lanes
    as map onto it. The backward stores each input lane's gradient where the lane was read (overlapping lanes of
    one input into buffers of their own, added up; positions no lane reads get zero)."""

    count: int = 1
    inputs: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    # Further row groups of one launch (HF RoPE's k beside q): each renames the inputs and outputs of rows of the
    # first group that the lanes read and write (``{q: k, q_embed: k_embed}``) to tensors with rows of their own
    # (other leading dims, the same row length); the math is the first group's, the inputs that broadcast are shared.
    groups: list[dict[str, str]] = field(default_factory=list)

    def output_widths(self) -> dict[str, int]:
        """Each output's row length in lanes."""
        widths: dict[str, int] = {}
        for written in self.outputs.values():
            tensor = parse_lane(written).tensor
            widths[tensor] = widths.get(tensor, 0) + 1
        return widths


@dataclass
class LossChoice:
    """What one value of the hyper-parameter that picks the reduction means, when it is not a reduction of its own
    name over ``math.loss.denominator`` (``batchmean``: ``mean`` over ``1`` per row)."""

    value: str
    reduction: str = "mean"
    denominator: str = "1"


@dataclass
class LossScale:
    """A mean the loss adds to means over other counts (Hinton's distillation: cross entropy over the kept rows plus a
    batchmean KL): ``name``, read in ``math.outputs``, is 1 / the sum over rows of ``denominator`` (a per-row
    formula, as ``math.loss.denominator``), taken at least ``denominator_min``; 0 when that sum is 0 (a mean over no
    row is 0)."""

    name: str
    denominator: str = "1"
    denominator_min: float | None = None


@dataclass
class LossSpec:
    """Tier 3: how the per-row values of ``math.outputs`` become the loss. ``reduction``: ``mean`` (their sum over
    the sum of ``denominator``, a per-row formula of class indices, hyper-parameters and ``n_cols``: 1 averages over
    rows, ``target != ignore_index`` over the rows that count, ``n_cols`` over every element), ``sum``, ``none`` (one
    value per row), or the name of a ``str`` hyper-parameter that picks one per call (its values are reductions by
    name, or listed in ``choices``). The first output is the loss; the others are returned beside it, reduced the
    same way, without gradients. A mean over nothing (every row ignored) is 0. ``sequence``: the math after the
    per-token statistics as Python (``def sequence_stage(statistics..., inputs..., hyper-parameters...)`` returning
    the outputs), run by PyTorch on ``[B, T]`` and smaller tensors: ``math.outputs`` are then the statistics (one value
    per token, ``reduction: none``), each differentiated through the adjoint autograd gives it. ``sequence_groups``:
    which sequences' statistics the adjoints of one sequence's read, when the first output is one number: ``sequence``
    (its own alone), ``pair`` (sequence i with i + B // 2, the first half of the batch chosen), empty (any: the whole
    batch). A fused linear kernel forms a chunk's d(logits) in its forward when its chunks hold whole groups.
    ``scales``: where the loss adds means over different counts, each count's scale (``LossScale``); the outputs
    read them and the rows are summed (``reduction: sum``). ``flat_rows``: the reference flattens [B, T, V] logits
    into rows itself, so its per-row values (``reduction: none``) come as [B*T], not [B, T]."""

    reduction: str = "mean"
    denominator: str = "1"
    # The mean's denominator summed over rows is taken at least this (``mask.sum().clamp(min=1)``); None: as summed.
    denominator_min: float | None = None
    choices: list[LossChoice] = field(default_factory=list)
    scales: list[LossScale] = field(default_factory=list)
    sequence: str = ""
    sequence_groups: str = ""
    flat_rows: bool = False


@dataclass
class Math:
    """What the kernel computes: formulas kernelgen derives the forward and backward from, or hand-written Triton.

    ``outputs`` maps every output to its formula; ``statistics`` (tier 2) are the per-row reductions those formulas
    read by name. ``triton`` replaces both with hand-written statements. ``rounding`` (tier 1): ``once`` computes in
    fp32 and rounds at the store; ``per_op`` rounds every op's result to the inputs' dtype as eager PyTorch does (a
    bf16 ``gelu(a) * b`` multiplies the rounded gelu, as Liger's hand-written MLP activations do)."""

    statistics: list[Statistic] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    rounding: str = "once"
    triton: HandWrittenMath | None = None
    loss: LossSpec | None = None
    lanes: Lanes | None = None
    # Tier 2: the int hyper-parameter that splits dim 1 (channels) of the first input into that many groups; a row
    # of the kernel is then one group of a sample, its channels' elements in order (``x.view(b, groups, -1)``), and
    # inputs that broadcast (``group`` parameters included) are laid out against ``[batch, channels, rest]``.
    groups: str = ""
    # Tier 2: the rank the first input must have where the reference names a dim that is the row's only at that rank
    # (``softmax(x, dim=1)``, ``F.normalize(x)``: dim 1 of ``[rows, columns]``); the kernel refuses other ranks, on
    # which the reference reduces another dim. 0: any rank, rows over the leading dims.
    input_rank: int = 0


@dataclass
class Backward:
    # None: tier 1 only where the module made the inputs (mlp), tier 2 where only autograd holds the output's
    # gradient (reusable_gradient), tier 3 for logits scored against class indices; False: never.
    in_place_gradients: bool | None = None


@dataclass
class FusedLinear:
    """Tier 3: also generate ``fused_linear_NAME``, the loss of ``hidden @ weight.T + bias`` computed over chunks of
    rows so the ``[rows, classes]`` logits never exist whole (Liger's fused linear cross entropy): each chunk's
    logits come from a matmul, the loss kernel writes their gradient in place, and matmuls accumulate the gradients
    of the hidden states, the weight and the bias. ``chunk_size``: rows per chunk (``null``: ceil(rows / ceil(classes
    / hidden)) rounded up to a power of two, as upstream Liger does: a chunk's logits about the size of the hidden
    states)."""

    enabled: bool = False
    chunk_size: int | None = None


@dataclass
class Tiling:
    """Launch settings the ops template reads (``None``: the tier's measured default, filled in on load).

    ``block_elements``: elements of one program's tile (tier 1: its 2-D tile; tier 3: the chunk of classes a pass
    over a row holds). ``max_block_cols`` (tier 1): the widest column slice of a long row. ``programs_per_sm``: programs per SM of the persistent grids that reduce parameter gradients.
    ``num_warps``: warps per program (``None``: chosen from the tile size). ``backward_num_warps`` (tier 1): the
    backward's warps per program where they should differ from the forward's (``None``: the backward launches as
    the forward does, except that a backward calling sin or cos gets 16 warps and 4096-column slices, as measured
    on an H200, unless ``num_warps`` is set). ``forward_math`` / ``backward_math`` (tier 1, Triton): how each pass
    computes tanh and log(1 + v), softplus's included: ``core`` (formulas of core ``tl`` ops, fewer registers) or
    ``libdevice`` (libdevice's, an ulp or two; core ops under the interpreter either way); ``None``: libdevice's in a
    forward whose only transcendental is tanh, core ops elsewhere (``synth/derive.py``). Which is faster depends on
    the kernel, so ``tune`` tries both."""

    block_elements: int | None = None
    max_block_cols: int | None = None
    programs_per_sm: int | None = None
    num_warps: int | None = None
    backward_num_warps: int | None = None
    forward_math: str | None = None
    backward_math: str | None = None


# The shapes an input only a loss's sequence stage reads may have, in words of the [B, T, V] logits' leading dims:
# a value per token, per sequence, per pair of sequences (the first half of the batch chosen), per chosen token, one
# for the batch (KTO's KL baseline).
SEQUENCE_SHAPES = ("B, T", "B", "B // 2", "B // 2, T", "1")
# What the adjoints of one sequence's statistics read (``math.loss.sequence_groups``; empty: the whole batch).
SEQUENCE_GROUPS = ("", "sequence", "pair")


def shape_of(words: str, batch: int, tokens: int) -> tuple[int, ...]:
    """A shape of ``SEQUENCE_SHAPES`` at ``batch`` sequences of ``tokens`` tokens."""
    return tuple(eval(part, {}, {"B": batch, "T": tokens}) for part in words.split(","))  # noqa: S307 - own words


# The tiling fields each ops template reads, with their defaults (from measured sweeps on an H200).
TILING_DEFAULTS = {
    "elementwise": {"block_elements": 4096, "max_block_cols": 2048, "programs_per_sm": 2},
    "rows": {"block_elements": 4096, "programs_per_sm": 2},
    "rows_handwritten": {"programs_per_sm": 1},
    "loss": {},
}
TILING_AUTO = ("num_warps",)  # fields whose None means "chosen by the template", for every tier
# ... and for one template: a loss's chunk of classes follows its schedule (see render/views.py).
TILING_AUTO_BY_TEMPLATE = {
    "loss": ("block_elements",),
    "elementwise": ("backward_num_warps", "forward_math", "backward_math"),
}
# How a tier-1 pass computes tanh and log(1 + v) (``Tiling.forward_math`` / ``backward_math``).
MATH_LIBRARIES = ("core", "libdevice")
# Tiling fields that name a choice instead of a size, with the values each takes.
TILING_CHOICES = {"forward_math": MATH_LIBRARIES, "backward_math": MATH_LIBRARIES}


@dataclass
class BenchmarkSpec:
    """``providers`` the generated benchmark runs; ``fixed_config``: the model sizes ``validate`` measures at."""

    providers: list[str] = field(default_factory=lambda: ["liger", "torch", "torch_compile"])
    fixed_config: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModuleSpec:
    """How the nn.Module wrapper looks: ``mlp`` (gate/up/down projections from an HF config), ``elementwise``
    (forward takes the tensor inputs), ``norm`` (owns a weight of ``hidden_size``), ``loss`` (input, target)."""

    kind: str = "elementwise"
    init_params: list[InitParameter] = field(default_factory=list)
    size_param: str = "hidden_size"  # the init param that sizes per-channel parameters
    hidden_act: str = ""  # mlp: the HF ``config.hidden_act`` the generated test's config carries
    variants: list[str] = field(default_factory=list)  # mlp: model-specific subclasses (MLP_VARIANTS)
    # Constructor arguments the kernel computes at their default only (a submodule's option, an int the reference
    # computes with, none of the kernel's hyper-parameters): the module refuses other values.
    fixed: list[str] = field(default_factory=list)
    # A function reference: also a function of this name in the module file, taking the reference's own arguments
    # (``liger_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1)`` for HF's apply_rotary_pos_emb),
    # those the kernel does not take refused at other values than their defaults.
    function: str = ""


@dataclass
class Reference:
    """The PyTorch reference: ``source`` defines ``entry`` (a function or an nn.Module class)."""

    source: str = ""
    entry: str = ""
    kind: str = "function"
    origin: str = ""


@dataclass
class TestSpec:
    # Masked tiles (31, 127 columns; 3 and 6 rows) and whole ones (8 rows of 64 columns: no lane masked), the two
    # code paths of the tiled kernels.
    cpu_shapes: list[list[int]] = field(default_factory=lambda: [[2, 3, 31], [2, 4, 64], [3, 127]])
    gpu_shapes: list[list[int]] = field(default_factory=lambda: [[2, 512, 4096], [1, 256, 14336], [4, 333, 1023]])
    tolerances: dict[str, list[float]] = field(
        default_factory=lambda: {"float32": [1e-5, 1e-5], "bfloat16": [1e-2, 1e-2]}
    )
    input_scale: float = 1.0
    input_domain: str = "real"  # "positive" when the reference takes log/sqrt/fractional powers of its inputs
    mlp_shapes: list[list[int]] = field(default_factory=lambda: [[4, 32, 48], [3, 31, 67]])  # mlp: (BT, H, I)


@dataclass
class Notes:
    """For the person reading the profile: nothing in this section changes what kernelgen generates."""

    tier_reason: str = ""
    closest_existing_kernel: str = ""
    gradient_formulas: dict[str, str] = field(default_factory=dict)
    casts: list[str] = field(default_factory=list)
    specialized: dict[str, Any] = field(default_factory=dict)
    other_parameters: list[str] = field(default_factory=list)
    remarks: list[str] = field(default_factory=list)


@dataclass
class KernelProfile:
    operation_name: str
    function_class_name: str = ""
    module_class_name: str = ""
    functional_name: str = ""
    tier: int = 1
    backend: str = "triton"  # the kernel language of the ops file (BACKENDS)
    inputs: list[TensorSpec] = field(default_factory=list)
    outputs: list[OutputSpec] = field(default_factory=list)
    hyperparameters: list[HyperParameter] = field(default_factory=list)
    parameters: list[LearnableParameter] = field(default_factory=list)
    forward_computation: str = ""  # one line for docstrings
    math: Math = field(default_factory=Math)
    backward: Backward = field(default_factory=Backward)
    tiling: Tiling = field(default_factory=Tiling)
    fused_linear: FusedLinear = field(default_factory=FusedLinear)
    module: ModuleSpec = field(default_factory=ModuleSpec)
    benchmark: BenchmarkSpec = field(default_factory=BenchmarkSpec)
    reference: Reference = field(default_factory=Reference)
    test: TestSpec = field(default_factory=TestSpec)
    notes: Notes = field(default_factory=Notes)
    profile_version: int = PROFILE_VERSION

    def __post_init__(self):
        self.fill_defaults()

    def fill_defaults(self) -> None:
        """Derive what was left empty: class and function names from ``operation_name``, tiling from ``tier``."""
        pascal = pascal_case(self.operation_name) if SNAKE_CASE.match(self.operation_name or "") else ""
        if not self.function_class_name and pascal:
            self.function_class_name = f"Liger{pascal}Function"
        if not self.module_class_name and pascal:
            suffix = {"loss": "Loss", "mlp": "MLP"}.get(self.module.kind, "")
            # A name that already ends in the suffix keeps one: focal_loss -> LigerFocalLoss, gated_mlp -> LigerGatedMLP.
            if suffix and pascal.lower().endswith(suffix.lower()):
                pascal = pascal[: -len(suffix)]
            self.module_class_name = f"Liger{pascal}{suffix}"
        if not self.functional_name and self.operation_name:
            self.functional_name = f"liger_{self.operation_name}"
        for key, value in TILING_DEFAULTS.get(self.template, {}).items():
            if getattr(self.tiling, key) is None:
                setattr(self.tiling, key, value)

    @property
    def template(self) -> str:
        """The ops template: ``elementwise`` (tier 1), ``rows`` (tier 2, derived), ``rows_handwritten`` (tier 2,
        hand-written Triton), ``loss`` (tier 3)."""
        if self.tier == 2:
            return "rows_handwritten" if self.math.triton is not None else "rows"
        return {1: "elementwise", 3: "loss"}.get(self.tier, "")

    def written_rank(self) -> int:
        """The least rank of example data for an element-wise or row reference that no broadcast pattern shapes:
        its test shapes' fewest dims (4 for one written for [batch, heads, seq, dim], GPT-J's ``x[:, :, :, ::2]``;
        2 for the defaults, whose last shape is [rows, columns]); 2 otherwise."""
        if self.tier == 3 or any(spec.broadcast for spec in self.inputs):
            return 2
        return self.example_rank()

    def example_rank(self) -> int:
        """The least rank of the data a tier-1 or tier-2 reference runs on (its test shapes' fewest dims), broadcast
        inputs or not: a smoke run, a staged check and a test of long rows run the reference at that rank
        (``B, T, H = x.shape`` beside a [hidden] weight needs 3); 2 for a loss."""
        if self.tier == 3:
            return 2
        return min((len(shape) for shape in self.test.cpu_shapes), default=2)

    # Names of the rendered artefacts ------------------------------------------------------------------------
    @property
    def forward_wrapper(self) -> str:
        return f"{self.operation_name}_forward"

    @property
    def backward_wrapper(self) -> str:
        return f"{self.operation_name}_backward"

    @property
    def fused_linear_name(self) -> str:
        """The kernel ``fused_linear.enabled`` adds beside the loss."""
        return f"fused_linear_{self.operation_name}"

    @property
    def fused_linear_classes(self) -> tuple[str, str, str]:
        """Its autograd Function, module and functional: ``Liger`` + ``FusedLinear`` + the loss's own names
        (``LigerCrossEntropyLoss`` -> ``LigerFusedLinearCrossEntropyLoss``, ``LigerJSD`` -> ``LigerFusedLinearJSD``)."""
        module = self.module_class_name
        if module.startswith("Liger"):
            stem = module[len("Liger") :]
            stem = stem[: -len("Loss")] if stem.endswith("Loss") else stem
            module = f"LigerFusedLinear{module[len('Liger') :]}"
        else:
            stem, module = pascal_case(self.operation_name), f"FusedLinear{module}"
        return f"LigerFusedLinear{stem}Function", module, f"liger_fused_linear_{self.operation_name}"

    @property
    def grad_inputs(self) -> list[TensorSpec]:
        return [t for t in self.inputs if t.requires_grad]

    @property
    def tier_description(self) -> str:
        return TIER_DESCRIPTIONS.get(self.tier, "")

    @property
    def formula_hyperparameters(self) -> list[str]:
        """Hyper-parameters a formula can read: the numbers (bools and strings are switches of the templates)."""
        return [hp.name for hp in self.hyperparameters if hp.type in ("float", "int")]

    def renamed(self, new_name: str) -> KernelProfile:
        """A copy for another kernel name; class and function names are re-derived from the new name."""
        clone = from_dict(to_dict(self), source=loaded_from(self) or f"<renamed {self.operation_name}>", validate=False)
        _remember_source(clone, loaded_from(self))
        clone.operation_name = new_name
        clone.function_class_name = clone.module_class_name = clone.functional_name = ""
        clone.fill_defaults()
        return clone

    def validate(self, source: str = "profile") -> None:
        """Raise ``ProfileError`` naming the profile's file, or ``source`` for one no file holds (an analysis)."""
        problems = validate_profile(self)
        if problems:
            raise ProfileError(loaded_from(self) or source, problems)


def hyper_cases(profile: KernelProfile) -> list[dict]:
    """The hyper-parameter sets tests sweep: the defaults, then each choice, then each runtime float moved off its
    default (doubled, or 0.5 for a default of 0), and each runtime int of a loss (an ignore_index) moved to class 1
    (2 where it is 1)."""
    defaults = {hp.name: hp.default for hp in profile.hyperparameters}
    cases = [dict(defaults)]
    for hp in profile.hyperparameters:
        if hp.choices:
            cases.extend({**defaults, hp.name: choice} for choice in hp.choices if choice != hp.default)
        elif hp.type == "float" and not hp.constexpr:
            cases.append({**defaults, hp.name: float(hp.default) * 2.0 if hp.default else 0.5})
        elif hp.type == "int" and not hp.constexpr and profile.tier == 3:
            # A loss reads such an int as a class index (the lowering makes only those runtime): a class every test
            # vocabulary has, so that its tokens are drawn too, and a kernel that kept the default (a two-stage
            # loss's sequence stage did, with -100 written in) fails.
            cases.append({**defaults, hp.name: 1 if hp.default != 1 else 2})
    return cases


# The model dimension a kernel runs along, as the benchmark sweeps it: (config key, words for plots).
def benchmark_dimension(profile: KernelProfile) -> tuple[str, str]:
    """The vocabulary for losses, the intermediate size for gated MLP activations, the hidden size otherwise."""
    if profile.tier == 3:
        return "vocab_size", "vocabulary size"
    if profile.module.kind == "mlp":
        return "intermediate_size", "intermediate size"
    return "hidden_size", "hidden size"


# A loss denominator's count of the batch per row: input.size(0) / rows (1 for [rows, classes] inputs), so that a
# mean "per batch" (F.kl_div's batchmean, a sum / x.shape[0]) divides by size(0) when the inputs have more dims.
BATCH_SHARE = "batch_share"
DEFAULT_BENCHMARK_SIZE = 4096


def benchmark_grad_inputs(tier: int, inputs: list[dict[str, Any]]) -> list[str]:
    """The inputs a benchmark differentiates: every one that takes a gradient, except that a loss's training step
    differentiates its first input only (the logits; a target, a teacher or a soft label is held fixed). ``inputs``:
    the profile's, as dicts (a record's YAML) or TensorSpecs."""
    names = [_field(t, "name") for t in inputs if _field(t, "requires_grad") and _field(t, "dtype") != "int64"]
    return names[:1] if tier == 3 else names


def _field(spec: Any, name: str) -> Any:
    return spec[name] if isinstance(spec, dict) else getattr(spec, name)


def benchmark_size(profile: KernelProfile) -> tuple[str, int]:
    """The dimension's key and the size ``validate`` measures at: ``benchmark.fixed_config`` or 4096."""
    key, _ = benchmark_dimension(profile)
    return key, int(profile.benchmark.fixed_config.get(key, DEFAULT_BENCHMARK_SIZE))


# Fields that mean something only for some profiles: dumps leave them out elsewhere, validation flags them set.
def _applies(profile: KernelProfile, path: str) -> bool:
    section, _, key = path.partition(".")
    if section == "tiling":
        auto = TILING_AUTO + TILING_AUTO_BY_TEMPLATE.get(profile.template, ())
        return key in TILING_DEFAULTS.get(profile.template, {}) or key in auto
    if path in ("module.hidden_act", "test.mlp_shapes"):
        return profile.module.kind == "mlp"
    if section == "fused_linear":
        return profile.tier == 3
    return True


def tiling_fields(profile: KernelProfile) -> list[str]:
    """The tiling fields the profile's ops template reads (what ``tune`` may change)."""
    return [f.name for f in dataclasses.fields(Tiling) if _applies(profile, f"tiling.{f.name}")]


def per_row_output(profile: KernelProfile, name: str) -> bool:
    """Whether output ``name``'s formula reads statistics and nothing that varies along the row."""
    formula = profile.math.outputs.get(name)
    names = _formula_names(formula) if isinstance(formula, str) else set()
    if isinstance(names, str):
        return False
    # Class indices (``where(labels != ignore_index, ...)`` of a per-token NLL) and per-row inputs are one value per
    # row, as the statistics are.
    along_the_row = [t for t in profile.inputs if t.dtype != "int64" and not t.per_row and not t.sequence_shape]
    varying = {t.name for t in along_the_row} | {p.name for p in profile.parameters if p.shape != "scalar"}
    return bool(names & {s.name for s in profile.math.statistics}) and not names & varying


def written_for_sequences(profile: KernelProfile) -> bool:
    """Whether the profile is a loss written for [B, T, V] logits (its tests draw 3-d ones: TRL gathers along dim
    2), whose class indices and per-row inputs are [B, T]."""
    return profile.tier == 3 and {len(shape) for shape in profile.test.cpu_shapes} == {3}


CONDITIONAL_FIELDS = (
    *(f"tiling.{f.name}" for f in dataclasses.fields(Tiling)),
    *(f"fused_linear.{f.name}" for f in dataclasses.fields(FusedLinear)),
    "module.hidden_act",
    "test.mlp_shapes",
)


# Validation -------------------------------------------------------------------------------------------------
def _check_identifier(problems: list[str], path: str, value: Any) -> None:
    if not isinstance(value, str) or not IDENTIFIER.match(value) or keyword.iskeyword(value):
        problems.append(f"{path}: {value!r} is not a Python identifier")


def _shown(text: str, limit: int = 100) -> str:
    """A formula or statement as an error line quotes it: at most ``limit`` characters of it."""
    return repr(text) if len(text) <= limit else repr(text[: limit - 3]) + f"... ({len(text)} characters)"


def _formula_names(text: str) -> set[str] | str:
    """Names a formula reads (function names excluded), or why it is not a formula."""
    if len(text) > MAX_FORMULA_CHARS:
        return f"is {len(text)} characters long (at most {MAX_FORMULA_CHARS}: name parts of it in math.statistics)"
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        return f"does not parse ({error.msg})"
    except (RecursionError, MemoryError, ValueError) as error:
        return f"does not parse ({type(error).__name__}: nested too deeply or not text)"
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and id(node) not in called}


def _check_statement(problems: list[str], path: str, statement: Any) -> None:
    if not isinstance(statement, str):
        problems.append(f"{path}: not a string")
        return
    try:
        tree = ast.parse(statement)
    except SyntaxError as error:
        problems.append(f"{path}: {_shown(statement)} does not parse ({error.msg})")
        return
    except (RecursionError, MemoryError, ValueError) as error:
        problems.append(f"{path}: {_shown(statement)} does not parse ({type(error).__name__})")
        return
    if len(tree.body) != 1 or isinstance(tree.body[0], (ast.Import, ast.ImportFrom)):
        problems.append(f"{path}: {statement!r} must be one statement (an assignment), not {len(tree.body)}")
        return
    problem = triton_statement_problem(tree.body[0])
    if problem:
        problems.append(f"{path}: {_shown(statement)} {problem}")


def _validate_math(profile: KernelProfile, problems: list[str]) -> None:
    math = profile.math
    written = math.triton
    if profile.tier == 3:
        if written is not None:
            problems.append("math.triton: tier 3 is derived from formulas only")
        if math.loss is None:
            problems.append("math.loss: tier 3 needs the reduction of its per-row values (reduction, denominator)")
    elif math.loss is not None:
        problems.append("math.loss: only tier 3 (a loss over rows) has one")
    if profile.tier == 3:
        _validate_loss(profile, problems)
    if math.rounding not in ROUNDING_MODES:
        problems.append(f"math.rounding: {math.rounding!r} is not one of {', '.join(ROUNDING_MODES)}")
    elif math.rounding != "once" and (profile.tier != 1 or written is not None):
        problems.append("math.rounding: per_op applies to tier-1 formulas only (tier 2 follows the reference's casts)")
    if written is not None:
        if math.outputs or math.statistics:
            problems.append("math: give formulas (outputs, statistics) or hand-written Triton (triton), not both")
        for group in ("forward", "backward", "row_statistics"):
            for index, statement in enumerate(getattr(written, group)):
                _check_statement(problems, f"math.triton.{group}[{index}]", statement)
        if not written.forward:
            problems.append("math.triton.forward: the forward statements are required")
        if not written.backward and profile.grad_inputs:
            problems.append("math.triton.backward: the backward statements are required")
        if profile.tier == 2:
            if len(profile.inputs) != 1:
                problems.append("inputs: hand-written tier-2 math takes exactly one input, the row x")
            if not written.row_statistics:
                problems.append("math.triton.row_statistics: tier 2 needs the per-row statistics statements")
            if not written.saved_row_statistics:
                problems.append("math.triton.saved_row_statistics: tier 2 needs the names of the saved statistics")
        elif written.row_statistics or written.saved_row_statistics:
            problems.append("math.triton: row_statistics are for tier 2 only")
        return
    if math.lanes is not None:
        _validate_lanes(profile, problems)
        return
    _validate_groups(profile, problems)
    _validate_input_rank(profile, problems)
    output_names = [t.name for t in profile.outputs]
    if not math.outputs:
        problems.append("math.outputs: a formula for every output is required (or hand-written math.triton)")
    elif list(math.outputs) != output_names:
        problems.append(f"math.outputs: formulas for {list(math.outputs)}, expected one per output {output_names}")
    if profile.tier == 1 and math.statistics:
        problems.append("math.statistics: a tier-1 (element-wise) kernel has no row statistics; use tier 2")
    known = {t.name for t in profile.inputs} | {p.name for p in profile.parameters} | set(FORMULA_CONSTANTS)
    known |= set(profile.formula_hyperparameters)
    if profile.tier == 3 or (profile.tier == 2 and not math.groups):  # (a group's tiles are a channel's columns)
        known.add(COLUMN_INDEX)
    for index, statistic in enumerate(math.statistics):
        path = f"math.statistics[{index}]"
        _check_identifier(problems, f"{path}.name", statistic.name)
        if statistic.reduce not in REDUCE_KINDS:
            problems.append(f"{path}.reduce: {statistic.reduce!r} is not one of {', '.join(REDUCE_KINDS)}")
        _check_formula(problems, f"{path}.of", statistic.of, known)
        known.add(statistic.name)
    if profile.tier == 3 and math.loss is not None:
        known |= {scale.name for scale in math.loss.scales}  # per-row values only: a statistic reads no count
    for name, formula in math.outputs.items():
        _check_formula(problems, f"math.outputs.{name}", formula, known)


def group_count(profile: KernelProfile) -> int:
    """The number of groups a grouped kernel's examples use: its groups hyper-parameter's default (1 without one)."""
    defaults = {hp.name: hp.default for hp in profile.hyperparameters}
    value = defaults.get(profile.math.groups)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def shifted_targets(profile: KernelProfile, renames: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(class-index input, pad value) of each target the reference shifts one token left (``TensorSpec.shift``),
    under ``renames`` where a fused linear form names them otherwise."""
    renames = renames or {}
    return [(renames.get(t.name, t.name), renames.get(t.shift, t.shift)) for t in profile.inputs if t.shift]


def _validate_groups(profile: KernelProfile, problems: list[str]) -> None:
    """Groups (``math.groups``): a derived tier-2 kernel whose named hyper-parameter is an int; ``group`` parameters
    only with groups; inputs of at least 3 dims ([batch, channels, rest])."""
    groups = profile.math.groups
    grouped_params = [p.name for p in profile.parameters if p.shape == "group"]
    if not groups:
        if grouped_params:
            problems.append(f"parameters: {grouped_params[0]} is a group parameter; math.groups names none")
        return
    hypers = {hp.name: hp for hp in profile.hyperparameters}
    if profile.tier != 2:
        problems.append("math.groups: statistics over groups of channels are a row kernel's (tier 2)")
    elif groups not in hypers or hypers[groups].type != "int" or hypers[groups].constexpr:
        problems.append(f"math.groups: {groups!r} is not a runtime int hyper-parameter")
    short = [shape for shape in profile.test.cpu_shapes + profile.test.gpu_shapes if len(shape) < 3]
    if short:
        problems.append(f"test shapes: {short[0]} has fewer than the 3 dims of [batch, channels, rest] groups take")


def _validate_input_rank(profile: KernelProfile, problems: list[str]) -> None:
    """``math.input_rank``: 0, or a row kernel's (tier 2) rank of at least 2 that every test shape has."""
    rank = profile.math.input_rank
    if not rank:
        return
    if profile.tier != 2 or rank < 2:
        problems.append(f"math.input_rank: {rank!r} is not 0 or a row kernel's (tier 2) rank of 2 or more")
        return
    other = [shape for shape in profile.test.cpu_shapes + profile.test.gpu_shapes if len(shape) != rank]
    if other:
        problems.append(f"test shapes: {other[0]} has not the {rank} dims math.input_rank gives the first input")


def _validate_broadcast(profile: KernelProfile, index: int, tensor: TensorSpec, problems: list[str]) -> None:
    path = f"inputs[{index}].broadcast"
    problem = broadcast_pattern_problem(tensor.broadcast)
    if problem:
        problems.append(f"{path}: {tensor.broadcast!r} {problem}")
    elif profile.tier not in (1, 2):
        problems.append(f"{path}: only element-wise and row kernels (tiers 1 and 2) take broadcast inputs")
    elif index == 0:
        problems.append(f"{path}: the first input sets the shape the others broadcast against; put a full one first")
    elif profile.math.triton is not None:
        problems.append(f"{path}: hand-written math.triton reads every input at the first input's positions")
    elif profile.backend != "triton":
        problems.append(f"{path}: the {profile.backend} backend reads every input at the first input's positions")
    elif narrowing(tensor.broadcast) > 1 and profile.math.lanes is None:
        problems.append(f"{path}: rows shorter than the first input's are read by index maps (math.lanes) only")
    elif narrowing(tensor.broadcast) > 1 and _no_whole_lanes(profile.math.lanes.count, tensor.broadcast):
        problems.append(
            f"{path}: rows {narrowing(tensor.broadcast)} times shorter than the first input's hold no whole number "
            f"of its math.lanes.count {profile.math.lanes.count} lanes"
        )
    else:
        rank = pattern_rank(tensor.broadcast)
        for group in ("cpu_shapes", "gpu_shapes"):
            short = [shape for shape in getattr(profile.test, group) if len(shape) < rank]
            if short:
                problems.append(
                    f"test.{group}: {short[0]} has fewer dims than {tensor.name}'s {tensor.broadcast!r} needs"
                )


def _no_whole_lanes(count, pattern: str) -> bool:
    """Whether ``count`` lanes of the first input's row leave no whole number of lanes to rows of ``pattern``."""
    return isinstance(count, int) and count % narrowing(pattern) != 0


def _validate_lanes(profile: KernelProfile, problems: list[str]) -> None:
    """Lanes (an index map within the row): tier-1 formulas over tensor inputs and hyper-parameters, a formula per
    output lane, lanes that parse and stay in their rows, output lanes that write each position once."""
    math, lanes = profile.math, profile.math.lanes
    if profile.tier != 1 or profile.parameters or profile.backend != "triton":
        problems.append("math.lanes: index maps are for tier-1 Triton kernels without learnable parameters")
        return
    if not isinstance(lanes.count, int) or lanes.count < 1:
        problems.append(f"math.lanes.count: {lanes.count!r} is not a positive number of lanes")
        return
    grouped = _validate_lane_groups(profile, problems)
    inputs = {t.name: lanes.count // narrowing(t.broadcast) for t in profile.inputs if t.name not in grouped}
    problems.extend(lane_problems(lanes.inputs, "math.lanes.inputs", inputs))
    found = len(problems)
    # An output's row is the lanes that map onto it, every position stored once.
    outputs = {t.name: 0 for t in profile.outputs if t.name not in grouped}
    problems.extend(lane_problems(lanes.outputs, "math.lanes.outputs", outputs, True))
    if len(problems) == found and set(lanes.output_widths()) != set(outputs):
        problems.append("math.lanes.outputs: every output needs at least one lane")
    if list(math.outputs) != list(lanes.outputs):
        problems.append(
            f"math.outputs: formulas for {list(math.outputs)}, expected one per output lane {list(lanes.outputs)}"
        )
    known = set(lanes.inputs) | set(FORMULA_CONSTANTS) | set(profile.formula_hyperparameters)
    for name, formula in math.outputs.items():
        _check_formula(problems, f"math.outputs.{name}", formula, known)


def _validate_lane_groups(profile: KernelProfile, problems: list[str]) -> set[str]:
    """The tensors of the further row groups (``math.lanes.groups``), each renaming every tensor of rows the first
    group's lanes read or write, to inputs and outputs of the profile no other group takes."""
    lanes = profile.math.lanes
    first = {parse_lane(text).tensor for text in [*lanes.inputs.values(), *lanes.outputs.values()] if _parses(text)}
    first -= {t.name for t in profile.inputs if t.broadcast}
    names = {t.name for t in profile.inputs} | {t.name for t in profile.outputs}
    taken: set[str] = set()
    for index, group in enumerate(lanes.groups):
        path = f"math.lanes.groups[{index}]"
        if not isinstance(group, dict) or set(group) != first:
            problems.append(
                f"{path}: renames {sorted(group) if isinstance(group, dict) else group!r}, expected {sorted(first)}"
            )
            continue
        for name, renamed in group.items():
            if renamed not in names or renamed in first or renamed in taken:
                problems.append(f"{path}.{name}: {renamed!r} is no input or output of its own")
            taken.add(renamed)
    return taken


def _parses(text: str) -> bool:
    try:
        parse_lane(text)
    except ValueError:
        return False
    return True


def _validate_backend(profile: KernelProfile, problems: list[str]) -> None:
    """TileLang kernels are rendered from derived element-wise formulas: tier 1 without hand-written Triton."""
    if profile.backend not in BACKENDS:
        problems.append(f"backend: {profile.backend!r} is not one of {', '.join(BACKENDS)}")
    elif profile.backend == "tilelang":
        if profile.tier != 1:
            problems.append(
                f"backend: tilelang renders tier-1 (element-wise) kernels; this is tier {profile.tier} (use triton)"
            )
        elif profile.math.triton is not None:
            problems.append("backend: tilelang derives its kernels from math.outputs formulas, not from math.triton")


def _validate_loss(profile: KernelProfile, problems: list[str]) -> None:
    if profile.module.kind != "loss":
        problems.append(f"module.kind: {profile.module.kind!r} with tier 3: a loss needs the 'loss' module")
    _validate_sequence_stage(profile, problems)
    if not any(
        t.dtype == "same" and not t.per_class and not t.per_row and not t.sequence_shape for t in profile.inputs
    ):
        problems.append("inputs: tier 3 needs a per-element input (the logits or a distribution)")
    for index, tensor in enumerate(profile.outputs):
        if tensor.dtype not in ("same", "float32"):
            problems.append(
                f"outputs[{index}].dtype: {tensor.dtype!r}: a loss returns the inputs' dtype ('same') or, where the "
                f"reference upcasts, 'float32'"
            )
    if len({t.dtype for t in profile.outputs}) > 1:
        problems.append("outputs: a loss returns all its outputs in one dtype ('same' or 'float32')")
    for index, tensor in enumerate(profile.inputs):
        if tensor.dtype not in ("same", "int64") and not (
            tensor.dtype == "bool" and (tensor.sequence_shape or tensor.per_row)
        ):
            problems.append(
                f"inputs[{index}].dtype: {tensor.dtype!r}: tier 3 takes rows ('same'), class indices and booleans "
                f"(a mask of the rows, or read by the sequence stage alone)"
            )
        if tensor.dtype == "int64" and tensor.requires_grad:
            problems.append(f"inputs[{index}].requires_grad: class indices have no gradient")
        if tensor.per_class and tensor.dtype != "same":
            problems.append(f"inputs[{index}].per_class: per-class values are numbers of the first input's dtype")
        if tensor.per_row and (tensor.dtype not in ("same", "bool") or tensor.per_class):
            problems.append(
                f"inputs[{index}].per_row: per-row values are numbers of the first input's dtype or booleans, one per row (not "
                f"class indices, not per-class values)"
            )
        if tensor.per_row and tensor.requires_grad:
            problems.append(
                f"inputs[{index}].requires_grad: a per-row input takes no gradient in a tier-3 kernel (pass it "
                f"detached, as an old policy's log-probabilities or advantages are)"
            )
        if tensor.per_class and tensor.requires_grad:
            problems.append(
                f"inputs[{index}].requires_grad: a per-class input takes no gradient (it would be a sum over rows, "
                f"which tier 3 does not derive)"
            )
    if profile.parameters:
        problems.append("parameters: a tier-3 loss owns no parameters (pass class weights as an input)")
    loss = profile.math.loss
    if loss is None:
        return
    row_names = {t.name for t in profile.inputs if t.dtype == "int64" or t.per_row}
    row_names |= set(profile.formula_hyperparameters)
    row_names |= {"n_cols", BATCH_SHARE}
    per_class = {t.name for t in profile.inputs if t.per_class}
    row_names |= per_class  # read at class indices only: take(NAME, index)
    formulas = [("math.loss.denominator", loss.denominator)]
    formulas += [(f"math.loss.choices[{i}].denominator", c.denominator) for i, c in enumerate(loss.choices)]
    for path, formula in formulas:
        bare = _bare_names(formula, per_class)
        if bare:
            problems.append(
                f"{path}: {formula!r} reads {bare[0]}, one value per class, outside take({bare[0]}, index): a "
                f"denominator has one value per row"
            )
    listed = {choice.value: choice for choice in loss.choices}
    for index, choice in enumerate(loss.choices):
        if choice.reduction not in LOSS_REDUCTIONS:
            problems.append(
                f"math.loss.choices[{index}].reduction: {choice.reduction!r} is not one of {', '.join(LOSS_REDUCTIONS)}"
            )
        _check_formula(problems, f"math.loss.choices[{index}].denominator", choice.denominator, row_names)
    if loss.reduction not in LOSS_REDUCTIONS:
        chooser = {hp.name: hp for hp in profile.hyperparameters}.get(loss.reduction)
        if chooser is None or chooser.type != "str":
            problems.append(
                f"math.loss.reduction: {loss.reduction!r} is neither one of {', '.join(LOSS_REDUCTIONS)} nor a str "
                f"hyper-parameter"
            )
        else:
            unknown = [
                v for v in (chooser.choices or [chooser.default]) if v not in LOSS_REDUCTIONS and v not in listed
            ]
            if unknown:
                problems.append(
                    f"hyperparameters: {chooser.name} can be {unknown}, which is no reduction: list it in "
                    f"math.loss.choices"
                )
    elif loss.choices:
        problems.append("math.loss.choices: only for a reduction picked by a hyper-parameter")
    _check_formula(problems, "math.loss.denominator", loss.denominator, row_names)
    _check_floor(problems, "math.loss.denominator_min", loss.denominator_min)
    _validate_loss_scales(profile, row_names, per_class, problems)


def _check_floor(problems: list[str], path: str, floor: Any) -> None:
    if floor is not None and (isinstance(floor, bool) or not isinstance(floor, (int, float)) or not floor > 0):
        problems.append(f"{path}: {floor!r}: a positive number (the mean's least denominator) or null")


def _validate_loss_scales(
    profile: KernelProfile, row_names: set[str], per_class: set[str], problems: list[str]
) -> None:
    """Each count's scale: a fresh name, a denominator of one value per row; the rows are summed (the outputs carry
    each mean's share), for the one reduction the kernel was derived for."""
    loss = profile.math.loss
    if not loss.scales:
        return
    if loss.reduction != "sum" or loss.sequence:
        problems.append(
            f"math.loss.scales: means over different counts are summed over rows in one kernel (reduction: sum, no "
            f"sequence stage), not {loss.reduction!r}"
        )
    taken = {t.name for t in profile.inputs} | {hp.name for hp in profile.hyperparameters} | set(FORMULA_CONSTANTS)
    taken |= {s.name for s in profile.math.statistics} | {t.name for t in profile.outputs}
    taken |= {COLUMN_INDEX, "n_cols", "n_rows", BATCH_SHARE}
    for index, scale in enumerate(loss.scales):
        path = f"math.loss.scales[{index}]"
        _check_identifier(problems, f"{path}.name", scale.name)
        if scale.name in taken:
            problems.append(f"{path}.name: {scale.name!r} names another value of the profile")
        taken.add(scale.name)
        _check_formula(problems, f"{path}.denominator", scale.denominator, row_names)
        bare = _bare_names(scale.denominator, per_class)
        if bare:
            problems.append(
                f"{path}.denominator: {scale.denominator!r} reads {bare[0]}, one value per class, outside take("
                f"{bare[0]}, index): a denominator has one value per row"
            )
        _check_floor(problems, f"{path}.denominator_min", scale.denominator_min)


def _validate_shift(profile: KernelProfile, index: int, tensor: TensorSpec, problems: list[str]) -> None:
    hyper = next((hp for hp in profile.hyperparameters if hp.name == tensor.shift), None)
    if profile.tier != 3 or tensor.dtype != "int64":
        problems.append(f"inputs[{index}].shift: only a loss's class-index target (int64) is shifted")
    elif re.fullmatch(r"-?[0-9]+", tensor.shift) is None and (hyper is None or hyper.type != "int"):
        problems.append(f"inputs[{index}].shift: {tensor.shift!r} is no int nor int hyper-parameter")


def _validate_sequence_stage(profile: KernelProfile, problems: list[str]) -> None:
    staged = profile.math.loss is not None and bool(profile.math.loss.sequence)
    if profile.math.loss is not None and profile.math.loss.sequence_groups and not staged:
        problems.append("math.loss.sequence_groups: only a loss with math.loss.sequence groups its sequences")
    for index, tensor in enumerate(profile.inputs):
        if not tensor.sequence_shape:
            continue
        if not staged:
            problems.append(f"inputs[{index}].sequence_shape: only a loss with math.loss.sequence reads such inputs")
        elif tensor.sequence_shape not in SEQUENCE_SHAPES:
            problems.append(
                f"inputs[{index}].sequence_shape: {tensor.sequence_shape!r} is not one of {SEQUENCE_SHAPES}"
            )
        if tensor.requires_grad or tensor.per_row or tensor.per_class:
            problems.append(f"inputs[{index}].sequence_shape: such an input takes no gradient and is no per-row input")
    if not staged:
        return
    try:
        compile(profile.math.loss.sequence, "math.loss.sequence", "exec")
    except SyntaxError as error:
        problems.append(f"math.loss.sequence: line {error.lineno}: {error.msg}")
    if profile.math.loss.reduction != "none":
        problems.append("math.loss.reduction: the per-token statistics of a sequence stage are not reduced ('none')")
    if profile.math.loss.sequence_groups not in SEQUENCE_GROUPS:
        problems.append(
            f"math.loss.sequence_groups: {profile.math.loss.sequence_groups!r} is not one of {SEQUENCE_GROUPS}"
        )


def _validate_fused_linear(profile: KernelProfile, problems: list[str]) -> None:
    fused = profile.fused_linear
    if not fused.enabled:
        if fused.chunk_size is not None:
            problems.append("fused_linear.chunk_size: set only with fused_linear.enabled")
        return
    if profile.tier != 3:
        problems.append(
            f"fused_linear.enabled: only a tier-3 loss has a fused linear form (this is tier {profile.tier})"
        )
        return
    if fused.chunk_size is not None and (not isinstance(fused.chunk_size, int) or fused.chunk_size < 1):
        problems.append(f"fused_linear.chunk_size: {fused.chunk_size!r} is not a positive integer")
    per_row = [t.name for t in profile.inputs if t.per_row]
    if per_row and profile.math.loss is not None and profile.math.loss.sequence:
        problems.append(
            f"fused_linear.enabled: {per_row[0]} holds one value per row, which a fused loss in two stages does not "
            f"take yet (generate it without --fused-linear)"
        )
    bounded = [
        t.name
        for t in profile.inputs
        if t.dtype != "int64"
        and not t.per_class
        and not t.per_row
        and not t.sequence_shape
        and t.domain not in ("", "real")
    ]
    if bounded:
        domain = next(t.domain for t in profile.inputs if t.name == bounded[0])
        domain = {"positive": "positive values", "log_probabilities": "log-probabilities"}.get(domain, domain)
        problems.append(
            f"fused_linear.enabled: a linear layer makes logits, any real number, but {bounded[0]} holds {domain} "
            f"only; generate the loss without --fused-linear, or take logits for {bounded[0]} and compute its "
            f"{domain} inside the reference (softmax, log_softmax)"
        )
    loss = profile.math.loss
    if loss is not None and loss.reduction == "none" and not loss.sequence:
        problems.append(
            "fused_linear.enabled: a loss reduced per row ('none') has no fused linear form (the weight's gradient "
            "sums over rows before any per-row grad_output is known)"
        )


def _bare_names(formula: Any, names: set[str]) -> list[str]:
    """Which of ``names`` a formula reads other than as the values of ``take(NAME, index)``."""
    if not names or not isinstance(formula, str):
        return []
    try:
        tree = ast.parse(formula.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return []  # reported by _check_formula
    taken = {
        id(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "take" and node.args
    }
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in names and id(n) not in taken})


def _check_formula(problems: list[str], path: str, formula: Any, known: set[str]) -> None:
    if not isinstance(formula, str) or not formula.strip():
        problems.append(f"{path}: a formula (a string) is required")
        return
    names = _formula_names(formula)
    if isinstance(names, str):
        problems.append(f"{path}: {_shown(formula)} {names}")
        return
    unknown = sorted(names - known)
    if unknown:
        problems.append(f"{path}: {_shown(formula)} reads {', '.join(unknown)}, which is not defined before it")


def _validate_constructor_links(
    profile: KernelProfile, index: int, param: LearnableParameter, problems: list[str]
) -> None:
    """``init_arg`` and ``enabled_by`` name constructor arguments (``module.init_params``) of the right kind."""
    defaults = {ip.name: ip.default for ip in profile.module.init_params}
    path = f"parameters[{index}]"
    if param.init_arg:
        default = defaults.get(param.init_arg)
        if param.init_arg not in defaults:
            problems.append(f"{path}.init_arg: {param.init_arg!r} is not one of module.init_params")
        elif isinstance(default, bool) or not isinstance(default, (int, float)):
            problems.append(f"{path}.init_arg: {param.init_arg!r} needs a numeric default, not {default!r}")
        if param.init != "constant":
            problems.append(f"{path}.init_arg: only a 'constant' parameter starts at an argument's value")
        elif param.init_value is not None:
            problems.append(f"{path}.init_value: the value is init_arg's default; leave init_value empty")
    if param.enabled_by:
        if param.enabled_by not in defaults:
            problems.append(f"{path}.enabled_by: {param.enabled_by!r} is not one of module.init_params")
        elif not isinstance(defaults[param.enabled_by], bool):
            problems.append(
                f"{path}.enabled_by: {param.enabled_by!r} needs a bool default, not {defaults[param.enabled_by]!r}"
            )
        if profile.tier != 1:
            problems.append(f"{path}.enabled_by: optional parameters are generated for tier 1 only")
        if param.init_arg:
            problems.append(f"{path}.enabled_by: a parameter started from init_arg cannot also be optional")


def _validate_hypers_reach_the_reference(profile: KernelProfile, problems: list[str]) -> None:
    """Each hyper-parameter is one the reference takes (the tests call it with every case's values)."""
    taken = names_the_entry_takes(profile.reference.source, profile.reference.entry)
    if taken is None:
        return
    for index, hp in enumerate(profile.hyperparameters):
        if hp.name not in taken:
            problems.append(
                f"hyperparameters[{index}].name: the reference {profile.reference.entry} does not take {hp.name!r} "
                f"(the tests call it with every hyper-parameter): add it to reference.source too"
            )


def _check_constructor_defaults(problems: list[str], profile: KernelProfile) -> None:
    """A hyper-parameter the module's constructor also takes starts at one value in both: the module's default and
    the functional's would otherwise compute different things (an edited profile that changed one of them)."""
    hypers = {hp.name: (index, hp.default) for index, hp in enumerate(profile.hyperparameters)}
    for index, ip in enumerate(profile.module.init_params):
        if not isinstance(ip.name, str) or ip.name not in hypers:
            continue
        hyper_index, default = hypers[ip.name]
        if ip.default != default and not (ip.default is None and ip.optional):
            problems.append(
                f"module.init_params[{index}].default: {ip.default!r} for {ip.name!r}, where "
                f"hyperparameters[{hyper_index}].default is {default!r}; the module and the functional would start at "
                "different values: make them equal"
            )


def validate_profile(profile: KernelProfile) -> list[str]:
    """Every problem of the profile at once, each prefixed with its YAML path."""
    problems: list[str] = []
    name_valid = isinstance(profile.operation_name, str) and SNAKE_CASE.match(profile.operation_name)
    if name_valid and len(profile.operation_name) > MAX_KERNEL_NAME:
        name_valid = False
        problems.append(f"operation_name: {len(profile.operation_name)} characters long; at most {MAX_KERNEL_NAME}")
    elif not name_valid:
        problems.append(f"operation_name: {profile.operation_name!r} is not a snake_case identifier")
    for attr in DERIVED_NAMES:
        value = getattr(profile, attr)
        if value or name_valid:  # empty ones are derived from operation_name, whose problem is reported above
            _check_identifier(problems, attr, value)
    if profile.profile_version != PROFILE_VERSION:
        problems.append(f"profile_version: {profile.profile_version!r}; this kernelgen reads format {PROFILE_VERSION}")
    if profile.tier not in TIER_DESCRIPTIONS:
        problems.append(f"tier: {profile.tier!r} is not one of 1, 2, 3")
    _validate_backend(profile, problems)
    if profile.module.kind not in MODULE_KINDS:
        problems.append(f"module.kind: {profile.module.kind!r} is not one of {', '.join(MODULE_KINDS)}")
    elif profile.module.kind == "loss" and profile.tier != 3:
        problems.append("module.kind: 'loss' needs tier 3 (a loss over rows)")
    init_names = {ip.name for ip in profile.module.init_params}
    _check_constructor_defaults(problems, profile)
    for index, name in enumerate(profile.module.fixed):
        if name not in init_names:
            problems.append(f"module.fixed[{index}]: {name!r} is no constructor argument (module.init_params)")
    if not profile.inputs:
        problems.append("inputs: at least one tensor input is required")
    if not profile.outputs:
        problems.append("outputs: at least one output is required")
    seen: dict[str, str] = {}
    groups = (
        ("inputs", profile.inputs),
        ("outputs", profile.outputs),
        ("hyperparameters", profile.hyperparameters),
        ("parameters", profile.parameters),
    )
    for group, items in groups:
        for index, item in enumerate(items):
            path = f"{group}[{index}].name"
            _check_identifier(problems, path, item.name)
            if item.name in seen:
                problems.append(f"{path}: {item.name!r} already used in {seen[item.name]}")
            seen[item.name] = group
    for group, tensors in (("inputs", profile.inputs), ("outputs", profile.outputs)):
        for index, tensor in enumerate(tensors):
            if tensor.dtype not in DTYPES:
                problems.append(f"{group}[{index}].dtype: {tensor.dtype!r} is not one of {', '.join(DTYPES)}")
            elif tensor.dtype != "same" and profile.tier in (1, 2):
                problems.append(
                    f"{group}[{index}].dtype: {tensor.dtype!r}, but tier-{profile.tier} kernels compute on floating-point "
                    f"tensors of the first input's dtype ('same')"
                )
    for index, tensor in enumerate(profile.inputs):
        if tensor.per_class and profile.tier != 3:
            problems.append(f"inputs[{index}].per_class: only a tier-3 loss takes per-class inputs (class weights)")
        if tensor.per_row and profile.tier != 3:
            problems.append(f"inputs[{index}].per_row: only a tier-3 loss takes per-row inputs (a per-token weight)")
        if tensor.attribute and profile.reference.kind != "module":
            problems.append(f"inputs[{index}].attribute: only a module reference holds inputs of its own")
        elif tensor.attribute and not ATTRIBUTE_PATH.match(tensor.attribute):
            problems.append(f"inputs[{index}].attribute: {tensor.attribute!r} is not an attribute path (a.b)")
        if tensor.domain not in INPUT_DOMAINS:
            problems.append(f"inputs[{index}].domain: {tensor.domain!r} is not one of {', '.join(INPUT_DOMAINS[1:])}")
        if tensor.broadcast:
            _validate_broadcast(profile, index, tensor, problems)
        if tensor.shift:
            _validate_shift(profile, index, tensor, problems)
        if tensor.unsqueeze:
            hyper = next((hp for hp in profile.hyperparameters if hp.name == tensor.unsqueeze), None)
            literal = re.fullmatch(r"-?[0-9]+", tensor.unsqueeze) is not None
            if tensor.broadcast.split().count("_") != 1:
                problems.append(f"inputs[{index}].unsqueeze: needs a broadcast pattern with one inserted dim ('_')")
            elif not literal and (hyper is None or hyper.type != "int"):
                problems.append(f"inputs[{index}].unsqueeze: {tensor.unsqueeze!r} is no int nor int hyper-parameter")
    for index, output in enumerate(profile.outputs):
        if not output.keepdim and not per_row_output(profile, output.name):
            problems.append(f"outputs[{index}].keepdim: only an output with one value per row can drop the dimension")
    for index, hyper in enumerate(profile.hyperparameters):
        if hyper.type not in SCALAR_TYPES:
            problems.append(f"hyperparameters[{index}].type: {hyper.type!r} is not one of {', '.join(SCALAR_TYPES)}")
        if hyper.choices is not None and hyper.default not in hyper.choices:
            problems.append(f"hyperparameters[{index}].default: {hyper.default!r} is not one of its choices")
    for index, param in enumerate(profile.parameters):
        if param.shape not in PARAMETER_SHAPES:
            problems.append(f"parameters[{index}].shape: {param.shape!r} is not one of {', '.join(PARAMETER_SHAPES)}")
        if param.init not in INIT_KINDS:
            problems.append(f"parameters[{index}].init: {param.init!r} is not one of {', '.join(INIT_KINDS)}")
        if param.init == "constant" and param.init_value is None and not param.init_arg:
            problems.append(f"parameters[{index}].init_value: required when init is 'constant' (or give init_arg)")
        if param.rank is not None:
            lowest = 1 if param.shape == "channel" else 0
            highest = 8 if param.shape == "channel" else 1
            if not isinstance(param.rank, int) or isinstance(param.rank, bool) or not lowest <= param.rank <= highest:
                problems.append(
                    f"parameters[{index}].rank: {param.rank!r} is not a rank a {param.shape} parameter is held with "
                    f"({lowest} to {highest})"
                )
        _validate_constructor_links(profile, index, param, problems)
    if profile.tier not in TIER_DESCRIPTIONS:
        return problems  # the math, the fused linear form and the tiling are read by a tier's template
    _validate_math(profile, problems)
    _validate_fused_linear(profile, problems)
    for key in dataclasses.fields(Tiling):
        value = getattr(profile.tiling, key.name)
        if value is None:
            continue
        if not _applies(profile, f"tiling.{key.name}"):
            problems.append(f"tiling.{key.name}: the {profile.template} template does not read it; remove it")
        elif key.name in TILING_CHOICES:
            if value not in TILING_CHOICES[key.name]:
                problems.append(f"tiling.{key.name}: {value!r} is not one of {', '.join(TILING_CHOICES[key.name])}")
            elif profile.backend != "triton":
                problems.append(f"tiling.{key.name}: the {profile.backend} backend has one math library; remove it")
        elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append(f"tiling.{key.name}: {value!r} is not a positive integer")
    if profile.module.hidden_act and not _applies(profile, "module.hidden_act"):
        problems.append("module.hidden_act: only mlp modules carry an HF hidden_act; remove it")
    if profile.module.function and (
        not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", profile.module.function) or profile.reference.kind != "function"
    ):
        problems.append(f"module.function: {profile.module.function!r} must be an identifier, for a function reference")
    for variant in profile.module.variants:
        if variant not in MLP_VARIANTS:
            problems.append(f"module.variants: {variant!r} is not one of {', '.join(MLP_VARIANTS)}")
        elif profile.module.kind != "mlp":
            problems.append(f"module.variants: {variant!r} is a variant of mlp modules, not {profile.module.kind}")
    if not profile.reference.source.strip():
        problems.append("reference.source: the PyTorch reference is required (tests compare against it)")
    elif not profile.reference.entry:
        problems.append("reference.entry: name of the function or module in reference.source is required")
    else:
        source_problems = reference_source_problems(profile.reference.source, profile.reference.entry)
        problems.extend(source_problems)
        if not source_problems and profile.module.kind != "mlp":  # an MLP reads its hyper-parameters off its config
            _validate_hypers_reach_the_reference(profile, problems)
    problems.extend(check_values(profile))
    return problems


# YAML ------------------------------------------------------------------------------------------------------
class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings (reference source) as readable ``|`` blocks."""


def _str_representer(dumper: yaml.SafeDumper, data: str):
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _list_representer(dumper: yaml.SafeDumper, data: list):
    # Short lists of scalars (shapes, tolerances, providers) on one line: [2, 3, 31].
    flat = all(isinstance(item, (str, int, float, bool)) or item is None for item in data)
    flow = flat and len(repr(data)) <= 80 and not any(isinstance(item, str) and "\n" in item for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_LiteralDumper.add_representer(str, _str_representer)
_LiteralDumper.add_representer(list, _list_representer)


def to_dict(profile: KernelProfile) -> dict[str, Any]:
    return dataclasses.asdict(profile)


MISSING_VALUE = ""  # stands in for a missing required field while the rest of a profile is checked


def dump_yaml(profile: KernelProfile) -> str:
    """The profile as YAML, without the fields that do not apply to it (another tier's tiling, mlp-only fields)."""
    data = to_dict(profile)
    for path in CONDITIONAL_FIELDS:
        if not _applies(profile, path):
            section, key = path.split(".")
            data[section].pop(key, None)
    if not data["fused_linear"]:
        data.pop("fused_linear")
    for output, spec in zip(profile.outputs, data["outputs"]):
        if not per_row_output(profile, output.name):
            spec.pop("keepdim")
    loss = (data.get("math") or {}).get("loss")
    if loss and not loss.get("sequence"):  # a loss in one kernel: no sequence stage to describe
        loss.pop("sequence", None)
        loss.pop("sequence_groups", None)
    if loss is not None and not loss.get("scales"):  # one count, or none: profiles read as before
        loss.pop("scales", None)
    if loss is not None and not loss.get("flat_rows"):
        loss.pop("flat_rows", None)
    # Constructor links and mlp variants only where used: profiles without them read as before.
    for spec in data["inputs"]:
        for key in ("per_class", "per_row", "attribute", "broadcast", "sequence_shape", "unsqueeze", "shift"):
            if not spec[key]:
                spec.pop(key)
    for spec in data["parameters"]:
        for key in ("init_arg", "enabled_by"):
            if not spec[key]:
                spec.pop(key)
        if spec["requires_grad"]:
            spec.pop("requires_grad")
        if spec["rank"] is None:
            spec.pop("rank")
    if not profile.module.variants:
        data["module"].pop("variants")
    if not profile.module.function:
        data["module"].pop("function")
    header = (
        f"# kernelgen kernel profile for '{profile.operation_name}' (edit, then: new NAME --profile FILE).\n"
        "# Every field changes what kernelgen generates, except the notes section at the end.\n"
    )
    return header + yaml.dump(data, Dumper=_LiteralDumper, sort_keys=False, width=120)


def _build(cls, data: Any, path: str, problems: list[str]):
    """Build dataclass ``cls`` from ``data``, recording unknown keys and wrong types with their path."""
    if not isinstance(data, dict):
        problems.append(f"{path or '<root>'}: expected a mapping, got {type(data).__name__}")
        return None
    kwargs = {}
    for key, value in data.items():
        child = f"{path}.{key}" if path else str(key)
        if key not in _field_kinds(cls):
            retired = RETIRED_FIELDS.get(re.sub(r"\[\d+\]", "[]", child), "unknown field")
            problems.append(f"{child}: {retired}")
            continue
        kind, expected = _field_kinds(cls)[key]
        if kind == "nested_list":
            if not isinstance(value, list):
                problems.append(f"{child}: expected a list")
                continue
            items = [_build(expected, item, f"{child}[{i}]", problems) for i, item in enumerate(value)]
            kwargs[key] = [item for item in items if item is not None]
            continue
        if kind == "nested":
            if value is None and _optional(cls, key):
                kwargs[key] = None
                continue
            built = _build(expected, value, child, problems)
            if built is not None:
                kwargs[key] = built
            continue
        # bool is an int to isinstance, but ``tier: true`` is a mistake, not tier 1.
        wrong_bool = isinstance(value, bool) and expected is int
        if expected is not None and value is not None and (not isinstance(value, expected) or wrong_bool):
            problems.append(f"{child}: expected {_type_name(expected)}, got {type(value).__name__}")
            continue
        kwargs[key] = value
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [name for name in required if name not in kwargs]
    reported = {problem.split(":")[0] for problem in problems}
    for name in missing:
        field_path = f"{path}.{name}" if path else name
        if field_path not in reported:  # a value of the wrong type was reported already
            problems.append(f"{field_path}: missing")
        # A stand-in (every required field is a name) so the rest of the profile is still checked: every problem
        # is reported at once. Problems validation finds at these paths are dropped (see from_dict).
        kwargs[name] = MISSING_VALUE
    return cls(**kwargs)


def _type_name(expected) -> str:
    if isinstance(expected, tuple):
        return " or ".join(t.__name__ for t in expected)
    return expected.__name__


def _field_kind(annotation: Any) -> tuple[str, Any]:
    """How ``_build`` reads a field of this annotation: ("nested", cls), ("nested_list", cls) or ("scalar", types)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (types.UnionType, typing.Union):  # ``X | None``: None is always accepted (the field's default)
        (annotation,) = [arg for arg in args if arg is not type(None)]
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if dataclasses.is_dataclass(annotation):
        return "nested", annotation
    if origin is list and args and dataclasses.is_dataclass(args[0]):
        return "nested_list", args[0]
    if annotation is Any:
        return "scalar", None
    if annotation is float:
        return "scalar", (int, float)
    return "scalar", origin or annotation


def _optional(cls, key: str) -> bool:
    annotation = typing.get_type_hints(cls)[key]
    return typing.get_origin(annotation) in (types.UnionType, typing.Union) and type(None) in typing.get_args(
        annotation
    )


@functools.cache
def _field_kinds(cls) -> dict[str, tuple[str, Any]]:
    """Every field of dataclass ``cls`` with how it is read, from its type annotation."""
    return {name: _field_kind(annotation) for name, annotation in typing.get_type_hints(cls).items()}


def from_dict(data: Any, source: str = "profile", validate: bool = True) -> KernelProfile:
    problems: list[str] = []
    profile = _build(KernelProfile, data, "", problems)
    if profile is not None and validate:
        already = {problem.split(":")[0] for problem in problems}  # a missing field's stand-in is not checked again
        problems.extend(problem for problem in validate_profile(profile) if problem.split(":")[0] not in already)
    if problems:
        raise ProfileError(source, problems)
    return profile


class _ProfileLoader(yaml.SafeLoader):
    """YAML 1.1, which PyYAML reads, takes a float only with a dot (``1.0e-5``); ``1e-5``, as people type it and as
    YAML 1.2 reads it, is a float too, not the string a float field refuses."""


_ProfileLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def load_yaml(text: str, source: str = "profile", validate: bool = True) -> KernelProfile:
    try:
        data = yaml.load(text, Loader=_ProfileLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ProfileError(source, [f"<yaml>{where}: {getattr(error, 'problem', error)}"]) from None
    return from_dict(data, source=source, validate=validate)


def load_profile(path: str | Path, validate: bool = True) -> KernelProfile:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ProfileError(str(path), [f"cannot read the file ({error.strerror})"]) from None
    except UnicodeDecodeError as error:
        raise ProfileError(str(path), [f"cannot read the file (not UTF-8 text: {error.reason})"]) from None
    profile = load_yaml(text, source=str(path), validate=validate)
    _remember_source(profile, str(path))
    return profile


_SOURCE_ATTRIBUTE = "_kernelgen_loaded_from"  # not a field: never dumped, never compared


def _remember_source(profile: KernelProfile, source: str | None) -> None:
    if source:
        object.__setattr__(profile, _SOURCE_ATTRIBUTE, source)


def loaded_from(profile: KernelProfile) -> str | None:
    """The file ``profile`` was loaded from (kept through ``renamed``), for error lines; None for an analysis."""
    return getattr(profile, _SOURCE_ATTRIBUTE, None)
