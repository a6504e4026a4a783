"""Lanes of a row (profile ``math.lanes``): where element ``j`` of a lane lies in a tensor's row.

A kernel with lanes runs over ``j < n_cols``, ``n_cols`` being the lane length: each input row holds ``count`` lanes,
each output row as many lanes as the profile maps onto it. A lane is written ``tensor[columns]``, the columns an
affine expression of the lane index ``cols`` and the lane length ``n_cols`` (``x[2 * cols + 1]``,
``x[cols + n_cols]``, ``x[n_cols - 1 - cols]``); analysis writes them (``analyze/lanes.py``) and a person may edit
them.
"""

from __future__ import annotations

import re

from dataclasses import dataclass

import sympy

_WRITTEN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\[(.+)\]\s*$")
_INDEX, _LENGTH = sympy.Symbol("cols"), sympy.Symbol("n_cols")


@dataclass(frozen=True)
class LaneMap:
    """Element ``j`` of the lane lies at ``start_lanes * n_cols + offset + step * j`` of ``tensor``'s row."""

    tensor: str
    start_lanes: int
    offset: int
    step: int

    def reversed(self) -> LaneMap:
        """The lane read from its last element to its first (``flip``)."""
        return LaneMap(self.tensor, self.start_lanes + self.step, self.offset - self.step, -self.step)

    def positions(self, lane_length: int) -> list[int]:
        start = self.start_lanes * lane_length + self.offset
        return [start + self.step * j for j in range(lane_length)]

    def columns(self, index: str = "cols") -> str:
        """The row positions as an expression of the lane index (``2 * cols + 1``, ``cols + n_cols``)."""
        terms = []
        if self.step != 0:
            terms.append(index if self.step == 1 else f"-{index}" if self.step == -1 else f"{self.step} * {index}")
        if self.start_lanes:
            terms.append("n_cols" if self.start_lanes == 1 else f"{self.start_lanes} * n_cols")
        if self.offset:
            terms.append(str(self.offset))
        return " + ".join(terms).replace("+ -", "- ") or "0"

    def written(self) -> str:
        return f"{self.tensor}[{self.columns()}]"


def parse_lane(text: str) -> LaneMap:
    """``tensor[columns]`` as a LaneMap; ValueError saying what is wrong."""
    match = _WRITTEN.match(str(text))
    if match is None:
        raise ValueError(f"{text!r} is not TENSOR[COLUMNS] (x[2 * cols + 1])")
    tensor, columns = match.groups()
    try:
        expr = sympy.expand(sympy.sympify(columns, locals={"cols": _INDEX, "n_cols": _LENGTH}))
    except (sympy.SympifyError, SyntaxError, TypeError) as error:
        raise ValueError(f"{text!r}: columns {columns!r} do not parse ({error})") from None
    if expr.free_symbols - {_INDEX, _LENGTH}:
        raise ValueError(f"{text!r}: columns may read cols and n_cols only")
    polynomial = sympy.Poly(expr, _INDEX, _LENGTH)
    if polynomial.total_degree() > 1:
        raise ValueError(f"{text!r}: columns must be affine in cols and n_cols")
    coefficients = [polynomial.coeff_monomial(m) for m in (_INDEX, _LENGTH, 1)]
    if not all(c.is_Integer for c in coefficients):
        raise ValueError(f"{text!r}: columns must have integer coefficients")
    step, start_lanes, offset = (int(c) for c in coefficients)
    if step == 0:
        raise ValueError(f"{text!r}: columns must move with cols")
    return LaneMap(tensor, start_lanes, offset, step)


def lane_problems(lanes: dict[str, str], path: str, row_lanes: dict[str, int], whole: bool = False) -> list[str]:
    """What is wrong with the lanes ``lanes`` (name -> written map) of rows ``row_lanes`` (tensor -> lanes it
    holds; 0: as many as map onto it): each parses, names such a tensor and stays within its row; with ``whole``
    (an output's lanes, each position stored once) the lanes of one tensor are disjoint and cover its row."""
    problems, parsed = [], {}
    for name, text in lanes.items():
        try:
            lane = parse_lane(text)
        except ValueError as error:
            problems.append(f"{path}.{name}: {error}")
            continue
        if lane.tensor not in row_lanes:
            problems.append(f"{path}.{name}: {lane.tensor!r} is not one of {sorted(row_lanes)}")
            continue
        parsed[name] = lane
    held = {
        tensor: count or sum(lane.tensor == tensor for lane in parsed.values()) for tensor, count in row_lanes.items()
    }
    for lane_length in (5, 8):  # the maps are affine in n_cols: a clash or overrun shows at either
        taken: dict[str, set[int]] = {}
        for name, lane in parsed.items():
            width = held[lane.tensor] * lane_length
            positions = lane.positions(lane_length)
            if min(positions) < 0 or max(positions) >= width:
                problems.append(f"{path}.{name}: {lane.written()} reads outside a row of {held[lane.tensor]} lanes")
                return problems
            seen = taken.setdefault(lane.tensor, set())
            if whole and seen & set(positions):
                problems.append(f"{path}.{name}: {lane.written()} overlaps another lane of {lane.tensor}")
                return problems
            seen |= set(positions)
        if whole:
            for tensor, seen in taken.items():
                if seen != set(range(held[tensor] * lane_length)):
                    problems.append(f"{path}: the lanes of {tensor} leave positions of its row unwritten")
                    return problems
    return problems


def disjoint_layers(lanes: list[LaneMap]) -> list[list[LaneMap]]:
    """``lanes`` (of one tensor) in layers of disjoint lanes, each lane in the first layer it does not overlap: the
    gradient stores of one layer never meet, and the layers' buffers add up to the gradient."""
    layers: list[list[LaneMap]] = []
    for lane in lanes:
        for layer in layers:
            if not any(_overlap(lane, other) for other in layer):
                layer.append(lane)
                break
        else:
            layers.append([lane])
    return layers


def _overlap(one: LaneMap, other: LaneMap) -> bool:
    return any(set(one.positions(length)) & set(other.positions(length)) for length in (5, 8))


def covers_row(lanes: list[LaneMap], row_lanes: int) -> bool:
    """Whether ``lanes`` (of one tensor) read every position of its row of ``row_lanes`` lanes."""
    return all(
        set().union(*(lane.positions(length) for lane in lanes)) == set(range(row_lanes * length)) for length in (5, 8)
    )


__all__ = ["LaneMap", "covers_row", "disjoint_layers", "lane_problems", "parse_lane"]
