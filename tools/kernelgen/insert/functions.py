"""``add_function``: one top-level ``def`` at its alphabetical place, with the file's blank-line convention."""

from collections import Counter

import libcst as cst

from tools.kernelgen.insert.errors import InsertError
from tools.kernelgen.insert.errors import parse_source
from tools.kernelgen.insert.imports import absolute_from_import
from tools.kernelgen.insert.ordering import BLANK_LINE
from tools.kernelgen.insert.ordering import dotted_name
from tools.kernelgen.insert.ordering import import_blocks
from tools.kernelgen.insert.ordering import leading_blank_lines

# ``indent=False``: a blank line inside a block must not get the block's indentation as trailing spaces.
DEFAULT_BLANK_LINES = 2  # PEP 8 / ruff format around top-level definitions


def _blank_lines_convention(body: list[cst.BaseStatement]) -> int:
    """The most common number of blank lines above the file's top-level defs (not the first statement)."""
    counts = Counter(
        leading_blank_lines(statement.leading_lines)
        for index, statement in enumerate(body)
        if index > 0 and isinstance(statement, cst.FunctionDef)
    )
    return counts.most_common(1)[0][0] if counts else DEFAULT_BLANK_LINES


def _parse_function(function_source: str, newline: str) -> cst.FunctionDef:
    # The host's newline goes into the snippet before parsing, so multi-line strings in it follow the host too.
    text = function_source.replace("\r\n", "\n").replace("\n", newline)
    functions = [statement for statement in parse_source(text, "<function_source>").body]
    functions = [statement for statement in functions if isinstance(statement, cst.FunctionDef)]
    if len(functions) != 1:
        raise InsertError("<function_source>", f"expected exactly one top-level def, found {len(functions)}")
    function = functions[0]
    # Its own blank lines are replaced by the host's convention; comments above it stay with it.
    lines = list(function.leading_lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    return function.with_changes(leading_lines=lines)


def _with_blank_lines(statement: cst.BaseStatement, count: int) -> cst.BaseStatement:
    """``statement`` with at least ``count`` blank lines above it (existing lines all kept)."""
    missing = count - leading_blank_lines(statement.leading_lines)
    if missing <= 0:
        return statement
    return statement.with_changes(leading_lines=[BLANK_LINE] * missing + list(statement.leading_lines))


def _end_of_imports(body: list[cst.BaseStatement], package: str) -> int | None:
    """Index after the run of imports holding the last top-level ``from {package}...`` import."""
    last = None
    for run in import_blocks(body):
        for index in run:
            small = absolute_from_import(body[index])
            if small is not None and (dotted_name(small.module) + ".").startswith(package + "."):
                last = run[-1] + 1
    return last


def add_function(source: str, function_source: str, *, after_imports_of: str | None = None) -> str:
    """Add the top-level ``def`` in ``function_source`` unless a function of that name exists.

    It goes right after the greatest top-level function whose name sorts before it, else right before the least
    that sorts after it (taking over that function's banner and blank lines). In a file without functions it goes
    after the imports of ``after_imports_of`` (a module prefix) when given and present, else at the end.
    """
    tree = parse_source(source)
    body = list(tree.body)
    function = _parse_function(function_source, tree.default_newline)
    name = function.name.value
    defined = {
        statement.name.value: index for index, statement in enumerate(body) if isinstance(statement, cst.FunctionDef)
    }
    if name in defined:
        return source
    blanks = _blank_lines_convention(body)
    spaced = function.with_changes(leading_lines=[BLANK_LINE] * blanks + list(function.leading_lines))
    smaller = [other for other in defined if other < name]
    if smaller:
        position = defined[max(smaller)] + 1
    elif defined:
        anchor = defined[min(defined)]
        # Sorts first: take over the anchor's blank lines and banner, and give the anchor fresh blank lines.
        spaced = function.with_changes(leading_lines=[*body[anchor].leading_lines, *function.leading_lines])
        body[anchor] = body[anchor].with_changes(leading_lines=[BLANK_LINE] * blanks)
        position = anchor
    else:
        after_imports = _end_of_imports(body, after_imports_of) if after_imports_of else None
        position = len(body) if after_imports is None else after_imports
        if position == 0:
            spaced = function  # an empty file: no blank lines at its top
    body.insert(position, spaced)
    if position + 1 < len(body):
        body[position + 1] = _with_blank_lines(body[position + 1], blanks)
    return tree.with_changes(body=body).code
