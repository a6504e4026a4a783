"""How an existing kernel of a checkout could be called with a reference's arguments, read from the kernel's files.

``call_plans`` pairs a reference profile with every kernel of the checkout whose entry (functional, else
``Function.apply``) can take the reference's tensors: tensors by name (``hostapi``'s synonyms), then in order onto
the entry's required parameters; an integer input (class targets) only onto a target-like parameter and back, a
float one too where a loss compares two distributions; hyper-parameters by name. Whatever the entry has beyond that
is an option: a parameter with a default, or a required one the reference does not name (a hyper-parameter of the
reference's by another name, or a number written in it, may fill it).
Each option gets the values worth trying: the reference's hyper-parameters of a compatible type (passed through),
the numeric literals of the reference's source, the other value of a bool, and the strings the kernel's own code
lists or compares beside a string default (casting modes, reductions).
"""

from __future__ import annotations

import ast
import dataclasses
import itertools

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from tools.kernelgen.hostapi import TENSOR_SYNONYMS
from tools.kernelgen.hostapi import ApiError
from tools.kernelgen.hostapi import KernelApi
from tools.kernelgen.hostapi import Param
from tools.kernelgen.hostapi import find_tensor
from tools.kernelgen.hostapi import read_kernel_api
from tools.kernelgen.hostapi import source_segment
from tools.kernelgen.layout import DTENSOR_UTILS
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import LAYOUT_UTILS
from tools.kernelgen.layout import OPS_UTILS
from tools.kernelgen.layout import ROW_UTILS
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.render.vectors import hold_vectors_whole
from tools.kernelgen.repo import LigerRepo

# A parameter the reference's integer input (class targets) goes to, and no float tensor does.
TARGET_WORDS = ("target", "label")
MAX_LITERALS = 8
_REQUIRED = object()
# torch's deprecated spellings of ``reduction``: beside a ``reduction`` parameter they choose nothing it cannot, and a
# call naming them would teach a deprecated API.
LEGACY_REDUCTION = ("size_average", "reduce")


@dataclass(frozen=True)
class Bound:
    """A kernel parameter that takes the value of the reference's hyper-parameter ``hyper``."""

    hyper: str


@dataclass
class Option:
    """An entry parameter the search may set: its default (``None`` in ``required`` ones: it has none) and the
    other values worth trying."""

    name: str
    default: Any
    candidates: list[Any] = field(default_factory=list)
    required: bool = False


@dataclass
class CallPlan:
    """One kernel called with a reference's arguments: what goes where, and what is left to choose."""

    api: KernelApi
    tensors: dict[str, str]  # reference tensor (inputs, then parameters) -> entry parameter
    fixed: dict[str, Bound]  # entry parameter -> the reference hyper-parameter of the same name
    options: list[Option]
    defaults: dict[str, Any]  # every entry parameter's default value that is a literal
    module_inits: dict[str, list[Param]]  # module class -> its __init__ parameters

    @property
    def name(self) -> str:
        return self.api.name

    @property
    def soft_targets(self) -> frozenset[str]:
        """Reference tensors that go to a target parameter without being class indices: a kernel may take them
        as data (no gradient), as Liger's distillation losses take the teacher's distribution."""
        return frozenset(name for name, param in self.tensors.items() if _target_like(param))


def kernel_names(repo: LigerRepo) -> list[str]:
    """Every ``ops/NAME.py`` of the checkout but the package's own and shared modules (a module without an autograd
    Function is no kernel: ``read_kernel_api`` says so later)."""
    folder = repo.root / Path(OPS_UTILS).parent
    if not folder.is_dir():
        return []
    shared = {Path(path).stem for path in (OPS_UTILS, LAYOUT_UTILS, DTENSOR_UTILS, ROW_UTILS)}
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_") and p.stem not in shared)


def default_value(text: str | None) -> Any:
    """A parameter's default as written (``"1e-6"``) as its value; a sentinel for none or one that is no literal."""
    if text is None:
        return _REQUIRED
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return _REQUIRED


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _target_like(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in TARGET_WORDS) or lowered in next(g for g in TENSOR_SYNONYMS if "target" in g)


# Calls and keywords whose numbers say where (a dimension, an index, a shape), not how much: no option's value.
SHAPE_CALLS = {
    "sum", "mean", "amax", "amin", "max", "min", "logsumexp", "softmax", "log_softmax", "gather", "unsqueeze",
    "squeeze", "view", "reshape", "transpose", "permute", "size", "chunk", "split", "narrow", "flatten", "expand",
    "repeat", "cumsum", "norm", "var", "std", "argmax", "take_along_dim", "index_select",
}  # fmt: skip
SHAPE_KEYWORDS = {"dim", "axis", "keepdim", "num_classes", "dims"}
# Orders of the float inputs tried against a kernel's parameters, the written order first: every order of up to four
# inputs; a reference of more inputs (20 inputs have 20! orders) is matched in its first orders only.
MAX_TENSOR_ORDERS = 24


def _structural(tree: ast.AST) -> set[int]:
    """Ids of the nodes under a dimension, index or shape argument, and of the hints dict ``KERNELGEN``."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "KERNELGEN" for t in node.targets):
            roots.append(node)
        elif isinstance(node, ast.Subscript):
            roots.append(node.slice)
        elif isinstance(node, ast.keyword) and node.arg in SHAPE_KEYWORDS:
            roots.append(node.value)
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in SHAPE_CALLS:
                roots.extend(node.args[1:] if isinstance(node.func, ast.Name) else node.args)
    return {id(inner) for root in roots for inner in ast.walk(root)}


def reference_literals(source: str, entry: str = "") -> list[float]:
    """Numbers written in the reference's code, once each: those of the ``entry`` function or class first (a file
    may hold other references), then the rest in order; a sign counts, dimensions, indices, shapes and the
    ``KERNELGEN`` hints do not."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    skipped = _structural(tree)
    own = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == entry.split(".")[0]]
    found: list[float] = []
    for node in itertools.chain(*map(ast.walk, own), ast.walk(tree)):
        if id(node) in skipped:
            continue
        value = None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            skipped.add(id(node.operand))
            value = -node.operand.value if _is_number(node.operand.value) else None
        elif isinstance(node, ast.Constant) and _is_number(node.value):
            value = node.value
        if value is not None and value not in found:
            found.append(value)
    return found[:MAX_LITERALS]


def string_choices(sources: list[str], option: str, default: str) -> list[str]:
    """The strings the kernel's code lists beside ``default`` (a tuple, set, list or dict's keys holding it) or
    compares ``option`` with: the values a string option accepts."""
    found: list[str] = []

    def add(values):
        for value in values:
            if isinstance(value, str) and value.isidentifier() and value != default and value not in found:
                found.append(value)

    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            elif isinstance(node, ast.Dict):
                values = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            elif isinstance(node, ast.Compare) and option in ast.unparse(node.left).split(".")[-1:]:
                add(e.value for e in node.comparators if isinstance(e, ast.Constant))
                continue
            else:
                continue
            if default in values:
                add(values)
    return found


def _candidates(param: Param, default: Any, loose_hypers: list, literals: list[float], sources: list[str]) -> list:
    bound = [
        Bound(hp.name)
        for hp in loose_hypers
        if default is _REQUIRED
        or default is None
        or (_is_number(default) and _is_number(hp.default))
        or type(default) is type(hp.default)
    ]
    if isinstance(default, bool):
        return [*bound, not default]
    if isinstance(default, str):
        return [*bound, *string_choices(sources, param.name, default)]
    if isinstance(default, int):
        values = [int(v) for v in literals if float(v).is_integer()]
    else:
        values = [float(v) for v in literals]
    # A literal equal to a passed-through hyper-parameter's default runs the same on the probe: the pass-through,
    # which the check off the defaults then confirms or refutes, stands for both.
    passed = [hp.default for hp in loose_hypers if Bound(hp.name) in bound and _is_number(hp.default)]
    return [*bound, *[v for v in dict.fromkeys(values) if v != default and v not in passed]]


def _tested_against_none(source: str, name: str) -> bool:
    """Whether ``source`` compares ``name`` with None (``if W is not None:``): an argument the kernel may go
    without."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Name)
        and node.left.id == name
        and all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
        and all(isinstance(c, ast.Constant) and c.value is None for c in node.comparators)
        for node in ast.walk(tree)
    )


def _calls(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` calls one of ``names`` (``F(...)``, ``F.apply(...)`` or ``module.F(...)``)."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            text = ast.unparse(call.func)
            if text.removesuffix(".apply").split(".")[-1] in names:
                return True
    return False


def _init_params(init: ast.FunctionDef, source: str) -> list[Param]:
    arguments = init.args
    positional = [*arguments.posonlyargs, *arguments.args][1:]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    pairs = [*zip(positional, defaults), *zip(arguments.kwonlyargs, arguments.kw_defaults)]
    return [Param(a.arg, None if d is None else source_segment(source, d)) for a, d in pairs]


def module_inits(repo: LigerRepo, api: KernelApi) -> dict[str, list[Param]]:
    """The ``__init__`` parameters of each module class of the kernel's module file that applies its Function or
    calls its functional."""
    path = kernel_paths(api.name)["module"]
    if not repo.exists(path):
        return {}
    source = repo.read(path)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    applied = {api.function_class} | ({api.functional.name} if api.functional else set())
    inits = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and _calls(node, applied):
            init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
            if init is not None:
                inits[node.name] = _init_params(init, source)
    return inits


def _map_tensors(profile: KernelProfile, params: list[Param], taken: set[str]) -> list[dict[str, str]]:
    """The ways the reference's tensors may go onto the entry's parameters (reference tensor -> parameter): by name
    where the names agree, else in order onto the required parameters (then those defaulting to None), in the
    first ``MAX_TENSOR_ORDERS`` orders of the float inputs placed so; an integer input (class targets) only onto a
    target-like parameter."""
    integer = {t.name for t in profile.inputs if t.dtype.startswith("int")}
    # A loss without class indices compares two distributions: its second one is the target (kl_div's, jsd's).
    soft_targets = profile.tier == 3 and not integer
    references = [t.name for t in profile.inputs] + [p.name for p in profile.parameters]
    free = [p.name for p in params if p.name not in taken]
    named: dict[str, str] = {}
    for name in references:
        found = find_tensor(name, free)
        if found is not None:
            named[name] = found
            free.remove(found)
    required = [p.name for p in params if p.default is None and p.name in free]
    optional = [p.name for p in params if p.default == "None" and p.name in free]
    placed = [name for name in references if name not in named]
    if len(placed) > len(required) + len(optional):
        return []
    slots = (required + optional)[: len(placed)]
    movable = [i for i, name in enumerate(placed) if name not in integer and name in {t.name for t in profile.inputs}]
    mappings = []
    for order in itertools.islice(itertools.permutations(movable), MAX_TENSOR_ORDERS):
        arranged = list(placed)
        for index, source in zip(movable, order):
            arranged[index] = placed[source]
        placed_at = {**named, **dict(zip(arranged, slots))}
        mapping = {name: placed_at[name] for name in references}  # in the reference's order
        if all(_may_take(name, param, integer, soft_targets) for name, param in mapping.items()):
            mappings.append(mapping)
    return mappings


def _may_take(name: str, param: str, integer: set[str], soft_targets: bool) -> bool:
    """Whether reference tensor ``name`` may go to entry parameter ``param``: class indices only to a target, a
    target only class indices unless the reference's targets are distributions (``soft_targets``)."""
    if name == param:
        return True
    if name in integer:
        return _target_like(param)
    return soft_targets or not _target_like(param)


def call_plans_of(
    repo: LigerRepo, name: str, profile: KernelProfile, literals: list[float], *, through_function: bool = False
) -> list[CallPlan]:
    """How kernel ``name`` of ``repo`` could be called with ``profile``'s arguments: one plan per way its tensors
    may be placed; none when it cannot take them. ``through_function``: called by ``Function.apply`` even where a
    functional exists (its options may be more than the functional passes on)."""
    try:
        api = read_kernel_api(repo, name)
    except (ApiError, OSError, UnicodeDecodeError, SyntaxError):
        return []
    if through_function:
        api = dataclasses.replace(api, functional=None)
    profile = hold_vectors_whole(profile)  # a held vector (PolyNorm's weight) is one argument, as the probe draws it
    params = api.entry.params
    names = {p.name for p in params}
    fixed = {hp.name: Bound(hp.name) for hp in profile.hyperparameters if hp.name in names}
    mappings = _map_tensors(profile, params, set(fixed))
    if not mappings:
        return []
    used = set(mappings[0].values()) | set(fixed)
    if any(_target_like(p.name) and p.default is None and p.name not in used for p in params):
        return []  # a loss's targets the reference does not have
    loose = [hp for hp in profile.hyperparameters if hp.name not in fixed]
    sources = [repo.read(kernel_paths(name)["ops"])]
    sources += [repo.read(path) for path in (kernel_paths(name)["module"], FUNCTIONAL) if repo.exists(path)]
    options, defaults = [], {}
    for param in params:
        default = default_value(param.default)
        if default is not _REQUIRED:
            defaults[param.name] = default
        if param.name in used or (param.name in LEGACY_REDUCTION and "reduction" in names):
            continue
        if param.default is not None and default is _REQUIRED:
            continue  # a default that is not a literal: left to the kernel
        candidates = _candidates(param, default, loose, literals, sources)
        if default is _REQUIRED:
            # A required argument the tensors left: a hyper-parameter of the reference's (an eps named otherwise),
            # else a number written in it (``F.layer_norm(..., eps=1e-5)`` against ``liger_layer_norm(X, W, B, eps)``).
            bound = [value for value in candidates if isinstance(value, Bound)]
            candidates = [*bound, *dict.fromkeys(literals)]
            if _tested_against_none(sources[0], param.name):
                # A tensor the kernel may go without (upstream's RMSNorm with ``W=None``): a reference without it
                # is the kernel at None.
                candidates.insert(0, None)
            if not candidates:
                return []
            options.append(Option(param.name, None, candidates, required=True))
        else:
            options.append(Option(param.name, default, candidates))
    modules = module_inits(repo, api)
    return [CallPlan(api, mapping, fixed, options, defaults, modules) for mapping in mappings]


def call_plans(repo: LigerRepo, profile: KernelProfile) -> list[CallPlan]:
    """Plans for every kernel of ``repo`` that can take ``profile``'s arguments (the kernel of the profile's own
    name left out: regenerating it is not a duplicate). A fused linear kernel takes hidden states and a weight, never
    a reference's logits: it is left out too (fed logits as its weight, upstream's reads out of bounds, which kills
    the process under the Triton interpreter); a loss's fused form is found through the loss (``_variant``)."""
    literals = reference_literals(profile.reference.source or "", profile.reference.entry or "")
    plans = []
    for name in kernel_names(repo):
        if name != profile.operation_name and not name.startswith("fused_linear_"):
            plans.extend(call_plans_of(repo, name, profile, literals))
    return plans


# The one line naming the call ------------------------------------------------------------------------------------
def _value_text(value: Any) -> str:
    if isinstance(value, Bound):
        return value.hyper
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def call_text(
    plan: CallPlan,
    chosen: dict[str, Any],
    reference_defaults: dict[str, Any] | None = None,
    name_tensors: bool = False,
    tensor_text: dict[str, str] | None = None,
    parameters_start: str | None = None,
) -> str:
    """``liger_rms_norm(X, W, eps, offset=1.0, casting_mode="gemma")`` and, when a module of the kernel takes the
    same options, `` / LigerRMSNorm(hidden_size, offset=1.0, casting_mode="gemma")``: the entry's required
    parameters by name, then what differs from its defaults (options moved, a tensor given to an optional parameter)
    and the reference's hyper-parameters of an option's name, passed on by name whatever their defaults.
    ``Function.apply`` takes positions only: every value up to the last one given. ``name_tensors``: each tensor
    parameter says which of the reference's tensors it takes even where they come in its order (names the caller has
    not written, such as the halves of a split argument). ``tensor_text``: the reference's tensors written as these
    expressions, each in its parameter's place (``logits.view(-1, logits.size(-1))``), the entry's call alone.
    ``parameters_start``: what the reference's learnable parameters start at (``ones``, ``zeros``), which a module's
    ``init_fn`` option (Liger's norms') is given where its default differs: Gemma's ``(1 + w)`` starts ``w`` at
    zeros, where ``LigerRMSNorm``'s weight starts at ones."""
    reference_defaults = reference_defaults or {}
    given = {param: (tensor_text or {}).get(tensor, tensor) for tensor, param in plan.tensors.items()}
    changed: dict[str, str] = {}
    for param in plan.api.entry.params:
        name = param.name
        option = next((o for o in plan.options if o.name == name), None)
        if name in given and param.default is not None:
            changed[name] = given[name]
        elif option is not None and name in chosen and (option.required or chosen[name] != option.default):
            value = chosen[name]
            changed[name] = _value_text(value)
        elif name in plan.fixed and param.default is not None:
            # The reference's hyper-parameter of this name, passed on whatever its default: at another value
            # (ignore_index=-1 in a caller) the kernel's own default would compute something else.
            changed[name] = plan.fixed[name].hyper
    in_order = [p.name for p in plan.api.entry.params if p.name in plan.tensors.values()]
    # The reference's tensors go in another order, or by names the kernel does not use: say where each goes.
    renamed = name_tensors or in_order != list(plan.tensors.values())
    if not plan.api.entry_is_functional:
        order = plan.api.entry.params
        last = max([i for i, p in enumerate(order) if p.name in changed or p.default is None], default=-1)
        tensors = given if renamed or tensor_text else {}
        values = [changed.get(p.name) or tensors.get(p.name) or p.default or p.name for p in order[: last + 1]]
        text = f"{plan.api.entry.name}({', '.join(values)})"
    else:
        # Required parameters by position up to the first one given a value, by name from there on: a keyword
        # before a positional that follows it (``liger_rms_norm(X, eps, W=None)``) would put eps in W's place.
        params = plan.api.entry.params
        first_changed = next((i for i, p in enumerate(params) if p.default is None and p.name in changed), len(params))
        required = [p.name for p in params[:first_changed] if p.default is None]
        named_after = {p.name: p.name for p in params[first_changed:] if p.default is None and p.name not in changed}
        if renamed:
            required = [f"{name}={given[name]}" if name in given else name for name in required]
        elif tensor_text:
            required = [given.get(name, name) for name in required]
        later = {name: (tensor_text or {}).get(name, given.get(name, name)) for name in named_after}
        keywords = {p.name: {**changed, **later}[p.name] for p in params if p.name in {**changed, **later}}
        text = f"{plan.api.entry.name}({', '.join([*required, *_keywords(keywords)])})"
    if tensor_text:
        return text
    for module, params in plan.module_inits.items():
        accepted = {p.name for p in params}
        options = {name: value for name, value in changed.items() if name not in given or name in accepted}
        if set(options) - accepted:
            continue
        # A hyper-parameter the module holds with a default of its own (LigerRMSNorm's eps=1e-6): the reference's
        # of that name passed on, as the functional's are.
        held = {p.name for p in params if p.default is not None}
        for name, bound in plan.fixed.items():
            if name in held and name not in options and bound.hyper in reference_defaults:
                options[name] = bound.hyper
        start = next((default_value(p.default) for p in params if p.name == "init_fn"), None)
        if parameters_start in ("ones", "zeros") and isinstance(start, str) and start != parameters_start:
            options["init_fn"] = _value_text(parameters_start)
        args = [p.name for p in params if p.default is None]
        args += _keywords({p.name: options[p.name] for p in params if p.name in options and p.name not in args})
        if parameters_start not in (None, "ones", "zeros"):
            # A start no option of the module gives (torch.full(..., 0.5)): said, not silently dropped.
            return (
                f"{text} / {module}({', '.join(args)}) (the reference starts its parameters at {parameters_start}: "
                "set them after building it)"
            )
        return f"{text} / {module}({', '.join(args)})"
    return text


def _keywords(values: dict[str, str]) -> list[str]:
    return [f"{name}={text}" for name, text in values.items()]


__all__ = [
    "Bound",
    "CallPlan",
    "Option",
    "call_plans",
    "call_plans_of",
    "call_text",
    "default_value",
    "kernel_names",
    "module_inits",
]
