"""Import order as ruff's isort rules apply it with this repository's settings.

Settings mirrored (pyproject.toml): force-single-line, lines-between-types = 1, known-first-party liger_kernel,
line-length 120 (a single import longer, its comment not counted, is wrapped in parentheses), and ruff's defaults: order-by-type, case-insensitive comparison with natural ordering of digit runs, straight
``import x`` before ``from x import y`` inside a section, sections future / stdlib / third-party / first-party /
local-folder. The tests check these keys against ``ruff check --select I --fix`` on generated import blocks.
"""

import functools
import re
import sys

from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from tools.kernelgen.insert.errors import parse_source

DIGITS = "0123456789"
_DIGIT_OR_BLANK = re.compile(r"[0-9\s]")  # \s: what str.isspace() calls blank
FIRST_PARTY = frozenset({"liger_kernel"})
LINE_LENGTH = 120

SECTION_FUTURE, SECTION_STDLIB, SECTION_THIRD_PARTY, SECTION_FIRST_PARTY, SECTION_LOCAL = range(5)
KIND_STRAIGHT, KIND_FROM = 0, 1
MEMBER_CONSTANT, MEMBER_CLASS, MEMBER_VARIABLE = range(3)
BLANK_LINE = cst.EmptyLine(indent=False)


def _is_digit(text: str, index: int) -> bool:
    return index < len(text) and text[index] in DIGITS


def _compare_right_aligned(a: str, i: int, b: str, j: int) -> int:
    """Numbers without leading zeros: the longer digit run is larger; equal lengths compare by first difference."""
    bias = 0
    while True:
        a_digit, b_digit = _is_digit(a, i), _is_digit(b, j)
        if not a_digit and not b_digit:
            return bias
        if not a_digit:
            return -1
        if not b_digit:
            return 1
        if bias == 0 and a[i] != b[j]:
            bias = -1 if a[i] < b[j] else 1
        i, j = i + 1, j + 1


def _compare_left_aligned(a: str, i: int, b: str, j: int) -> int:
    """Digit runs with a leading zero compare digit by digit, like decimal fractions."""
    while True:
        a_digit, b_digit = _is_digit(a, i), _is_digit(b, j)
        if not a_digit and not b_digit:
            return 0
        if not a_digit:
            return -1
        if not b_digit:
            return 1
        if a[i] != b[j]:
            return -1 if a[i] < b[j] else 1
        i, j = i + 1, j + 1


def natural_compare(a: str, b: str) -> int:
    """Natural-order comparison (strnatcmp, as the ``natord`` crate ruff uses): ``x2 < x10``."""
    i = j = 0
    while True:
        while i < len(a) and a[i].isspace():
            i += 1
        while j < len(b) and b[j].isspace():
            j += 1
        if i >= len(a) or j >= len(b):
            return (i < len(a)) - (j < len(b))
        if _is_digit(a, i) and _is_digit(b, j):
            aligned = _compare_left_aligned if "0" in (a[i], b[j]) else _compare_right_aligned
            result = aligned(a, i, b, j)
            if result:
                return result
        if a[i] != b[j]:
            return -1 if a[i] < b[j] else 1
        i, j = i + 1, j + 1


@functools.total_ordering
class NaturalText:
    """A string that orders naturally, so it can sit inside tuple sort keys."""

    __slots__ = ("text", "plain")

    def __init__(self, text: str) -> None:
        self.text = text
        # Without digits or blanks the natural order is the plain one, which Python compares much faster.
        self.plain = _DIGIT_OR_BLANK.search(text) is None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NaturalText):
            return False
        if self.text == other.text or (self.plain and other.plain):
            return self.text == other.text
        return natural_compare(self.text, other.text) == 0

    def __lt__(self, other: "NaturalText") -> bool:
        if self.plain and other.plain:
            return self.text < other.text
        return natural_compare(self.text, other.text) < 0

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"NaturalText({self.text!r})"


def _name_key(name: str) -> tuple[NaturalText, NaturalText]:
    # Case-insensitive first; the case-sensitive comparison only breaks ties (``aB`` before ``ab``).
    return NaturalText(name.lower()), NaturalText(name)


def member_type(name: str) -> int:
    """order-by-type: CONSTANTS (every cased letter upper, length > 1), then Classes, then everything else."""
    if len(name) > 1 and not any(char.islower() for char in name) and any(char.isupper() for char in name):
        return MEMBER_CONSTANT
    if name[:1].isupper():
        return MEMBER_CLASS
    return MEMBER_VARIABLE


def member_key(name: str) -> tuple:
    """Sort key of one imported name; also used to order ``__all__`` entries and lazy tables."""
    return (member_type(name), *_name_key(name))


def from_import_key(module: str, name: str, asname: str | None = None, level: int = 0) -> tuple:
    """Sort key of ``from {'.' * level}{module} import {name} as {asname}`` inside its section."""
    # Relative imports go furthest-first (``from ..`` before ``from .``), ruff's default.
    return (-level, *_name_key(module), *member_key(name), NaturalText(asname or ""))


def straight_import_key(module: str, asname: str | None = None) -> tuple:
    return (*_name_key(module), NaturalText(asname or ""))


def import_section(module: str, level: int = 0, first_party: frozenset[str] = FIRST_PARTY) -> int:
    if level:
        return SECTION_LOCAL
    root = module.split(".", 1)[0]
    if root == "__future__":
        return SECTION_FUTURE
    if root in first_party:
        return SECTION_FIRST_PARTY
    if root in sys.stdlib_module_names:
        return SECTION_STDLIB
    return SECTION_THIRD_PARTY


def dotted_name(node: cst.BaseExpression | None) -> str:
    """``a.b.c`` for a Name/Attribute chain, ``""`` for None (``from . import x``)."""
    if node is None:
        return ""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted_name(node.value)}.{node.attr.value}"
    raise TypeError(f"not a dotted name: {type(node).__name__}")


@dataclass(frozen=True)
class ImportEntry:
    """One import statement line, reduced to what ordering needs."""

    statement: cst.SimpleStatementLine
    group: tuple[int, int]  # (section, kind): a blank line separates different groups
    key: tuple
    single_line: bool  # force-single-line holds: exactly one name, in parentheses only past the line length


def is_import_line(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and bool(statement.body)
        and all(isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body)
    )


def import_entry(statement: cst.SimpleStatementLine, first_party: frozenset[str] = FIRST_PARTY) -> ImportEntry:
    """Key of an import line (the first import on it; lines with ``;`` are flagged as not single-line)."""
    small = statement.body[0]
    single_line = len(statement.body) == 1
    if isinstance(small, cst.Import):
        alias = small.names[0]
        module = dotted_name(alias.name)
        asname = alias.asname.name.value if alias.asname else None
        group = (import_section(module, 0, first_party), KIND_STRAIGHT)
        return ImportEntry(statement, group, straight_import_key(module, asname), single_line and len(small.names) == 1)
    module = dotted_name(small.module)
    level = len(small.relative)
    if isinstance(small.names, cst.ImportStar):
        name, asname, count = "*", None, 1
    else:
        alias = small.names[0]
        name = dotted_name(alias.name)
        asname = alias.asname.name.value if alias.asname else None
        count = len(small.names)
    group = (import_section(module, level, first_party), KIND_FROM)
    single_line = single_line and count == 1 and (small.lpar is None or _too_long_unwrapped(small))
    return ImportEntry(statement, group, from_import_key(module, name, asname, level), single_line)


def _too_long_unwrapped(small: cst.ImportFrom) -> bool:
    """Whether the one-name import would pass the line length on one line (a trailing comment does not count):
    then ruff writes it in parentheses."""
    alias = small.names[0]
    text = f"from {'.' * len(small.relative)}{dotted_name(small.module) if small.module else ''} import "
    text += dotted_name(alias.name) + (f" as {alias.asname.name.value}" if alias.asname else "")
    return len(text) > LINE_LENGTH


def import_blocks(body: Sequence[cst.BaseStatement]) -> Iterator[list[int]]:
    """Index runs of consecutive import lines: ruff sorts each run on its own."""
    run: list[int] = []
    for index, statement in enumerate(body):
        if is_import_line(statement):
            run.append(index)
            continue
        if run:
            yield run
        run = []
    if run:
        yield run


def leading_blank_lines(lines: Sequence[cst.EmptyLine]) -> int:
    """Blank lines above a statement, down to its first comment line."""
    count = 0
    for line in lines:
        if line.comment is not None:
            break
        count += 1
    return count


def _lines_after_imports_problem(statement: cst.BaseStatement) -> str | None:
    """ruff's automatic lines-after-imports at module level: 2 blank lines before a def or class, else 1."""
    wanted = 2 if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) else 1
    found = leading_blank_lines(statement.leading_lines)
    return None if found == wanted else f"{found} blank lines after the imports, ruff wants {wanted}"


def _leading_layout_problem(
    lines: Sequence[cst.EmptyLine], group: tuple[int, int], previous: tuple[int, int]
) -> str | None:
    """What ruff would rewrite in the lines above a non-first import of a block, or None.

    Wanted blank lines (all above the comments, none among them): one between sections; one between straight and
    from-imports of a section (lines-between-types), plus one when comments follow; inside a group none, or one
    above comments. Checked against ruff's output in the tests.
    """
    blanks_before_comments = leading_blank_lines(lines)
    rest = lines[blanks_before_comments:]
    if any(line.comment is None for line in rest):
        return "blank line after a comment"
    comments = 1 if rest else 0
    if group[0] != previous[0]:
        wanted = 1
    elif group[1] != previous[1]:
        wanted = 1 + comments
    else:
        wanted = comments
    if blanks_before_comments == wanted:
        return None
    return f"{blanks_before_comments} blank lines above an import, ruff wants {wanted}"


def statement_bodies(body: Sequence[cst.BaseStatement]) -> Iterator[Sequence[cst.BaseStatement]]:
    """``body`` and every statement list nested in it (if / else / try / with / def / class blocks).

    Walks statements only, never expressions: a full CST visitor is several times slower.
    """
    yield body
    for statement in body:
        if not isinstance(statement, cst.BaseCompoundStatement):
            continue
        parts = [statement]
        while parts:
            part = parts.pop()
            block = getattr(part, "body", None)
            if isinstance(block, cst.IndentedBlock):
                yield from statement_bodies(block.body)
            orelse = getattr(part, "orelse", None)
            if orelse is not None:
                parts.append(orelse)
            parts.extend(getattr(part, "handlers", ()))
            final = getattr(part, "finalbody", None)
            if final is not None:
                parts.append(final)


def import_order_problems(source: str, first_party: frozenset[str] = FIRST_PARTY) -> list[str]:
    """Everything ``ruff check --select I`` (this repo's settings) would reorder or re-space, as messages.

    Covers order, force-single-line, blank lines between imports of a block and after a module-level block; not
    the whitespace inside a statement.
    """
    problems = []
    module_body = parse_source(source).body
    for body in statement_bodies(module_body):
        for run in import_blocks(body):
            if body is module_body and run[-1] + 1 < len(body):
                after = _lines_after_imports_problem(body[run[-1] + 1])
                if after:
                    problems.append(after)
            entries = [import_entry(body[index], first_party) for index in run]
            for position, entry in enumerate(entries):
                if not entry.single_line:
                    problems.append(f"not force-single-line: {_statement_code(entry)}")
                if position == 0:
                    continue
                previous = entries[position - 1]
                if (entry.group, entry.key) < (previous.group, previous.key):
                    problems.append(f"out of order: {_statement_code(entry)}")
                layout = _leading_layout_problem(entry.statement.leading_lines, entry.group, previous.group)
                if layout:
                    problems.append(f"{layout}: {_statement_code(entry)}")
    return problems


def _statement_code(entry: ImportEntry) -> str:
    """The import line a problem names (printed only then: a file's every import line would cost a code
    generation each)."""
    return cst.Module(body=[entry.statement.with_changes(leading_lines=())]).code.strip()


def imports_are_sorted(source: str, first_party: frozenset[str] = FIRST_PARTY) -> bool:
    return not import_order_problems(source, first_party)
