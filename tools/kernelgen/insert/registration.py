"""``register_kernel``: wire a generated kernel into ops/__init__.py, transformers/__init__.py, functional.py."""

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from tools.kernelgen.insert.errors import SOURCE_PLACEHOLDER
from tools.kernelgen.insert.errors import InsertError
from tools.kernelgen.insert.errors import parse_source
from tools.kernelgen.insert.exports import add_to_all
from tools.kernelgen.insert.functions import add_function
from tools.kernelgen.insert.imports import absolute_from_import
from tools.kernelgen.insert.imports import add_import
from tools.kernelgen.insert.invariants import check_invariants
from tools.kernelgen.insert.lazy import add_lazy_symbol
from tools.kernelgen.insert.ordering import dotted_name
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import OPS_INIT
from tools.kernelgen.layout import TRANSFORMERS_INIT

FUNCTIONAL_MODULE = "liger_kernel.transformers.functional"
OPS_PACKAGE = "liger_kernel.ops"


@dataclass(frozen=True, kw_only=True)
class Registration:
    """What a new kernel exports, and from where."""

    kernel: str  # "geglu"
    ops_module: str  # "liger_kernel.ops.geglu"
    ops_names: tuple[str, ...]  # the autograd Function, and the forward / backward helpers
    transformers_module: str  # "liger_kernel.transformers.geglu"
    module_names: tuple[str, ...]  # nn.Module classes importable without transformers
    lazy_names: tuple[str, ...] = ()  # names that need transformers, resolved by __getattr__
    functional_name: str  # "liger_geglu"
    functional_source: str  # the text of ``def liger_geglu(...)``
    function_class_name: str  # the autograd Function the functional wrapper calls


def _top_level_imports(source: str) -> list[tuple[str, str]]:
    """``(module, name)`` of every absolute from-import at module level (not inside ``if``/``try``)."""
    found = []
    for statement in parse_source(source).body:
        small = absolute_from_import(statement)
        if small is not None:
            found.extend((dotted_name(small.module), dotted_name(alias.name)) for alias in small.names)
    return found


def _require_imports_from(source: str, prefix: str) -> list[tuple[str, str]]:
    imports = [(module, name) for module, name in _top_level_imports(source) if module.startswith(prefix)]
    if not imports:
        raise InsertError(
            SOURCE_PLACEHOLDER, f"no module-level `from {prefix}... import` line to anchor the registration"
        )
    return imports


def _has_noqa(source: str, prefix: str) -> bool:
    """Whether the file's module-level imports from ``prefix`` carry ``# noqa`` comments."""
    for statement in parse_source(source).body:
        small = absolute_from_import(statement)
        if small is not None and dotted_name(small.module).startswith(prefix):
            comment = statement.trailing_whitespace.comment
            if comment is not None and "noqa" in comment.value:
                return True
    return False


def register_ops(source: str, registration: Registration) -> str:
    _require_imports_from(source, "liger_kernel.ops.")
    noqa = _has_noqa(source, "liger_kernel.ops.")
    for name in registration.ops_names:
        source = add_import(source, registration.ops_module, name, noqa=noqa)
        source = add_to_all(source, name)
    return source


def _exports_functionals(source: str) -> bool:
    """Whether the package already re-exports helpers of ``functional.py`` at its top level (this repository does;
    upstream Liger-Kernel exports only some modules' own functions, such as rope's, and none of functional.py)."""
    return any(module == FUNCTIONAL_MODULE for module, _ in _top_level_imports(source))


def functional_import_module(source: str, registration: Registration) -> str:
    """Where ``functional.py`` imports the autograd Functions from, as the file already does: the ``liger_kernel.ops``
    package (upstream, so that backend replacement applies) or each kernel's submodule (this repository). A tie, or
    a file with neither, takes the submodule."""
    modules = [module for module, _ in _top_level_imports(source)]
    package = sum(module == OPS_PACKAGE for module in modules)
    submodules = sum(module.startswith(OPS_PACKAGE + ".") for module in modules)
    return OPS_PACKAGE if package > submodules else registration.ops_module


def register_transformers(source: str, registration: Registration) -> str:
    _require_imports_from(source, "liger_kernel.transformers.")
    for name in registration.module_names:
        source = add_import(source, registration.transformers_module, name, noqa=True)
        source = add_to_all(source, name)
    if _exports_functionals(source):
        source = add_import(source, FUNCTIONAL_MODULE, registration.functional_name, noqa=True)
        source = add_to_all(source, registration.functional_name)
    for name in registration.lazy_names:
        source = add_lazy_symbol(source, name, registration.transformers_module)
    return source


def register_functional(source: str, registration: Registration) -> str:
    functions = [
        statement.name.value
        for statement in parse_source(registration.functional_source, "<functional_source>").body
        if isinstance(statement, cst.FunctionDef)
    ]
    if functions != [registration.functional_name]:
        raise InsertError("<functional_source>", f"should define only {registration.functional_name}, not {functions}")
    module = functional_import_module(source, registration)
    source = add_import(source, module, registration.function_class_name)
    return add_function(source, registration.functional_source, after_imports_of=OPS_PACKAGE)


EDITS: dict[str, Callable[[str, Registration], str]] = {
    OPS_INIT: register_ops,
    TRANSFORMERS_INIT: register_transformers,
    FUNCTIONAL: register_functional,
}


def register_kernel(files: dict[str, str], registration: Registration) -> dict[str, str]:
    """New texts of the registration files that change (paths as in ``EDITS``; absent paths are skipped).

    Raises :class:`InsertError` naming the file when it does not parse, lacks an anchor, or an invariant breaks.
    """
    changed = {}
    for path, edit in EDITS.items():
        if path not in files:
            continue
        original = files[path]
        try:
            parse_source(original)
            result = edit(original, registration)
            check_invariants(path, original, result, lambda text, edit=edit: edit(text, registration))
        except InsertError as error:
            if error.path == path:
                raise
            raise InsertError(path, error.message if error.path == SOURCE_PLACEHOLDER else str(error)) from error
        if result != original:
            changed[path] = result
    return changed
