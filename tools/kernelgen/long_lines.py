"""Generated lines wrapped at the target's line length, where ``ruff format`` leaves them long.

Templates fill docstrings and messages with names and formulas whose length they cannot know, and ruff does not
break a string, so a generated line can run past the line length a maintainer keeps to. Two kinds are wrapped:

- docstrings: each line that runs past is broken at its last space that fits; the rest starts the next line when
  that line continues the same paragraph (same indentation, not a list item), else a line of its own;
- a string literal alone on its line inside brackets (a message argument): split at a space into two literals that
  Python joins again, each an f-string only if it has a placeholder.

Only layout changes: an edit is kept only if the file parses to the same syntax tree (docstrings: the same words).
"""

from __future__ import annotations

import ast
import re

_LIST_ITEM_STARTS = ("- ", "* ", ">>>")


def _docstring_nodes(tree: ast.Module) -> list[ast.Constant]:
    nodes = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                nodes.append(first.value)
    return nodes


def _continues(line: str, indent: str) -> bool:
    """Whether ``line`` carries on the paragraph above it (so a broken line's rest can join it)."""
    body = line[len(indent) :]
    return (
        line.startswith(indent)
        and bool(body.strip())
        and not body.startswith((" ", *_LIST_ITEM_STARTS))
        and not body.startswith('"""')
    )


def _wrapped(lines: list[str], indent: str, width: int) -> list[str]:
    lines = list(lines)
    index = 0
    while index < len(lines):
        line = lines[index]
        if len(line) <= width:
            index += 1
            continue
        floor = len(indent) + (3 if index == 0 else 0) + 1  # never break inside the indentation or opening quotes
        cut = line.rfind(" ", floor, width + 1)
        if cut < 0:
            index += 1  # one word longer than the line: left as it is
            continue
        head, rest = line[:cut].rstrip(), line[cut + 1 :].lstrip()
        lines[index] = head
        following = index + 1
        if following < len(lines) and _continues(lines[following], indent):
            lines[following] = f"{indent}{rest} {lines[following][len(indent) :]}"
        else:
            lines.insert(following, f"{indent}{rest}")
        index += 1
    return lines


def _wrap_docstrings(source: str, tree: ast.Module, width: int) -> str:
    lines = source.split("\n")
    # Bottom-up, so inserted lines do not move the docstrings still to do.
    for node in sorted(_docstring_nodes(tree), key=lambda node: -node.lineno):
        first, last = node.lineno - 1, node.end_lineno - 1
        if all(len(line) <= width for line in lines[first : last + 1]):
            continue
        indent = " " * node.col_offset
        wrapped = _wrapped(lines[first : last + 1], indent, width)
        if " ".join("\n".join(wrapped).split()) == " ".join("\n".join(lines[first : last + 1]).split()):
            lines[first : last + 1] = wrapped
    return "\n".join(lines)


# A string literal alone on its line (a trailing comma allowed): prefix, quote, text.
_LONE_STRING = re.compile(r"^(?P<indent> *)(?P<prefix>[fF]?)(?P<quote>[\"'])(?P<text>.*)(?P=quote)(?P<comma>,?)$")


def _split_point(text: str, formatted: bool, limit: int) -> int:
    """The index of the last space of ``text`` at or before ``limit`` outside an f-string's placeholders (-1: none)."""
    depth = 0
    best = -1
    for index, char in enumerate(text[: limit + 1]):
        if formatted and char == "{":
            depth += 1
        elif formatted and char == "}":
            depth -= 1
        elif char == " " and depth == 0 and index > 0:
            best = index
    return best


def _split_strings(source: str, width: int) -> str:
    lines = source.split("\n")
    result = []
    for line in lines:
        match = _LONE_STRING.match(line) if len(line) > width else None
        text = match and match["text"]
        formatted = bool(match and match["prefix"])
        # Escaped braces would read as placeholders to the split; a quote inside means the match is not one literal.
        if not match or match["quote"] in text or (formatted and ("{{" in text or "}}" in text)):
            result.append(line)
            continue
        # The first part keeps its trailing space and closes its quote within the width.
        limit = width - len(match["indent"]) - len(match["prefix"]) - 3
        cut = _split_point(text, formatted, limit)
        if cut < 0:
            result.append(line)
            continue
        quote, indent = match["quote"], match["indent"]
        parts = [text[: cut + 1], text[cut + 1 :]]
        prefixes = ["f" if formatted and "{" in part else "" for part in parts]
        result.append(f"{indent}{prefixes[0]}{quote}{parts[0]}{quote}")
        result.append(f"{indent}{prefixes[1]}{quote}{parts[1]}{quote}{match['comma']}")
    return "\n".join(result)


def _same_tree(before: ast.Module, text: str) -> bool:
    try:
        return ast.dump(ast.parse(text)) == ast.dump(before)
    except SyntaxError:
        return False


def wrap_long_lines(source: str, width: int) -> str:
    """``source`` with its docstrings and lone string literals wrapped at ``width`` (unparsable source: as it is)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    wrapped = _wrap_docstrings(source, tree, width)  # checks each docstring's words itself
    try:
        tree = ast.parse(wrapped)
    except SyntaxError:
        wrapped = source
    split = _split_strings(wrapped, width)
    return split if _same_tree(tree, split) else wrapped
