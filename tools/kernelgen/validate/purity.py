"""Purity stage: the math of a kernel lives in its Triton or TileLang kernels, and its backward is real.

Three rules, checked on the ops file's AST (nothing is imported or run):

1. Inside ``@triton.jit`` functions only Triton language: calls to ``tl.*``/``triton.*``, to other jit functions of
   the same file, to names imported from ``liger_kernel.ops.utils`` or the shared ``liger_kernel.ops.layout_utils``
   (its tile of a program), to a few builtins Triton understands, and
   methods of Triton values (``x.to(...)``). Any use of ``torch``/``numpy``/``math`` there fails. TileLang kernels
   are the functions that build a ``@T.prim_func`` (``T`` being ``tilelang.language``): in them, nested functions
   included, only calls to ``tilelang.*`` (``T.*``), to other such builders of the file, to functions they define
   themselves and to the same builtins; ``torch``/``numpy``/``math`` fail there too.
2. Python wrappers and the autograd Function only allocate, reshape and launch: torch calls and tensor methods
   come from allow-lists; tensor arithmetic, tensor comparisons, tensor indexing and everything else fails. The
   exceptions are the host-side reductions the templates need: ``.sum()``/``.sum(dim=0)``/``.sum(dim=1)`` of a
   buffer the wrapper allocated (per-program partial sums) and the ``(target != ignore_index).sum()`` count of kept rows;
   and one copy of the targets: a causal LM's labels shifted one token left, ``F.pad(labels, (0, 1), value=v)[..., 1:]``.
   A class-weighted loss's weighted count, ``torch.where(target != ignore_index, _take(weight, target), 0.0).sum()``
   with its ``_take`` helper, is that count's weighted form (upstream gathers the weights on the host too).
   A row longer than one program holds is walked in pieces: a scalar parameter's gradient, to which each piece
   added its whole row's value, is shared out as ``grad / chunks``.
   A two-stage loss's sequence stage (``_NAME_sequence``) is the reference's own PyTorch math after the per-token
   statistics, by design: it is not a wrapper, and its Function may run it under ``torch.enable_grad`` and take its
   adjoints with ``torch.autograd.grad``.
3. ``Function.backward`` is not a stub: not only ``pass``, no ``NotImplementedError``, not returning its incoming
   gradient unchanged or only ``None``s, and not ``None`` for an input that requires a gradient.

``.claude/skills/liger-kernel-gen/rules/purity.md`` explains these lists; this module is their source of truth.
"""

from __future__ import annotations

import ast
import re

from collections.abc import Collection
from dataclasses import dataclass

# Builtins the Triton frontend accepts inside a kernel (static loops, constexpr arithmetic, float("-inf")).
JIT_BUILTINS = frozenset({"range", "float", "int", "bool", "min", "max", "abs", "len", "isinstance"})
# Modules whose code cannot run inside a Triton kernel.
FORBIDDEN_IN_JIT = ("torch", "numpy", "math", "scipy")
JIT_ALLOWED_PREFIXES = ("triton.", "liger_kernel.ops.utils.", "liger_kernel.ops.layout_utils.")
TILELANG_PRIM_FUNC = "tilelang.language.prim_func"  # the decorator of a TileLang kernel, inside its builder
TILELANG_ALLOWED_PREFIXES = ("tilelang.",)

TORCH_ALLOCATORS = frozenset(
    {
        "torch.empty",
        "torch.empty_like",
        "torch.empty_strided",
        "torch.zeros",
        "torch.zeros_like",
        "torch.ones",
        "torch.ones_like",
        "torch.full",
        "torch.full_like",
    }
)
# torch functions a wrapper may call: allocation, the grad_output == 1 shortcut, device properties.
ALLOWED_TORCH_CALLS = TORCH_ALLOCATORS | {
    "torch.equal",
    "torch.Size",  # a shape (a long row's pieces), not a tensor
    "torch.device",
    "torch.finfo",
    "torch.iinfo",
    "torch.is_tensor",
    "torch.is_grad_enabled",
    "torch.distributed.is_available",  # whether an argument can be a DTensor at all (dtensor_utils.dtensor_layout)
    "torch.compiler.is_compiling",  # whether an input's buffer may take its gradient (torch.compile plans buffers)
}
ALLOWED_TORCH_PREFIXES = ("torch.cuda.", "torch.xpu.")  # device queries: properties, current device, streams
# A two-stage loss's sequence stage, ``_NAME_sequence``: the reference's own PyTorch math over tokens and sequences
# after the per-token statistics the Triton kernel computes, by design; its Function runs it with autograd on.
SEQUENCE_STAGE = re.compile(r"_\w+_sequence")
SEQUENCE_STAGE_CALLS = frozenset({"torch.enable_grad", "torch.autograd.grad"})
# A class-weighted loss's ``_take(weight, target)``: each kept row's class weight, gathered on the host for the
# weighted mean's denominator ``torch.where(target != ignore_index, _take(weight, target), 0.0).sum()``, as
# upstream's cross entropy gathers them; the kept-rows count's weighted form.
CLASS_WEIGHT_TAKE = "_take"
# The count of pieces a row longer than one program holds is cut into: a scalar parameter's gradient over them,
# ``grad / chunks``, each piece having added the whole row's value.
LONG_ROW_PIECES = "chunks"
# Tensor methods a wrapper may call: views, reshapes, layout and dtype changes, metadata, buffer allocation.
# Tensor metadata: allowed, but they return numbers, not tensors.
METADATA_METHODS = frozenset(
    {"stride", "size", "dim", "numel", "element_size", "is_contiguous", "data_ptr", "is_floating_point"}
)
ALLOWED_TENSOR_METHODS = METADATA_METHODS | {
    "view",
    "view_as",
    "reshape",
    "flatten",
    "squeeze",
    "unsqueeze",
    "expand",
    "expand_as",
    "contiguous",
    "to",
    "float",
    "type_as",
    "detach",
    "detach_",
    "clone",
    "requires_grad_",
    "new_empty",
    "new_zeros",
    "new_full",
    "zero_",
    "fill_",
}
ALLOCATING_METHODS = frozenset({"new_empty", "new_zeros", "new_full"})
# The one torch.nn.functional call a wrapper may make: shifting a causal LM's labels (``_is_label_shift``).
LABEL_SHIFT_PAD = "torch.nn.functional.pad"
# Methods allowed only on the kept-rows count ``(target != ignore_index).sum()``.
COUNT_METHODS = frozenset({"clamp", "clamp_", "to", "float"})
# Methods that return a tensor when called on one (used to follow tensors through assignments).
TENSOR_RESULT_METHODS = (ALLOWED_TENSOR_METHODS | COUNT_METHODS | {"sum"}) - METADATA_METHODS
# Attributes only tensors have: a name used with one of them is a tensor (not ``numel``: a torch.Size has it too, and
# the tier-2 templates keep the input's shape to size the backward).
TENSOR_EVIDENCE = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "contiguous",
        "stride",
        "shape",
        "dim",
        "ndim",
        "dtype",
        "device",
        "is_contiguous",
        "data_ptr",
        "element_size",
        "clone",
        "detach",
        "requires_grad",
        "grad",
        "to",
        "sum",
    }
)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def check_source(source: str, path: str = "<ops>", grad_names: Collection[str] | None = None) -> list[Finding]:
    """Every purity violation of one ops file, sorted by line. ``grad_names``: inputs/parameters that require grad
    (from the profile); their positions in ``backward``'s return must not be ``None``."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        return [Finding(path, error.lineno or 1, f"does not parse: {error.msg}")]
    checker = _FileChecker(tree, path)
    findings = checker.check_jit_functions() + checker.check_wrappers() + checker.check_backwards(grad_names)
    return sorted(set(findings), key=lambda f: (f.line, f.message))


# Module-level structure ------------------------------------------------------------------------------------
def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> fully qualified name, for every import of the file."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _top_level_defs(body: list[ast.stmt]):
    """Functions and classes at module level, including those under ``if``/``try`` (interpreter fallbacks)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            yield node
        elif isinstance(node, ast.If):
            yield from _top_level_defs(node.body)
            yield from _top_level_defs(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                yield from _top_level_defs(block)


def _walk_function(function: ast.FunctionDef):
    """Nodes of a function's body, without descending into nested functions, lambdas or classes."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(child)


def _parents(function: ast.FunctionDef) -> dict[ast.AST, ast.AST]:
    parents = {}
    for node in _walk_function(function):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    return parents


def _source_of(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _FileChecker:
    def __init__(self, tree: ast.Module, path: str):
        self.path = path
        self.aliases = _imports(tree)
        defs = list(_top_level_defs(tree.body))
        self.jit_functions = {d.name: d for d in defs if isinstance(d, ast.FunctionDef) and self._is_jit(d)}
        self.tilelang_programs = {
            d.name: d for d in defs if isinstance(d, ast.FunctionDef) and self._builds_tilelang_kernel(d)
        }
        kernels = set(self.jit_functions) | set(self.tilelang_programs)
        self.function_classes = [d for d in defs if isinstance(d, ast.ClassDef) and self._is_autograd_function(d)]
        self.plain_functions = {d.name: d for d in defs if isinstance(d, ast.FunctionDef) and d.name not in kernels}
        self.sequence_stages = {name for name in self.plain_functions if SEQUENCE_STAGE.fullmatch(name)}
        host_math = self.sequence_stages | {CLASS_WEIGHT_TAKE}
        self.wrappers: list[tuple[str, ast.FunctionDef]] = [
            (name, fn) for name, fn in self.plain_functions.items() if name not in host_math
        ]
        for cls in self.function_classes:
            for item in cls.body:
                if isinstance(item, ast.FunctionDef):
                    self.wrappers.append((f"{cls.name}.{item.name}", item))
        self.tensors = _TensorInference(self).run()

    def qualified(self, node: ast.AST) -> str | None:
        """``tl.sum`` -> ``triton.language.sum``; None when the root is not an imported name."""
        parts = _dotted(node)
        if not parts or parts[0] not in self.aliases:
            return None
        return ".".join([self.aliases[parts[0]], *parts[1:]])

    def _is_jit(self, function: ast.FunctionDef) -> bool:
        for decorator in function.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self.qualified(target) == "triton.jit":
                return True
        return False

    def _builds_tilelang_kernel(self, function: ast.FunctionDef) -> bool:
        """A function that defines a ``@T.prim_func`` (a TileLang kernel) inside it."""
        for node in ast.walk(function):
            if isinstance(node, ast.FunctionDef) and node is not function:
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if self.qualified(target) == TILELANG_PRIM_FUNC:
                        return True
        return False

    def _is_autograd_function(self, cls: ast.ClassDef) -> bool:
        return any((self.qualified(base) or "").endswith("autograd.Function") for base in cls.bases)

    def finding(self, node: ast.AST, message: str) -> Finding:
        return Finding(self.path, getattr(node, "lineno", 1), message)

    # Rule 1 -------------------------------------------------------------------------------------------------
    def check_jit_functions(self) -> list[Finding]:
        findings = []
        for name, function in self.jit_functions.items():
            parents = _parents(function)
            for node in _walk_function(function):
                if isinstance(node, ast.Call):
                    problem = self._jit_call_problem(node)
                    if problem:
                        findings.append(self.finding(node, f"@triton.jit {name}: {problem}"))
                elif isinstance(node, ast.Attribute) and not self._inside_chain_or_call(node, parents):
                    # Non-call uses (torch.float32, math.pi): host objects a kernel cannot use either.
                    qualified = self.qualified(node)
                    if qualified and qualified.split(".")[0] in FORBIDDEN_IN_JIT:
                        findings.append(
                            self.finding(node, f"@triton.jit {name}: uses {qualified} (not Triton language)")
                        )
        return findings + self._check_tilelang_programs()

    def _check_tilelang_programs(self) -> list[Finding]:
        """Rule 1 for TileLang: a kernel builder and the kernel in it use TileLang (and Python builtins) only."""
        findings = []
        for name, function in self.tilelang_programs.items():
            local = {node.name for node in ast.walk(function) if isinstance(node, ast.FunctionDef)}
            nodes = list(ast.walk(function))
            parents = {child: node for node in nodes for child in ast.iter_child_nodes(node)}
            for node in nodes:
                if isinstance(node, ast.Call):
                    problem = self._tilelang_call_problem(node, local)
                    if problem:
                        findings.append(self.finding(node, f"TileLang program {name}: {problem}"))
                elif isinstance(node, ast.Attribute) and not self._inside_chain_or_call(node, parents):
                    qualified = self.qualified(node)
                    if qualified and qualified.split(".")[0] in FORBIDDEN_IN_JIT:
                        findings.append(self.finding(node, f"TileLang program {name}: uses {qualified} (not TileLang)"))
        return findings

    def _tilelang_call_problem(self, call: ast.Call, local: set[str]) -> str | None:
        qualified = self.qualified(call.func)
        if qualified is not None:
            if qualified.startswith(TILELANG_ALLOWED_PREFIXES):
                return None
            return f"calls {qualified}(...) (only T.*, TileLang programs of this file and Python builtins)"
        if isinstance(call.func, ast.Name):
            allowed = local | set(self.tilelang_programs) | JIT_BUILTINS
            if call.func.id in allowed:
                return None
            return f"calls {call.func.id}(...), which is not TileLang, a TileLang program of this file or a builtin"
        return None  # a method of a TileLang value

    @staticmethod
    def _inside_chain_or_call(node: ast.Attribute, parents: dict) -> bool:
        parent = parents.get(node)
        return isinstance(parent, ast.Attribute) or (isinstance(parent, ast.Call) and parent.func is node)

    def _jit_call_problem(self, call: ast.Call) -> str | None:
        func = call.func
        qualified = self.qualified(func)
        if qualified is not None:
            if qualified.startswith(JIT_ALLOWED_PREFIXES) or qualified == "triton":
                return None
            return f"calls {qualified}(...) (only tl.*, jit functions of this file, liger_kernel.ops.utils and layout_utils)"
        if isinstance(func, ast.Name):
            if func.id in self.jit_functions or func.id in JIT_BUILTINS:
                return None
            return f"calls {func.id}(...), which is not a @triton.jit function of this file or a Triton builtin"
        # A method of a Triton value (x.to(tl.float32), ptr.dtype.element_ty.to(...)): Triton language.
        return None

    # Rule 2 -------------------------------------------------------------------------------------------------
    def check_wrappers(self) -> list[Finding]:
        findings = []
        for label, function in self.wrappers:
            tensors = self.tensors[id(function)]
            buffers = _allocated_buffers(self, function)
            parents = _parents(function)
            for node in _walk_function(function):
                problem = self._wrapper_problem(node, tensors, buffers, parents)
                if problem:
                    findings.append(self.finding(node, f"{label}: {problem}"))
        return findings

    def _wrapper_problem(self, node, tensors, buffers, parents) -> str | None:
        is_tensor = _TensorPredicate(self, tensors)
        hint = "wrappers only allocate, reshape and launch; the math belongs in the Triton kernel"
        if self._in_weighted_count(node, parents):
            return None
        if isinstance(node, ast.Call):
            qualified = self.qualified(node.func)
            if qualified is not None and qualified.split(".")[0] in ("torch", "numpy"):
                if qualified in ALLOWED_TORCH_CALLS or qualified.startswith(ALLOWED_TORCH_PREFIXES):
                    return None
                if qualified in SEQUENCE_STAGE_CALLS and self.sequence_stages:
                    return None
                if qualified == LABEL_SHIFT_PAD and self._is_label_shift(parents.get(node)):
                    return None
                return f"{qualified}(...) is not allowed ({hint})"
            if isinstance(node.func, ast.Attribute) and qualified is None and is_tensor(node.func.value):
                return self._method_problem(node, is_tensor, buffers, hint)
            return None
        if isinstance(node, ast.BinOp) and (is_tensor(node.left) or is_tensor(node.right)):
            if _is_per_piece_share(node):
                return None
            return f"tensor arithmetic `{_source_of(node)}` ({hint})"
        if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not) and is_tensor(node.operand):
            return f"tensor arithmetic `{_source_of(node)}` ({hint})"
        if isinstance(node, ast.AugAssign) and (is_tensor(node.target) or is_tensor(node.value)):
            return f"in-place tensor arithmetic `{_source_of(node)}` ({hint})"
        if isinstance(node, ast.Compare) and any(is_tensor(e) for e in [node.left, *node.comparators]):
            if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
                return None
            if _is_kept_count_compare(node, parents):
                return None
            return f"tensor comparison `{_source_of(node)}` ({hint})"
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and is_tensor(node.value):
            if self._is_label_shift(node):
                return None
            return f"tensor indexing `{_source_of(node)}` ({hint})"
        return None

    def _in_weighted_count(self, node: ast.AST, parents: dict) -> bool:
        """Whether ``node`` is ``torch.where(target != ignore_index, _take(weight, target), 0.0).sum()`` or a part of
        its where (``CLASS_WEIGHT_TAKE``)."""
        for _ in range(4):  # a part of the where's condition: condition, where, .sum, the sum's call
            if self._is_weighted_count(node):
                return True
            node = parents.get(node)
        return False

    def _is_weighted_count(self, node: ast.AST | None) -> bool:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sum"):
            return False
        where = node.func.value
        if not (isinstance(where, ast.Call) and self.qualified(where.func) == "torch.where" and len(where.args) == 3):
            return False
        condition, taken, otherwise = where.args
        return (
            not node.args
            and isinstance(condition, ast.Compare)
            and len(condition.ops) == 1
            and isinstance(condition.ops[0], ast.NotEq)
            and isinstance(taken, ast.Call)
            and isinstance(taken.func, ast.Name)
            and taken.func.id == CLASS_WEIGHT_TAKE
            and isinstance(otherwise, ast.Constant)
        )

    def _is_label_shift(self, node: ast.AST | None) -> bool:
        """``F.pad(labels, (0, 1), value=v)[..., 1:]``: each token's label taken from the next token, the last one
        padded (Liger's LigerForCausalLMLoss shifts so on the host), a copy of the targets and no math."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)):
            return False
        pad = node.value
        if self.qualified(pad.func) != LABEL_SHIFT_PAD or len(pad.args) != 2:
            return False
        widths = pad.args[1]
        one_at_the_end = isinstance(widths, ast.Tuple) and [_constant(e) for e in widths.elts] == [0, 1]
        keywords_ok = [k.arg for k in pad.keywords] == ["value"]
        index = node.slice.elts if isinstance(node.slice, ast.Tuple) else []
        from_one = (
            len(index) == 2
            and _constant(index[0]) is Ellipsis
            and isinstance(index[1], ast.Slice)
            and _constant(index[1].lower) == 1
            and index[1].upper is None
            and index[1].step is None
        )
        return one_at_the_end and keywords_ok and from_one

    def _method_problem(self, call: ast.Call, is_tensor, buffers, hint) -> str | None:
        method = call.func.attr
        receiver = call.func.value
        if method == "sum":
            if _is_sum_of_buffer(call, buffers) or _is_kept_count_compare_node(receiver, is_tensor):
                return None
            return (
                f"`{_source_of(call)}`: only .sum() / .sum(dim=0 or 1) of a partial-sum buffer allocated here, or the "
                f"(target != ignore_index).sum() count, may reduce on the host ({hint})"
            )
        if method in COUNT_METHODS and _is_kept_count(receiver, is_tensor):
            return None
        if method in ALLOWED_TENSOR_METHODS:
            return None
        return f"tensor method .{method}() in `{_source_of(call)}` is not allowed ({hint})"

    # Rule 3 -------------------------------------------------------------------------------------------------
    def check_backwards(self, grad_names: Collection[str] | None) -> list[Finding]:
        findings = []
        for cls in self.function_classes:
            methods = {item.name: item for item in cls.body if isinstance(item, ast.FunctionDef)}
            backward = methods.get("backward")
            if backward is None:
                findings.append(self.finding(cls, f"{cls.name} has no backward"))
                continue
            forward_inputs = [a.arg for a in methods["forward"].args.args[1:]] if "forward" in methods else []
            problem = _stub_backward_problem(backward, forward_inputs, set(grad_names or ()))
            if problem:
                findings.append(self.finding(backward, f"{cls.name}.backward: {problem}"))
        return findings


# Tensor inference ------------------------------------------------------------------------------------------
class _TensorPredicate:
    """Is an expression a tensor, given the names known to hold tensors?"""

    def __init__(self, checker: _FileChecker, names: set[str], tensor_names: dict[int, set[str]] | None = None):
        self.checker = checker
        self.names = names
        # Names inferred so far for every wrapper: a call to a same-file function returning a tensor is a tensor.
        self.tensor_names = tensor_names if tensor_names is not None else checker.tensors

    def __call__(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, ast.Call):
            qualified = self.checker.qualified(node.func)
            if qualified is not None:
                if qualified.split(".")[0] != "torch" or qualified.startswith(ALLOWED_TORCH_PREFIXES):
                    return False
                return qualified not in ALLOWED_TORCH_CALLS - TORCH_ALLOCATORS
            if isinstance(node.func, ast.Attribute):
                return node.func.attr in TENSOR_RESULT_METHODS and self(node.func.value)
            if isinstance(node.func, ast.Name) and node.func.id in self.checker.plain_functions:
                return self._returns_tensor(self.checker.plain_functions[node.func.id])
            return False
        if isinstance(node, ast.BinOp):
            return self(node.left) or self(node.right)
        if isinstance(node, ast.UnaryOp):
            return self(node.operand)
        if isinstance(node, ast.Compare):
            return any(self(e) for e in [node.left, *node.comparators]) and not all(
                isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops
            )
        if isinstance(node, ast.Subscript):
            return self(node.value)
        if isinstance(node, ast.IfExp):
            return self(node.body) or self(node.orelse)
        return False

    def _returns_tensor(self, function: ast.FunctionDef) -> bool:
        """Does the function return a single tensor (not a tuple) on some path?"""
        names = self.tensor_names.get(id(function), set())
        callee = _TensorPredicate(self.checker, names, self.tensor_names)
        for node in _walk_function(function):
            if isinstance(node, ast.Return) and node.value is not None and not isinstance(node.value, ast.Tuple):
                # Direct values only (names, methods, allocations): no recursion through further calls.
                if not isinstance(node.value, ast.Call) or isinstance(node.value.func, ast.Attribute):
                    if callee(node.value):
                        return True
        return False


def _is_per_piece_share(node: ast.BinOp) -> bool:
    """``grad / chunks``: a scalar parameter's gradient over a long row's pieces, each of which held the whole row's
    value (the split path's per-row terms), shared out by the count of pieces the row was cut into."""
    return isinstance(node.op, ast.Div) and isinstance(node.right, ast.Name) and node.right.id == LONG_ROW_PIECES


class _TensorInference:
    """Which local names of each wrapper hold tensors: a file-wide fixed point over evidence and data flow."""

    def __init__(self, checker: _FileChecker):
        self.checker = checker
        self.functions = {id(fn): fn for _, fn in checker.wrappers}
        self.names: dict[int, set[str]] = {key: set() for key in self.functions}
        # An autograd Function's ``ctx`` holds what forward kept (``ctx.shape = x.shape``): never a tensor itself.
        self.contexts = {
            id(item): item.args.args[0].arg
            for cls in checker.function_classes
            for item in cls.body
            if isinstance(item, ast.FunctionDef) and item.args.args
        }

    def run(self) -> dict[int, set[str]]:
        for key, function in self.functions.items():
            self.names[key] |= self._evidence(function)
            self.names[key].discard(self.contexts.get(key))
        for _ in range(20):
            changed = False
            for key, function in self.functions.items():
                before = len(self.names[key])
                self._propagate(function)
                self.names[key].discard(self.contexts.get(key))
                changed |= len(self.names[key]) != before
            if not changed:
                break
        return self.names

    def _evidence(self, function: ast.FunctionDef) -> set[str]:
        found = set()
        if function.name == "backward":
            # Every argument of an autograd backward after ctx is an incoming gradient.
            found |= {arg.arg for arg in function.args.args[1:]}
        for node in _walk_function(function):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)  # ``ctx.shape = ...`` stores an attribute: no evidence
                and node.attr in TENSOR_EVIDENCE
                and isinstance(node.value, ast.Name)
            ):
                found.add(node.value.id)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
                found |= self._launch_pointer_arguments(node)
        return found

    def _launch_pointer_arguments(self, call: ast.Call) -> set[str]:
        """Names passed to a kernel launch ``kernel[grid](...)`` where the kernel's parameter is a ``*_ptr``."""
        kernel = call.func.value
        if not isinstance(kernel, ast.Name) or kernel.id not in self.checker.jit_functions:
            return set()
        params = [a.arg for a in self.checker.jit_functions[kernel.id].args.args]
        found = set()
        for index, arg in enumerate(call.args):
            if index < len(params) and params[index].endswith("_ptr") and isinstance(arg, ast.Name):
                found.add(arg.id)
        for keyword in call.keywords:
            if keyword.arg and keyword.arg.endswith("_ptr") and isinstance(keyword.value, ast.Name):
                found.add(keyword.value.id)
        return found

    def _callee(self, call: ast.Call) -> ast.FunctionDef | None:
        """The wrapper ``call`` calls (a sequence stage is none: its tensors are not followed)."""
        if isinstance(call.func, ast.Name):
            callee = self.checker.plain_functions.get(call.func.id)
            return callee if callee is not None and id(callee) in self.functions else None
        return None

    def _returned_tensor_positions(self, function: ast.FunctionDef) -> set[int]:
        is_tensor = _TensorPredicate(self.checker, self.names[id(function)], self.names)
        positions = set()
        for node in _walk_function(function):
            if isinstance(node, ast.Return) and node.value is not None:
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                positions |= {i for i, value in enumerate(values) if is_tensor(value)}
        return positions

    def _propagate(self, function: ast.FunctionDef) -> None:
        names = self.names[id(function)]
        is_tensor = _TensorPredicate(self.checker, names, self.names)
        for node in _walk_function(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._assign(names, target, node.value, is_tensor)
            elif isinstance(node, ast.Call):
                callee = self._callee(node)
                if callee is None:
                    continue
                callee_names = self.names[id(callee)]
                params = [a.arg for a in callee.args.args]
                for index, arg in enumerate(node.args):
                    if index >= len(params) or not isinstance(arg, ast.Name):
                        continue
                    # Data flows both ways: a tensor argument makes a tensor parameter and vice versa.
                    if arg.id in names:
                        callee_names.add(params[index])
                    elif params[index] in callee_names:
                        names.add(arg.id)

    def _assign(self, names: set[str], target: ast.AST, value: ast.AST, is_tensor) -> None:
        if isinstance(target, ast.Name):
            if is_tensor(value):
                names.add(target.id)
            return
        if not isinstance(target, (ast.Tuple, ast.List)):
            return
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            for sub_target, sub_value in zip(target.elts, value.elts):
                self._assign(names, sub_target, sub_value, is_tensor)
        elif isinstance(value, ast.Attribute) and value.attr == "saved_tensors":
            names.update(t.id for t in target.elts if isinstance(t, ast.Name))
        elif isinstance(value, ast.Call) and (callee := self._callee(value)) is not None:
            positions = self._returned_tensor_positions(callee)
            names.update(t.id for i, t in enumerate(target.elts) if i in positions and isinstance(t, ast.Name))


def _allocated_buffers(checker: _FileChecker, function: ast.FunctionDef) -> set[str]:
    """Names the wrapper bound to a freshly allocated tensor (directly or in either branch of ``a if c else b``)."""

    def allocates(value: ast.AST) -> bool:
        if isinstance(value, ast.IfExp):
            return allocates(value.body) or allocates(value.orelse)
        if not isinstance(value, ast.Call):
            return False
        if checker.qualified(value.func) in TORCH_ALLOCATORS:
            return True
        return isinstance(value.func, ast.Attribute) and value.func.attr in ALLOCATING_METHODS

    return {
        target.id
        for node in _walk_function(function)
        if isinstance(node, ast.Assign) and allocates(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _constant(node: ast.AST):
    return node.value if isinstance(node, ast.Constant) else None


def _is_sum_of_buffer(call: ast.Call, buffers: set[str]) -> bool:
    receiver = call.func.value
    if not isinstance(receiver, ast.Name) or receiver.id not in buffers:
        return False
    if not call.args and not call.keywords:
        return True
    dims = [k.value for k in call.keywords if k.arg == "dim"] + list(call.args[:1])
    # dim=1: the partial sums of a parameter vector's elements, one row of programs per element ([n, n_programs]).
    return len(dims) == 1 and isinstance(dims[0], ast.Constant) and dims[0].value in (0, 1) and len(call.keywords) <= 1


def _is_kept_count_compare_node(node: ast.AST, is_tensor) -> bool:
    return (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.NotEq)
        and (is_tensor(node.left) or is_tensor(node.comparators[0]))
    )


def _is_kept_count_compare(node: ast.Compare, parents: dict) -> bool:
    """``(target != ignore_index)`` that is immediately summed: the number of kept rows."""
    parent = parents.get(node)
    grandparent = parents.get(parent)
    return (
        len(node.ops) == 1
        and isinstance(node.ops[0], ast.NotEq)
        and isinstance(parent, ast.Attribute)
        and parent.attr == "sum"
        and isinstance(grandparent, ast.Call)
        and grandparent.func is parent
    )


def _is_kept_count(node: ast.AST, is_tensor) -> bool:
    """``(t != i).sum()`` possibly followed by ``.clamp(min=1)`` / ``.to(...)`` / ``.float()``."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    if node.func.attr == "sum":
        return _is_kept_count_compare_node(node.func.value, is_tensor)
    return node.func.attr in COUNT_METHODS and _is_kept_count(node.func.value, is_tensor)


# Rule 3 helpers --------------------------------------------------------------------------------------------
def _stub_backward_problem(backward: ast.FunctionDef, forward_inputs: list[str], grad_names: set[str]) -> str | None:
    body = [
        s
        for s in backward.body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str))
    ]
    if all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in body):
        return "is a stub (its body does nothing)"
    for node in _walk_function(backward):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name) and target.id == "NotImplementedError":
                return "raises NotImplementedError (a stub)"
    returns = [node for node in _walk_function(backward) if isinstance(node, ast.Return)]
    if not returns or all(r.value is None for r in returns):
        return "returns nothing (a stub)"
    incoming = {arg.arg for arg in backward.args.args[1:]}
    reassigned = {
        target.id
        for node in _walk_function(backward)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        for target in ast.walk(target)
        if isinstance(target, ast.Name)
    }
    passthrough = incoming - reassigned
    rows = [r.value.elts if isinstance(r.value, ast.Tuple) else [r.value] for r in returns if r.value is not None]

    def kind(value: ast.AST) -> str:
        if isinstance(value, ast.Constant) and value.value is None:
            return "none"
        if isinstance(value, ast.Name) and value.id in passthrough:
            return "passthrough"
        return "computed"

    kinds = [[kind(v) for v in row] for row in rows]
    if all("computed" not in row for row in kinds):
        passed = sorted({v.id for row in rows for v in row if kind(v) == "passthrough"})
        if passed:
            return f"returns its incoming gradient {', '.join(passed)} unchanged (a stub)"
        return "returns only None (a stub: no input gets a gradient)"
    for position, name in enumerate(forward_inputs):
        if name in grad_names and all(position < len(row) and kind(row[position]) == "none" for row in rows):
            return f"returns None for '{name}', which requires a gradient"
    return None
