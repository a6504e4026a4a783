"""libcst edits of a target's ``monkey_patch.py`` for ``patch``: new top-level statements before the model-type
table (or at the end of a file without one), an entry in that table, a plain ``import`` at its sorted place.

Like the kernel registrations (``insert``), each edit takes and returns source text and leaves what it does not
touch as it was: comments, blank lines and quotes.
"""

from __future__ import annotations

import libcst as cst

from tools.kernelgen.insert.errors import InsertError
from tools.kernelgen.insert.errors import parse_source
from tools.kernelgen.insert.ordering import BLANK_LINE
from tools.kernelgen.insert.ordering import dotted_name
from tools.kernelgen.insert.ordering import import_section
from tools.kernelgen.insert.ordering import leading_blank_lines
from tools.kernelgen.insert.ordering import straight_import_key
from tools.kernelgen.insert.sequences import _insert_after as insert_after

TOP_LEVEL_BLANK_LINES = 2


def _assigns(statement: cst.CSTNode, name: str) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    return any(
        isinstance(small, cst.Assign)
        and any(isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets)
        for small in statement.body
    )


def defined_names(source: str) -> set[str]:
    tree = parse_source(source)
    names = set()
    for statement in tree.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            names.add(statement.name.value)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    names.update(t.target.value for t in small.targets if isinstance(t.target, cst.Name))
    return names


def _spaced(statement: cst.BaseStatement) -> cst.BaseStatement:
    missing = TOP_LEVEL_BLANK_LINES - leading_blank_lines(statement.leading_lines)
    if missing <= 0:
        return statement
    return statement.with_changes(leading_lines=[BLANK_LINE] * missing + list(statement.leading_lines))


def insert_statements(source: str, snippet: str, *, before_assignment_of: str | None = None) -> str:
    """``snippet``'s top-level statements, each with two blank lines above it, right before the statement assigning
    ``before_assignment_of`` (its leading comment kept above the new code... below it: the comment stays with the
    table), else at the end of the file."""
    tree = parse_source(source)
    body = list(tree.body)
    text = snippet.replace("\r\n", "\n").replace("\n", tree.default_newline)
    new = [_spaced(statement) for statement in parse_source(text, "<patch snippet>").body]
    position = len(body)
    if before_assignment_of is not None:
        found = [index for index, statement in enumerate(body) if _assigns(statement, before_assignment_of)]
        if not found:
            raise InsertError("monkey_patch.py", f"no top-level assignment of {before_assignment_of}")
        position = found[0]
        # The table's own comment lines stay above the table.
        table = body[position]
        comments = [line for line in table.leading_lines if line.comment is not None]
        body[position] = table.with_changes(leading_lines=[BLANK_LINE] * TOP_LEVEL_BLANK_LINES + comments)
    body[position:position] = new
    return tree.with_changes(body=body).code


def add_table_entry(source: str, table: str, key: str, function: str) -> str:
    """``"key": function,`` as the last entry of the dict literal assigned to ``table`` (unless ``key`` is there)."""
    tree = parse_source(source)
    body = list(tree.body)
    for index, statement in enumerate(body):
        if not _assigns(statement, table):
            continue
        assign = statement.body[0]
        if not isinstance(assign.value, cst.Dict):
            raise InsertError("monkey_patch.py", f"{table} is not a dict literal")
        elements = list(assign.value.elements)
        keys = [
            e.key.evaluated_value
            for e in elements
            if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
        ]
        if key in keys:
            return source
        element = cst.DictElement(key=cst.SimpleString(f'"{key}"'), value=cst.Name(function))
        if elements:
            value = insert_after(assign.value, len(elements) - 1, element)
        else:
            value = assign.value.with_changes(elements=[element])
        body[index] = statement.with_changes(body=[assign.with_changes(value=value)])
        return tree.with_changes(body=body).code
    raise InsertError("monkey_patch.py", f"no top-level assignment of {table}")


def _straight_import(statement: cst.CSTNode) -> str | None:
    """``a.b`` of a top-level ``import a.b`` line (one name), else None."""
    if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Import):
        names = statement.body[0].names
        if len(names) == 1 and names[0].asname is None:
            return dotted_name(names[0].name)
    return None


def add_plain_import(source: str, module: str) -> str:
    """``import module`` at its sorted place among the file's ``import x`` lines of the same section (stdlib,
    third party, first party), unless it is imported; a file without such lines of that section is left as it is."""
    tree = parse_source(source)
    body = list(tree.body)
    straight = [(index, _straight_import(statement)) for index, statement in enumerate(body)]
    straight = [(index, name) for index, name in straight if name is not None]
    if any(name == module for _, name in straight):
        return source
    section = [(index, name) for index, name in straight if import_section(name) == import_section(module)]
    if not section:
        return source
    after = [index for index, name in section if straight_import_key(name) > straight_import_key(module)]
    line = cst.parse_statement(f"import {module}{tree.default_newline}")
    if after:
        index = after[0]
        line = line.with_changes(leading_lines=body[index].leading_lines)
        body[index] = body[index].with_changes(leading_lines=[])
    else:
        index = section[-1][0] + 1
    body.insert(index, line)
    return tree.with_changes(body=body).code


def remove_definitions(source: str, names: set[str]) -> str:
    """``source`` without the top-level functions and classes named in ``names``."""
    tree = parse_source(source)
    body = [
        statement
        for statement in tree.body
        if not (isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and statement.name.value in names)
    ]
    return tree.with_changes(body=body).code
