"""Insert one element into a list / tuple / set / dict literal, keeping the literal's own layout.

In libcst the whitespace between elements lives in each element's ``comma``: the comma after element ``k`` carries
the rest of ``k``'s line (a trailing comment), the comment and blank lines above element ``k + 1`` and the
indentation of ``k + 1``. Inserting a new element therefore means splitting one comma in two.
"""

from collections.abc import Callable
from typing import Union

import libcst as cst

Collection = Union[cst.List, cst.Tuple, cst.Set, cst.Dict]
Element = Union[cst.BaseElement, cst.BaseDictElement]


def string_value(node: cst.CSTNode | None) -> str | None:
    """The text of a plain (non-f, non-bytes) string literal, else None."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def quote_style(collection: Collection) -> str:
    """The quote character of the literal's first string (keys for dicts), double quotes if none."""
    for element in collection.elements:
        node = getattr(element, "key", None) or getattr(element, "value", None)
        if isinstance(node, cst.SimpleString):
            return node.quote[0]
    return '"'


def make_string(text: str, quote: str) -> cst.SimpleString:
    return cst.SimpleString(f"{quote}{text}{quote}")


def _opening_whitespace(collection: Collection) -> cst.BaseParenthesizableWhitespace | None:
    if isinstance(collection, cst.List):
        return collection.lbracket.whitespace_after
    if isinstance(collection, (cst.Set, cst.Dict)):
        return collection.lbrace.whitespace_after
    return collection.lpar[0].whitespace_after if collection.lpar else None


def _clean_line_break(whitespace: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
    """The same indentation, without the comment at the end of the line or the lines that followed."""
    return whitespace.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())


def _separator(collection: Collection) -> cst.Comma:
    """A comma between two elements in this literal's style: one per line, or ``", "`` on one line."""
    for element in collection.elements[:-1]:
        if isinstance(element.comma, cst.Comma):
            whitespace = element.comma.whitespace_after
            if isinstance(whitespace, cst.ParenthesizedWhitespace):
                return element.comma.with_changes(whitespace_after=_clean_line_break(whitespace))
            return element.comma
    opening = _opening_whitespace(collection)
    if isinstance(opening, cst.ParenthesizedWhitespace):
        return cst.Comma(whitespace_after=_clean_line_break(opening))
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _closing_whitespace(collection: Collection) -> cst.BaseParenthesizableWhitespace | None:
    if isinstance(collection, cst.List):
        return collection.rbracket.whitespace_before
    if isinstance(collection, (cst.Set, cst.Dict)):
        return collection.rbrace.whitespace_before
    return collection.rpar[-1].whitespace_before if collection.rpar else None


def _with_closing_whitespace(collection: Collection, whitespace: cst.BaseParenthesizableWhitespace) -> Collection:
    if isinstance(collection, cst.List):
        return collection.with_changes(rbracket=collection.rbracket.with_changes(whitespace_before=whitespace))
    if isinstance(collection, (cst.Set, cst.Dict)):
        return collection.with_changes(rbrace=collection.rbrace.with_changes(whitespace_before=whitespace))
    rpar = [*collection.rpar[:-1], collection.rpar[-1].with_changes(whitespace_before=whitespace)]
    return collection.with_changes(rpar=rpar)


def _split_line_break(
    separator: cst.Comma, line_break: cst.ParenthesizedWhitespace
) -> tuple[cst.BaseParenthesizableWhitespace, cst.ParenthesizedWhitespace]:
    """Split the line break after an element into (what the element keeps, what the new element takes).

    The element keeps the end of its own line (a trailing comment); the new element takes what followed (comment
    lines above the next element, the next element's or the closing bracket's indentation).
    """
    kept = separator.whitespace_after
    if isinstance(kept, cst.ParenthesizedWhitespace):
        kept = kept.with_changes(first_line=line_break.first_line)
    elif line_break.first_line.comment is not None:
        # A one-line literal whose element carries a comment: keep a line break so the comment stays put.
        kept = line_break.with_changes(empty_lines=())
    return kept, line_break.with_changes(first_line=cst.TrailingWhitespace())


def _insert_after(collection: Collection, index: int, new: Element) -> Collection:
    elements = list(collection.elements)
    old = elements[index]
    separator = _separator(collection)
    is_last = index == len(elements) - 1
    closing = _closing_whitespace(collection) if is_last else None
    if isinstance(closing, cst.ParenthesizedWhitespace):
        # After the last element, libcst keeps the rest of its line in the closing bracket's whitespace.
        kept, moved = _split_line_break(separator, closing)
        elements[index] = old.with_changes(comma=separator.with_changes(whitespace_after=kept))
        elements.append(new.with_changes(comma=old.comma))
        return _with_closing_whitespace(collection.with_changes(elements=elements), moved)
    if not isinstance(old.comma, cst.Comma):
        # Last element without a trailing comma: it gets one and the new element ends the literal instead.
        elements[index] = old.with_changes(comma=separator)
        elements.insert(index + 1, new.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        return collection.with_changes(elements=elements)
    whitespace = old.comma.whitespace_after
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        kept, moved = _split_line_break(separator, whitespace)
        elements[index] = old.with_changes(comma=old.comma.with_changes(whitespace_after=kept))
        elements.insert(index + 1, new.with_changes(comma=old.comma.with_changes(whitespace_after=moved)))
        return collection.with_changes(elements=elements)
    elements[index] = old.with_changes(comma=separator if is_last else old.comma)
    elements.insert(index + 1, new.with_changes(comma=old.comma))
    return collection.with_changes(elements=elements)


def insert_sorted(
    collection: Collection, new: Element, new_key: object, key_of: Callable[[Element], object]
) -> Collection:
    """Insert ``new`` right after the greatest element whose key sorts before ``new_key``.

    When nothing sorts before it, it goes right before the least element that sorts after it (below any comment
    above that element); elements whose ``key_of`` is None are never anchors. Nothing existing moves.
    """
    elements = list(collection.elements)
    keyed = [(key_of(element), index) for index, element in enumerate(elements)]
    keyed = [(key, index) for key, index in keyed if key is not None]
    before = [(key, index) for key, index in keyed if key < new_key]
    if before:
        _, anchor = max(before, key=lambda pair: pair[0])
        return _insert_after(collection, anchor, new)
    if keyed:
        _, anchor = min(keyed, key=lambda pair: pair[0])
        elements.insert(anchor, new.with_changes(comma=_separator(collection)))
        return collection.with_changes(elements=elements)
    if elements:
        return _insert_after(collection, len(elements) - 1, new)
    return collection.with_changes(elements=[new.with_changes(comma=cst.MaybeSentinel.DEFAULT)])
