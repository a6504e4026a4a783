"""Normalise fx nodes to kernelgen's canonical op names.

Every way PyTorch spells one operation (``torch.sigmoid(x)``, ``x.sigmoid()``, ``F.sigmoid``, ``nn.Sigmoid()``)
becomes one ``OpCall``: the canonical name (the names ``tools.kernelgen.synth.apply_op`` takes for element-wise
ops; reduction and structural names for the rest), the family that drives classification, the value operands
and the remaining options bound to their parameter names (defaults filled in, so ``F.gelu(x)`` carries
``approximate="none"`` explicitly).
"""

from __future__ import annotations

import builtins
import math
import operator

from dataclasses import dataclass
from dataclasses import field
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn

ELEMENTWISE = "elementwise"
REDUCTION = "reduction"
STRUCTURAL = "structural"
CAST = "cast"
LAYOUT = "layout"  # reshapes that keep every element where it is relative to the others (view, contiguous)
META = "meta"  # shape, dtype and device queries: not values of the computation
LINE_KEY = "kernelgen_line"  # node.meta key of the reference line that created the node


@dataclass(frozen=True)
class OpSpec:
    name: str
    family: str
    params: tuple[str, ...] = ("input",)
    operands: int = 1  # how many leading params are value operands (tensors or scalars combined element-wise)
    defaults: dict[str, Any] = field(default_factory=dict)
    fixed: dict[str, Any] = field(default_factory=dict)  # options forced by the spelling (relu6 -> 0..6)
    index_params: tuple[str, ...] = ()  # params that take integer indices (class targets, gather indices)


@dataclass
class OpCall:
    node: fx.Node
    name: str
    family: str
    operands: list[Any]
    options: dict[str, Any]
    label: str  # how the reference spelled it, for messages
    line: int | None
    index_operands: list[Any] = field(default_factory=list)


def _spec(name, family=ELEMENTWISE, params=("input",), operands=1, defaults=None, fixed=None, index_params=()):
    return OpSpec(name, family, tuple(params), operands, dict(defaults or {}), dict(fixed or {}), tuple(index_params))


_BINARY = ("input", "other")
_UNARY_NAMES = (
    "neg exp log log1p expm1 sqrt rsqrt abs tanh sigmoid silu relu mish logsigmoid sin cos erf square reciprocal"
    " sign selu hardsigmoid hardswish softsign exp2 ndtr tanhshrink erfc sinh cosh log2 log10 asinh sinc floor ceil trunc round"
    " atanh acosh"
).split()

# Specs shared by torch.*, Tensor methods and F.* spellings, keyed by the method / function name.
_BY_NAME: dict[str, OpSpec] = {name: _spec(name) for name in _UNARY_NAMES}
_BY_NAME.update(
    {
        "add": _spec("add", params=("input", "other", "alpha"), operands=2, defaults={"alpha": 1}),
        "sub": _spec("sub", params=("input", "other", "alpha"), operands=2, defaults={"alpha": 1}),
        "subtract": _spec("sub", params=("input", "other", "alpha"), operands=2, defaults={"alpha": 1}),
        "mul": _spec("mul", params=_BINARY, operands=2),
        "multiply": _spec("mul", params=_BINARY, operands=2),
        "div": _spec("div", params=("input", "other", "rounding_mode"), operands=2, defaults={"rounding_mode": None}),
        "divide": _spec(
            "div", params=("input", "other", "rounding_mode"), operands=2, defaults={"rounding_mode": None}
        ),
        "true_divide": _spec("div", params=_BINARY, operands=2, defaults={"rounding_mode": None}),
        "negative": _spec("neg"),
        "pow": _spec("pow", params=("input", "exponent"), operands=2),
        "logaddexp": _spec("logaddexp", params=_BINARY, operands=2),
        "logaddexp2": _spec("logaddexp2", params=_BINARY, operands=2),
        "hypot": _spec("hypot", params=_BINARY, operands=2),
        "absolute": _spec("abs"),
        "expit": _spec("sigmoid"),
        "gelu": _spec("gelu", params=("input", "approximate"), defaults={"approximate": "none"}),
        "leaky_relu": _spec("leaky_relu", params=("input", "negative_slope"), defaults={"negative_slope": 0.01}),
        "elu": _spec("elu", params=("input", "alpha"), defaults={"alpha": 1.0}),
        "celu": _spec("celu", params=("input", "alpha"), defaults={"alpha": 1.0}),
        "rrelu": _spec(
            "rrelu", params=("input", "lower", "upper", "training"), defaults={"lower": 0.125, "upper": 1.0 / 3.0}
        ),
        "threshold": _spec("threshold", params=("input", "threshold", "value")),
        "softshrink": _spec("softshrink", params=("input", "lambd"), defaults={"lambd": 0.5}),
        "hardshrink": _spec("hardshrink", params=("input", "lambd"), defaults={"lambd": 0.5}),
        "_threshold": _spec("threshold", params=("input", "threshold", "value")),
        "special_ndtr": _spec("ndtr"),
        "lerp": _spec("lerp", params=("input", "end", "weight"), operands=3),
        "addcmul": _spec("addcmul", params=("input", "tensor1", "tensor2", "value"), operands=3, defaults={"value": 1}),
        "addcdiv": _spec("addcdiv", params=("input", "tensor1", "tensor2", "value"), operands=3, defaults={"value": 1}),
        "copysign": _spec("copysign", params=_BINARY, operands=2),
        "special_sinc": _spec("sinc"),
        "arcsinh": _spec("asinh"),
        "arctanh": _spec("atanh"),
        "arccosh": _spec("acosh"),
        "logit": _spec("logit", params=("input", "eps"), defaults={"eps": None}),
        "special_logit": _spec("logit", params=("input", "eps"), defaults={"eps": None}),
        "dropout": _spec(
            "dropout", params=("input", "p", "training", "inplace"), defaults={"p": 0.5, "training": True}
        ),
        "softplus": _spec("softplus", params=("input", "beta", "threshold"), defaults={"beta": 1.0, "threshold": 20.0}),
        "hardtanh": _spec(
            "hardtanh", params=("input", "min_val", "max_val"), defaults={"min_val": -1.0, "max_val": 1.0}
        ),
        "relu6": _spec("hardtanh", fixed={"min_val": 0.0, "max_val": 6.0}),
        "clamp": _spec("clamp", params=("input", "min", "max"), defaults={"min": None, "max": None}),
        "clip": _spec("clamp", params=("input", "min", "max"), defaults={"min": None, "max": None}),
        "clamp_min": _spec("clamp", params=("input", "min"), defaults={"max": None}),
        "clamp_max": _spec("clamp", params=("input", "max"), defaults={"min": None}),
        "where": _spec("where", params=("condition", "input", "other"), operands=3),
        "maximum": _spec("maximum", params=_BINARY, operands=2),
        "minimum": _spec("minimum", params=_BINARY, operands=2),
        "fmax": _spec("fmax", params=_BINARY, operands=2),
        "fmin": _spec("fmin", params=_BINARY, operands=2),
        # Reductions: the options say along which dims (None: every dim) and whether the dim is kept.
        "sum": _spec("sum", REDUCTION, ("input", "dim", "keepdim"), defaults={"dim": None, "keepdim": False}),
        "mean": _spec("mean", REDUCTION, ("input", "dim", "keepdim"), defaults={"dim": None, "keepdim": False}),
        "prod": _spec("prod", REDUCTION, ("input", "dim", "keepdim"), defaults={"dim": None, "keepdim": False}),
        "amax": _spec("amax", REDUCTION, ("input", "dim", "keepdim"), defaults={"dim": None, "keepdim": False}),
        "amin": _spec("amin", REDUCTION, ("input", "dim", "keepdim"), defaults={"dim": None, "keepdim": False}),
        "var": _spec(
            "var", REDUCTION, ("input", "dim", "unbiased", "keepdim"), defaults={"dim": None, "keepdim": False}
        ),
        "std": _spec(
            "std", REDUCTION, ("input", "dim", "unbiased", "keepdim"), defaults={"dim": None, "keepdim": False}
        ),
        # (variance or std, mean) of one pass over the row: a tuple the reference indexes.
        "var_mean": _spec(
            "var_mean", REDUCTION, ("input", "dim", "unbiased", "keepdim"), defaults={"dim": None, "keepdim": False}
        ),
        "std_mean": _spec(
            "std_mean", REDUCTION, ("input", "dim", "unbiased", "keepdim"), defaults={"dim": None, "keepdim": False}
        ),
        "norm": _spec("norm", REDUCTION, ("input", "p", "dim", "keepdim"), defaults={"dim": None, "keepdim": False}),
        "vector_norm": _spec(
            "norm", REDUCTION, ("input", "ord", "dim", "keepdim"), defaults={"dim": None, "keepdim": False}
        ),
        "softmax": _spec("softmax", REDUCTION, ("input", "dim"), defaults={"dim": None}),
        "softmin": _spec("softmin", REDUCTION, ("input", "dim"), defaults={"dim": None}),
        "log_softmax": _spec("log_softmax", REDUCTION, ("input", "dim"), defaults={"dim": None}),
        "logsumexp": _spec("logsumexp", REDUCTION, ("input", "dim", "keepdim"), defaults={"keepdim": False}),
        "layer_norm": _spec("layer_norm", REDUCTION, ("input", "normalized_shape", "weight", "bias", "eps")),
        "rms_norm": _spec("rms_norm", REDUCTION, ("input", "normalized_shape", "weight", "eps")),
        "normalize": _spec(
            "normalize", REDUCTION, ("input", "p", "dim", "eps"), defaults={"p": 2.0, "dim": 1, "eps": 1e-12}
        ),
        "cosine_similarity": _spec(
            "cosine_similarity", REDUCTION, ("x1", "x2", "dim", "eps"), 2, defaults={"dim": 1, "eps": 1e-8}
        ),
        # Structural: tier 3 (losses over a class dimension, gathers, matmuls, reorderings).
        "cross_entropy": _spec(
            "cross_entropy",
            STRUCTURAL,
            ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing"),
            2,
            defaults={"weight": None, "ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0},
            index_params=("target",),
        ),
        "nll_loss": _spec(
            "nll_loss",
            STRUCTURAL,
            ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction"),
            2,
            defaults={"weight": None, "ignore_index": -100, "reduction": "mean"},
            index_params=("target",),
        ),
        "kl_div": _spec(
            "kl_div",
            STRUCTURAL,
            ("input", "target", "size_average", "reduce", "reduction", "log_target"),
            2,
            defaults={"reduction": "mean", "log_target": False},
        ),
        "one_hot": _spec("one_hot", STRUCTURAL, ("input", "num_classes"), 0, index_params=("input",)),
        "xlogy": _spec("xlogy", params=_BINARY, operands=2),
        "special_xlogy": _spec("xlogy", params=_BINARY, operands=2),
        "special_entr": _spec("entr"),
        "detach": _spec("detach"),
        "gather": _spec("gather", STRUCTURAL, ("input", "dim", "index"), index_params=("index",)),
        "take_along_dim": _spec("gather", STRUCTURAL, ("input", "indices", "dim"), index_params=("indices",)),
        "scatter": _spec("scatter", STRUCTURAL, ("input", "dim", "index", "src", "reduce"), index_params=("index",)),
        "index_select": _spec("index_select", STRUCTURAL, ("input", "dim", "index"), index_params=("index",)),
        "take": _spec("take", STRUCTURAL, ("input", "index"), index_params=("index",)),
        "embedding": _spec("embedding", STRUCTURAL, ("input", "weight"), index_params=("input",)),
        "matmul": _spec("matmul", STRUCTURAL, _BINARY, 2),
        "mm": _spec("matmul", STRUCTURAL, _BINARY, 2),
        "bmm": _spec("matmul", STRUCTURAL, _BINARY, 2),
        "linear": _spec("linear", STRUCTURAL, ("input", "weight", "bias"), 2),
        "einsum": _spec("einsum", STRUCTURAL, ("equation",), 0),
    }
)
# Losses of the whole tensor; with reduction="none" an element-wise op each (normalize).
_WHOLE_TENSOR_LOSSES = {
    "binary_cross_entropy": ("input", "target", "weight", "size_average", "reduce", "reduction"),
    "binary_cross_entropy_with_logits": (
        "input",
        "target",
        "weight",
        "size_average",
        "reduce",
        "reduction",
        "pos_weight",
    ),
    "mse_loss": ("input", "target", "size_average", "reduce", "reduction", "weight"),
    "l1_loss": ("input", "target", "size_average", "reduce", "reduction"),
    "smooth_l1_loss": ("input", "target", "size_average", "reduce", "reduction", "beta"),
    "huber_loss": ("input", "target", "reduction", "delta"),
}
for _loss, _params in _WHOLE_TENSOR_LOSSES.items():
    _BY_NAME[_loss] = _spec(_loss, STRUCTURAL, _params, 2, defaults={"reduction": "mean"})
# A loss with reduction="none" reduces nothing: the loss of each element, an element-wise op of its own (not a
# loss), and the options it keeps.
_POINTWISE_LOSSES = {
    "kl_div": ("kl_div_pointwise", ("log_target",)),
    "binary_cross_entropy": ("bce_pointwise", ()),
    "binary_cross_entropy_with_logits": ("bce_with_logits_pointwise", ()),
    "mse_loss": ("mse_pointwise", ()),
    "l1_loss": ("l1_pointwise", ()),
    "smooth_l1_loss": ("smooth_l1_pointwise", ("beta",)),
    "huber_loss": ("huber_pointwise", ("delta",)),
}
# Options that weight or reduce the elements otherwise: such a call stays the loss (refused as one).
_WEIGHTING_OPTIONS = ("weight", "pos_weight", "size_average", "reduce")


def pointwise_loss(call: OpCall) -> tuple[str, dict] | None:
    """A loss of the whole tensor as the element-wise op of its terms and the options that op keeps (``F.mse_loss``
    -> ``mse_pointwise``), None for any other call or one weighted otherwise (``weight=``, ``pos_weight=``)."""
    if call.name not in _POINTWISE_LOSSES or any(call.options.get(k) is not None for k in _WEIGHTING_OPTIONS):
        return None
    name, kept = _POINTWISE_LOSSES[call.name]
    return name, {key: call.options[key] for key in kept if key in call.options}


for _name in ("cat", "stack", "chunk", "split", "narrow", "transpose", "permute", "t", "flip", "roll", "topk", "sort"):
    _BY_NAME[_name] = _spec(_name, STRUCTURAL)
# The ops that move elements within the row, which the lanes of analyze/lanes.py express.
INDEX_MAP_OPS = ("slice", "getitem", "chunk", "split", "narrow", "cat", "stack", "flip", "repeat_interleave")
# Each element repeated along a dim: an index map within the row (analyze/lanes.py), refused elsewhere.
_BY_NAME["repeat_interleave"] = _spec("repeat_interleave", STRUCTURAL, params=("input", "repeats", "dim"))
for _name in ("argmax", "argmin", "cumsum", "cumprod", "masked_select", "nonzero", "unfold", "diff"):
    _BY_NAME[_name] = _spec(_name, STRUCTURAL)
for _name in ("view", "reshape", "flatten", "unflatten", "contiguous", "clone", "expand", "expand_as", "view_as"):
    _BY_NAME[_name] = _spec(_name, LAYOUT)
for _name in ("reshape_as", "unsqueeze", "squeeze"):
    _BY_NAME[_name] = _spec(_name, LAYOUT)
for _name in ("float", "double", "half", "bfloat16", "long", "int", "to", "type", "type_as"):
    _BY_NAME[_name] = _spec(_name, CAST)
for _name in ("size", "dim", "numel"):
    _BY_NAME[_name] = _spec(_name, META)
for _compare in ("gt", "ge", "lt", "le", "eq", "ne"):
    _BY_NAME[_compare] = _spec(_compare, params=_BINARY, operands=2)
# Constants shaped like a tensor (``torch.where(x > t, x, torch.zeros_like(x))``).
_BY_NAME["zeros_like"] = _spec("zeros_like")
_BY_NAME["ones_like"] = _spec("ones_like")
_BY_NAME["full_like"] = _spec("full_like", params=("input", "fill_value"))
# Masks: combined, negated, and used to overwrite (``x.masked_fill(~mask, 0)``).
_BY_NAME["logical_not"] = _spec("logical_not")
for _logical in ("logical_and", "logical_or"):
    _BY_NAME[_logical] = _spec(_logical, params=_BINARY, operands=2)
_BY_NAME["masked_fill"] = _spec("masked_fill", params=("input", "mask", "value"), operands=3)
_BY_NAME["bool"] = _spec("bool")  # a mask of the non-zero elements (``F.one_hot(t, n).bool()``)
_BY_NAME.update(
    {
        "greater": _BY_NAME["gt"],
        "greater_equal": _BY_NAME["ge"],
        "less": _BY_NAME["lt"],
        "less_equal": _BY_NAME["le"],
        "not_equal": _BY_NAME["ne"],
    }
)

# torch.special / torch.linalg builtins report prefixed names.
_BY_NAME.update(
    {
        "log_sigmoid": _BY_NAME["logsigmoid"],
        "special_expit": _BY_NAME["sigmoid"],
        "special_erf": _BY_NAME["erf"],
        "special_erfc": _BY_NAME["erfc"],
        "special_expm1": _BY_NAME["expm1"],
        "special_log1p": _BY_NAME["log1p"],
        "special_logsumexp": _BY_NAME["logsumexp"],
        "special_softmax": _BY_NAME["softmax"],
        "special_log_softmax": _BY_NAME["log_softmax"],
        "linalg_vector_norm": _BY_NAME["vector_norm"],
        # A vector norm where dim names one dim (a pair of dims, a matrix norm, reduces more than the row).
        "linalg_norm": _BY_NAME["vector_norm"],
    }
)

# Python operators as fx records them (``a + b`` -> operator.add).
_OPERATORS: dict[Any, OpSpec] = {
    operator.add: _spec("add", params=_BINARY, operands=2),
    operator.sub: _spec("sub", params=_BINARY, operands=2),
    operator.mul: _spec("mul", params=_BINARY, operands=2),
    operator.truediv: _spec("div", params=_BINARY, operands=2, defaults={"rounding_mode": None}),
    operator.neg: _spec("neg"),
    operator.pos: _spec("pos", LAYOUT),
    operator.abs: _spec("abs"),
    operator.pow: _spec("pow", params=("input", "exponent"), operands=2),
    operator.matmul: _spec("matmul", STRUCTURAL, _BINARY, 2),
    operator.gt: _BY_NAME["gt"],
    operator.ge: _BY_NAME["ge"],
    operator.lt: _BY_NAME["lt"],
    operator.le: _BY_NAME["le"],
    operator.eq: _BY_NAME["eq"],
    operator.ne: _BY_NAME["ne"],
    operator.invert: _BY_NAME["logical_not"],
    operator.and_: _BY_NAME["logical_and"],
    operator.or_: _BY_NAME["logical_or"],
}

# Leaf nn modules fx keeps as call_module nodes: the spec plus the options read from the module's attributes.
_MODULES: dict[type, tuple[OpSpec, tuple[str, ...]]] = {
    nn.GELU: (_BY_NAME["gelu"], ("approximate",)),
    nn.SiLU: (_BY_NAME["silu"], ()),
    nn.ReLU: (_BY_NAME["relu"], ()),
    nn.ReLU6: (_BY_NAME["relu6"], ()),
    nn.LeakyReLU: (_BY_NAME["leaky_relu"], ("negative_slope",)),
    nn.ELU: (_BY_NAME["elu"], ("alpha",)),
    nn.Softplus: (_BY_NAME["softplus"], ("beta", "threshold")),
    nn.Mish: (_BY_NAME["mish"], ()),
    nn.LogSigmoid: (_BY_NAME["logsigmoid"], ()),
    nn.Hardtanh: (_BY_NAME["hardtanh"], ("min_val", "max_val")),
    nn.Sigmoid: (_BY_NAME["sigmoid"], ()),
    nn.Tanh: (_BY_NAME["tanh"], ()),
    nn.CELU: (_BY_NAME["celu"], ("alpha",)),
    nn.SELU: (_BY_NAME["selu"], ()),
    nn.Hardsigmoid: (_BY_NAME["hardsigmoid"], ()),
    nn.Hardswish: (_BY_NAME["hardswish"], ()),
    nn.Softsign: (_BY_NAME["softsign"], ()),
    nn.Threshold: (_BY_NAME["threshold"], ("threshold", "value")),
    nn.Tanhshrink: (_BY_NAME["tanhshrink"], ()),
    nn.Softshrink: (_BY_NAME["softshrink"], ("lambd",)),
    nn.Hardshrink: (_BY_NAME["hardshrink"], ("lambd",)),
    nn.Identity: (_spec("identity", LAYOUT), ()),
    nn.Softmax: (_BY_NAME["softmax"], ("dim",)),
    nn.Softmin: (_BY_NAME["softmin"], ("dim",)),
    nn.LogSoftmax: (_BY_NAME["log_softmax"], ("dim",)),
    nn.Linear: (_BY_NAME["linear"], ()),
    nn.Embedding: (_BY_NAME["embedding"], ()),
    nn.CrossEntropyLoss: (_BY_NAME["cross_entropy"], ("ignore_index", "label_smoothing", "reduction")),
    nn.NLLLoss: (_BY_NAME["nll_loss"], ("ignore_index", "reduction")),
    nn.KLDivLoss: (_BY_NAME["kl_div"], ("reduction", "log_target")),
    nn.BCELoss: (_BY_NAME["binary_cross_entropy"], ("weight", "reduction")),
    nn.BCEWithLogitsLoss: (_BY_NAME["binary_cross_entropy_with_logits"], ("weight", "reduction", "pos_weight")),
    nn.MSELoss: (_BY_NAME["mse_loss"], ("reduction",)),
    nn.L1Loss: (_BY_NAME["l1_loss"], ("reduction",)),
    nn.SmoothL1Loss: (_BY_NAME["smooth_l1_loss"], ("reduction", "beta")),
    nn.HuberLoss: (_BY_NAME["huber_loss"], ("reduction", "delta")),
}

# torch.max(x, y) is element-wise, torch.max(x, dim) a reduction returning (values, indices).
_MAX_MIN = {"max": ("maximum", "amax"), "min": ("minimum", "amin")}
_META_ATTRIBUTES = {"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad"}


class UnknownOpError(LookupError):
    """An fx node kernelgen has no canonical name for; ``label`` is how the reference spelled it."""

    def __init__(self, label: str):
        self.label = label
        super().__init__(label)


def normalize(node: fx.Node, root: nn.Module) -> OpCall | None:
    """The canonical form of a call node (None for placeholders, get_attr and output)."""
    if node.op == "call_function":
        call = _normalize_call(node, node.target, _function_name(node.target), list(node.args), dict(node.kwargs))
    elif node.op == "call_method":
        call = _normalize_call(node, node.target, node.target, list(node.args), dict(node.kwargs))
    elif node.op == "call_module":
        call = _normalize_module(node, root.get_submodule(node.target))
    else:
        return None
    pointwise = pointwise_loss(call)
    if pointwise is not None and call.options.get("reduction") == "none":
        return OpCall(node, pointwise[0], ELEMENTWISE, call.operands, pointwise[1], call.label, call.line)
    shape = call.options.get("normalized_shape")
    if call.name in ("layer_norm", "rms_norm") and isinstance(shape, fx.Node):
        call.options["normalized_shape"] = (None,) * _shape_length(shape, root, call)
    return call


def _shape_length(node: fx.Node, root: nn.Module, call: OpCall) -> int:
    """How many trailing dims a traced ``normalized_shape`` names: ``self.weight.shape`` (the parameter's rank),
    ``x.shape[-1:]`` (the slice's length), ``(x.shape[-1],)``-like sizes (one each)."""
    if node.op == "call_function" and node.target is builtins.getattr and node.args[1] == "shape":
        source = node.args[0]
        if isinstance(source, fx.Node) and source.op == "get_attr":
            value = root
            for part in str(source.target).split("."):
                value = getattr(value, part)
            return value.dim()
    if node.op == "call_function" and node.target is operator.getitem:
        index = node.args[1]
        if isinstance(index, int):
            return 1
        if isinstance(index, slice) and index.stop is None and index.step is None and (index.start or 0) < 0:
            return -index.start
    raise UnknownOpError(f"{call.label} with a normalized_shape computed as `{node.format_node()}`")


def _function_name(target: Any) -> str:
    return getattr(target, "__name__", str(target))


def _label(node: fx.Node) -> str:
    if node.op == "call_method":
        return f".{node.target}()"
    if node.op == "call_module":
        return f"nn.{type(node.graph.owning_module.get_submodule(node.target)).__name__}"
    target = node.target
    if target in _OPERATORS or getattr(target, "__module__", None) in ("_operator", "operator"):
        return f"operator.{_function_name(target)}"
    module = getattr(target, "__module__", None) or "torch"
    name = _function_name(target)
    for prefix in ("special", "linalg", "fft"):
        if module == f"torch._C._{prefix}" and name.startswith(f"{prefix}_"):
            return f"torch.{prefix}.{name[len(prefix) + 1 :]}"
    module = _MODULE_ALIASES.get(module, module)
    return f"{module}.{name}"


_MODULE_ALIASES = {"torch.nn.functional": "F", "torch._C._nn": "F", "torch._C._VariableFunctions": "torch"}


def descendants(start: fx.Node) -> set[fx.Node]:
    """Every node computed from ``start``, through any number of ops."""
    seen, pending = set(), [start]
    while pending:
        for user in pending.pop().users:
            if user not in seen:
                seen.add(user)
                pending.append(user)
    return seen


def node_line(node: fx.Node) -> int | None:
    """The reference line that created ``node`` (stamped by the tracer under ``LINE_KEY``), if known."""
    return node.meta.get(LINE_KEY)


def _bind(spec: OpSpec, args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any], list[Any]]:
    bound = dict(spec.defaults)
    bound.update(zip(spec.params, args))
    bound.update(kwargs)
    for ignored in ("inplace", "out", "_stacklevel", "memory_format"):
        bound.pop(ignored, None)
    index_operands = [bound[name] for name in spec.index_params if name in bound]
    operands = [bound.pop(name) for name in spec.params[: spec.operands] if name in bound]
    bound.update(spec.fixed)
    return operands, bound, index_operands


def _make(node: fx.Node, spec: OpSpec, args: list[Any], kwargs: dict[str, Any], name: str | None = None) -> OpCall:
    operands, options, index_operands = _bind(spec, args, kwargs)
    return OpCall(
        node, name or spec.name, spec.family, operands, options, _label(node), node_line(node), index_operands
    )


def _counts_from_zero(args: list[Any], kwargs: dict[str, Any]) -> bool:
    """``torch.arange(n)``, ``torch.arange(0, n)``, ``torch.arange(0, n, 1)`` and their keyword forms: 0, 1, ..., n - 1."""
    bound = dict(zip(("end",) if len(args) == 1 else ("start", "end", "step"), args))
    if set(bound) & set(kwargs):
        return False
    bound.update((key, kwargs[key]) for key in ("start", "end", "step") if key in kwargs)
    return "end" in bound and bound.get("start", 0) == 0 and bound.get("step", 1) == 1


# Integer arithmetic a reference does on sizes (``x.shape[-1] // 2``): a number, not a value of the computation.
_SIZE_ARITHMETIC = {operator.floordiv: "//", operator.mod: "%"}


def _normalize_call(node: fx.Node, target: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> OpCall:
    if target is torch.arange and _counts_from_zero(args, kwargs):
        # a sequence of indices, read only as the row index of ``x[torch.arange(rows), t]`` (also written
        # ``torch.arange(0, rows)`` or ``torch.arange(start=0, end=rows)``, as Megatron does)
        return OpCall(node, "arange", META, [], {}, "torch.arange", node_line(node))
    if target in _SIZE_ARITHMETIC and all(_is_meta(arg) or isinstance(arg, int) for arg in args):
        return OpCall(node, "size_arithmetic", META, [], {}, f"{_label(node)} of a size", node_line(node))
    if target in _OPERATORS:
        return _make(node, _OPERATORS[target], args, kwargs)
    if target is operator.getitem or target == "__getitem__":  # the method form: indexing a module's buffer
        return _normalize_getitem(node, args)
    if target is builtins.getattr:
        attribute = args[1] if len(args) > 1 else None
        if attribute in ("T", "mT", "H", "mH"):
            return OpCall(node, "transpose", STRUCTURAL, [args[0]], {}, f".{attribute}", node_line(node))
        if attribute in _META_ATTRIBUTES:
            return OpCall(node, attribute, META, [], {}, f".{attribute}", node_line(node))
        source = args[0]
        family = source.meta.get("kernelgen_family") if isinstance(source, fx.Node) else None
        if attribute == "values" and family in (REDUCTION, STRUCTURAL):
            # of max(x, dim), or of sort/topk, which then classify the reference by themselves
            return OpCall(node, "values", LAYOUT, [source], {}, ".values", node_line(node))
        raise UnknownOpError(f".{attribute}")
    if name in _MAX_MIN and _function_module_ok(target):
        elementwise, reduction = _MAX_MIN[name]
        second = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("dim"))
        if isinstance(second, fx.Node) and not _is_meta(second):
            return _make(node, _BY_NAME[elementwise], args, kwargs)
        options = {"dim": second, "keepdim": args[2] if len(args) > 2 else kwargs.get("keepdim", False)}
        if second is not None:
            # Its values' gradient goes to the one index it returns, the first holding the extremum (torch's
            # documented tie rule); amax, and max() of every element, split it evenly between ties instead.
            options["first_index"] = True
        return OpCall(node, reduction, REDUCTION, [args[0]], options, _label(node), node_line(node))
    if name in _BY_NAME and _function_module_ok(target):
        return _make(node, _BY_NAME[name], args, kwargs)
    raise UnknownOpError(_label(node))


# Python's math functions of the same names (fx records them as calls when a hyper-parameter is their argument,
# ``math.exp(log_temperature)``).
_MATH_FUNCTIONS = frozenset("exp log log1p expm1 sqrt tanh sin cos erf pow".split())


def _function_module_ok(target: Any) -> bool:
    """Method names (strings), functions of torch / torch.nn.functional / torch.special / torch.linalg, and
    Python's math functions that torch has under the same name."""
    if isinstance(target, str):
        return True
    module = getattr(target, "__module__", None) or ""
    if module == "math":
        return getattr(target, "__name__", "") in _MATH_FUNCTIONS
    return module.startswith("torch")


def _is_meta(value: Any) -> bool:
    return isinstance(value, fx.Node) and value.meta.get("kernelgen_family") == META


def _normalize_getitem(node: fx.Node, args: list[Any]) -> OpCall:
    source, index = args[0], args[1]
    if _is_meta(source):
        return OpCall(node, "getitem", META, [], {}, "[...]", node_line(node))
    rows = index[0] if isinstance(index, tuple) and len(index) == 2 else None
    if isinstance(rows, fx.Node) and _is_meta(rows) and rows.target is torch.arange and isinstance(index[1], fx.Node):
        # x[torch.arange(rows), t]: the element of each row at its own class index, a gather along the last dim
        label = f"{_operand_text(source)}[torch.arange(...), {_operand_text(index[1])}]"
        options = {"dim": -1, "rows": rows}
        return OpCall(node, "gather", STRUCTURAL, [source], options, label, node_line(node), [index[1]])
    broadcast = all(item is None or item is Ellipsis or item == slice(None) for item in _flatten(index))
    if broadcast and any(item is None for item in _flatten(index)):
        # x[..., None] / x.mean(-1)[:, None]: adds broadcast dims only (a tuple result is indexed by an int instead).
        return OpCall(node, "unsqueeze", LAYOUT, [source], {}, "[..., None]", node_line(node))
    if isinstance(source, fx.Node) and _function_name(source.target) in TUPLE_REDUCTIONS and index in (0, 1):
        # var_mean / std_mean: the element is one of the statistics (the program builder picks it by index).
        return OpCall(node, "statistic", LAYOUT, [source], {"index": index}, f"[{index}]", node_line(node))
    if isinstance(source, fx.Node) and source.meta.get("kernelgen_family") in (REDUCTION, STRUCTURAL):
        if source.meta.get("kernelgen_family") == STRUCTURAL and not isinstance(index, int):
            return _slice_call(node, source, index)  # a slice of a slice (x[..., :d][..., ::2])
        # (values, indices) of max(x, dim) / pieces of chunk(): the element is the producing op's result.
        if source.meta.get("kernelgen_family") == REDUCTION and index == 0:
            return OpCall(node, "values", LAYOUT, [source], {}, "[0]", node_line(node))
        return OpCall(node, "getitem", STRUCTURAL, [source], {"index": index}, "[...]", node_line(node))
    element = index[0] if isinstance(index, tuple) and len(index) == 1 else index
    if isinstance(source, fx.Node) and source.op == "get_attr" and type(element) is int:
        # self.weight[0]: one element of a module's parameter vector, a scalar of the kernel (PolyNorm's weights).
        label = f"self.{source.target}[{element}]"
        return OpCall(node, "parameter_element", LAYOUT, [source], {"index": element}, label, node_line(node))
    tensor_index = [item for item in _flatten(index) if isinstance(item, fx.Node)]
    if tensor_index:
        return OpCall(node, "index", STRUCTURAL, [source], {}, "indexing by a tensor", node_line(node), tensor_index)
    if broadcast:  # x[...], x[:]: the tensor itself
        return OpCall(node, "unsqueeze", LAYOUT, [source], {}, "[...]", node_line(node))
    return _slice_call(node, source, index)


def _slice_call(node: fx.Node, source: Any, index: Any) -> OpCall:
    label = f"{_operand_text(source)}[{', '.join(_index_text(item) for item in _flatten(index))}]"
    return OpCall(node, "slice", STRUCTURAL, [source], {"index": index}, label, node_line(node))


def _operand_text(value: Any) -> str:
    """How a reference names an indexed value: ``self.weight`` for a module's parameter, else the fx name (the
    argument's, or the op's that computed it)."""
    if isinstance(value, fx.Node) and value.op == "get_attr":
        return f"self.{value.target}"
    sliced = isinstance(value, fx.Node) and value.op == "call_function" and value.target is operator.getitem
    if sliced and not isinstance(value.args[1], int):  # a slice of a slice reads as both: x[..., :d][..., ::2]
        return f"{_operand_text(value.args[0])}[{', '.join(_index_text(item) for item in _flatten(value.args[1]))}]"
    return value.name if isinstance(value, fx.Node) else repr(value)


def _index_text(item: Any) -> str:
    """One item of a subscript as written (``...``, ``::2``, ``:n``; a computed bound by its fx name)."""
    if item is Ellipsis:
        return "..."
    if item is None:
        return "None"
    if isinstance(item, slice):
        parts = ["" if part is None else _index_text(part) for part in (item.start, item.stop, item.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
    return _size_text(item) if isinstance(item, fx.Node) else repr(item)


def _size_text(node: fx.Node) -> str:
    """A bound computed from sizes as written (``x.shape[-1] // 2``); any other node by its fx name."""
    if node.op == "call_function" and node.target is builtins.getattr and node.args[1] == "shape":
        return f"{_operand_text(node.args[0])}.shape"
    if node.op == "call_function" and node.target is operator.getitem and isinstance(node.args[0], fx.Node):
        return f"{_size_text(node.args[0])}[{node.args[1]!r}]"
    if node.op == "call_method" and node.target == "size" and isinstance(node.args[0], fx.Node):
        return f"{_operand_text(node.args[0])}.size({', '.join(repr(arg) for arg in node.args[1:])})"
    if node.op == "call_function" and node.target in _SIZE_ARITHMETIC:
        left, right = (_size_text(arg) if isinstance(arg, fx.Node) else repr(arg) for arg in node.args)
        return f"{left} {_SIZE_ARITHMETIC[node.target]} {right}"
    return node.name


# Reductions whose result is a tuple of row statistics, indexed by the reference.
TUPLE_REDUCTIONS = ("var_mean", "std_mean")


def _flatten(index: Any) -> list[Any]:
    return list(index) if isinstance(index, (tuple, list)) else [index]


def _normalize_module(node: fx.Node, module: nn.Module) -> OpCall:
    """A held torch module's call (a held nn.LayerNorm / nn.RMSNorm or loss is its functional call already:
    analyze/held_modules.py)."""
    if type(module) not in _MODULES:
        raise UnknownOpError(f"nn.{type(module).__name__}")
    spec, attributes = _MODULES[type(module)]
    kwargs = {name: getattr(module, name) for name in attributes}
    return _make(node, spec, list(node.args), {**kwargs, **node.kwargs})


def reduced_dims(call: OpCall, rank: int | None) -> tuple[int, ...] | None:
    """The dims a reduction folds, normalised to non-negative indices (None when unknown: no rank)."""
    if call.name in ("layer_norm", "rms_norm"):
        count = len(call.options.get("normalized_shape") or (1,))
        return tuple(range(rank - count, rank)) if rank is not None else None
    dim = call.options.get("dim")
    if rank is None:
        return None
    if dim is None or dim == () or dim == []:
        return tuple(range(rank))
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    if not all(isinstance(d, int) for d in dims):
        return None
    return tuple(sorted(d % rank if rank else d for d in dims))


def is_integer_exponent(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()


def is_fractional_exponent(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value) and not value.is_integer()
