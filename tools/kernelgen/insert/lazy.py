"""``add_lazy_symbol``: register a transformers-dependent name in ``transformers/__init__.py``.

Two table layouts are understood:

* a dict literal ``NAME = {"symbol": "module", ...}`` (module level or inside ``__getattr__``);
* set literals inside ``def __getattr__(name)``, each guarding ``if name in the_set:`` followed by
  ``importlib.import_module("module")``. A name whose module has no set yet gets a new set and branch of the
  same shape, placed before the closing ``raise AttributeError``.
"""

import libcst as cst
import libcst.matchers as m

from tools.kernelgen.insert.errors import SOURCE_PLACEHOLDER
from tools.kernelgen.insert.errors import InsertError
from tools.kernelgen.insert.errors import parse_source
from tools.kernelgen.insert.errors import replace_in_statement
from tools.kernelgen.insert.exports import add_to_all
from tools.kernelgen.insert.exports import entry_key
from tools.kernelgen.insert.imports import add_import
from tools.kernelgen.insert.imports import find_type_checking_block
from tools.kernelgen.insert.ordering import BLANK_LINE
from tools.kernelgen.insert.ordering import member_key
from tools.kernelgen.insert.sequences import insert_sorted
from tools.kernelgen.insert.sequences import make_string
from tools.kernelgen.insert.sequences import quote_style
from tools.kernelgen.insert.sequences import string_value

# ``indent=False``: a blank line inside a block must not get the block's indentation as trailing spaces.
_IMPORT_MODULE_CALL = m.Call(
    func=m.Attribute(value=m.Name("importlib"), attr=m.Name("import_module")) | m.Name("import_module"),
    args=[m.Arg(value=m.SimpleString())],
)


def _getattr_index(tree: cst.Module) -> int | None:
    """Index of the module-level ``def __getattr__``."""
    for index, statement in enumerate(tree.body):
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "__getattr__":
            return index
    return None


def _function_body(function: cst.FunctionDef | None) -> list[cst.BaseStatement]:
    if function is None or not isinstance(function.body, cst.IndentedBlock):
        return []
    return list(function.body.body)


def _assignments(statements: list[cst.BaseStatement]) -> dict[str, cst.BaseExpression]:
    """``name -> value`` of single-target assignments among ``statements``."""
    found = {}
    for statement in statements:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if (
                isinstance(small, cst.Assign)
                and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)
            ):
                found[small.targets[0].target.value] = small.value
    return found


def _located_assignments(tree: cst.Module, getattr_index: int | None) -> dict[str, tuple[int, cst.BaseExpression]]:
    """``name -> (top-level statement index, value)`` at module level and directly inside ``__getattr__``.

    An assignment inside ``__getattr__`` shadows a module-level one of the same name.
    """
    located = {}
    for index, statement in enumerate(tree.body):
        for name, value in _assignments([statement]).items():
            located[name] = (index, value)
    if getattr_index is not None:
        for name, value in _assignments(_function_body(tree.body[getattr_index])).items():
            located[name] = (getattr_index, value)
    return located


def _is_string_table(value: cst.BaseExpression) -> bool:
    return (
        isinstance(value, cst.Dict)
        and bool(value.elements)
        and all(
            isinstance(element, cst.DictElement)
            and string_value(element.key) is not None
            and string_value(element.value) is not None
            for element in value.elements
        )
    )


def _parameter_name(function: cst.FunctionDef) -> str:
    return function.params.params[0].name.value if function.params.params else "name"


def _set_branches(function: cst.FunctionDef | None) -> list[tuple[str, str, cst.Call]]:
    """``(set variable, module, import call)`` for each ``if name in <set>:`` branch of ``__getattr__``."""
    if function is None:
        return []
    guard = m.Comparison(
        left=m.Name(_parameter_name(function)),
        comparisons=[m.ComparisonTarget(operator=m.In(), comparator=m.Name())],
    )
    branches = []
    for statement in _function_body(function):
        if isinstance(statement, cst.If) and m.matches(statement.test, guard):
            calls = m.findall(statement.body, _IMPORT_MODULE_CALL)
            if calls:
                variable = statement.test.comparisons[0].comparator.value
                branches.append((variable, string_value(calls[0].args[0].value), calls[0]))
    return branches


def _registered_names(tree: cst.Module, getattr_index: int | None) -> set[str]:
    """Every name some lazy table (dict keys, sets, ``if name == "X"`` branches) already resolves."""
    names = set()
    function = None if getattr_index is None else tree.body[getattr_index]
    for _, value in _located_assignments(tree, getattr_index).values():
        if _is_string_table(value):
            names.update(string_value(element.key) for element in value.elements)
        elif isinstance(value, cst.Set):
            names.update(string_value(element.value) for element in value.elements)
    if function is not None:
        equality = m.Comparison(comparisons=[m.ComparisonTarget(operator=m.Equal(), comparator=m.SimpleString())])
        for comparison in m.findall(function, equality):
            names.add(string_value(comparison.comparisons[0].comparator))
    names.discard(None)
    return names


def _new_set_branch(function: cst.FunctionDef, name: str, module: str, call: cst.Call) -> cst.FunctionDef:
    """Add ``<module>_symbols = {"name"}`` and its ``if`` branch before ``__getattr__``'s final ``raise``."""
    body = _function_body(function)
    taken = set(_assignments(body))
    variable = f"{module.rsplit('.', 1)[-1]}_symbols"
    while variable in taken:
        variable = f"_{variable}"
    parameter = _parameter_name(function)
    quote = call.args[0].value.quote[0]
    import_call = cst.Module(body=[]).code_for_node(call.func)
    snippet = (
        f"def _({parameter}):\n"
        f"    {variable} = {{\n"
        f"        {quote}{name}{quote},\n"
        f"    }}\n\n"
        f"    if {parameter} in {variable}:\n"
        f"        module = {import_call}({quote}{module}{quote})\n"
        f"        return getattr(module, {parameter})\n"
    )
    new_statements = list(cst.parse_module(snippet).body[0].body.body)
    last = body[-1] if body else None
    ends_with_raise = isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Raise)
    position = len(body) - 1 if ends_with_raise else len(body)
    if position < len(body):
        # The new branch takes the blank line above the ``raise``; the ``raise`` gets its own.
        new_statements[0] = new_statements[0].with_changes(leading_lines=body[position].leading_lines)
        body[position] = body[position].with_changes(leading_lines=(BLANK_LINE,))
    else:
        new_statements[0] = new_statements[0].with_changes(leading_lines=(BLANK_LINE,))
    body[position:position] = new_statements
    return function.with_changes(body=function.body.with_changes(body=body))


def _add_to_table(source: str, name: str, module: str) -> str:
    tree = parse_source(source)
    getattr_index = _getattr_index(tree)
    if name in _registered_names(tree, getattr_index):
        return source
    located = _located_assignments(tree, getattr_index)
    for index, value in located.values():
        if _is_string_table(value):
            quote = quote_style(value)
            entry = cst.DictElement(key=make_string(name, quote), value=make_string(module, quote))
            updated = insert_sorted(
                value, entry, member_key(name), lambda element: member_key(element.key.evaluated_value)
            )
            return replace_in_statement(tree, index, value, updated).code
    function = None if getattr_index is None else tree.body[getattr_index]
    branches = _set_branches(function)
    if not branches:
        raise InsertError(
            SOURCE_PLACEHOLDER, "no lazy symbol table: neither a {'name': 'module'} dict nor `if name in {...}` sets"
        )
    for variable, branch_module, _ in branches:
        index, table = located.get(variable, (None, None))
        if branch_module == module and isinstance(table, cst.Set):
            entry = cst.Element(value=make_string(name, quote_style(table)))
            updated = insert_sorted(table, entry, member_key(name), entry_key)
            return replace_in_statement(tree, index, table, updated).code
    new_function = _new_set_branch(function, name, module, branches[0][2])
    return replace_in_statement(tree, getattr_index, function, new_function).code


def add_lazy_symbol(source: str, name: str, module: str) -> str:
    """Register ``name`` (defined in ``module``) as a lazily imported symbol.

    It is imported inside ``if TYPE_CHECKING:`` (when that block exists), added to the lazy table, and appended to
    the ``__all__.extend([...])`` list (when there is one). Each step is skipped when already done.
    """
    tree = parse_source(source)
    if find_type_checking_block(tree) is not None:
        source = add_import(source, module, name, noqa=True, within="type_checking")
    source = _add_to_table(source, name, module)
    return add_to_all(source, name, lazy=True)
