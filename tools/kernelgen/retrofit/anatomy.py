"""Read a hand-written kernel's files (``ast``) and plan the edits that thread new hyper-parameters through it.

The autograd Function's ``forward``/``backward`` and the module-level wrappers they call, down to the Triton
launches, are read as an alias graph: names that hold the same tensor (``a = a.view(...)``, arguments and
parameters, returned tuples and their unpacking, ``ctx.save_for_backward``/``ctx.saved_tensors``, launch arguments
and kernel parameters) are joined, and the graph's components get roles: a reference input, a learnable parameter,
an output, an output's incoming gradient, an input's gradient. A kernel pointer's roles say what its ``tl.load``
reads and what its ``tl.store`` writes, which is where the math delta's maps go:

- an input map right after each load of the input (``a = (a * gate).to(a.dtype)``);
- an output map right before each store of the output, into a new name (``c_scale = scale * c``);
- the output map's scale right after each load of that output's incoming gradient;
- an input map's scale right before each store of that input's gradient, into a new name.

Each new hyper-parameter then becomes a parameter of every kernel that uses it (before the constexpr ones), of each
wrapper on the way and of the Function's forward (saved on ``ctx`` for the backward, whose returns get one more
``None``), of the functional and of the module (constructor, attribute, ``extra_repr``). Whatever the analysis does
not understand is a ``NotUnderstood`` with the file and line, never a guess.
"""

from __future__ import annotations

import ast

from dataclasses import dataclass
from dataclasses import field

from tools.kernelgen.hostapi import ArgumentMap
from tools.kernelgen.hostapi import KernelApi
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.retrofit.delta import Affine
from tools.kernelgen.retrofit.delta import MathDelta
from tools.kernelgen.retrofit.edits import AddArg
from tools.kernelgen.retrofit.edits import AddParam
from tools.kernelgen.retrofit.edits import AppendReturnValue
from tools.kernelgen.retrofit.edits import AppendStatement
from tools.kernelgen.retrofit.edits import ClassAttribute
from tools.kernelgen.retrofit.edits import ExtendRepr
from tools.kernelgen.retrofit.edits import FileEdits
from tools.kernelgen.retrofit.edits import InsertStatement
from tools.kernelgen.retrofit.edits import RenameAt
from tools.kernelgen.retrofit.edits import ReplaceExpression

# Tensor methods whose result holds the same values as the tensor (for the alias graph).
VIEW_METHODS = frozenset(
    {
        "view",
        "reshape",
        "contiguous",
        "to",
        "float",
        "half",
        "bfloat16",
        "flatten",
        "view_as",
        "reshape_as",
        "squeeze",
        "unsqueeze",
        "clone",
        "detach",
        "type_as",
        "t",
        "transpose",
        "permute",
        "expand",
        "expand_as",
    }
)
SAVED = "<saved>"


class NotUnderstood(ValueError):
    """The kernel's files are not shaped as the analysis can follow; the message names the place and why."""


@dataclass
class Plan:
    """Edits per repository-relative file, and what they amount to, for the report."""

    edits: dict[str, FileEdits] = field(default_factory=dict)
    changes: dict[str, list[str]] = field(default_factory=dict)  # path -> what changes in it, in words
    notes: list[str] = field(default_factory=list)

    def file(self, path: str) -> FileEdits:
        return self.edits.setdefault(path, FileEdits())

    def say(self, path: str, what: str) -> None:
        self.changes.setdefault(path, []).append(what)


def _is_jit(node: ast.FunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        text = ast.unparse(target)
        if text in ("triton.jit", "jit") or text.endswith(".jit"):
            return True
    return False


def _alias(expr: ast.AST | None) -> str | None:
    """The variable whose tensor ``expr`` is (through views, casts and copies), or None."""
    while expr is not None:
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, ast.IfExp):
            expr = expr.body  # ``x if cond else placeholder``: the value meant
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in VIEW_METHODS:
            expr = expr.func.value
        elif isinstance(expr, ast.Attribute) and expr.attr in ("T", "mT", "data"):
            expr = expr.value
        else:
            return None
    return None


def _positional(function: ast.FunctionDef) -> list[str]:
    return [a.arg for a in [*function.args.posonlyargs, *function.args.args]]


def _statements(body: list[ast.stmt]):
    """Every statement of a body, nested blocks included (not nested functions or classes)."""
    for statement in body:
        yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(statement, name, []) or [])
        for handler in getattr(statement, "handlers", []) or []:
            yield from _statements(handler.body)


def _calls(node: ast.AST):
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            yield child


def _own_calls(statement: ast.stmt):
    """Calls of one statement itself: a compound statement's header (``if``/``while`` test, ``for`` iterable,
    ``with`` items), not its body, whose statements ``_statements`` yields on their own."""
    if isinstance(statement, (ast.If, ast.While)):
        parts = [statement.test]
    elif isinstance(statement, (ast.For, ast.AsyncFor)):
        parts = [statement.target, statement.iter]
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        parts = list(statement.items)
    elif isinstance(statement, (ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        parts = []
    else:
        parts = [statement]
    for part in parts:
        yield from _calls(part)


def _is_tl_call(call: ast.Call, name: str) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == name and ast.unparse(call.func.value) == "tl"


class _Graph:
    """Union-find over ``(scope, name)`` nodes."""

    def __init__(self):
        self.parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(self, node):
        self.parent.setdefault(node, node)
        while self.parent[node] != node:
            self.parent[node] = self.parent[self.parent[node]]
            node = self.parent[node]
        return node

    def union(self, a, b) -> None:
        if a[1] is None or b[1] is None:
            return
        self.parent[self.find(a)] = self.find(b)


@dataclass
class _Launch:
    scope: str
    call: ast.Call
    kernel: str


@dataclass
class _WrapperCall:
    scope: str
    call: ast.Call
    callee: str


class OpsAnatomy:
    """The alias graph of one ops file, from the Function's forward and backward down to the kernels."""

    def __init__(self, source: str, path: str, function_class: str):
        self.path = path
        self.tree = ast.parse(source)
        self.functions = {n.name: n for n in self.tree.body if isinstance(n, ast.FunctionDef)}
        self.kernels = {name for name, node in self.functions.items() if _is_jit(node)}
        classes = {n.name: n for n in self.tree.body if isinstance(n, ast.ClassDef)}
        if function_class not in classes:
            raise NotUnderstood(f"{path}: no class {function_class}")
        self.cls = classes[function_class]
        methods = {n.name: n for n in self.cls.body if isinstance(n, ast.FunctionDef)}
        if "forward" not in methods or "backward" not in methods:
            raise NotUnderstood(f"{path}: {function_class} lacks forward or backward")
        self.forward_scope = f"{function_class}.forward"
        self.backward_scope = f"{function_class}.backward"
        self.scopes: dict[str, ast.FunctionDef] = {
            self.forward_scope: methods["forward"],
            self.backward_scope: methods["backward"],
        }
        self.graph = _Graph()
        self.launches: list[_Launch] = []
        self.wrapper_calls: list[_WrapperCall] = []
        pending = [self.forward_scope, self.backward_scope]
        while pending:
            scope = pending.pop()
            for callee in self._walk(scope, self.scopes[scope]):
                if callee not in self.scopes:
                    self.scopes[callee] = self.functions[callee]
                    pending.append(callee)
        if not self.launches:
            raise NotUnderstood(
                f"{path}: {function_class}'s forward and backward launch no @triton.jit kernel of this file "
                f"(directly or through its functions)"
            )

    def params(self, scope: str) -> list[str]:
        params = _positional(self.scopes[scope])
        return params[1:] if scope in (self.forward_scope, self.backward_scope) else params

    def _returns_tuple(self, function: str) -> int:
        """How many values ``function`` returns (0: not a tuple)."""
        sizes = [
            len(s.value.elts)
            for s in _statements(self.functions[function].body)
            if isinstance(s, ast.Return) and isinstance(s.value, ast.Tuple)
        ]
        return max(sizes, default=0)

    def _walk(self, scope: str, function: ast.FunctionDef) -> list[str]:
        """Join the names of one function in the graph; returns the wrappers it calls."""
        g = self.graph
        callees = []
        for statement in _statements(function.body):
            if isinstance(statement, (ast.Assign, ast.AnnAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                value = statement.value
                for target in targets:
                    self._assign(scope, target, value)
            elif isinstance(statement, ast.Return) and statement.value is not None:
                value = statement.value
                if isinstance(value, ast.Tuple):
                    for index, element in enumerate(value.elts):
                        g.union((scope, f"<ret {index}>"), (scope, _alias(element)))
                else:
                    g.union((scope, "<ret 0>"), (scope, _alias(value)))
                    callee = self._wrapper_of(value)
                    if callee:
                        for index in range(max(1, self._returns_tuple(callee))):
                            g.union((scope, f"<ret {index}>"), (callee, f"<ret {index}>"))
            for call in _own_calls(statement):
                if isinstance(call.func, ast.Attribute) and call.func.attr == "save_for_backward":
                    for index, arg in enumerate(call.args):
                        if isinstance(arg, ast.Starred):
                            raise NotUnderstood(
                                f"{self.path}:{call.lineno}: save_for_backward(*...) hides what is saved"
                            )
                        g.union((SAVED, str(index)), (scope, _alias(arg)))
                callee = self._wrapper_of(call)
                if callee:
                    self.wrapper_calls.append(_WrapperCall(scope, call, callee))
                    callees.append(callee)
                    self._bind_arguments(scope, call, callee, _positional(self.functions[callee]))
                if isinstance(call.func, ast.Subscript) and isinstance(call.func.value, ast.Name):
                    kernel = call.func.value.id
                    if kernel in self.kernels:
                        self.launches.append(_Launch(scope, call, kernel))
                        self._bind_arguments(scope, call, kernel, _positional(self.functions[kernel]))
        return callees

    def _wrapper_of(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name in self.functions and name not in self.kernels:
                return name
        return None

    def _assign(self, scope: str, target: ast.AST, value: ast.AST) -> None:
        g = self.graph
        if isinstance(target, ast.Name):
            g.union((scope, target.id), (scope, _alias(value)))
            saved = isinstance(value, ast.Subscript) and ast.unparse(value.value).endswith(".saved_tensors")
            if saved and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, int):
                g.union((scope, target.id), (SAVED, str(value.slice.value)))
            callee = self._wrapper_of(value)
            if callee and not self._returns_tuple(callee):
                g.union((scope, target.id), (callee, "<ret 0>"))
        elif isinstance(target, (ast.Tuple, ast.List)):
            names = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
            callee = self._wrapper_of(value)
            saved = isinstance(value, ast.Attribute) and value.attr == "saved_tensors"
            for index, name in enumerate(names):
                if callee:
                    g.union((scope, name), (callee, f"<ret {index}>"))
                elif saved:
                    g.union((scope, name), (SAVED, str(index)))
                elif isinstance(value, ast.Tuple) and index < len(value.elts):
                    g.union((scope, name), (scope, _alias(value.elts[index])))

    def _bind_arguments(self, scope: str, call: ast.Call, callee: str, params: list[str]) -> None:
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                raise NotUnderstood(f"{self.path}:{call.lineno}: *{ast.unparse(arg.value)} passed to {callee}")
            if index < len(params):
                self.graph.union((scope, _alias(arg)), (callee, params[index]))
        for keyword in call.keywords:
            if keyword.arg is None:
                raise NotUnderstood(f"{self.path}:{call.lineno}: **{ast.unparse(keyword.value)} passed to {callee}")
            self.graph.union((scope, _alias(keyword.value)), (callee, keyword.arg))

    def roles(self, seeds: dict[tuple[str, str], str]) -> dict[tuple[str, str], set[str]]:
        """Every node's roles: the seeds of its component."""
        by_root: dict[tuple[str, str], set[str]] = {}
        for node, role in seeds.items():
            by_root.setdefault(self.graph.find(node), set()).add(role)
        return {node: by_root.get(self.graph.find(node), set()) for node in list(self.graph.parent)}


@dataclass
class _Site:
    kernel: str
    statement: ast.stmt
    variable: str  # the loaded-into name, or the stored value's root name ("" for a stored expression)
    roles: set[str]
    root: ast.Name | None = None  # stores: the Name node of the stored value
    value: ast.expr | None = None  # stores of an expression: the expression
    pointer: str = ""  # stores: the pointer's name


class Threader:
    """Plans every edit for one math delta; ``plan()`` returns them or raises ``NotUnderstood``."""

    def __init__(
        self,
        profile: KernelProfile,
        api: KernelApi,
        mapping: ArgumentMap,
        delta: MathDelta,
        paths: dict[str, str],
        sources: dict[str, str],
    ):
        self.profile = profile
        self.api = api
        self.mapping = mapping
        self.delta = delta
        self.paths = paths  # ops, module, functional
        self.sources = sources
        self.result = Plan()
        self.defaults = {hp.name: repr(hp.default) for hp in delta.hypers}
        self.order = [hp.name for hp in delta.hypers]
        self.types = {hp.name: hp.type for hp in delta.hypers if hp.type in ("float", "int")}
        self.local_names: dict[str, dict[str, str]] = {}  # kernel -> hyper-parameter -> its name in the kernel

    # Roles -----------------------------------------------------------------------------------------------------
    def _forward_roles(self) -> dict[str, str]:
        """Function.forward parameter -> role (``in:x``, ``param:weight``), through the functional's apply call."""
        roles = {}
        reference_of = {entry: ref for ref, entry in self.mapping.tensors.items()}
        kinds = {t.name: "in" for t in self.profile.inputs} | {p.name: "param" for p in self.profile.parameters}
        forward = self.api.forward.params
        if not self.api.entry_is_functional:
            for entry, ref in reference_of.items():
                roles[entry] = f"{kinds[ref]}:{ref}"
            return roles
        call = self._apply_calls(self.paths["functional"], self.api.functional.name)[0]
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Name) and arg.id in reference_of and index < len(forward):
                ref = reference_of[arg.id]
                roles[forward[index].name] = f"{kinds[ref]}:{ref}"
        return roles

    def _apply_calls(self, path: str, scope: str) -> list[ast.Call]:
        tree = ast.parse(self.sources[path])
        owner = _find_scope(tree, scope)
        if owner is None:
            raise NotUnderstood(f"{path}: no {scope}")
        calls = [
            c
            for c in ast.walk(owner)
            if isinstance(c, ast.Call)
            and isinstance(c.func, ast.Attribute)
            and c.func.attr == "apply"
            and isinstance(c.func.value, ast.Name)
            and c.func.value.id == self.api.function_class
        ]
        if not calls:
            raise NotUnderstood(f"{path}: {scope} does not call {self.api.function_class}.apply")
        return calls

    def plan(self) -> Plan:
        ops_path = self.paths["ops"]
        anatomy = OpsAnatomy(self.sources[ops_path], ops_path, self.api.function_class)
        self.anatomy = anatomy
        forward_params = anatomy.params(anatomy.forward_scope)
        taken = [h for h in self.order if h in forward_params]
        if taken:
            raise NotUnderstood(f"{ops_path}: {anatomy.forward_scope} already has a parameter {taken[0]}")
        seeds: dict[tuple[str, str], str] = {}
        for param, role in self._forward_roles().items():
            seeds[(anatomy.forward_scope, param)] = role
        outputs = [o.name for o in self.profile.outputs]
        for index in range(len(outputs)):
            seeds[(anatomy.forward_scope, f"<ret {index}>")] = f"out:{outputs[index]}"
        backward_params = anatomy.params(anatomy.backward_scope)
        for index, param in enumerate(backward_params[: len(outputs)]):
            seeds[(anatomy.backward_scope, param)] = f"gout:{outputs[index]}"
        forward_roles = self._forward_roles()
        for index, param in enumerate(forward_params):
            role = forward_roles.get(param)
            if role:
                seeds[(anatomy.backward_scope, f"<ret {index}>")] = "gin:" + role.split(":", 1)[1]
        roles = anatomy.roles(seeds)

        needs: dict[str, set[str]] = {}
        for kernel in sorted({launch.kernel for launch in anatomy.launches}):
            used = self._kernel_edits(
                kernel, {p: roles.get((kernel, p), set()) for p in _positional(anatomy.functions[kernel])}
            )
            if used:
                needs[kernel] = used
        if not needs:
            raise NotUnderstood(
                f"{ops_path}: no load or store of the tensors {self.delta.describe()} touches was found in the "
                f"kernels {', '.join(sorted(anatomy.kernels))}"
            )
        self._thread(needs)
        self._functional()
        self._module()
        return self.result

    # Kernels ---------------------------------------------------------------------------------------------------
    def _kernel_edits(self, kernel: str, param_roles: dict[str, set[str]]) -> set[str]:
        """Plan the transform statements of one kernel; returns the hyper-parameters they read."""
        path = self.paths["ops"]
        node = self.anatomy.functions[kernel]
        pointer_roles = {name: set(roles) for name, roles in param_roles.items() if roles}
        for statement in _statements(node.body):
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                loads = [c for c in _calls(statement.value) if _is_tl_call(c, "load")]
                if isinstance(target, ast.Name) and not loads:
                    inherited = set().union(
                        *(pointer_roles.get(n.id, set()) for n in ast.walk(statement.value) if isinstance(n, ast.Name))
                    )
                    if inherited:
                        pointer_roles[target.id] = pointer_roles.get(target.id, set()) | inherited
        names_in_kernel = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | set(_positional(node))
        # The kernel's name for each hyper-parameter: its own, unless the kernel already uses that name.
        local = {h: h if h not in names_in_kernel else _fresh(f"{h}_param", names_in_kernel) for h in self.order}
        names_in_kernel |= set(local.values())
        self.local_names[kernel] = local
        used: set[str] = set()
        edits = self.result.file(path)
        for statement in _statements(node.body):
            for call in _own_calls(statement):
                if _is_tl_call(call, "load"):
                    site = self._load_site(kernel, statement, call, pointer_roles)
                    if site is not None:
                        used |= self._transform_load(site, edits, local)
                elif _is_tl_call(call, "store"):
                    site = self._store_site(kernel, statement, call, pointer_roles)
                    if site is not None:
                        used |= self._transform_store(site, edits, names_in_kernel, local)
                else:
                    self._check_opaque_use(kernel, call, pointer_roles)
        return used

    def _relevant(self, roles: set[str], kind: str) -> set[str]:
        """The roles of a pointer that call for a transform at a load (``load``) or a store (``store``)."""
        changed_inputs = set(self.delta.inputs)
        changed_outputs = set(self.delta.outputs)
        found = set()
        for role in roles:
            what, name = role.split(":", 1)
            if kind == "load" and what == "in" and name in changed_inputs:
                found.add(role)
            if kind == "load" and what == "gout" and name in changed_outputs and self.delta.outputs[name].scale != 1:
                found.add(role)
            if kind == "load" and what == "out" and name in changed_outputs:
                found.add(role)
            if kind == "store" and what == "out" and name in changed_outputs:
                found.add(role)
            if kind == "store" and what == "gin" and name in changed_inputs and self.delta.inputs[name].scale != 1:
                found.add(role)
        return found

    def _pointer_roles(self, expression: ast.AST, pointer_roles: dict[str, set[str]]) -> set[str]:
        return set().union(*(pointer_roles.get(n.id, set()) for n in ast.walk(expression) if isinstance(n, ast.Name)))

    def _load_site(self, kernel, statement, call, pointer_roles) -> _Site | None:
        pointer = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "pointer"), None)
        roles = self._relevant(self._pointer_roles(pointer, pointer_roles), "load")
        if not roles:
            return None
        where = f"{self.paths['ops']}:{statement.lineno}"
        if len(roles) > 1:
            raise NotUnderstood(f"{where}: {kernel} loads a pointer that is both {' and '.join(sorted(roles))}")
        ok = (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and _chain_root(statement.value) is call
        )
        if not ok:
            raise NotUnderstood(
                f"{where}: {kernel} loads {next(iter(roles))} inside an expression; kernelgen changes a load assigned "
                f"to a name (x = tl.load(...))"
            )
        return _Site(kernel, statement, statement.targets[0].id, roles)

    def _store_site(self, kernel, statement, call, pointer_roles) -> _Site | None:
        pointer = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "pointer"), None)
        roles = self._relevant(self._pointer_roles(pointer, pointer_roles), "store")
        if not roles:
            return None
        where = f"{self.paths['ops']}:{statement.lineno}"
        if len(roles) > 1:
            raise NotUnderstood(f"{where}: {kernel} stores to a pointer that is both {' and '.join(sorted(roles))}")
        value = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "value"), None)
        if value is None or not isinstance(statement, ast.Expr) or statement.value is not call:
            raise NotUnderstood(f"{where}: {kernel} stores {next(iter(roles))} other than as a tl.store(...) statement")
        pointer = next(
            (n.id for n in ast.walk(pointer) if isinstance(n, ast.Name) and pointer_roles.get(n.id)), "value"
        )
        root = _chain_root(value)
        if isinstance(root, ast.Name):
            return _Site(kernel, statement, root.id, roles, root, pointer=pointer)
        return _Site(kernel, statement, "", roles, value=value, pointer=pointer)

    def _transform_load(self, site: _Site, edits: FileEdits, local: dict[str, str]) -> set[str]:
        (role,) = site.roles
        what, name = role.split(":", 1)
        v = site.variable
        where = f"{self.paths['ops']}:{site.statement.lineno}"
        if what == "out":
            raise NotUnderstood(
                f"{where}: {site.kernel} reads the output {name} back, which the new math changes "
                f"({self.delta.describe()})"
            )
        affine = self.delta.inputs[name] if what == "in" else Affine(self.delta.outputs[name].scale)
        text = f"{v} = ({affine.renamed(local).triton(v)}).to({v}.dtype)"
        edits.statements.append(InsertStatement(site.statement.lineno, text, after=True))
        self.result.say(self.paths["ops"], f"{site.kernel}: {text} after line {site.statement.lineno}")
        return _hypers_of(affine, self.order)

    def _transform_store(self, site: _Site, edits: FileEdits, names: set[str], local: dict[str, str]) -> set[str]:
        (role,) = site.roles
        what, name = role.split(":", 1)
        affine = self.delta.outputs[name] if what == "out" else Affine(self.delta.inputs[name].scale)
        hypers = _hypers_of(affine, self.order)
        stem = site.variable or site.pointer.lower().removesuffix("_ptr")
        new = _fresh(f"{stem}_{'_'.join(hypers)}", names)
        names.add(new)
        if site.variable:
            text = f"{new} = {affine.renamed(local).triton(site.variable)}"
            edits.renames.append(RenameAt((site.root.lineno, site.root.col_offset), new))
            stored = site.variable
        else:
            placeholder = "kernelgen_stored_value"
            source = ast.unparse(site.value)
            text = f"{new} = {affine.renamed(local).triton(placeholder)}".replace(placeholder, f"({source})")
            value = site.value
            edits.replacements.append(
                ReplaceExpression((value.lineno, value.col_offset), (value.end_lineno, value.end_col_offset), new)
            )
            stored = f"`{source}`"
        edits.statements.append(InsertStatement(site.statement.lineno, text))
        self.result.say(self.paths["ops"], f"{site.kernel}: {text}, stored instead of {stored}")
        return hypers

    def _check_opaque_use(self, kernel: str, call: ast.Call, pointer_roles: dict[str, set[str]]) -> None:
        if _is_tl_call(call, "load") or _is_tl_call(call, "store"):
            return
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            names = _value_names(arg)
            roles = set().union(*(pointer_roles.get(n, set()) for n in names))
            relevant = self._relevant(roles, "load") | self._relevant(roles, "store")
            if relevant:
                raise NotUnderstood(
                    f"{self.paths['ops']}:{call.lineno}: {kernel} passes the pointer of {sorted(relevant)[0]} to "
                    f"{ast.unparse(call.func)}(...); kernelgen follows tl.load and tl.store only"
                )

    # Threading ---------------------------------------------------------------------------------------------------
    def _value(self, scope: str, hyper: str) -> str:
        return f"ctx.{hyper}" if scope == self.anatomy.backward_scope else hyper

    def _thread(self, kernel_needs: dict[str, set[str]]) -> None:
        anatomy = self.anatomy
        path = self.paths["ops"]
        edits = self.result.file(path)
        needs: dict[str, set[str]] = dict(kernel_needs)
        for launch in anatomy.launches:
            if launch.kernel in kernel_needs:
                needs.setdefault(launch.scope, set()).update(kernel_needs[launch.kernel])
        changed = True
        while changed:  # a wrapper needs what everything it calls needs
            changed = False
            for call in anatomy.wrapper_calls:
                wanted = needs.get(call.callee, set())
                if wanted - needs.get(call.scope, set()):
                    needs.setdefault(call.scope, set()).update(wanted)
                    changed = True
        # Kernels: the parameter before the first constexpr one, and the argument at each launch.
        for kernel, hypers in kernel_needs.items():
            node = anatomy.functions[kernel]
            params = _positional(node)
            constexpr = next(
                (a.arg for a in node.args.args if a.annotation and "constexpr" in ast.unparse(a.annotation)), None
            )
            index = params.index(constexpr) if constexpr else len(params)
            ordered = [h for h in self.order if h in hypers]
            local = self.local_names[kernel]
            for hyper in ordered:
                edits.params.append(AddParam(kernel, local[hyper], before=constexpr))
            self.result.say(path, f"{kernel}: new parameter(s) {', '.join(local[h] for h in ordered)}")
            for launch in anatomy.launches:
                if launch.kernel != kernel:
                    continue
                positional = len(launch.call.args)
                start, end = _span(launch.call)
                for offset, hyper in enumerate(ordered):
                    value = self._value(launch.scope, hyper)
                    if positional >= index:  # the new argument continues or joins the positional run
                        edits.args.append(AddArg(start, value, index=index + offset, end=end))
                    else:
                        edits.args.append(AddArg(start, value, keyword=local[hyper], end=end))
        # Wrappers: a parameter with the default, and the argument at each call on the chain.
        for scope, hypers in needs.items():
            if scope in anatomy.kernels or scope in (anatomy.forward_scope, anatomy.backward_scope):
                continue
            ordered = [h for h in self.order if h in hypers]
            node = anatomy.functions[scope]
            if node.args.vararg is not None:
                raise NotUnderstood(f"{path}:{node.lineno}: {scope} takes *{node.args.vararg.arg}")
            existing = set(_positional(node)) | {a.arg for a in node.args.kwonlyargs}
            clash = [h for h in ordered if h in existing]
            if clash:
                raise NotUnderstood(f"{path}:{node.lineno}: {scope} already has a parameter {clash[0]}")
            for hyper in ordered:
                edits.params.append(AddParam(scope, self._param_text(node, hyper)))
            self.result.say(
                path, f"{scope}(): new parameter(s) {', '.join(f'{h}={self.defaults[h]}' for h in ordered)}"
            )
        for call in anatomy.wrapper_calls:
            wanted = [h for h in self.order if h in needs.get(call.callee, set())]
            if not wanted:
                continue
            callee_params = _positional(anatomy.functions[call.callee])
            all_positional = not call.call.keywords and len(call.call.args) == len(callee_params)
            start, end = _span(call.call)
            for hyper in wanted:
                value = self._value(call.scope, hyper)
                keyword = None if all_positional else hyper
                edits.args.append(AddArg(start, value, keyword=keyword, end=end))
        # The Function: every new hyper-parameter in forward, saved for the backward, one more None per return.
        forward = anatomy.scopes[anatomy.forward_scope]
        if forward.args.vararg is not None or forward.args.kwarg is not None:
            raise NotUnderstood(f"{path}:{forward.lineno}: {anatomy.forward_scope} takes *args or **kwargs")
        for hyper in self.order:
            edits.params.append(AddParam(anatomy.forward_scope, self._param_text(forward, hyper)))
        for hyper in [h for h in self.order if h in needs.get(anatomy.backward_scope, set())]:
            edits.statements.append(self._ctx_statement(forward, hyper))
        returns = [s for s in _statements(anatomy.scopes[anatomy.backward_scope].body) if isinstance(s, ast.Return)]
        # A forward of one argument may return its gradient bare (``return dx``): it becomes ``return dx, None``.
        single = len(anatomy.params(anatomy.forward_scope)) == 1
        for statement in returns:
            value = statement.value
            bare = single and value is not None and not isinstance(value, (ast.Tuple, ast.Starred))
            if not bare and (not isinstance(value, ast.Tuple) or any(isinstance(e, ast.Starred) for e in value.elts)):
                raise NotUnderstood(
                    f"{path}:{statement.lineno}: {anatomy.backward_scope} does not return a tuple of gradients"
                )
            for _ in self.order:
                edits.returns.append(AppendReturnValue(statement.lineno))
        self.result.say(
            path,
            f"{anatomy.forward_scope}: new parameter(s) {', '.join(f'{h}={self.defaults[h]}' for h in self.order)}; "
            f"{anatomy.backward_scope} returns {len(self.order)} more None",
        )

    def _ctx_statement(self, forward: ast.FunctionDef, hyper: str) -> InsertStatement:
        text = f"ctx.{hyper} = {hyper}"
        for statement in forward.body:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                if ast.unparse(statement.value.func).endswith("save_for_backward"):
                    return InsertStatement(statement.lineno, text)
        ctx_assignments = [
            s
            for s in forward.body
            if isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Attribute) and ast.unparse(t.value) == "ctx" for t in s.targets)
        ]
        if ctx_assignments:
            return InsertStatement(ctx_assignments[-1].lineno, text, after=True)
        last = forward.body[-1]
        return InsertStatement(last.lineno, text, after=not isinstance(last, ast.Return))

    # Callers of the Function ---------------------------------------------------------------------------------------
    def _apply_args(self, call: ast.Call, value_of, where: str) -> list[AddArg]:
        """Arguments that extend one ``Function.apply(...)`` call: the forward's defaults up to the new ones."""
        if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
            raise NotUnderstood(f"{where}: {ast.unparse(call.func)}(...) passes keywords or *args")
        params = self.api.forward.params
        start = (call.lineno, call.col_offset)
        added = []
        for param in params[len(call.args) :]:
            if param.default is None:
                raise NotUnderstood(
                    f"{where}: {ast.unparse(call.func)}(...) leaves out {param.name}, which has no default"
                )
            added.append(AddArg(start, param.default))
        added += [AddArg(start, value_of(hyper)) for hyper in self.order]
        return added

    def _functional(self) -> None:
        if not self.api.entry_is_functional:
            return
        path = self.paths["functional"]
        name = self.api.functional.name
        tree = ast.parse(self.sources[path])
        node = _find_scope(tree, name)
        if node.args.vararg is not None or node.args.kwarg is not None:
            raise NotUnderstood(f"{path}:{node.lineno}: {name} takes *args or **kwargs")
        edits = self.result.file(path)
        for hyper in self.order:
            edits.params.append(AddParam(name, self._param_text(node, hyper)))
        for call in self._apply_calls(path, name):
            edits.args.extend(self._apply_args(call, lambda h: h, f"{path}:{call.lineno}"))
        self.result.say(path, f"{name}(): new parameter(s) {', '.join(f'{h}={self.defaults[h]}' for h in self.order)}")

    def _module(self) -> None:
        path = self.paths["module"]
        if path not in self.sources or not self.api.module_classes:
            self.result.notes.append(f"no module class applies {self.api.function_class}: no module to thread into")
            return
        classes = self.api.module_classes
        wanted = self.profile.module_class_name
        primary = wanted if wanted in classes else classes[0]
        others = [c for c in classes if c != primary]
        tree = ast.parse(self.sources[path])
        node = _find_scope(tree, primary)
        init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        where = f"{path}:{node.lineno}"
        if init is None:
            raise NotUnderstood(f"{where}: {primary} has no __init__ to take the new hyper-parameter")
        if init.args.vararg is not None:
            raise NotUnderstood(f"{where}: {primary}.__init__ takes *{init.args.vararg.arg}")
        attributes = {
            t.attr
            for t in ast.walk(node)
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
        }
        clash = [h for h in self.order if h in attributes or h in _positional(init)]
        if clash:
            raise NotUnderstood(f"{where}: {primary} already has self.{clash[0]}")
        edits = self.result.file(path)
        patching = self._instance_patching(primary)
        for index, hyper in enumerate(self.order):
            edits.params.append(AddParam(f"{primary}.__init__", self._param_text(init, hyper)))
            edits.appends.append(AppendStatement(f"{primary}.__init__", f"self.{hyper} = {hyper}"))
            if patching == "converted":
                # A class default too: modules converted in place (``module.__class__ = ...``) skip __init__.
                comment = "defaults for modules converted in place (their __init__ never runs)" if index == 0 else ""
                edits.attributes.append(ClassAttribute(primary, f"{hyper} = {self.defaults[hyper]}", comment))
        if patching == "bound":
            # The forward runs on modules of another class, which have neither the attribute nor a class default.
            value_of = lambda h: f'getattr(self, "{h}", {self.defaults[h]})'  # noqa: E731
            self.result.notes.append(
                f"{self.paths['patch']} binds {primary}.forward to a model's own modules, which have no "
                f"{', '.join(self.order)}: the forward reads {value_of(self.order[0])}"
            )
        else:
            value_of = lambda h: f"self.{h}"  # noqa: E731
        for call in self._apply_calls(path, primary):
            edits.args.extend(self._apply_args(call, value_of, f"{path}:{call.lineno}"))
        repr_node = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "extra_repr"), None)
        returned = [s.value for s in ast.walk(repr_node) if isinstance(s, ast.Return)] if repr_node else []
        if repr_node is None or (len(returned) == 1 and isinstance(returned[0], ast.JoinedStr)):
            for hyper in self.order:
                edits.reprs.append(ExtendRepr(primary, hyper))
            repr_note = "extra_repr shows them" if repr_node else "a new extra_repr shows them"
        else:
            repr_note = "extra_repr left as is (it does not return one f-string)"
        self.result.say(
            path,
            f"{primary}: __init__ takes {', '.join(f'{h}={self.defaults[h]}' for h in self.order)}, forward passes "
            f"them to {self.api.function_class}, {repr_note}",
        )
        if others:
            self.result.notes.append(
                f"{', '.join(others)} also apply {self.api.function_class}: they keep the default "
                f"{', '.join(self.order)} (left as is)"
            )

    def _instance_patching(self, primary: str) -> str:
        """How the monkey-patch file puts ``primary`` on a model's existing modules: ``converted`` (``module.__class__
        = primary``: its ``__init__`` never runs), ``bound`` (``primary.forward`` taken as a value, or a parameter's
        ``.forward`` in a helper that is passed ``primary``: the forward runs on an object of another class), or ""
        (not at all, or no monkey-patch file)."""
        path = self.paths.get("patch", "")
        if path not in self.sources:
            return ""
        tree = ast.parse(self.sources[path])
        called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
        helpers, bound = set(), False
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            params = _positional(function)
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr == "forward"
                    and isinstance(node.value, ast.Name)
                    and id(node) not in called
                ):
                    bound = bound or node.value.id == primary
                    if node.value.id in params:
                        helpers.add(function.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in helpers:
                values = [*node.args, *(k.value for k in node.keywords)]
                bound = bound or any(isinstance(v, ast.Name) and v.id == primary for v in values)
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Attribute) and t.attr == "__class__" for t in node.targets)
                and ast.unparse(node.value).split(".")[-1] == primary
            ):
                return "converted"
        return "bound" if bound else ""

    def _param_text(self, function: ast.FunctionDef, hyper: str) -> str:
        """``scale=1.0``, or ``scale: float = 1.0`` where the function annotates its parameters (those with a
        default, else all but ``self``/``ctx``)."""
        arguments = function.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        every = [a for a in every if a.arg not in ("self", "ctx", "cls")]
        with_default = [*arguments.args[len(arguments.args) - len(arguments.defaults) :], *arguments.kwonlyargs]
        considered = [a for a in with_default if a.arg not in ("self", "ctx", "cls")] or every
        kind = self.types.get(hyper, "")
        if considered and kind and all(a.annotation is not None for a in considered):
            return f"{hyper}: {kind} = {self.defaults[hyper]}"
        return f"{hyper}={self.defaults[hyper]}"


def _span(node: ast.AST) -> tuple[tuple[int, int], tuple[int, int]]:
    return (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)


def _value_names(expr: ast.AST) -> set[str]:
    """Names ``expr`` reads as values (``p.dtype`` reads the pointer's type, not what it points to)."""
    if isinstance(expr, ast.Attribute) and expr.attr in ("dtype", "element_ty"):
        return set()
    if isinstance(expr, ast.Name):
        return {expr.id}
    return set().union(set(), *(_value_names(child) for child in ast.iter_child_nodes(expr)))


def _chain_root(expr: ast.AST | None) -> ast.AST | None:
    """The innermost object of a method chain: ``tl.load(...).to(tl.float32)`` -> the ``tl.load`` call."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("to", "cast"):
        expr = expr.func.value
    return expr


def _find_scope(tree: ast.Module, qualified: str) -> ast.AST | None:
    node: ast.AST = tree
    for part in qualified.split("."):
        body = getattr(node, "body", [])
        node = next((s for s in body if isinstance(s, (ast.FunctionDef, ast.ClassDef)) and s.name == part), None)
        if node is None:
            return None
    return node


def _hypers_of(affine: Affine, order: list[str]) -> set[str]:
    names = {s.name for s in affine.scale.free_symbols | affine.shift.free_symbols}
    return {h for h in order if h in names}


def _fresh(name: str, taken: set[str]) -> str:
    candidate, index = name, 2
    while candidate in taken:
        candidate, index = f"{name}{index}", index + 1
    return candidate


__all__ = ["NotUnderstood", "OpsAnatomy", "Plan", "Threader"]
