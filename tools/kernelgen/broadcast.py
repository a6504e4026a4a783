"""Broadcast inputs: a tensor input whose shape broadcasts against the first input's, as torch broadcasts it (aligned
at the last dim; fewer dims or dims of size 1 repeat). The profile writes that shape as a pattern
(``TensorSpec.broadcast``): one token per dim of the input, ``*`` for a dim of the first input's size and ``1`` for
a broadcast one, ``_`` for a broadcast dim the input lacks and the reference inserts itself (``scale.unsqueeze(1)``,
``scale[:, None]``), after an optional leading ``...`` that stands for every dim of the first input before them:

- ``* 1 *``: ``[batch, 1, hidden]`` against ``[batch, seq, hidden]`` (one row per sequence);
- ``* _ *``: ``[batch, hidden]``, which the reference unsqueezes at dim 1 (DiT's ``modulate``);
- ``*``: ``[hidden]``, one row shared by all;
- ``... 1``: ``[..., 1]``, one value per row;
- ``* * _ /2``: ``[batch, seq, hidden // 2]``, unsqueezed at dim 2, of rows half as long as the first input's: the
  last token ``/2``, ``/4`` or ``/8`` is a row narrower by that factor, which an index map (``math.lanes``) reads
  at lanes of its own (GPT-J's half-width sin and cos); no other kernel reads one.

A reference declares it with the hint ``KERNELGEN = {"shapes": {"scale": "batch 1 hidden"}}`` (any names stand for
dims of the first input; ``1`` and ``...`` as above), or gives example shapes (``{"shapes": {"x": (2, 5, 8),
"scale": (2, 1, 8)}}``), which are read the same way.
"""

from __future__ import annotations

ELLIPSIS = "..."
KEPT = "*"
BROADCAST = "1"
INSERTED = "_"
# The last token of a row narrower than the first input's by a factor (``/2``: half as long).
NARROWER = ("/2", "/4", "/8")


def pattern_tokens(pattern: str) -> list[str]:
    return pattern.split()


def declared_tokens(declared: str) -> list[str]:
    """The dims of a ``shapes`` hint's entry as written (``"batch, seq hidden"``: commas or spaces between them)."""
    return declared.replace(",", " ").split()


def broadcast_pattern_problem(pattern: str) -> str:
    """What is wrong with ``pattern`` (empty when nothing is)."""
    if not isinstance(pattern, str):
        return "is not a string"
    tokens = pattern_tokens(pattern)
    body = tokens[1:] if tokens[:1] == [ELLIPSIS] else tokens
    if not body:
        return "names no dim (tokens: '*' a dim of the first input's size, '1' a broadcast one, a leading '...')"
    unknown = [token for token in body[:-1] if token not in (KEPT, BROADCAST, INSERTED)]
    unknown += [token for token in body[-1:] if token not in (KEPT, BROADCAST, INSERTED, *NARROWER)]
    if unknown:
        return (
            f"has {unknown[0]!r}: each dim is '*' (the first input's size), '1' (broadcast) or '_' (inserted by the "
            f"reference), the last one also {', '.join(map(repr, NARROWER))} (a row that much narrower), after an "
            "optional '...'"
        )
    if INSERTED in body and tokens[0] == ELLIPSIS:
        return "has both '...' and '_' (a dim the reference inserts needs the dims before it named)"
    if BROADCAST not in body and INSERTED not in body and not narrowing(pattern) > 1 and tokens[0] == ELLIPSIS:
        return "broadcasts nothing: it is the first input's shape (leave broadcast empty)"
    return ""


def narrowing(pattern: str) -> int:
    """How many times shorter than the first input's the input's rows are (``/2``: 2); 1 for every other pattern."""
    tokens = pattern_tokens(pattern) if isinstance(pattern, str) else []
    return int(tokens[-1][1:]) if tokens and tokens[-1] in NARROWER else 1


def narrowed(pattern: str, factor: int) -> str:
    """``pattern`` (empty: the first input's shape) with rows ``factor`` times shorter than the first input's."""
    tokens = pattern_tokens(pattern) if pattern else [ELLIPSIS, KEPT]
    return " ".join([*tokens[:-1], f"/{factor}" if factor > 1 else KEPT])


def pattern_rank(pattern: str) -> int:
    """The fewest dims the first input must have for ``pattern`` to apply."""
    return len([token for token in pattern_tokens(pattern) if token != ELLIPSIS])


def shape_expression(pattern: str, shape: str = "shape") -> str:
    """Python code of the input's shape for the first input's shape ``shape`` (``(shape[-3], 1, shape[-1])``)."""
    tokens = pattern_tokens(pattern)
    leading = tokens[:1] == [ELLIPSIS]
    body = tokens[1:] if leading else tokens
    dims = [
        f"{shape}[{index - len(body)}]"
        if token == KEPT
        else f"{shape}[-1] // {token[1:]}"
        if token in NARROWER
        else "1"
        for index, token in enumerate(body)
        if token != INSERTED
    ]
    if leading:
        dims.insert(0, f"*{shape}[: -{len(body)}]")
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"


def shape_for(pattern: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The input's shape for a first input of ``shape`` (at least ``pattern_rank`` dims; numbers, or code)."""
    tokens = pattern_tokens(pattern)
    leading = tokens[:1] == [ELLIPSIS]
    body = tokens[1:] if leading else tokens
    dims = [
        shape[index - len(body)] if token == KEPT else _shorter(shape[-1], int(token[1:])) if token in NARROWER else 1
        for index, token in enumerate(body)
        if token != INSERTED
    ]
    return (tuple(shape[: len(shape) - len(body)]) if leading else ()) + tuple(dims)


def _shorter(size, factor: int):
    """A row length ``factor`` times shorter: a number, or code (``"size"`` -> ``"size // 2"``)."""
    return f"{size} // {factor}" if isinstance(size, str) else size // factor


def narrowed_shape_expression(pattern: str, shape: str = "shape") -> str:
    """Python code of the shape ``pattern``'s input broadcasts against: ``shape``, with the last dim divided by the
    pattern's narrowing (``(*shape[:-1], shape[-1] // 2)``)."""
    factor = narrowing(pattern)
    return shape if factor == 1 else f"(*{shape}[:-1], {shape}[-1] // {factor})"


def with_inserted_dims(own: list[str], inserted: list[int]) -> str:
    """The pattern of an input of own tokens ``own`` once the dims at positions ``inserted`` (of the result) are
    inserted by the reference."""
    tokens, rest = [], iter(own)
    for position in range(len(own) + len(inserted)):
        tokens.append(INSERTED if position in inserted else next(rest))
    return " ".join(tokens)


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
        pairs = list(zip(declared, first[len(first) - len(declared) :]))
        for index, (size, full) in enumerate(pairs):
            shorter = f"/{full // size}" if size > 1 and full % size == 0 else ""
            if index == len(pairs) - 1 and size != full and shorter in NARROWER:
                tokens.append(shorter)  # rows that many times shorter (GPT-J's half-width sin)
                continue
            if size != full and size != 1:
                raise ValueError(f"{tuple(declared)} does not broadcast against the first input's {tuple(first)}")
            tokens.append(KEPT if size == full else BROADCAST)
        whole = BROADCAST not in tokens and tokens[-1] not in NARROWER
        return "" if len(declared) == len(first) and whole else " ".join(tokens)
    raise ValueError("is neither dim names ('batch 1 hidden') nor an example shape ((2, 1, 8))")


def _is_shape(value: object) -> bool:
    return isinstance(value, (tuple, list)) and bool(value) and all(type(d) is int and d > 0 for d in value)


def _named_pattern(declared: str, first: object) -> str:
    tokens = declared_tokens(declared)
    leading = tokens[:1] == [ELLIPSIS]
    body = tokens[1:] if leading else tokens
    if not body:
        raise ValueError("names no dim")
    if ELLIPSIS in body:
        raise ValueError("has '...' after its first dim")
    # a last dim written with a factor ("dim/2") is a row that many times shorter than the first input's
    shorter = "/" + body[-1].rsplit("/", 1)[1] if "/" in body[-1] else ""
    if shorter and shorter not in NARROWER:
        raise ValueError(f"has {body[-1]!r}: a shorter row is written NAME/2, NAME/4 or NAME/8")
    tokens = [BROADCAST if t == BROADCAST else KEPT for t in body[:-1]] + [shorter or _named_token(body[-1])]
    pattern = " ".join(([ELLIPSIS] if leading else []) + tokens)
    first_tokens = declared_tokens(first) if isinstance(first, str) else None
    first_rank = len([t for t in first_tokens if t != ELLIPSIS]) if first_tokens else None
    if first_rank is not None and first_tokens[0] != ELLIPSIS and len(body) > first_rank:
        raise ValueError(f"has {len(body)} dims, more than the first input's {first_rank}")
    if BROADCAST in body or shorter:
        return pattern
    if leading:
        return ""
    if first_rank is None:
        raise ValueError("has no broadcast dim ('1'): declare the first input's shape too, to tell its rank")
    # Against a first input of any rank (``"... hidden"``), a fixed rank (``"hidden"``) is the trailing dims only.
    return "" if len(body) == first_rank and first_tokens[0] != ELLIPSIS else pattern


def _named_token(name: str) -> str:
    return BROADCAST if name == BROADCAST else KEPT


def inserted_dims(pattern: str) -> tuple[int, ...]:
    """The dims the reference inserts, as ``unsqueeze`` takes them applied one after the other (negative, the last
    first): ``(-2,)`` for ``* _ *``."""
    body = [token for token in pattern_tokens(pattern) if token != ELLIPSIS]
    return tuple(position - len(body) for position in reversed(range(len(body))) if body[position] == INSERTED)


def first_input_dims(patterns: list[str], rows, cols, group=2, rank=2) -> tuple:
    """The first input's shape for example data of ``rows`` rows of ``cols`` (numbers or code): as they are, or with
    the rows grouped in as many more dims of ``group`` as the deepest of ``patterns`` or ``rank`` (the least the
    reference is written for) needs (each broadcast dim then repeats); with code (``rows`` a str), the rows are
    divided by the groups instead."""
    rank = max([rank, *map(pattern_rank, patterns)])
    if rank <= 2:
        return (rows, cols)
    if isinstance(rows, str):
        return (str(group),) * (rank - 2) + (f"{rows} // {group ** (rank - 2)}", cols)
    return (group,) * (rank - 2) + (rows, cols)


def own_rank(pattern: str) -> int:
    """The dims of the input itself (without those the reference inserts); ``...`` patterns: the named ones."""
    return len([token for token in pattern_tokens(pattern) if token not in (ELLIPSIS, INSERTED)])


def group_dims(patterns: list[str], rank: int) -> list[int]:
    """The dims (of ``rank``) in which a further row group's input (HF RoPE's ``k`` beside ``q``) may differ from the
    first input in tests and benchmarks: each dim every broadcast input broadcasts over (other heads than ``q``'s),
    or the first dim where there is none; never the row length."""
    over = [
        index
        for index in range(rank - 1)
        if patterns and all(_token_at(pattern, index - rank) in (BROADCAST, INSERTED, None) for pattern in patterns)
    ]
    return over or [0]


def group_shape_expression(patterns: list[str], rank: int, shape: str = "shape") -> str:
    """Python code of the shape tests draw a further row group's input in, for the first input's shape ``shape`` of
    at least ``rank`` dims (of the last ``rank``): one more along each of ``group_dims``."""
    over = group_dims(patterns, rank)
    dims = [f"{shape}[{index - rank}]" + (" + 1" if index in over else "") for index in range(rank)]
    return f"(*{shape}[:-{rank}], {', '.join(dims)})"


def _token_at(pattern: str, position: int) -> str | None:
    """The token of ``pattern`` at dim ``position`` (negative, from the last); None where it has no such dim."""
    tokens = pattern_tokens(pattern)
    body = tokens[1:] if tokens[:1] == [ELLIPSIS] else tokens
    if -position > len(body):
        return KEPT if tokens[:1] == [ELLIPSIS] else None
    return body[position]
