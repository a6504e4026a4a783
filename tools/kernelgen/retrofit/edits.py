"""Targeted edits of existing Python files with libcst: everything not named by an edit stays byte for byte.

Edits are located by what ``ast`` reported (function qualified names, ``(line, column)`` of calls, names and
statements), matched against libcst's ``PositionProvider``; comments, blank lines, quotes and the file's own style
survive. Each edit is one small change: add a parameter, add an argument to one call, insert a statement before or
after another, rename one name, append ``None`` to a ``return`` tuple, extend ``extra_repr``'s f-string, append a
statement to a body, add a method to a class.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

import libcst as cst

from libcst.metadata import MetadataWrapper
from libcst.metadata import PositionProvider


class EditError(ValueError):
    """An edit that could not be applied as planned (the file is not shaped as the analysis saw it)."""


@dataclass(frozen=True)
class AddParam:
    function: str  # qualified name: "func" or "Class.method"
    text: str  # "scale=1.0", "scale: float = 1.0" or "scale"
    before: str | None = None  # insert before this parameter; None: after the last positional parameter


@dataclass(frozen=True)
class AddArg:
    position: tuple[int, int]  # (line, column) where the call starts
    value: str
    keyword: str | None = None  # keyword argument name; None: positional
    index: int | None = None  # positional index to insert at; None: after the last positional argument
    end: tuple[int, int] | None = None  # where the call ends (``f(a)(b)``: two calls start at one place)


@dataclass(frozen=True)
class InsertStatement:
    line: int  # the anchor statement's first line
    text: str  # one simple statement, without indentation
    after: bool = False


@dataclass(frozen=True)
class RenameAt:
    position: tuple[int, int]  # (line, column) of one Name
    new: str


@dataclass(frozen=True)
class ReplaceExpression:
    start: tuple[int, int]  # (line, column) where the expression starts
    end: tuple[int, int]  # (line, column) where it ends
    new: str  # the expression that replaces it


@dataclass(frozen=True)
class AppendReturnValue:
    line: int  # the return statement's line
    value: str = "None"


@dataclass(frozen=True)
class AppendStatement:
    function: str  # qualified name
    text: str


@dataclass(frozen=True)
class ClassAttribute:
    class_name: str
    text: str  # "scale = 1.0", placed first in the class body (after its docstring)
    comment: str = ""


@dataclass(frozen=True)
class ExtendRepr:
    class_name: str
    field: str  # appended as ", field={self.field}"


@dataclass
class FileEdits:
    params: list[AddParam] = field(default_factory=list)
    args: list[AddArg] = field(default_factory=list)
    statements: list[InsertStatement] = field(default_factory=list)
    renames: list[RenameAt] = field(default_factory=list)
    returns: list[AppendReturnValue] = field(default_factory=list)
    appends: list[AppendStatement] = field(default_factory=list)
    reprs: list[ExtendRepr] = field(default_factory=list)
    attributes: list[ClassAttribute] = field(default_factory=list)
    replacements: list[ReplaceExpression] = field(default_factory=list)

    @property
    def all(self) -> list:
        every = [*self.params, *self.args, *self.statements, *self.renames, *self.returns, *self.appends]
        return every + [*self.reprs, *self.attributes, *self.replacements]

    @property
    def empty(self) -> bool:
        return not self.all


def _insert_in_sequence(items: list, index: int, new, default_comma: cst.Comma) -> list:
    """``items`` (Params or Args, each owning the comma after it) with ``new`` at ``index``, commas kept in the
    file's style: the new item takes the comma of the item it follows (or precedes), line breaks included."""
    items = list(items)
    if not items:
        return [new]
    if index >= len(items):
        last = items[-1]
        # The old last item's trailing comma (maybe none) moves to the new last item; the old last gets the comma
        # its predecessor has (``, `` or a comma and a new line), so the new item sits as the others do.
        separator = items[-2].comma if len(items) > 1 and isinstance(items[-2].comma, cst.Comma) else default_comma
        items[-1] = last.with_changes(comma=separator)
        return [*items, new.with_changes(comma=last.comma)]
    anchor = items[index]
    separator = anchor.comma if isinstance(anchor.comma, cst.Comma) else default_comma
    if index > 0 and isinstance(items[index - 1].comma, cst.Comma):
        separator = items[index - 1].comma
    return [*items[:index], new.with_changes(comma=separator), *items[index:]]


class _Editor(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, edits: FileEdits):
        super().__init__()
        self.edits = edits
        self.scope: list[str] = []
        self.used: set[object] = set()
        self.args_at: dict[tuple[int, int], list[AddArg]] = {}
        for arg in edits.args:
            self.args_at.setdefault(arg.position, []).append(arg)

    def _end(self, node) -> tuple[int, int]:
        position = self.get_metadata(PositionProvider, node).end
        return position.line, position.column

    def _start(self, node) -> tuple[int, int]:
        position = self.get_metadata(PositionProvider, node).start
        return position.line, position.column

    # Scopes ---------------------------------------------------------------------------------------------------
    def visit_ClassDef(self, node):
        self.scope.append(node.name.value)

    def visit_FunctionDef(self, node):
        self.scope.append(node.name.value)

    def leave_ClassDef(self, original, updated):
        name = self.scope.pop()
        attributes = [edit for edit in self.edits.attributes if edit.class_name == name]
        if attributes:
            body = list(updated.body.body)
            docstring = bool(body) and _is_docstring(body[0])
            index = 1 if docstring else 0
            for offset, edit in enumerate(attributes):
                lines = [cst.EmptyLine(indent=False)] if docstring and offset == 0 else []
                if edit.comment:
                    lines.append(cst.EmptyLine(comment=cst.Comment(f"# {edit.comment}")))
                body.insert(index + offset, cst.parse_statement(edit.text + "\n").with_changes(leading_lines=lines))
                self.used.add(edit)
            updated = updated.with_changes(body=updated.body.with_changes(body=body))
        for edit in self.edits.reprs:
            if edit.class_name == name and not _has_method(updated, "extra_repr"):
                method = cst.parse_statement(
                    f'def extra_repr(self) -> str:\n    return f"{edit.field}={{self.{edit.field}}}"\n'
                )
                body = list(updated.body.body)
                body.append(method.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
                updated = updated.with_changes(body=updated.body.with_changes(body=body))
                self.used.add(edit)
        return updated

    def leave_FunctionDef(self, original, updated):
        qualified = ".".join(self.scope)
        self.scope.pop()
        for edit in self.edits.params:
            if edit.function == qualified:
                updated = updated.with_changes(params=self._add_param(updated.params, edit))
                self.used.add(edit)
        for edit in self.edits.appends:
            if edit.function == qualified:
                statement = cst.parse_statement(edit.text + "\n")
                body = updated.body
                if not isinstance(body, cst.IndentedBlock):
                    raise EditError(f"{qualified}: a one-line body cannot take a statement")
                updated = updated.with_changes(body=body.with_changes(body=[*body.body, statement]))
                self.used.add(edit)
        if qualified.endswith(".extra_repr"):
            class_name = qualified.rsplit(".", 1)[0]
            for edit in self.edits.reprs:
                if edit.class_name == class_name:
                    updated = updated.visit(_ReprExtender(edit.field))
                    self.used.add(edit)
        return updated

    def _add_param(self, params: cst.Parameters, edit: AddParam) -> cst.Parameters:
        head, _, default = edit.text.partition("=")
        name, _, annotation = head.partition(":")
        new = cst.Param(
            cst.Name(name.strip()),
            annotation=cst.Annotation(cst.parse_expression(annotation.strip())) if annotation else None,
            default=cst.parse_expression(default.strip()) if default else None,
            # PEP 8: ``name=default``, but ``name: type = default``.
            equal=(_spaced_equal() if annotation else _tight_equal()) if default else cst.MaybeSentinel.DEFAULT,
        )
        positional = list(params.params)
        if edit.before is None:
            index = len(positional)
        else:
            names = [p.name.value for p in positional]
            if edit.before not in names:
                raise EditError(f"no parameter {edit.before} to insert {name} before")
            index = names.index(edit.before)
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        return params.with_changes(params=_insert_in_sequence(positional, index, new, comma))

    # Calls ----------------------------------------------------------------------------------------------------
    def leave_Call(self, original, updated):
        end = self._end(original)
        edits = [e for e in self.args_at.get(self._start(original), []) if e.end is None or e.end == end]
        if not edits:
            return updated
        args = list(updated.args)
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        for edit in edits:
            value = cst.parse_expression(edit.value)
            positional = [a for a in args if a.keyword is None and not a.star]
            if edit.keyword is not None:
                new = cst.Arg(
                    value,
                    keyword=cst.Name(edit.keyword),
                    equal=_tight_equal(),
                )
                index = len(args)
            else:
                new = cst.Arg(value)
                index = len(positional) if edit.index is None else edit.index
            args = _insert_in_sequence(args, index, new, comma)
            self.used.add(edit)
        return updated.with_changes(args=args)

    # Expressions, names and returns ----------------------------------------------------------------------------
    def on_leave(self, original, updated):
        updated = super().on_leave(original, updated)
        if self.edits.replacements and isinstance(original, cst.BaseExpression) and not getattr(original, "lpar", ()):
            code_range = self.get_metadata(PositionProvider, original, None)
            if code_range is not None:
                span = ((code_range.start.line, code_range.start.column), (code_range.end.line, code_range.end.column))
                for edit in self.edits.replacements:
                    if (edit.start, edit.end) == span and edit not in self.used:
                        self.used.add(edit)
                        return cst.parse_expression(edit.new)
        return updated

    def leave_Name(self, original, updated):
        for edit in self.edits.renames:
            if self._start(original) == edit.position:
                self.used.add(edit)
                return updated.with_changes(value=edit.new)
        return updated

    def leave_Return(self, original, updated):
        for edit in self.edits.returns:
            if self._start(original)[0] == edit.line:
                value = updated.value
                if value is None:
                    raise EditError(f"line {edit.line}: return without a value")
                if not isinstance(value, cst.Tuple):  # one gradient returned bare: the tuple starts here
                    value = cst.Tuple([cst.Element(value)], lpar=[], rpar=[])
                elements = list(value.elements)
                extra = cst.Element(cst.parse_expression(edit.value))
                comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                elements = _insert_in_sequence(elements, len(elements), extra, comma)
                updated = updated.with_changes(value=value.with_changes(elements=elements))
                self.used.add(edit)
        return updated

    # Statements -----------------------------------------------------------------------------------------------
    def _insert_statements(self, original_body, updated_body) -> list:
        result = []
        for original, updated in zip(original_body, updated_body):
            line = self._start(original)[0]
            before = [e for e in self.edits.statements if e.line == line and not e.after]
            after = [e for e in self.edits.statements if e.line == line and e.after]
            if before:
                # The anchor keeps its comments; blank lines above it go above the new statements.
                leading = list(updated.leading_lines)
                split = next((i for i, empty in enumerate(leading) if empty.comment is not None), len(leading))
                for index, edit in enumerate(before):
                    statement = cst.parse_statement(edit.text + "\n")
                    result.append(statement.with_changes(leading_lines=leading[:split] if index == 0 else []))
                    self.used.add(edit)
                updated = updated.with_changes(leading_lines=leading[split:])
            result.append(updated)
            for edit in after:
                result.append(cst.parse_statement(edit.text + "\n"))
                self.used.add(edit)
        return result

    def leave_IndentedBlock(self, original, updated):
        if not self.edits.statements:
            return updated
        return updated.with_changes(body=self._insert_statements(original.body, updated.body))

    def leave_Module(self, original, updated):
        if not self.edits.statements:
            return updated
        return updated.with_changes(body=self._insert_statements(original.body, updated.body))


def _is_docstring(statement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _tight_equal() -> cst.AssignEqual:
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def _spaced_equal() -> cst.AssignEqual:
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" "))


def _has_method(node: cst.ClassDef, name: str) -> bool:
    return any(isinstance(s, cst.FunctionDef) and s.name.value == name for s in node.body.body)


class _ReprExtender(cst.CSTTransformer):
    """Appends ``, field={self.field}`` to the f-string ``extra_repr`` returns (the last part of a concatenation)."""

    def __init__(self, field_name: str):
        super().__init__()
        self.field = field_name

    def leave_Return(self, original, updated):
        value = updated.value
        extended = _extend_string(value, self.field)
        if extended is None:
            raise EditError("extra_repr does not return an f-string")
        return updated.with_changes(value=extended)


def _extend_string(value, field_name: str):
    if isinstance(value, cst.FormattedString):
        parts = [
            *value.parts,
            cst.FormattedStringText(f", {field_name}="),
            cst.FormattedStringExpression(cst.parse_expression(f"self.{field_name}")),
        ]
        return value.with_changes(parts=parts)
    if isinstance(value, cst.ConcatenatedString):
        right = _extend_string(value.right, field_name)
        return None if right is None else value.with_changes(right=right)
    return None


def apply_edits(source: str, edits: FileEdits, path: str) -> str:
    """``source`` with ``edits`` applied; raises ``EditError`` when one of them found nothing to change."""
    if edits.empty:
        return source
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        raise EditError(f"{path} does not parse: {error.message}") from None
    editor = _Editor(edits)
    updated = MetadataWrapper(module).visit(editor)
    missed = [edit for edit in edits.all if edit not in editor.used]
    if missed:
        raise EditError(f"{path}: an edit found nothing to change ({missed[0]})")
    return updated.code


__all__ = [
    "AddArg",
    "AddParam",
    "AppendReturnValue",
    "AppendStatement",
    "ClassAttribute",
    "EditError",
    "ExtendRepr",
    "FileEdits",
    "InsertStatement",
    "RenameAt",
    "ReplaceExpression",
    "apply_edits",
]
