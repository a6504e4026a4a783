"""Map each block of a model to what the target checkout computes it with, deciding by the numbers.

The math of a block (a norm class as written, an MLP's activation as an expression, the loss as a cross entropy)
is analysed as ``new`` analyses a reference and searched among the target's kernels with the variant search
``new`` runs before generating (``variants``): the kernel and its option values. A module of that kernel then
has to stand in for the model's own: built from the mini config, given the model module's weights (the state
dict has to load as it is) and run on the inputs the mini causal LM gave the block, its output has to be the
block's. Where the target has no kernel the row says what to generate, or why nothing can.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import re

from dataclasses import dataclass
from dataclasses import field
from typing import Any

from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.patch.model import Block
from tools.kernelgen.patch.model import ModelSource
from tools.kernelgen.repo import LigerRepo

# ACT2FN names -> the activation as a torch expression of ``x`` (checked against ACT2FN before use).
ACTIVATIONS = {
    "silu": "F.silu(x)",
    "swish": "F.silu(x)",
    "gelu": "F.gelu(x)",
    "gelu_pytorch_tanh": 'F.gelu(x, approximate="tanh")',
    "gelu_new": 'F.gelu(x, approximate="tanh")',
    "relu": "F.relu(x)",
    "relu2": "torch.square(F.relu(x))",
    "sigmoid": "torch.sigmoid(x)",
    "tanh": "torch.tanh(x)",
}
REFERENCE_HEADER = "import torch\nimport torch.nn.functional as F\n\nfrom torch import nn\n\n\n"
ATOL = RTOL = 1e-5  # float32 Liger module against the float32 model module


@dataclass
class Row:
    """One line of the table and what writing the patch needs of it."""

    block: Block
    status: str  # "kernel", "generate", "none", "unused"
    kernel: str = ""
    call: str = ""  # the kernel's call, as the variant search names it
    why: str = ""
    strategy: str = ""  # "class" (swap for a Liger module), "act_fn", "rope", "cross_entropy"
    liger_class: str = ""  # the Liger module or function that replaces the block
    liger_module: str = ""  # the module that defines it
    options: dict[str, Any] = field(default_factory=dict)  # keyword arguments of the Liger constructor
    reference: str = ""  # the reference source to generate a kernel from (status "generate")
    flag: str = ""  # the apply function's keyword that switches it
    forward: str = ""  # strategy "forward": the MLP's forward through the kernel's entry
    capture: tuple | None = None  # (qualified name, args, kwargs, output) of the block's first call in the mini model
    unchecked: str = ""  # why the Liger module was not run against the block here (it needs a GPU)
    init_params: list[tuple[str, str | None]] = field(default_factory=list)  # the model norm's (name, default)

    @property
    def label(self) -> str:
        kinds = {"norm": "norm", "mlp": "MLP", "experts": "experts", "rope": "rotary embedding", "loss": "loss"}
        return f"{self.block.name} ({kinds[self.block.kind]})"


def block_reference(source: ModelSource, block: Block) -> tuple[str, str]:
    """(source text, entry) of a block's math as a standalone reference ``analyze`` can load."""
    if block.kind == "norm":
        node = copy.deepcopy(block.node)
        node.decorator_list = []
        return REFERENCE_HEADER + ast.unparse(node) + "\n", block.name
    if block.kind == "rope":
        functions = {n.name: n for n in source.tree.body if isinstance(n, ast.FunctionDef)}
        needed, pending = [], [block.name]
        while pending:  # the function and the module's functions it calls, callees first
            name = pending.pop()
            if name in needed:
                continue
            needed.insert(0, name)
            calls = {
                n.func.id for n in ast.walk(functions[name]) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            }
            pending.extend(sorted(callee for callee in calls if callee in functions and callee not in needed))
        parts = []
        for name in needed:
            node = copy.deepcopy(functions[name])
            node.decorator_list = []
            parts.append(ast.unparse(node))
        return REFERENCE_HEADER + "\n\n\n".join(parts) + "\n", block.name
    raise ValueError(block.kind)


def activation_reference(act_name: str, gated: bool) -> tuple[str, str] | None:
    """The activation (times the up projection when gated) as a reference function; None for an unknown name."""
    expression = ACTIVATIONS.get(act_name)
    if expression is None:
        return None
    entry = f"{act_name}_gated" if gated else act_name
    if gated:
        body = f"def {entry}(gate, up):\n    return {expression.replace('(x', '(gate')} * up\n"
    else:
        body = f"def {entry}(x):\n    return {expression}\n"
    return REFERENCE_HEADER + body, entry


def loss_reference() -> tuple[str, str]:
    body = (
        "def causal_lm_cross_entropy(logits, target, ignore_index: int = -100):\n"
        '    return F.cross_entropy(logits, target, ignore_index=ignore_index, reduction="mean")\n'
    )
    return REFERENCE_HEADER + body, "causal_lm_cross_entropy"


def _activation_matches(act_name: str) -> bool:
    """The table's expression computes transformers' own activation of that name."""
    import torch
    import torch.nn.functional as F  # noqa: F401, N812 - the expressions' namespace

    from transformers.activations import ACT2FN

    x = torch.linspace(-4, 4, 101, dtype=torch.float64)
    ours = eval(ACTIVATIONS[act_name], {"torch": torch, "F": F, "x": x})  # noqa: S307 - the table's own text
    return torch.allclose(ours, ACT2FN[act_name](x), atol=1e-6)


def search(repo: LigerRepo, text: str, entry: str, name: str):
    """(plan, values, call text) of the target's kernel computing the reference, else (None, None, why or "")."""
    from tools.kernelgen.analyze import AnalyzeError
    from tools.kernelgen.analyze import analyze
    from tools.kernelgen.variants.options import call_plans
    from tools.kernelgen.variants.probe import matching_options

    try:
        profile = analyze(f"-:{entry}", name=name, stdin_source=text, knowledge_root=repo.root)
    except AnalyzeError as error:
        return None, None, str(error).splitlines()[0]
    plans = call_plans(repo, profile)
    found = matching_options(repo.root, profile, plans) if plans else None
    if found is None:
        return None, None, ""
    return found.plan, found.values, found.call(profile)


# Whether a Liger module stands in for the model's ----------------------------------------------------------------
def _close(ours, theirs) -> bool:
    import torch

    if isinstance(theirs, (tuple, list)):
        return isinstance(ours, (tuple, list)) and all(_close(a, b) for a, b in zip(ours, theirs))
    if not torch.is_tensor(theirs):
        return True
    return ours.shape == theirs.shape and torch.allclose(ours.float(), theirs.float(), atol=ATOL, rtol=RTOL)


class NotRunnable(Exception):
    """A Liger module that loads the block's weights but cannot run on this machine: unchecked, not refused."""


def stands_in(candidate, call: tuple) -> str | None:
    """None when ``candidate`` (a Liger module) loads the model module's state dict and computes its output on the
    captured call; else why not."""
    import torch

    module, args, kwargs, output = call
    try:
        missing = candidate.load_state_dict(module.state_dict(), strict=True)
        del missing
    except RuntimeError as error:
        return (
            f"{type(candidate).__name__} does not take {type(module).__name__}'s weights ({str(error).splitlines()[0]})"
        )
    try:
        with torch.no_grad():
            ours = candidate(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - a module that cannot run here (a GPU-only autotuned kernel)
        raise NotRunnable(
            f"{type(candidate).__name__} takes the weights but does not run on this machine: "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        ) from None
    if not _close(ours, output):
        return f"{type(candidate).__name__} computes another output than {type(module).__name__}"
    return None


def _module_classes(plan) -> list[str]:
    """The kernel's module classes (those calling its Function), then the other modules of its file that are built
    from a config alone (a MoE layer's experts may reach the kernel through a helper)."""
    import torch.nn as nn

    names = list(plan.module_inits)
    try:
        module = importlib.import_module(_kernel_module(plan))
    except ImportError:
        return names
    for name, value in vars(module).items():
        if name in names or not isinstance(value, type) or not issubclass(value, nn.Module):
            continue
        if value.__module__ != module.__name__:
            continue
        params = [p for p in inspect.signature(value.__init__).parameters.values() if p.name != "self"]
        if len(params) == 1 and params[0].name == "config":
            names.append(name)
    return names


def _init_arity(plan, class_name: str, cls) -> int:
    """The number of required constructor arguments of a module class of the kernel."""
    if class_name in plan.module_inits:
        return sum(p.default is None for p in plan.module_inits[class_name])
    return sum(
        p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.name != "self"
    )


def _accepts(cls, name: str) -> bool:
    """Whether ``cls``'s constructor takes an argument ``name`` (by that name or as ``**kwargs``)."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in parameters)


def _kernel_module(plan) -> str:
    return f"liger_kernel.transformers.{plan.name}"


def _hf_init_params(block: Block) -> list[tuple[str, str | None]]:
    """(name, default as written or None) of the block's ``__init__`` parameters after ``self``."""
    init = next((n for n in block.node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return []
    args = init.args.args[1:]
    defaults = [None] * (len(args) - len(init.args.defaults)) + [ast.unparse(d) for d in init.args.defaults]
    return list(zip([arg.arg for arg in args], defaults))


def _unread_init_params(block: Block) -> set[str]:
    """The block's ``__init__`` parameters its body never reads."""
    init = next((n for n in block.node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return set()
    read = {n.id for n in ast.walk(init) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return {arg.arg for arg in init.args.args[1:]} - read


def norm_row(repo: LigerRepo, source: ModelSource, row: Row, call: tuple) -> None:
    import torch

    text, entry = block_reference(source, row.block)
    plan, values, found = search(repo, text, entry, f"{source.model_type}_rms_norm")
    if plan is None:
        _missing(
            row, text, found, f"{source.model_type}_norm", f"no kernel of the target computes {row.block.name}", source
        )
        return
    module, *_ = call
    signature = _hf_init_params(row.block)
    params = [name for name, _ in signature]
    # An argument the norm's __init__ never reads (CohereLayerNorm's bias=False) is taken and ignored.
    ignored = _unread_init_params(row.block)
    extra = [name for name in params[1:] if name != "eps" and name not in ignored]
    if not params or extra:
        row.status, row.why = (
            "none",
            f"{plan.name} computes it ({found}), but {row.block.name}.__init__ takes {extra or 'nothing'}",
        )
        return
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    weight = getattr(module, "weight", None)
    problems = []
    for class_name in _module_classes(plan):
        accepted = {p.name for p in plan.module_inits[class_name]}
        options = {
            name: value
            for name, value in values.items()
            if name in accepted and isinstance(value, (int, float, str, bool))
        }
        # The gradient of a norm's output may be read again (a residual add passes one tensor to both branches):
        # the kernel must not overwrite it.
        if "in_place" in accepted:
            options["in_place"] = False
        if "init_fn" in accepted and weight is not None:
            options["init_fn"] = (
                "zeros" if float(torch.count_nonzero(type(module)(weight.shape[0]).weight)) == 0 else "ones"
            )
        cls = getattr(importlib.import_module(_kernel_module(plan)), class_name)
        try:
            candidate = cls(weight.shape[0], eps=eps, **options)
        except (TypeError, ValueError, AttributeError) as error:
            problems.append(f"{class_name}: {error}")
            continue
        try:
            problem = stands_in(candidate, call)
        except NotRunnable as error:
            problem = str(error)
        if problem is None:
            row.status, row.kernel, row.call, row.strategy = "kernel", plan.name, found, "class"
            row.liger_class, row.liger_module, row.options = class_name, _kernel_module(plan), options
            row.init_params = signature
            return
        problems.append(problem)
    row.status, row.why = (
        "none",
        f"{plan.name} computes the math ({found}) but no module of it stands in: {'; '.join(problems)}",
    )


def mlp_row(repo: LigerRepo, source: ModelSource, row: Row, call: tuple, config) -> None:
    detail = row.block.detail
    act_name = getattr(config, detail["config_attribute"], None)
    if not isinstance(act_name, str) or act_name not in ACTIVATIONS or not _activation_matches(act_name):
        row.status = "none"
        row.why = f"activation {act_name!r} (config.{detail['config_attribute']}) has no expression kernelgen knows"
        return
    # A forward of another shape (one fused gate-up projection) may still be a gated MLP a Liger module of the
    # kernel stands in for as a whole: the module check decides.
    gated = detail.get("pattern", "gated") == "gated"
    text, entry = activation_reference(act_name, gated)
    row.flag = _activation_flag(act_name, gated)
    plan, values, found = search(repo, text, entry, f"{source.model_type}_{row.flag}")
    if plan is None and "pattern" not in detail:
        # Which math to generate is not known of a forward of another shape.
        row.status, row.why = "none", "its forward is not down(act(gate(x)) * up(x)) nor down(act(up(x)))"
        return
    if plan is None:
        _missing(row, text, found, row.flag, f"no kernel of the target computes {entry}", source)
        return
    module = call[0]
    problems = []
    unrunnable = None
    extra = [name for name, _ in _hf_init_params(row.block)][1:]  # what the model builds it with beside config
    for class_name in _module_classes(plan):
        cls = getattr(importlib.import_module(_kernel_module(plan)), class_name)
        required = _init_arity(plan, class_name, cls)
        try:
            if required == 1 and detail.get("dropout"):
                problems.append(f"{class_name}: the MLP's dropout would be lost with the module")
                continue
            missing = [name for name in extra if not _accepts(cls, name)]
            if required == 1 and missing:
                # DeepSeek builds its shared experts as DeepseekV3MLP(config, intermediate_size=...): a class
                # swapped in for it must take what the model passes
                problems.append(f"{class_name}: takes no {', '.join(missing)}, which {row.block.name} is built with")
                continue
            if required == 1:
                candidate, strategy = cls(config), "class"
            elif required == 0 and detail.get("pattern") == "plain":
                candidate, strategy = copy.deepcopy(module), "act_fn"
                setattr(candidate, detail["act"], cls())
            else:
                continue
        except (TypeError, ValueError, AttributeError) as error:
            problems.append(f"{class_name}: {error}")
            continue
        try:
            problem = stands_in(candidate, call)
        except NotRunnable as error:
            unrunnable = unrunnable or (class_name, strategy, str(error))
            continue
        if problem is None:
            row.status, row.kernel, row.call, row.strategy = "kernel", plan.name, found, strategy
            row.liger_class, row.liger_module = class_name, _kernel_module(plan)
            return
        problems.append(problem)
    if "pattern" in detail and unrunnable is None and not detail.get("dropout"):
        problem = _functional_stands_in(plan, values, row, call)
        if problem is None:
            row.status, row.kernel, row.call = "kernel", plan.name, found
            return
        problems.append(problem)
    if unrunnable is not None:
        class_name, strategy, reason = unrunnable
        row.status, row.kernel, row.call, row.strategy = "kernel", plan.name, found, strategy
        row.liger_class, row.liger_module, row.unchecked = class_name, _kernel_module(plan), reason
        return
    row.status = "none"
    if row.block.kind == "mlp" and "pattern" not in detail:
        problems.insert(0, "its forward is not down(act(gate(x)) * up(x)) nor down(act(up(x)))")
    row.why = f"{plan.name} computes the activation ({found}) but no module of it stands in: {'; '.join(problems) or 'none takes the config'}"


def functional_call(plan, values: dict[str, Any], tensors: dict[str, str]) -> tuple[tuple[str, str], str]:
    """((module, name) to import, call text) of the kernel's entry with ``tensors`` (reference input -> expression)
    and the option values the search found: keywords for a functional, positions for ``Function.apply``."""
    from tools.kernelgen.variants.options import Bound

    entry = plan.api.entry
    given = {plan.tensors[name]: expression for name, expression in tensors.items()}
    options = {
        name: repr(value)
        for name, value in values.items()
        if not isinstance(value, Bound) and value != plan.defaults.get(name, object())
    }
    imported = entry.name.split(".")[0]
    if plan.api.entry_is_functional:
        arguments = [f"{name}={text}" for name, text in {**given, **options}.items()]
    else:
        chosen = {**given, **options}
        last = max(i for i, p in enumerate(entry.params) if p.name in chosen)
        arguments = [chosen.get(p.name, p.default or "None") for p in entry.params[: last + 1]]
    return (entry.module, imported), f"{entry.name}({', '.join(arguments)})"


def mlp_forward(row: Row, plan, values: dict[str, Any]) -> tuple[tuple[str, str], str]:
    """The MLP's forward with its activation through the kernel's entry: (import, ``def forward`` text)."""
    detail = row.block.detail
    x = detail["argument"]
    tensors = {"gate": f"self.{detail['gate']}({x})", "up": f"self.{detail['up']}({x})"}
    if detail["pattern"] == "plain":
        tensors = {"x": f"self.{detail['up']}({x})"}
    imported, call = functional_call(plan, values, tensors)
    return imported, f"def forward(self, {x}):\n    return self.{detail['down']}({call})\n"


def _functional_stands_in(plan, values: dict[str, Any], row: Row, call: tuple) -> str | None:
    """None when the model's MLP with its forward through the kernel's entry computes its output (the row then
    takes the "forward" strategy); else why not."""
    module = call[0]
    try:
        (module_name, name), forward_text = mlp_forward(row, plan, values)
        namespace = {name: getattr(importlib.import_module(module_name), name)}
        exec(forward_text, namespace)  # noqa: S102 - kernelgen's own text, from the block's projections
    except (KeyError, ValueError, ImportError, AttributeError, SyntaxError) as error:
        return f"{plan.api.entry.name} cannot be called in {row.block.name}.forward: {error}"
    candidate = copy.deepcopy(module)
    candidate.__class__ = type(f"Liger{row.block.name}", (type(module),), {"forward": namespace["forward"]})
    try:
        problem = stands_in(candidate, call)
    except NotRunnable as error:
        return str(error)
    if problem is None:
        row.strategy, (row.liger_module, row.liger_class) = "forward", (module_name, name)
        row.forward = forward_text
    return problem


def _activation_flag(act_name: str, gated: bool) -> str:
    """The apply function's keyword for the activation: upstream's names where they exist."""
    known = {("silu", True): "swiglu", ("swish", True): "swiglu", ("gelu_pytorch_tanh", True): "geglu"}
    known[("gelu_new", True)] = "geglu"
    known[("relu2", False)] = "relu_squared"
    return known.get((act_name, gated), f"{act_name}_gated" if gated else act_name)


def _squeezed(line: str) -> str:
    """A line without its spaces and with one kind of quote: the reference is the block as ``ast.unparse`` writes
    it, which spaces and quotes it its own way."""
    return "".join(line.split()).replace("'", '"')


def _refusal_place(source: ModelSource, row: Row, text: str, refusal: str) -> str:
    """The analysis names the reference by where it read it (``<stdin>:LINE``, a line of ``text``, which is not
    written anywhere): the modeling file's line of the same text says more, else the block's name."""
    match = re.match(r"<stdin>:(\d+)", refusal)
    lines = text.splitlines()
    if match and 1 <= int(match.group(1)) <= len(lines) and lines[int(match.group(1)) - 1].strip():
        wanted = _squeezed(lines[int(match.group(1)) - 1])
        try:
            modeling = source.path.read_text().splitlines()
        except OSError:
            modeling = []
        start = getattr(row.block.node, "lineno", 1)
        # The block's own lines first: a helper with the same line elsewhere in the file is less likely.
        order = list(range(start - 1, len(modeling))) + list(range(0, start - 1))
        for index in order:
            if _squeezed(modeling[index]) == wanted:
                return f"{source.path.name}:{index + 1}{refusal[match.end() :]}"
    return refusal.replace("<stdin>", row.block.name, 1)


def _missing(row: Row, text: str, refusal: str, name: str, nothing: str, source: ModelSource | None = None) -> None:
    if refusal:
        place = _refusal_place(source, row, text, refusal) if source else refusal.replace("<stdin>", row.block.name, 1)
        row.status, row.why = "none", f"new refuses it: {place}"
    else:
        row.status, row.reference, row.kernel = "generate", text, name
        row.why = nothing


def _shorter_tables_hint(source: ModelSource, entry: str, call: tuple) -> str:
    """A shapes hint for the rotary reference where the mini model called it with tables of shorter rows than the
    first tensor's (GPT-NeoX's and StableLM's ``cos`` of the rotary width, a quarter of the head): the reference
    itself runs with tables of any width (``rotary_dim = cos.shape[-1]``), so only the call tells. Empty otherwise."""
    args, kwargs, _ = call
    try:
        bound = inspect.signature(getattr(source.module(), entry)).bind(*args, **kwargs).arguments
    except (AttributeError, TypeError, ValueError):
        return ""
    tensors = {name: value for name, value in bound.items() if hasattr(value, "shape") and value.dim() >= 1}
    if not tensors:
        return ""
    first, *others = tensors
    width, rank = tensors[first].shape[-1], tensors[first].dim()
    names = [f"d{index}" for index in range(rank)]
    shapes = {}
    for name in others:
        own = tensors[name]
        factor = width // own.shape[-1] if own.shape[-1] and width % own.shape[-1] == 0 else 0
        if factor in (2, 4, 8) and own.dim() <= rank:
            shapes[name] = " ".join([*names[rank - own.dim() : -1], f"{names[-1]}/{factor}"])
    if not shapes:
        return ""
    entries = ", ".join(f'"{name}": "{dims}"' for name, dims in {first: " ".join(names), **shapes}.items())
    return f'KERNELGEN = {{"shapes": {{{entries}}}}}\n\n\n'


def rope_row(repo: LigerRepo, source: ModelSource, row: Row, calls: list[tuple]) -> None:
    text, entry = block_reference(source, row.block)
    if calls:
        hint = _shorter_tables_hint(source, entry, calls[0])
        text = text.replace(REFERENCE_HEADER, REFERENCE_HEADER + hint, 1) if hint else text
    candidates = rotary_functions(repo)
    if not calls:
        row.status, row.why = "none", f"the mini {source.causal_lm} never calls {entry} through its module"
        return
    problems = []
    for module_name, function_name in candidates:
        function = getattr(importlib.import_module(module_name), function_name)
        args, kwargs, output = calls[0]
        try:
            ours = function(*[a.clone() if hasattr(a, "clone") else a for a in args], **kwargs)
        except Exception as error:  # noqa: BLE001 - any failure means it does not stand in
            problems.append(f"{function_name}: {type(error).__name__}: {error}")
            continue
        if _close(ours, output):
            row.status, row.kernel, row.strategy, row.flag = "kernel", "rope", "rope", "rope"
            row.liger_class, row.liger_module = function_name, module_name
            row.call = f"{function_name}({', '.join(_required_parameters(function))})"
            return
        problems.append(f"{function_name} computes another output")
    plan, values, found = search(repo, text, entry, f"{source.model_type}_rope")
    if problems:
        row.status, row.why = "none", "; ".join(problems)
    else:
        _missing(row, text, found, f"{source.model_type}_rope", "the target has no rotary embedding function", source)


def _required_parameters(function) -> list[str]:
    """The names of ``function``'s parameters without defaults (HF's ``q, k, cos, sin``; GPT-J's ``tensor, sin,
    cos``), as the table's call shows them."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return ["..."]
    return [p.name for p in parameters if p.default is inspect.Parameter.empty and p.kind <= p.POSITIONAL_OR_KEYWORD]


def rotary_functions(repo: LigerRepo) -> list[tuple[str, str]]:
    """(module, function) of each public ``*rotary_pos_emb`` or ``*_rope`` function in the target's
    ``liger_kernel.transformers`` (a rope kernelgen generated is called through its functional ``liger_NAME``); each
    is run on the mini model's calls before it is taken."""
    found = []
    folder = repo.root / "src/liger_kernel/transformers"
    for path in sorted(folder.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in tree.body:
            if (
                isinstance(node, ast.FunctionDef)
                and node.name.endswith(("rotary_pos_emb", "_rope"))
                and not node.name.startswith("_")
            ):
                found.append((f"liger_kernel.transformers.{path.stem}", node.name))
    return found


def loss_row(repo: LigerRepo, source: ModelSource, row: Row) -> None:
    text, entry = loss_reference()
    plan, values, found = search(repo, text, entry, f"{source.model_type}_cross_entropy")
    row.flag = "cross_entropy"
    if plan is None:
        _missing(
            row, text, found, "cross_entropy", "no kernel of the target computes the causal LM's cross entropy", source
        )
        return
    row.status, row.kernel, row.call, row.strategy = "kernel", plan.name, found, "cross_entropy"


MAX_FORWARD_TRIES = 6  # lce_forwards run on the mini model before the search gives up


def fused_linear_row(repo: LigerRepo, source: ModelSource, block: Block, model, input_ids) -> Row:
    """The causal LM's forward with the fused linear + cross entropy: a target's ``model/<type>.py`` ``lce_forward``
    that, bound to the mini model, gives its loss. Tried first: those whose own model's causal LM forward reads as
    this one's (names of the model aside), the model type's own and Llama's first."""
    row = Row(Block("loss", f"{source.causal_lm}.forward", block.node), "none", flag="fused_linear_cross_entropy")
    folder = repo.root / "src/liger_kernel/transformers/model"
    if not folder.is_dir():
        row.why = "the target has no fused linear cross entropy forward (src/liger_kernel/transformers/model/)"
        return row
    ours = _normalized_forward(source.tree, source.causal_lm)
    preferred = {source.model_type: 0, "llama": 1}
    paths = [p for p in folder.glob("*.py") if "def lce_forward" in p.read_text(encoding="utf-8")]
    paths.sort(key=lambda p: (_forward_of_model_type(p.stem) != ours, preferred.get(p.stem, 2), p.stem))
    problems = []
    for path in paths[:MAX_FORWARD_TRIES]:
        module = f"liger_kernel.transformers.model.{path.stem}"
        problem = _gives_the_loss(module, model, input_ids)
        if problem is None:
            row.status, row.kernel, row.strategy = "kernel", "fused_linear_cross_entropy", "lce_forward"
            row.liger_class, row.liger_module = "lce_forward", module
            row.call = f"{module}.lce_forward (bound to the mini {source.causal_lm}, it gives its loss)"
            return row
        problems.append(f"{path.stem}: {problem}")
    row.why = f"no lce_forward of the target gives the mini {source.causal_lm}'s loss ({'; '.join(problems)})"
    return row


def _gives_the_loss(module_name: str, model, input_ids) -> str | None:
    """None when ``module_name``'s ``lce_forward`` bound to ``model`` gives the model's own loss; else why not."""
    import types

    import torch

    try:
        forward = importlib.import_module(module_name).lce_forward
        with torch.no_grad():
            expected = model(input_ids=input_ids, labels=input_ids).loss
            ours = types.MethodType(forward, model)(input_ids=input_ids, labels=input_ids).loss
    except Exception as error:  # noqa: BLE001 - any failure means it is not this model's forward
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    if ours is None or not torch.allclose(ours.float(), expected.float(), atol=ATOL, rtol=RTOL):
        return "another loss"
    return None


def _forward_of_model_type(model_type: str) -> str | None:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from tools.kernelgen.patch.model import PatchError
    from tools.kernelgen.patch.model import locate

    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return None
    try:
        other = locate(model_type)
    except PatchError:
        return None
    return _normalized_forward(other.tree, other.causal_lm)


def _normalized_forward(tree: ast.Module, class_name: str) -> str | None:
    """The causal LM's forward without docstring, decorators, annotations, and with the model's name prefix
    (``Qwen3`` of ``Qwen3ForCausalLM``) taken out of every name."""
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    forward = (
        next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None) if node else None
    )
    if forward is None:
        return None
    forward = copy.deepcopy(forward)
    forward.decorator_list, forward.returns = [], None
    if forward.body and isinstance(forward.body[0], ast.Expr) and isinstance(forward.body[0].value, ast.Constant):
        forward.body = forward.body[1:]
    for arg in [*forward.args.args, *forward.args.kwonlyargs, forward.args.kwarg, forward.args.vararg]:
        if arg is not None:
            arg.annotation = None
    prefix = class_name.removesuffix("ForCausalLM")
    return ast.unparse(forward).replace(prefix, "MODEL")


# The table -------------------------------------------------------------------------------------------------------
def map_model(repo: LigerRepo, source: ModelSource) -> list[Row]:
    """A row for every block of ``source``, mapped onto ``repo``'s kernels."""
    import torch

    from tools.kernelgen.patch.model import capture_calls
    from tools.kernelgen.patch.model import used_classes
    from tools.kernelgen.variants.probe import checkout_kernels

    config = source.mini_config()
    model = source.build(config)
    used = used_classes(model)
    input_ids = torch.randint(3, config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
    module_blocks = {block.name for block in source.blocks if block.kind in ("norm", "mlp", "experts")}
    calls = capture_calls(model, module_blocks & set(used), input_ids)
    rope_calls = _rope_calls(source, model, input_ids)
    rows = []
    with checkout_kernels(repo.root):
        for block in source.blocks:
            row = Row(block, "unused")
            if block.kind in ("norm", "mlp", "experts") and block.name not in calls:
                row.why = f"no module of the mini {source.causal_lm} is one"
            if block.name in calls:
                module, args, kwargs, output = calls[block.name]
                qualified = next(q for q, m in model.named_modules() if m is module)
                row.capture = (qualified, args, kwargs, output)
            if block.kind in ("norm", "mlp", "experts") and block.name not in calls:
                pass
            elif block.kind == "norm":
                row.flag = "rms_norm" if block.name.endswith("RMSNorm") else "layer_norm"
                norm_row(repo, source, row, calls[block.name])
            elif block.kind in ("mlp", "experts"):
                mlp_row(repo, source, row, calls[block.name], config)
            elif block.kind == "rope":
                rope_row(repo, source, row, rope_calls)
            elif block.kind == "loss":
                loss_row(repo, source, row)
                rows.append(row)
                row = fused_linear_row(repo, source, block, model, input_ids)
            rows.append(row)
    return rows + torch_norm_rows(repo, model)


# torch's own norm classes a modeling file may build its norms from, and the target's kernel of each.
TORCH_NORMS = {"LayerNorm": "layer_norm", "RMSNorm": "rms_norm"}


def torch_norm_rows(repo: LigerRepo, model) -> list[Row]:
    """A "no kernel" row for each of torch's own norm classes among the model's modules (``nn.LayerNorm`` of StableLM,
    Phi, Starcoder2): patch swaps the modeling file's classes, and swapping torch's would change every model of the
    process; the target's kernel of it could only replace each instance's forward once the model is built."""
    found: dict[str, list[str]] = {}
    for qualified, module in model.named_modules():
        name = type(module).__name__
        if type(module).__module__.startswith("torch.nn.") and name in TORCH_NORMS:
            found.setdefault(name, []).append(qualified)
    rows = []
    for name, modules in found.items():
        kernel = TORCH_NORMS[name]
        has_kernel = repo.exists(kernel_paths(kernel)["ops"])
        instead = f"its {kernel} kernel would replace each instance's forward" if has_kernel else f"no {kernel} kernel"
        why = (
            f"torch's own class ({len(modules)} modules, e.g. {modules[0]}): patch swaps the modeling file's classes, "
            f"not torch's, which every model shares; {instead}"
        )
        rows.append(Row(Block("norm", f"nn.{name}"), "none", why=why))
    return rows


def _rope_calls(source: ModelSource, model, input_ids) -> list[tuple]:
    """(args, kwargs, output) of the mini model's calls of the modeling module's rotary embedding function."""
    import torch

    module = source.module()
    original = getattr(module, "apply_rotary_pos_emb", None)
    if original is None:
        return []
    calls = []

    def recorder(*args, **kwargs):
        output = original(*args, **kwargs)
        if not calls:
            calls.append((tuple(a.clone() if torch.is_tensor(a) else a for a in args), dict(kwargs), output))
        return output

    module.apply_rotary_pos_emb = recorder
    try:
        with torch.no_grad():
            model(input_ids=input_ids)
    finally:
        module.apply_rotary_pos_emb = original
    return calls


__all__ = ["Row", "map_model"]
