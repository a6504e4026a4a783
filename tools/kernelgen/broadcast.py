"""Broadcast inputs: a tensor input whose shape broadcasts against the first input's, as torch broadcasts it (aligned
at the last dim; fewer dims or dims of size 1 repeat). The profile writes that shape as a pattern
(``TensorSpec.broadcast``): one token per dim of the input, ``*`` for a dim of the first input's size and ``1`` for
a broadcast one, after an optional leading ``...`` that stands for every dim of the first input before them:

- ``* 1 *``: ``[batch, 1, hidden]`` against ``[batch, seq, hidden]`` (one row per sequence, DiT's modulation);
- ``*``: ``[hidden]``, one row shared by all;
- ``... 1``: ``[..., 1]``, one value per row.

A reference declares it with the hint ``KERNELGEN = {"shapes": {"scale": "batch 1 hidden"}}`` (any names stand for
dims of the first input; ``1`` and ``...`` as above), or gives example shapes (``{"shapes": {"x": (2, 5, 8),
"scale": (2, 1, 8)}}``), which are read the same way.
"""

from __future__ import annotations

ELLIPSIS = "..."
KEPT = "*"
BROADCAST = "1"


def pattern_tokens(pattern: str) -> list[str]:
    return pattern.split()


def broadcast_pattern_problem(pattern: str) -> str:
    """What is wrong with ``pattern`` (empty when nothing is)."""
    if not isinstance(pattern, str):
        return "is not a string"
    tokens = pattern_tokens(pattern)
    body = tokens[1:] if tokens[:1] == [ELLIPSIS] else tokens
    if not body:
        return "names no dim (tokens: '*' a dim of the first input's size, '1' a broadcast one, a leading '...')"
    unknown = [token for token in body if token not in (KEPT, BROADCAST)]
    if unknown:
        return (
            f"has {unknown[0]!r}: each dim is '*' (the first input's size) or '1' (broadcast), after an optional '...'"
        )
    if BROADCAST not in body and tokens[0] == ELLIPSIS:
        return "broadcasts nothing: it is the first input's shape (leave broadcast empty)"
    return ""


def pattern_rank(pattern: str) -> int:
    """The fewest dims the first input must have for ``pattern`` to apply."""
    return len([token for token in pattern_tokens(pattern) if token != ELLIPSIS])


def shape_expression(pattern: str, shape: str = "shape") -> str:
    """Python code of the input's shape for the first input's shape ``shape`` (``(shape[-3], 1, shape[-1])``)."""
    tokens = pattern_tokens(pattern)
    leading = tokens[:1] == [ELLIPSIS]
    body = tokens[1:] if leading else tokens
    dims = [f"{shape}[{index - len(body)}]" if token == KEPT else "1" for index, token in enumerate(body)]
    if leading:
        dims.insert(0, f"*{shape}[: -{len(body)}]")
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"


def shape_for(pattern: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The input's shape for a first input of ``shape`` (at least ``pattern_rank`` dims)."""
    tokens = pattern_tokens(pattern)
    leading = tokens[:1] == [ELLIPSIS]
    body = tokens[1:] if leading else tokens
    dims = [shape[index - len(body)] if token == KEPT else 1 for index, token in enumerate(body)]
    return (tuple(shape[: len(shape) - len(body)]) if leading else ()) + tuple(dims)


def declared_pattern(declared: object, first: object) -> str:
    """The pattern of a ``shapes`` hint's entry ``declared`` (dim names or an example shape) against the first
    input's entry ``first`` (None when the hint leaves it out); empty for the first input's own shape. Raises
    ValueError saying what is wrong."""
    if isinstance(declared, str):
        return _named_pattern(declared, first)
    if _is_shape(declared):
        if not _is_shape(first):
            raise ValueError("is an example shape: give the first input's example shape too")
        if len(declared) > len(first):
            raise ValueError(f"{tuple(declared)} has more dims than the first input's {tuple(first)}")
        tokens = []
        for size, full in zip(declared, first[len(first) - len(declared) :]):
            if size != full and size != 1:
                raise ValueError(f"{tuple(declared)} does not broadcast against the first input's {tuple(first)}")
            tokens.append(KEPT if size == full else BROADCAST)
        return "" if len(declared) == len(first) and BROADCAST not in tokens else " ".join(tokens)
    raise ValueError("is neither dim names ('batch 1 hidden') nor an example shape ((2, 1, 8))")


def _is_shape(value: object) -> bool:
    return isinstance(value, (tuple, list)) and bool(value) and all(type(d) is int and d > 0 for d in value)


def _named_pattern(declared: str, first: object) -> str:
    tokens = declared.replace(",", " ").split()
    leading = tokens[:1] == [ELLIPSIS]
    body = tokens[1:] if leading else tokens
    if not body:
        raise ValueError("names no dim")
    if ELLIPSIS in body:
        raise ValueError("has '...' after its first dim")
    pattern = " ".join(([ELLIPSIS] if leading else []) + [BROADCAST if t == BROADCAST else KEPT for t in body])
    first_tokens = first.replace(",", " ").split() if isinstance(first, str) else None
    first_rank = len([t for t in first_tokens if t != ELLIPSIS]) if first_tokens else None
    if first_rank is not None and first_tokens[0] != ELLIPSIS and len(body) > first_rank:
        raise ValueError(f"has {len(body)} dims, more than the first input's {first_rank}")
    if BROADCAST in body:
        return pattern
    if leading:
        return ""
    if first_rank is None:
        raise ValueError("has no broadcast dim ('1'): declare the first input's shape too, to tell its rank")
    return "" if len(body) == first_rank else pattern
