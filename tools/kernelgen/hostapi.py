"""A kernel's public API as a checkout defines it, read from its files, for generated and hand-written kernels alike.

``read_kernel_api`` finds the autograd Function of ``ops/NAME.py``, the functional of ``transformers/functional.py``
that applies it and the module classes of ``transformers/NAME.py`` that apply it, without importing anything.
``match_arguments`` maps a reference's tensor inputs, learnable parameters and hyper-parameters onto the
functional's parameters (the Function's forward when there is no functional) by name: a mismatch is one line with
both signatures.
"""

from __future__ import annotations

import ast
import functools
import re

from dataclasses import dataclass
from dataclasses import field

from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.repo import LigerRepo

# Spellings of the same tensor across references and kernels (tried after the exact and the case-blind name):
# torch's ``input`` is the reference's ``logits`` or ``x``, a module's ``weight`` is a kernel's ``W``.
TENSOR_SYNONYMS = (
    frozenset({"input", "x", "logits", "hidden_states", "inputs"}),
    frozenset({"weight", "w"}),
    frozenset({"bias", "b"}),
    frozenset({"target", "targets", "labels"}),
)


class ApiError(ValueError):
    """The checkout's files do not show the kernel's API (no ops file, no autograd Function...)."""


class SignatureMismatch(ValueError):
    """A reference whose arguments are not the kernel's, by name; the message lists both signatures."""


@dataclass(frozen=True)
class Param:
    name: str
    default: str | None = None  # the default's source text; None: required

    def text(self) -> str:
        return self.name if self.default is None else f"{self.name}={self.default}"


@dataclass
class Signature:
    """A callable's parameters (``self``/``ctx`` left out) and where it lives."""

    name: str
    module: str  # the importable module that defines it
    params: list[Param] = field(default_factory=list)

    def text(self) -> str:
        return f"{self.name}({', '.join(p.text() for p in self.params)})"

    def index(self, name: str) -> int | None:
        return next((i for i, p in enumerate(self.params) if p.name == name), None)


@dataclass
class KernelApi:
    name: str
    function_class: str
    forward: Signature  # the Function's forward, ``ctx`` left out
    functional: Signature | None = None
    module_classes: list[str] = field(default_factory=list)

    @property
    def entry(self) -> Signature:
        """What tests and validation call: the functional, else ``Function.apply``."""
        return self.functional or self.forward

    @property
    def entry_is_functional(self) -> bool:
        return self.functional is not None


@dataclass
class ArgumentMap:
    """Reference name -> entry parameter name, for each kind of argument the reference takes."""

    entry: Signature
    tensors: dict[str, str] = field(default_factory=dict)  # inputs, then learnable parameters
    hypers: dict[str, str] = field(default_factory=dict)
    new_hypers: list[str] = field(default_factory=list)  # the reference's hyper-parameters the kernel lacks


@functools.lru_cache(maxsize=16)
def _lines(source: str) -> list[bytes]:
    """``source``'s lines as the parser counts them (``\\n``, ``\\r\\n`` or ``\\r`` end one), in UTF-8."""
    return [line.encode("utf-8") for line in re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", source)]


def source_segment(source: str, node: ast.AST) -> str | None:
    """``ast.get_source_segment(source, node)`` without splitting the whole source again at each call (a checkout's
    ``functional.py`` holds hundreds of defaults)."""
    if getattr(node, "end_lineno", None) != getattr(node, "lineno", None):
        return ast.get_source_segment(source, node)
    lines = _lines(source)
    if node.lineno > len(lines):
        return None
    return lines[node.lineno - 1][node.col_offset : node.end_col_offset].decode("utf-8")


def _params(function: ast.FunctionDef, skip_first: bool, source: str) -> list[Param]:
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    params = [
        Param(arg.arg, None if default is None else source_segment(source, default))
        for arg, default in zip(positional, defaults)
    ]
    params += [
        Param(arg.arg, None if default is None else source_segment(source, default))
        for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults)
    ]
    return params[1:] if skip_first else params


def _is_function_class(node: ast.ClassDef) -> bool:
    for base in node.bases:
        text = ast.unparse(base)
        if text in ("Function", "torch.autograd.Function", "autograd.Function") or text.endswith(".Function"):
            return True
    return False


def _method(node: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == name), None)


def applied_classes(node: ast.AST) -> set[str]:
    """Names ``X`` of every ``X.apply(...)`` call under ``node``."""
    found = set()
    for call in ast.walk(node):
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "apply"
            and isinstance(call.func.value, ast.Name)
        ):
            found.add(call.func.value.id)
    return found


@functools.lru_cache(maxsize=16)
def _parsed(source: str) -> ast.Module:
    """The tree of ``source``, kept: reading every kernel of a checkout parses its ``functional.py`` once (the
    trees are only read)."""
    return ast.parse(source)


def _parse(repo: LigerRepo, path: str) -> tuple[ast.Module, str]:
    source = repo.read(path)
    try:
        return _parsed(source), source
    except SyntaxError as error:
        raise ApiError(f"{path}:{error.lineno}: does not parse ({error.msg})") from None


def read_kernel_api(repo: LigerRepo, name: str, profile: KernelProfile | None = None) -> KernelApi:
    """The API of kernel ``name`` in ``repo``; ``profile`` (when given) picks among several Function classes."""
    paths = kernel_paths(name)
    if not repo.exists(paths["ops"]):
        raise ApiError(f"no kernel '{name}' in {repo.root}: {paths['ops']} is missing")
    tree, source = _parse(repo, paths["ops"])
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef) and _is_function_class(node)}
    if not classes:
        raise ApiError(f"{paths['ops']} defines no torch.autograd.Function subclass: its API is not understood")

    functional = None
    chosen = None
    if repo.exists(FUNCTIONAL):
        functional_tree, functional_source = _parse(repo, FUNCTIONAL)
        imported = _imported_from(functional_tree, name)
        candidates = [
            node
            for node in functional_tree.body
            if isinstance(node, ast.FunctionDef) and applied_classes(node) & imported & set(classes)
        ]
        preferred = [node for node in candidates if node.name == f"liger_{name}"]
        if profile is not None:
            preferred = preferred or [node for node in candidates if node.name == profile.functional_name]
        node = (preferred or candidates or [None])[0]
        if node is not None:
            params = _params(node, False, functional_source)
            functional = Signature(node.name, "liger_kernel.transformers.functional", params)
            chosen = sorted(applied_classes(node) & imported & set(classes))[0]
    if chosen is None:
        wanted = profile.function_class_name if profile is not None else ""
        chosen = wanted if wanted in classes else sorted(classes)[0]
    forward = _method(classes[chosen], "forward")
    if forward is None:
        raise ApiError(f"{paths['ops']}: {chosen} has no forward(ctx, ...): its API is not understood")
    signature = Signature(f"{chosen}.apply", f"liger_kernel.ops.{name}", _params(forward, True, source))
    modules = []
    if repo.exists(paths["module"]):
        module_tree, _ = _parse(repo, paths["module"])
        modules = [
            node.name for node in module_tree.body if isinstance(node, ast.ClassDef) and chosen in applied_classes(node)
        ]
    return KernelApi(name, chosen, signature, functional, modules)


def _imported_from(tree: ast.Module, name: str) -> set[str]:
    """Names ``functional.py`` imports from the kernel's ops module (or the ops package)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in (f"liger_kernel.ops.{name}", "liger_kernel.ops"):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


# Matching a reference to the entry, by name ---------------------------------------------------------------------
def reference_signature(profile: KernelProfile) -> str:
    """The reference's arguments as one call: tensors, learnable parameters, then hyper-parameters."""
    parts = [t.name for t in profile.inputs] + [p.name for p in profile.parameters]
    parts += [f"{hp.name}={hp.default!r}" for hp in profile.hyperparameters]
    return f"{profile.reference.entry or profile.operation_name}({', '.join(parts)})"


def find_tensor(name: str, free: list[str]) -> str | None:
    if name in free:
        return name
    folded = [p for p in free if p.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    for group in TENSOR_SYNONYMS:
        if name.lower() in group:
            hits = [p for p in free if p.lower() in group]
            if len(hits) == 1:
                return hits[0]
    return None


def match_arguments(profile: KernelProfile, entry: Signature, *, allow_new_hypers: bool = False) -> ArgumentMap:
    """Map the reference's arguments onto ``entry``'s parameters by name; raises ``SignatureMismatch``.

    Tensors (inputs, then learnable parameters) match by name, case-blind name or a synonym of ``TENSOR_SYNONYMS``;
    hyper-parameters by their exact name. ``allow_new_hypers``: hyper-parameters the entry lacks are listed in
    ``new_hypers`` (what ``--modify`` adds) instead of being a mismatch. Every entry parameter the reference does
    not give must have a default."""
    mapping = ArgumentMap(entry)
    hyper_names = {hp.name for hp in profile.hyperparameters}
    free = [p.name for p in entry.params if p.name not in hyper_names]
    unmatched = []
    for tensor in [t.name for t in profile.inputs] + [p.name for p in profile.parameters]:
        found = find_tensor(tensor, free)
        if found is None:
            unmatched.append(tensor)
            continue
        mapping.tensors[tensor] = found
        free.remove(found)
    names = {p.name for p in entry.params}
    for hp in profile.hyperparameters:
        if hp.name in names:
            mapping.hypers[hp.name] = hp.name
        elif allow_new_hypers:
            mapping.new_hypers.append(hp.name)
        else:
            unmatched.append(hp.name)
    given = set(mapping.tensors.values()) | set(mapping.hypers.values())
    required = [p.name for p in entry.params if p.default is None and p.name not in given]
    if unmatched or required:
        problems = []
        if unmatched:
            problems.append(f"no parameter named {', '.join(unmatched)}")
        if required:
            problems.append(f"{', '.join(required)} required but not given by the reference")
        raise SignatureMismatch(
            f"the reference {reference_signature(profile)} does not match the kernel's {entry.text()} "
            f"({'; '.join(problems)})"
        )
    return mapping


__all__ = [
    "ApiError",
    "ArgumentMap",
    "KernelApi",
    "Param",
    "Signature",
    "SignatureMismatch",
    "match_arguments",
    "read_kernel_api",
    "reference_signature",
]
