"""``add_to_all``: one name in ``__all__`` (the plain assignment, or the lazily extended list)."""

import libcst as cst
import libcst.matchers as m

from tools.kernelgen.insert.errors import parse_source
from tools.kernelgen.insert.errors import replace_in_statement
from tools.kernelgen.insert.ordering import member_key
from tools.kernelgen.insert.sequences import insert_sorted
from tools.kernelgen.insert.sequences import make_string
from tools.kernelgen.insert.sequences import quote_style
from tools.kernelgen.insert.sequences import string_value

_ALL = m.Name("__all__")
_SEQUENCE = m.List() | m.Tuple()
_ALL_ASSIGNMENT = m.Assign(targets=[m.AssignTarget(target=_ALL)], value=_SEQUENCE) | m.AnnAssign(
    target=_ALL, value=_SEQUENCE
)
_ALL_EXTEND = m.Call(func=m.Attribute(value=_ALL, attr=m.Name("extend")), args=[m.Arg(value=_SEQUENCE)])


def entry_key(element: cst.BaseElement) -> tuple | None:
    """isort-style key of a string entry (CONSTANTS, Classes, rest), None for anything else."""
    text = string_value(getattr(element, "value", None))
    return None if text is None else member_key(text)


def _all_assignment(module: cst.Module) -> tuple[int, cst.List | cst.Tuple] | None:
    """(statement index, literal) of the module-level ``__all__ = [...]`` (or tuple)."""
    for index, statement in enumerate(module.body):
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if m.matches(small, _ALL_ASSIGNMENT):
                    return index, small.value
    return None


def _all_extensions(module: cst.Module) -> list[tuple[int, cst.List | cst.Tuple]]:
    """(statement index, literal argument) of ``__all__.extend([...])`` calls under module-level ``if``."""
    found = []
    for index, statement in enumerate(module.body):
        if isinstance(statement, cst.If):
            for call in m.findall(statement, _ALL_EXTEND):
                found.append((index, call.args[0].value))
    return found


def exported_names(module: cst.Module) -> set[str]:
    located = [_all_assignment(module), *_all_extensions(module)]
    names = set()
    for found in located:
        if found is not None:
            names.update(string_value(element.value) for element in found[1].elements)
    names.discard(None)
    return names


def add_to_all(source: str, name: str, *, lazy: bool = False) -> str:
    """Add ``"name"`` to ``__all__`` at its sorted place, in the literal's quote style and layout.

    ``lazy=True`` targets the list of ``__all__.extend([...])`` under a module-level ``if`` (the
    transformers-dependent exports). A name already in any of them, or no such list, leaves ``source`` unchanged.
    """
    tree = parse_source(source)
    if name in exported_names(tree):
        return source
    if lazy:
        extensions = _all_extensions(tree)
        found = extensions[0] if extensions else None
    else:
        found = _all_assignment(tree)
    if found is None:
        return source
    index, target = found
    new_element = cst.Element(value=make_string(name, quote_style(target)))
    updated = insert_sorted(target, new_element, member_key(name), entry_key)
    return replace_in_statement(tree, index, target, updated).code
