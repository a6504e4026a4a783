"""``add_import``: one ``from module import name`` line at its sorted place among its package's imports."""

from typing import Literal

import libcst as cst

from tools.kernelgen.insert.errors import SOURCE_PLACEHOLDER
from tools.kernelgen.insert.errors import InsertError
from tools.kernelgen.insert.errors import parse_source
from tools.kernelgen.insert.errors import replace_in_statement
from tools.kernelgen.insert.ordering import LINE_LENGTH
from tools.kernelgen.insert.ordering import dotted_name
from tools.kernelgen.insert.ordering import from_import_key
from tools.kernelgen.insert.ordering import import_blocks

Scope = Literal["module", "type_checking"]


def is_type_checking_test(test: cst.BaseExpression) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    if isinstance(test, cst.Name):
        return test.value == "TYPE_CHECKING"
    return isinstance(test, cst.Attribute) and test.attr.value == "TYPE_CHECKING"


def find_type_checking_block(module: cst.Module) -> int | None:
    """Index of the module-level ``if TYPE_CHECKING:`` statement."""
    for index, statement in enumerate(module.body):
        if isinstance(statement, cst.If) and is_type_checking_test(statement.test):
            if isinstance(statement.body, cst.IndentedBlock):
                return index
    return None


def absolute_from_import(statement: cst.CSTNode) -> cst.ImportFrom | None:
    """The ``from x import ...`` of a line holding exactly that (absolute, not ``*``), else None."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if not isinstance(small, cst.ImportFrom) or small.relative or small.module is None:
        return None
    if isinstance(small.names, cst.ImportStar):
        return None
    return small


def imported_names(statement: cst.CSTNode, module: str) -> list[str]:
    """Names (not aliases) a line imports from ``module``."""
    small = absolute_from_import(statement)
    if small is None or dotted_name(small.module) != module:
        return []
    return [dotted_name(alias.name) for alias in small.names]


def _import_line(module: str, name: str, noqa: bool, indent: int) -> cst.SimpleStatementLine:
    """One import, wrapped as ruff's isort wraps it when the statement (``indent`` included, its comment not) passes
    the line length: the name on a line of its own inside parentheses, the comment after it."""
    comment = "  # noqa: F401" if noqa else ""
    text = f"from {module} import {name}{comment}\n"
    if indent + len(f"from {module} import {name}") > LINE_LENGTH:
        text = f"from {module} import (\n    {name},{comment}\n)\n"
    statement = cst.parse_statement(text)
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement


def _first_key(statement: cst.CSTNode) -> tuple:
    small = absolute_from_import(statement)
    alias = small.names[0]
    asname = alias.asname.name.value if alias.asname else None
    return from_import_key(dotted_name(small.module), dotted_name(alias.name), asname)


def insert_import_line(
    body: list[cst.BaseStatement], module: str, name: str, noqa: bool, where: str, indent: int = 0
) -> list[cst.BaseStatement] | None:
    """The body with the import added, or None when ``name`` is already imported from ``module`` there; ``indent``:
    the columns the body is indented by."""
    if any(name in imported_names(statement, module) for statement in body):
        return None
    package = module.split(".", 1)[0]

    def is_neighbour(index: int) -> bool:
        small = absolute_from_import(body[index])
        return small is not None and dotted_name(small.module).split(".", 1)[0] == package

    # The run of imports holding most of the package's imports; ties go to the first run.
    runs = [[index for index in run if is_neighbour(index)] for run in import_blocks(body)]
    neighbours = max(runs, key=len, default=[])
    if not neighbours:
        raise InsertError(SOURCE_PLACEHOLDER, f"no `from {package}... import` lines {where} to place {module} among")

    new_key = from_import_key(module, name)
    new_line = _import_line(module, name, noqa, indent)
    keys = {index: _first_key(body[index]) for index in neighbours}
    before = [index for index in neighbours if keys[index] < new_key]
    body = list(body)
    if before:
        anchor = max(before, key=keys.__getitem__)
        body.insert(anchor + 1, new_line)
        return body
    anchor = min(neighbours, key=keys.__getitem__)
    # The new line sorts first: it takes the anchor's leading comment banner and blank lines, so a banner that
    # introduces the group stays above the whole group.
    banner = body[anchor].leading_lines
    body[anchor] = body[anchor].with_changes(leading_lines=())
    body.insert(anchor, new_line.with_changes(leading_lines=banner))
    return body


def add_import(source: str, module: str, name: str, *, noqa: bool = False, within: Scope = "module") -> str:
    """Ensure ``from {module} import {name}`` exists in the module body or the ``if TYPE_CHECKING:`` block.

    Any existing import of that name from that module (inside a parenthesised list, or with ``as``) counts. The new
    line is single-line (force-single-line) and goes right after the greatest import of the same top-level package
    that sorts before it, else right before the least that sorts after it.
    """
    tree = parse_source(source)
    if within == "module":
        body = insert_import_line(list(tree.body), module, name, noqa, "at module level")
        return source if body is None else tree.with_changes(body=body).code
    if within != "type_checking":
        raise ValueError(f"within must be 'module' or 'type_checking', not {within!r}")
    index = find_type_checking_block(tree)
    if index is None:
        raise InsertError(SOURCE_PLACEHOLDER, "no `if TYPE_CHECKING:` block at module level")
    block = tree.body[index]
    where = "in the `if TYPE_CHECKING:` block"
    indent = len(block.body.indent) if block.body.indent is not None else len(tree.default_indent)
    body = insert_import_line(list(block.body.body), module, name, noqa, where, indent)
    if body is None:
        return source
    new_block = block.with_changes(body=block.body.with_changes(body=body))
    return replace_in_statement(tree, index, block, new_block).code
