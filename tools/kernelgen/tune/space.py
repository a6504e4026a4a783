"""What ``tune`` may change: the tiling fields the kernel's ops template reads, each with the values worth a try.

The space is the profile's ``tiling`` section (``profile.tiling_fields``): tile size (``block_elements``), the
widest column slice of a long row (``max_block_cols``, tier 1; the whole tile of a parameter-free element-wise
kernel on contiguous tensors, which walk as one row), persistent programs per SM for parameter-gradient
reductions (``programs_per_sm``) and warps per program (``num_warps``; ``None`` lets the template choose from the
tile), the backward's own (``backward_num_warps``, tier 1: a compute-bound backward may want more warps than its
forward), and the one variant the tier-1 template offers: each pass's tanh and log1p, core ``tl`` formulas or
libdevice's (``forward_math``, ``backward_math``; the same change made one kernel faster and another slower on an
H200). Every size is a power of two (Triton's block shapes are). A field's values are tried nearest the starting
value first (from the template's own choice: in the order listed, likeliest first), so a small budget spends
itself on the likeliest neighbours.
"""

from __future__ import annotations

import copy
import math

from dataclasses import dataclass

from tools.kernelgen.profile import TILING_CHOICES
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import tiling_fields

# Values per field; ``None``: the template's own choice (only where the template has one).
VALUES = {
    "block_elements": (1024, 2048, 4096, 8192, 16384),
    "max_block_cols": (512, 1024, 2048, 4096),
    "programs_per_sm": (1, 2, 4, 8),
    "num_warps": (None, 8, 4, 16, 2, 32),
    "backward_num_warps": (None, 16, 8, 4, 32),
    "forward_math": (None, "libdevice", "core"),
    "backward_math": (None, "libdevice", "core"),
}
VALUES_BY_TEMPLATE = {
    ("rows", "block_elements"): (1024, 2048, 4096, 8192, 16384, 32768),
    ("loss", "block_elements"): (None, 8192, 4096, 16384, 32768, 2048),
    ("rows", "num_warps"): (None, 8, 16, 4, 32),
    ("rows_handwritten", "num_warps"): (None, 8, 16, 4, 32),
    ("loss", "num_warps"): (None, 8, 16, 4, 32),
}
# Which field to sweep first: the tile decides the most, then warps, then the rest.
ORDER = (
    "block_elements",
    "num_warps",
    "backward_num_warps",
    "backward_math",
    "forward_math",
    "max_block_cols",
    "programs_per_sm",
)
# An element-wise kernel without parameters walks contiguous tensors as one row (layout_utils.launch_shape):
# its tile there is max_block_cols elements, and block_elements only sizes the 2-D tiles of strided inputs, so the
# slice width goes first and the tile size last (at validate's contiguous shape a block_elements candidate renders
# other text that runs the same launch).
FLAT_ORDER = (
    "max_block_cols",
    "num_warps",
    "backward_num_warps",
    "backward_math",
    "forward_math",
    "block_elements",
    "programs_per_sm",
)
FLAT_MAX_BLOCK_COLS = (512, 1024, 2048, 4096, 8192)


@dataclass(frozen=True)
class SearchSpace:
    """Fields in sweep order, each with its candidate values in the order they are tried."""

    fields: tuple[str, ...]
    values: dict[str, tuple]

    def configuration(self, profile: KernelProfile) -> dict:
        return {field: getattr(profile.tiling, field) for field in self.fields}

    def moves(self) -> list[tuple[str, object]]:
        """Every (field, value), breadth first: each field's nearest value, then each field's next one..."""
        longest = max((len(values) for values in self.values.values()), default=0)
        return [
            (field, self.values[field][rank])
            for rank in range(longest)
            for field in self.fields
            if rank < len(self.values[field])
        ]


def _nearest_first(values: tuple, start) -> tuple:
    """``values`` ordered by distance from ``start`` (in powers of two); ``None`` (the template's choice) first when
    the start is an explicit value, last-but-kept when the start is ``None``."""
    if start is None:
        return tuple(v for v in values if v is not None) if None in values else values
    if isinstance(start, str):  # a named choice has no distance: the others in the order listed
        return tuple(v for v in values if v != start)

    def distance(value):
        if value is None:
            return (-1.0, 0)  # going back to the template's own choice is the first thing to try
        return (abs(math.log2(value) - math.log2(start)), value < start)

    return tuple(sorted((v for v in values if v != start), key=distance))


def walks_flat(profile: KernelProfile) -> bool:
    """Whether the kernel's forward and backward walk contiguous tensors as one row of all their elements (what the
    tier-1 ops view decides for the template: no per-channel parameter read, no parameter gradient)."""
    if profile.template != "elementwise":
        return False
    from tools.kernelgen.render.views import build_views

    ops = build_views(profile).ops
    return ops.forward_walks_flat and ops.backward_walks_flat


def _choices_that_change_the_kernel(profile: KernelProfile, field: str, values: tuple) -> tuple:
    """``values`` of a choice field (``TILING_CHOICES``) that print the kernel's pass otherwise than its current value
    and than each other, in order: the default (None) prints one of the named choices, and a pass without tanh or
    log prints alike under all of them."""
    from tools.kernelgen.derivation import elementwise_math

    def printed(value):
        trial = copy.deepcopy(profile)
        setattr(trial.tiling, field, value)
        math = elementwise_math(trial)
        return math.forward if field == "forward_math" else math.backward

    seen = [printed(getattr(profile.tiling, field))]
    distinct = []
    for value in values:
        statements = printed(value)
        if statements not in seen:
            seen.append(statements)
            distinct.append(value)
    return tuple(distinct)


def search_space(profile: KernelProfile) -> SearchSpace:
    from tools.kernelgen.render.views import launches_by_row_blocks

    flat = walks_flat(profile)
    fields = [field for field in (FLAT_ORDER if flat else ORDER) if field in tiling_fields(profile)]
    if launches_by_row_blocks(profile):  # blocks of max_block_cols elements: no 2-D tile, no partial sums
        fields = [field for field in fields if field not in ("block_elements", "programs_per_sm")]
    values = {}
    for field in fields:
        candidates = VALUES_BY_TEMPLATE.get((profile.template, field), VALUES[field])
        if flat and field == "max_block_cols":
            candidates = FLAT_MAX_BLOCK_COLS
        candidates = _nearest_first(candidates, getattr(profile.tiling, field))
        if field in TILING_CHOICES:
            candidates = _choices_that_change_the_kernel(profile, field, candidates)
        if candidates:
            values[field] = candidates
    return SearchSpace(tuple(field for field in fields if field in values), values)


def describe(configuration: dict) -> str:
    return ", ".join(f"{field}={'auto' if value is None else value}" for field, value in configuration.items())
