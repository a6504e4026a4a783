"""Tier-1 symbolic synthesis: the op table, the Triton printer, gradient derivation and the printed kernels.

Printed statements are checked numerically against torch and torch.autograd in float64 with a ``tl`` shim that maps
``tl.exp`` to ``torch.exp`` and so on; a few fused expressions are also rendered into real ``@triton.jit`` kernels
and run (under the interpreter on CPU) to prove the statements are valid Triton.
"""

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
import warnings

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Callable

import pytest
import sympy
import torch
import torch.nn.functional as F
import triton  # noqa: F401  (imported after the root conftest chose the interpreter on CPU)

from test.utils import assert_verbose_allclose
from test.utils import infer_device
from test.utils import set_seed
from tools.kernelgen.synth import OPS
from tools.kernelgen.synth import SUPPORTED_OPS
from tools.kernelgen.synth import UnsupportedOpError
from tools.kernelgen.synth import apply_op
from tools.kernelgen.synth import format_formula
from tools.kernelgen.synth import make_symbols
from tools.kernelgen.synth import parse_formula
from tools.kernelgen.synth import print_triton
from tools.kernelgen.synth import synthesize_elementwise
from tools.kernelgen.synth.derive import derive_elementwise
from tools.kernelgen.synth.derive import print_elementwise
from tools.kernelgen.synth.functions import Log1p
from tools.kernelgen.synth.functions import SigmoidOfLog
from tools.kernelgen.synth.functions import Take
from tools.kernelgen.synth.functions import in_unit_interval
from tools.kernelgen.synth.naming import TemporaryNames
from tools.kernelgen.synth.naming import constant_parts
from tools.kernelgen.synth.printer import TileLangPrinter
from tools.kernelgen.synth.printer import TritonLibdevicePrinter
from tools.kernelgen.synth.printer import TritonPrinter
from tools.kernelgen.synth.printer import jit_helpers_called
from tools.kernelgen.synth.printer import print_torch
from tools.kernelgen.synth.printer import print_triton_index
from tools.kernelgen.synth.rules import tensor_arguments
from tools.kernelgen.synth.symbols import RESERVED_NAMES
from tools.kernelgen.synth.transcendentals import share_transcendentals
from tools.kernelgen.synth.transcendentals import transcendental_calls

REPO_ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------------------------
# A tiny evaluator: run printed statements on torch tensors through a ``tl`` shim.
# ---------------------------------------------------------------------------------------------------------------


class TorchTL:
    """The ``tl`` functions printed statements use, on torch tensors; Python floats become tensors of ``dtype``."""

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype

    def _t(self, value):
        return value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=self.dtype)

    def where(self, condition, if_true, if_false):
        return torch.where(self._t(condition).bool(), self._t(if_true), self._t(if_false))

    def maximum(self, a, b):
        return torch.maximum(self._t(a), self._t(b))

    def minimum(self, a, b):
        return torch.minimum(self._t(a), self._t(b))

    def exp2(self, x):
        return torch.exp2(self._t(x))

    def log2(self, x):
        return torch.log2(self._t(x))

    def zeros_like(self, x):
        return torch.zeros_like(x)

    def __getattr__(self, name):
        if name == "float32":  # the printed kernels compute in fp32: here, in the values' own dtype
            return self.dtype
        function = {
            "exp": torch.exp,
            "log": torch.log,
            "sqrt": torch.sqrt,
            "rsqrt": torch.rsqrt,
            "abs": torch.abs,
            "sigmoid": torch.sigmoid,
            "erf": torch.erf,
            "sin": torch.sin,
            "cos": torch.cos,
            "floor": torch.floor,
        }.get(name)
        if function is None:
            raise AttributeError(f"the tl shim has no {name!r}: the printer emitted something unexpected")
        return lambda x: function(self._t(x))


def run_statements(statements: list[str], values: dict[str, torch.Tensor]) -> dict:
    dtype = next(iter(values.values())).dtype
    namespace = {"tl": TorchTL(dtype), "pow": torch.pow, "input_dtype": dtype, **values}
    # The utils helpers: core-op tanh and log1p of [0, 1], and libdevice's tanh and log1p (light forwards,
    # tiling.*_math: libdevice). The helpers' own values are tested on the interpreter (test_generate.py).
    namespace |= {
        "tanh_from_exp": torch.tanh,
        "tanh": torch.tanh,
        "log1p": torch.log1p,
        "log1p_unit": torch.log1p,
        "expm1": torch.expm1,
        "erfc": torch.special.erfc,
    }
    exec(compile("\n".join(statements), "<synthesized>", "exec"), namespace)
    return namespace


def evaluate(expr: sympy.Basic, values: dict[str, torch.Tensor]) -> torch.Tensor:
    result = run_statements([f"result__ = {print_triton(expr)}"], values)["result__"]
    reference = next(iter(values.values()))
    return result if isinstance(result, torch.Tensor) else torch.full_like(reference, float(result))


def sample(domain: str, n: int = 64, dtype=torch.float64) -> torch.Tensor:
    magnitude = torch.empty(n, dtype=dtype).uniform_(0.1, 3.0)
    if domain == "positive":
        return magnitude
    if domain == "nonzero":
        return magnitude * torch.where(torch.rand(n) < 0.5, -1.0, 1.0).to(dtype)
    if domain == "unit":  # probabilities, away from 0 and 1
        return torch.empty(n, dtype=dtype).uniform_(0.02, 0.98)
    if domain == "signed_unit":
        return torch.empty(n, dtype=dtype).uniform_(-0.98, 0.98)
    if domain == "above_one":
        return magnitude + 1
    return torch.empty(n, dtype=dtype).uniform_(-3.0, 3.0)


def check_against_torch(formula_or_expr, names, torch_fn, domains=None, parameters=None, hyperparameters=None):
    """Synthesize ``out = formula``, run forward and backward statements, compare with torch and autograd."""
    hyperparameters = hyperparameters or {}
    all_names = [*names, *(parameters or {})]
    if isinstance(formula_or_expr, str):
        expr = parse_formula(formula_or_expr, [*all_names, *hyperparameters])
    else:
        expr = formula_or_expr
    math = synthesize_elementwise({"out": expr}, list(names), parameters, list(hyperparameters))
    domains = domains or {}
    values = {name: sample(domains.get(name, "real")) for name in all_names}
    hyper_values = {name: torch.tensor(value, dtype=torch.float64) for name, value in hyperparameters.items()}

    forward = run_statements(math.forward, {**values, **hyper_values})["out"]
    leaves = {name: value.clone().requires_grad_(True) for name, value in values.items()}
    reference = torch_fn(*leaves.values(), *hyperparameters.values())
    assert_verbose_allclose(forward, reference, rtol=1e-6, atol=1e-9, extra_info="(forward)")

    grad_out = torch.randn_like(reference)
    reference.backward(grad_out)
    backward = run_statements(math.backward, {**values, **hyper_values, "grad_out": grad_out})
    for name, leaf in leaves.items():
        expected = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
        got = backward[f"grad_{name}"]
        assert_verbose_allclose(got.expand_as(expected), expected, rtol=1e-6, atol=1e-9, extra_info=f"(grad_{name})")
    return math


@pytest.fixture(autouse=True)
def _seed():
    set_seed(0)


# ---------------------------------------------------------------------------------------------------------------
# Every op family of the table against torch (float64, random inputs that avoid kinks).
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class OpCase:
    op: str
    torch_fn: Callable
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    names: tuple = ("x",)
    domains: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        extra = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return self.op + (f"[{','.join(extra)}]" if extra else "")


POSITIVE = {"x": "positive"}
OP_CASES = [
    OpCase("add", lambda a, b: a + b, names=("a", "b")),
    OpCase("add", lambda a, b: a + 2.5 * b, kwargs={"alpha": 2.5}, names=("a", "b")),
    OpCase("sub", lambda a, b: a - b, names=("a", "b")),
    OpCase("mul", lambda a, b: a * b, names=("a", "b")),
    OpCase("div", lambda a, b: a / b, names=("a", "b"), domains={"b": "nonzero"}),
    OpCase("neg", lambda x: -x),
    OpCase("pow", lambda x: x**2, args=(2,)),
    OpCase("pow", lambda x: x**3, args=(3.0,)),
    OpCase("pow", lambda x: x**5, args=(5,)),
    OpCase("pow", lambda x: x**11, args=(11,), domains={"x": "nonzero"}),
    OpCase("pow", lambda x: x**-1, args=(-1,), domains={"x": "nonzero"}),
    OpCase("pow", lambda x: x**-2, args=(-2,), domains={"x": "nonzero"}),
    OpCase("pow", lambda x: x**0.5, args=(0.5,), domains=POSITIVE),
    OpCase("pow", lambda x: x**-0.5, args=(-0.5,), domains=POSITIVE),
    OpCase("pow", lambda x: x**1.5, args=(1.5,), domains=POSITIVE),
    OpCase("pow", lambda x: x**-2.5, args=(-2.5,), domains=POSITIVE),
    OpCase("pow", lambda x: x**1.7, args=(1.7,), domains=POSITIVE),
    OpCase("square", torch.square),
    OpCase("reciprocal", torch.reciprocal, domains={"x": "nonzero"}),
    OpCase("exp", torch.exp),
    OpCase("log", torch.log, domains=POSITIVE),
    OpCase("log1p", torch.log1p, domains=POSITIVE),
    OpCase("expm1", torch.expm1),
    OpCase("sqrt", torch.sqrt, domains=POSITIVE),
    OpCase("rsqrt", torch.rsqrt, domains=POSITIVE),
    OpCase("abs", torch.abs),
    OpCase("sign", torch.sign),
    OpCase("tanh", torch.tanh),
    OpCase("sigmoid", torch.sigmoid),
    OpCase("silu", F.silu),
    OpCase("gelu", F.gelu),
    OpCase("gelu", lambda x: F.gelu(x, approximate="tanh"), kwargs={"approximate": "tanh"}),
    OpCase("relu", torch.relu),
    OpCase("leaky_relu", F.leaky_relu),
    OpCase("leaky_relu", lambda x: F.leaky_relu(x, 0.2), args=(0.2,)),
    OpCase("elu", F.elu),
    OpCase("elu", lambda x: F.elu(x, alpha=0.5), kwargs={"alpha": 0.5}),
    OpCase("softplus", F.softplus),
    OpCase("softplus", lambda x: F.softplus(x, beta=2.0, threshold=5.0), kwargs={"beta": 2.0, "threshold": 5.0}),
    OpCase("mish", F.mish),
    OpCase("logsigmoid", F.logsigmoid),
    OpCase("hardtanh", F.hardtanh),
    OpCase("hardtanh", lambda x: F.hardtanh(x, -0.5, 2.0), kwargs={"min_val": -0.5, "max_val": 2.0}),
    OpCase("clamp", lambda x: torch.clamp(x, min=-0.7), kwargs={"min": -0.7}),
    OpCase("clamp", lambda x: torch.clamp(x, max=1.2), kwargs={"max": 1.2}),
    OpCase("clamp", lambda x: torch.clamp(x, -1.5, 0.25), args=(-1.5, 0.25)),
    # Tensor bounds, drawn independently: where lo > hi torch gives hi (its gradient too).
    OpCase("clamp", lambda x, lo, hi: torch.clamp(x, lo, hi), names=("x", "lo", "hi")),
    OpCase("maximum", torch.maximum, names=("a", "b")),
    OpCase("fmax", torch.fmax, names=("a", "b")),
    OpCase("fmin", torch.fmin, names=("a", "b")),
    OpCase("minimum", torch.minimum, names=("a", "b")),
    OpCase("xlogy", torch.xlogy, names=("a", "b"), domains={"a": "positive", "b": "positive"}),
    OpCase("entr", torch.special.entr, domains={"x": "positive"}),
    OpCase("sin", torch.sin),
    OpCase("cos", torch.cos),
    OpCase("erf", torch.erf),
    OpCase("hardswish", F.hardswish),
    OpCase("hardsigmoid", F.hardsigmoid),
    OpCase("softsign", F.softsign),
    OpCase("tanhshrink", F.tanhshrink),
    OpCase("erfc", torch.erfc),
    OpCase("sinh", torch.sinh),
    OpCase("cosh", torch.cosh),
    OpCase("log2", torch.log2, domains=POSITIVE),
    OpCase("log10", torch.log10, domains=POSITIVE),
    OpCase("softshrink", lambda x: F.softshrink(x, 0.75), kwargs={"lambd": 0.75}),
    OpCase("hardshrink", lambda x: F.hardshrink(x, 0.75), kwargs={"lambd": 0.75}),
    OpCase("celu", lambda x: F.celu(x, alpha=0.5), kwargs={"alpha": 0.5}),
    OpCase("selu", F.selu),
    OpCase(
        "kl_div_pointwise",
        lambda x, t: F.kl_div(x, t, reduction="none"),
        names=("x", "t"),
        domains={"t": "positive"},
    ),
    OpCase(
        "kl_div_pointwise",
        lambda x, t: F.kl_div(x, t, reduction="none", log_target=True),
        kwargs={"log_target": True},
        names=("x", "t"),
    ),
    OpCase(
        "bce_with_logits_pointwise",
        lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"),
        names=("x", "y"),
        domains={"y": "unit"},
    ),
    OpCase(
        "bce_pointwise",
        lambda p, y: F.binary_cross_entropy(p, y, reduction="none"),
        names=("p", "y"),
        domains={"p": "unit", "y": "unit"},
    ),
    OpCase("mse_pointwise", lambda a, b: F.mse_loss(a, b, reduction="none"), names=("a", "b")),
    OpCase("l1_pointwise", lambda a, b: F.l1_loss(a, b, reduction="none"), names=("a", "b")),
    OpCase(
        "smooth_l1_pointwise",
        lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.5),
        kwargs={"beta": 0.5},
        names=("a", "b"),
    ),
    OpCase(
        "huber_pointwise",
        lambda a, b: F.huber_loss(a, b, reduction="none", delta=0.7),
        kwargs={"delta": 0.7},
        names=("a", "b"),
    ),
    OpCase("rrelu", lambda x: F.rrelu(x, 0.1, 0.3, training=False), args=(0.1, 0.3)),
    OpCase("rrelu", lambda x: F.rrelu(x, training=False)),
    OpCase("threshold", lambda x: F.threshold(x, 0.1, -2.0), args=(0.1, -2.0)),
    OpCase("exp2", torch.exp2),
    OpCase("logaddexp", torch.logaddexp, names=("a", "b")),
    OpCase("logaddexp2", torch.logaddexp2, names=("a", "b")),
    OpCase("hypot", torch.hypot, names=("a", "b")),
    OpCase("ndtr", torch.special.ndtr),
    OpCase("lerp", lambda a, b: torch.lerp(a, b, 0.25), args=(0.25,), names=("a", "b")),
    OpCase("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), kwargs={"value": 0.5}, names=("a", "b", "c")),
    OpCase(
        "addcdiv",
        lambda a, b, c: torch.addcdiv(a, b, c, value=0.5),
        kwargs={"value": 0.5},
        names=("a", "b", "c"),
        domains={"c": "positive"},
    ),
    OpCase("asinh", torch.asinh),
    OpCase("floor", torch.floor),
    OpCase("ceil", torch.ceil),
    OpCase("dropout", lambda x: F.dropout(x, 0.1, training=False), kwargs={"p": 0.1, "training": False}),
    OpCase("trunc", torch.trunc),
    OpCase("round", torch.round),
    OpCase("sinc", torch.special.sinc),
    OpCase("copysign", torch.copysign, names=("a", "b")),
    OpCase("atanh", torch.atanh, domains={"x": "signed_unit"}),
    OpCase("acosh", torch.acosh, domains={"x": "above_one"}),
    OpCase("logit", torch.logit, domains={"x": "unit"}),
    # eps clamps the input: samples of (0.02, 0.98) on both sides of [0.1, 0.9], where torch's gradient is 0.
    OpCase("logit", lambda x: torch.logit(x, eps=0.1), kwargs={"eps": 0.1}, domains={"x": "unit"}),
    # A norm's or std's root (its gradient 0 where the value is 0: test_rows checks zero rows against torch).
    OpCase("root", lambda x: x ** (1 / 3), args=(3,), domains=POSITIVE),
    # Rounding to the input's dtype (float64 here) is exact; its gradient passes through.
    OpCase("cast_to_input", lambda x: x),
]


@pytest.mark.parametrize("case", OP_CASES, ids=lambda case: case.id)
def test_op_forward_and_gradients_match_torch(case):
    symbols = make_symbols(case.names)
    expr = apply_op(case.op, *(symbols[n] for n in case.names), *case.args, **case.kwargs)
    check_against_torch(expr, case.names, case.torch_fn, domains=case.domains)


def test_clamp_with_tensor_bounds_takes_torch_s_values_and_gradients_at_ties_and_crossings():
    """bf16 bounds tie often: at x < min == max torch's backward gives no input a gradient, and where min > max it
    gives max the output and its gradient."""
    symbols = make_symbols(["x", "lo", "hi"])
    math = synthesize_elementwise({"out": apply_op("clamp", *symbols.values())}, ["x", "lo", "hi"])
    generator = torch.Generator().manual_seed(0)
    values = {name: torch.randint(-2, 3, (4096,), generator=generator).double() * 0.5 for name in symbols}
    assert bool((values["lo"] == values["hi"]).any() and (values["lo"] > values["hi"]).any())
    leaves = {name: value.clone().requires_grad_(True) for name, value in values.items()}
    reference = torch.clamp(*leaves.values())
    reference.backward(grad_out := torch.randn_like(reference))
    torch.testing.assert_close(run_statements(math.forward, values)["out"], reference, rtol=0, atol=0)
    backward = run_statements(math.backward, {**values, "grad_out": grad_out})
    for name, leaf in leaves.items():
        torch.testing.assert_close(backward[f"grad_{name}"].expand_as(leaf), leaf.grad, rtol=0, atol=0)


def test_every_op_of_the_table_is_exercised():
    exercised = {case.op for case in OP_CASES} | {"where", "gt", "ge", "lt", "le", "eq", "ne"}
    exercised |= {"logical_not", "logical_and", "logical_or", "masked_fill", "bool"}  # test_masks_...
    exercised |= {"zeros_like", "ones_like", "full_like"}  # test_constants_shaped_like_a_tensor
    exercised |= {"take"}  # test_take_...; the losses of test_class_weights.py
    exercised |= {"detach"}  # its gradient, 0: test_documented_derivatives_...; the detached styles of test_losses.py
    assert exercised == SUPPORTED_OPS


def test_take_reads_a_per_class_input_at_a_class_index_and_prints_as_an_integer_index():
    """take(weight, index): a loss's class weight of each row; the index keeps integer constants (a float literal
    would make it a float tensor), on the host through the wrapper's _take (0 outside the classes, 1 without
    weights)."""
    names = ["weight", "target", "ignore_index"]
    expr = parse_formula("where(target != ignore_index, take(weight, where(target < 0, 0, target)), 0)", names)
    assert isinstance(expr.args[0][0], Take) and parse_formula(format_formula(expr), names) == expr
    assert print_torch(expr) == (
        "torch.where(ignore_index != target, _take(weight, torch.where(target < 0, 0, target)), 0.0)"
    )
    assert print_triton_index(expr.args[0][0].args[1]) == "tl.where(target < 0, 0, target)"
    weight, target = make_symbols(["weight", "target"]).values()
    with pytest.raises(ValueError, match="take: the values must be a per-class input"):
        apply_op("take", 2 * weight, target)


@pytest.mark.parametrize(
    "comparison, torch_comparison",
    [("gt", torch.gt), ("ge", torch.ge), ("lt", torch.lt), ("le", torch.le), ("eq", torch.eq), ("ne", torch.ne)],
)
def test_comparisons_select_in_where_and_count_as_indicators(comparison, torch_comparison):
    a, b = make_symbols(["a", "b"]).values()
    condition = apply_op(comparison, a, b)
    expr = apply_op("add", apply_op("where", condition, a * a, apply_op("sin", b)), apply_op("mul", condition, b))

    def reference(a, b):
        mask = torch_comparison(a, b)
        return torch.where(mask, a * a, torch.sin(b)) + mask * b

    names = ("a", "b")
    math = synthesize_elementwise({"y": expr}, list(names))
    # A coarse grid makes ties (a == b) common, so eq/ne/ge/le are tested where they differ from gt/lt.
    values = {name: torch.randint(-3, 4, (64,)).double() / 2 for name in names}
    leaves = {name: value.clone().requires_grad_(True) for name, value in values.items()}
    expected = reference(**leaves)
    assert_verbose_allclose(run_statements(math.forward, values)["y"], expected, rtol=1e-12)
    grad_y = torch.randn(64, dtype=torch.float64)
    expected.backward(grad_y)
    backward = run_statements(math.backward, {**values, "grad_y": grad_y})
    for name in names:
        assert_verbose_allclose(backward[f"grad_{name}"], leaves[name].grad, rtol=1e-12)


def test_masks_combine_negate_and_fill_as_torch_does():
    a, b = make_symbols(["a", "b"]).values()
    keep = apply_op("logical_or", apply_op("logical_and", a > 0, b < 1), apply_op("logical_not", a > b))
    expr = apply_op("mul", apply_op("masked_fill", a * b, apply_op("logical_not", keep), 0.0), keep)

    def reference(a, b):
        keep = ((a > 0) & (b < 1)) | ~(a > b)
        return (a * b).masked_fill(~keep, 0.0) * keep

    math = synthesize_elementwise({"y": expr}, ["a", "b"])
    values = {name: torch.randn(64, dtype=torch.float64) for name in ("a", "b")}
    leaves = {name: value.clone().requires_grad_(True) for name, value in values.items()}
    expected = reference(**leaves)
    assert_verbose_allclose(run_statements(math.forward, values)["y"], expected, rtol=1e-12)
    expected.backward(torch.ones_like(expected))
    backward = run_statements(math.backward, {**values, "grad_y": torch.ones(64, dtype=torch.float64)})
    for name in ("a", "b"):
        assert_verbose_allclose(backward[f"grad_{name}"], leaves[name].grad, rtol=1e-12)
    with pytest.raises(ValueError, match="combine masks"):
        apply_op("logical_not", a)


def test_bool_of_a_value_is_the_mask_of_its_non_zero_elements():
    a, b = make_symbols(["a", "b"]).values()
    expr = apply_op("masked_fill", a * b, apply_op("logical_not", apply_op("bool", b)), 0.5)
    expr = apply_op("add", expr, apply_op("mul", apply_op("bool", a > 0), b))  # a comparison's bool is itself
    math = synthesize_elementwise({"y": expr}, ["a", "b"])
    values = {"a": torch.randn(64, dtype=torch.float64), "b": torch.randn(64, dtype=torch.float64)}
    values["b"][::4] = 0.0
    leaves = {name: value.clone().requires_grad_(True) for name, value in values.items()}
    a_leaf, b_leaf = leaves["a"], leaves["b"]
    expected = (a_leaf * b_leaf).masked_fill(~b_leaf.bool(), 0.5) + (a_leaf > 0).bool() * b_leaf
    assert_verbose_allclose(run_statements(math.forward, values)["y"], expected, rtol=1e-12)
    expected.backward(torch.ones_like(expected))
    backward = run_statements(math.backward, {**values, "grad_y": torch.ones(64, dtype=torch.float64)})
    for name in ("a", "b"):
        assert_verbose_allclose(backward[f"grad_{name}"], leaves[name].grad, rtol=1e-12)


def test_constants_shaped_like_a_tensor():
    x = make_symbols(["x"])["x"]
    assert apply_op("zeros_like", x) == 0 and apply_op("ones_like", x) == 1
    assert apply_op("full_like", x, 2.5) == sympy.Rational(5, 2)


def test_where_routes_the_gradient_by_its_condition_and_the_condition_input_gets_zero():
    check_against_torch(
        "where(c > 0.5, x * x, exp(y))",
        ("c", "x", "y"),
        lambda c, x, y: torch.where(c > 0.5, x * x, torch.exp(y)),
    )


# ---------------------------------------------------------------------------------------------------------------
# torch.autograd's conventions at kinks, checked exactly at the kink points.
# ---------------------------------------------------------------------------------------------------------------

KINK_CASES = [
    ("relu(x)", torch.relu, [0.0, -1.0, 1.0]),
    ("leaky_relu(x, 0.2)", lambda x: F.leaky_relu(x, 0.2), [0.0, -1.0, 1.0]),
    ("elu(x, alpha=0.5)", lambda x: F.elu(x, alpha=0.5), [0.0, -1.0, 1.0]),
    ("hardtanh(x)", F.hardtanh, [-1.0, 1.0, 0.0, -2.0, 2.0]),
    ("clamp(x, -0.5, 0.5)", lambda x: torch.clamp(x, -0.5, 0.5), [-0.5, 0.5, 0.0, -1.0, 1.0]),
    ("abs(x)", torch.abs, [0.0, -1.0, 1.0]),
    ("softplus(x)", F.softplus, [20.0, 19.5, 20.5]),
    ("softplus(x, beta=2, threshold=4)", lambda x: F.softplus(x, 2.0, 4.0), [2.0, 1.5, 2.5]),
    ("relu(x) ** 2", lambda x: torch.relu(x) ** 2, [0.0, -1.0, 1.0]),
]


@pytest.mark.parametrize("formula, torch_fn, points", KINK_CASES, ids=[case[0] for case in KINK_CASES])
def test_gradients_at_kinks_follow_torch_autograd(formula, torch_fn, points):
    math = synthesize_elementwise({"y": parse_formula(formula, ["x"])}, ["x"])
    x = torch.tensor(points, dtype=torch.float64)
    leaf = x.clone().requires_grad_(True)
    expected = torch_fn(leaf)
    expected.backward(torch.ones_like(x))
    assert_verbose_allclose(run_statements(math.forward, {"x": x})["y"], expected, rtol=1e-12)
    grad = run_statements(math.backward, {"x": x, "grad_y": torch.ones_like(x)})["grad_x"]
    assert_verbose_allclose(grad, leaf.grad, rtol=1e-12)


@pytest.mark.parametrize(
    "formula, inputs, torch_fn",
    [
        ("xlogy(a, b)", ["a", "b"], torch.xlogy),
        ("xlogy(a, sigmoid(b))", ["a", "b"], lambda a, b: torch.xlogy(a, torch.sigmoid(b))),
        ("entr(sigmoid(a))", ["a"], lambda a: torch.special.entr(torch.sigmoid(a))),
    ],
)
def test_xlogy_and_entr_keep_their_zero_where_the_first_argument_is_zero(formula, inputs, torch_fn):
    """0 * log(0) is 0 for torch.xlogy and entr: the guard survives sympy's simplification (which reads a * log(b)
    at a = 0 as 0 and folds a "where a == 0" branch away), at 0 * log(0) and where a sigmoid underflows to 0."""
    math = synthesize_elementwise({"y": parse_formula(formula, inputs)}, inputs)
    values = {"a": torch.tensor([0.0, 0.0, 0.5, 2.0, -200.0], dtype=torch.float64)}
    values["b"] = torch.tensor([0.0, -120.0, 0.25, 3.0, 1.0], dtype=torch.float64)
    got = run_statements(math.forward, {name: values[name] for name in inputs})["y"]
    assert_verbose_allclose(got, torch_fn(*(values[name] for name in inputs)), rtol=1e-12)
    # torch's gradients, where finite: log(b) to a even at a = 0 (0 only where b <= 0 too), 0 to b there.
    leaves = [values[name].clone().requires_grad_(True) for name in inputs]
    torch_fn(*leaves).backward(torch.ones_like(values["a"]))
    grads = run_statements(math.backward, {**{n: values[n] for n in inputs}, "grad_y": torch.ones_like(values["a"])})
    for name, leaf in zip(inputs, leaves):
        finite = leaf.grad.isfinite()
        assert_verbose_allclose(grads[f"grad_{name}"][finite], leaf.grad[finite], rtol=1e-12)


def test_round_takes_halves_to_the_even_integer_and_a_straight_through_estimator_passes_the_gradient():
    x = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4999, -0.7, 3.2], dtype=torch.float64)
    for op, torch_fn in (("round", torch.round), ("floor", torch.floor), ("ceil", torch.ceil), ("trunc", torch.trunc)):
        math = synthesize_elementwise({"y": parse_formula(f"{op}(x)", ["x"])}, ["x"])
        assert_verbose_allclose(run_statements(math.forward, {"x": x})["y"], torch_fn(x), rtol=0.0)
    # Fake quantization to quarters, its gradient straight through: x + (round(4x) / 4 - x).detach()
    math = synthesize_elementwise({"y": parse_formula("x + detach(round(x * 4) / 4 - x)", ["x"])}, ["x"])
    assert_verbose_allclose(run_statements(math.forward, {"x": x})["y"], torch.round(x * 4) / 4, rtol=1e-15)
    assert math.backward == ["grad_x = grad_y"]


def test_a_rewrite_that_makes_exponentials_of_new_bases_is_not_taken():
    """2 ** x + 2 ** -x + 3 ** x factored as 2 ** -x * (4 ** x + 6 ** x + 1) overflows fp32 from x = 49.5 (6 ** x)
    where the written terms reach 7e23 at x = 50: the rewrite is cheaper, but not taken."""
    math = synthesize_elementwise({"y": parse_formula("pow(2.0, x) + exp2(-x) + pow(3.0, x)", ["x"])}, ["x"])
    assert not any("6.0" in line or "4.0" in line for line in math.forward), math.forward
    x = torch.tensor([50.0, 60.0, -20.0], dtype=torch.float32)
    got = run_statements(math.forward, {"x": x})["y"]
    assert torch.isfinite(got).all()
    assert_verbose_allclose(got.double(), 2.0 ** x.double() + 2.0 ** -x.double() + 3.0 ** x.double(), rtol=1e-5)


def test_a_detached_sum_times_a_factor_prints_in_brackets():
    """A learnable-step straight-through estimator, (v + (round(v) - v).detach()) * s: the detached sum is one factor
    (it printed as ``s * -v + round(v)``, the product of its first term only)."""
    math = synthesize_elementwise({"y": parse_formula("x + s * detach(round(x / s) - x / s)", ["x", "s"])}, ["x", "s"])
    x, s = torch.tensor([0.37, -1.26, 2.5], dtype=torch.float64), torch.tensor([0.25, 0.5, 0.3], dtype=torch.float64)
    got = run_statements(math.forward, {"x": x, "s": s})["y"]
    assert_verbose_allclose(got, x + s * (torch.round(x / s) - x / s), rtol=1e-12)


@pytest.mark.parametrize("op, torch_fn", [("fmax", torch.fmax), ("fmin", torch.fmin)])
def test_fmax_and_fmin_give_a_tie_to_their_first_argument_and_pass_over_its_nan(op, torch_fn):
    math = synthesize_elementwise({"y": parse_formula(f"{op}(a, b)", ["a", "b"])}, ["a", "b"])
    a = torch.tensor([1.0, 2.0, -3.0, float("nan")], dtype=torch.float64)
    b = torch.tensor([1.0, 1.0, 0.5, 4.0], dtype=torch.float64)
    leaves = [a.clone().requires_grad_(True), b.clone().requires_grad_(True)]
    torch_fn(*leaves).backward(torch.ones_like(a))
    assert_verbose_allclose(run_statements(math.forward, {"a": a, "b": b})["y"], torch_fn(a, b), rtol=1e-12)
    grads = run_statements(math.backward, {"a": a, "b": b, "grad_y": torch.ones_like(a)})
    assert_verbose_allclose(grads["grad_a"], leaves[0].grad, rtol=1e-12)
    assert_verbose_allclose(grads["grad_b"], leaves[1].grad, rtol=1e-12)


@pytest.mark.parametrize("op, torch_fn", [("maximum", torch.maximum), ("minimum", torch.minimum)])
def test_maximum_and_minimum_split_ties_half_and_half(op, torch_fn):
    a_sym, b_sym = make_symbols(["a", "b"]).values()
    math = synthesize_elementwise({"y": apply_op(op, a_sym, b_sym)}, ["a", "b"])
    a = torch.tensor([1.0, 2.0, -3.0, 0.5], dtype=torch.float64)
    b = torch.tensor([1.0, 1.0, -2.0, 0.5], dtype=torch.float64)
    leaves = [a.clone().requires_grad_(True), b.clone().requires_grad_(True)]
    torch_fn(*leaves).backward(torch.ones_like(a))
    backward = run_statements(math.backward, {"a": a, "b": b, "grad_y": torch.ones_like(a)})
    assert backward["grad_a"][0].item() == 0.5 and backward["grad_b"][0].item() == 0.5
    assert_verbose_allclose(backward["grad_a"], leaves[0].grad, rtol=0)
    assert_verbose_allclose(backward["grad_b"], leaves[1].grad, rtol=0)


# ---------------------------------------------------------------------------------------------------------------
# Fused expressions written as formulas (what profiles state as forward_computation).
# ---------------------------------------------------------------------------------------------------------------


def dyt(x, alpha, weight, bias):
    return torch.tanh(alpha * x) * weight + bias


FUSED_CASES = {
    "geglu": ("gelu(a, approximate='tanh') * b", ("a", "b"), {}, {}, lambda a, b: F.gelu(a, approximate="tanh") * b),
    "swiglu": ("silu(a) * b", ("a", "b"), {}, {}, lambda a, b: F.silu(a) * b),
    "dyt": (
        "tanh(alpha * x) * weight + bias",
        ("x",),
        {"alpha": "scalar", "weight": "channel", "bias": "channel"},
        {},
        dyt,
    ),
    "relu_squared": ("relu(x) ** 2", ("x",), {}, {}, lambda x: torch.relu(x) ** 2),
    "snake": (
        "x + sin(alpha * x) ** 2 / alpha",
        ("x",),
        {"alpha": "channel"},
        {},
        lambda x, alpha: x + torch.sin(alpha * x) ** 2 / alpha,
    ),
    "sigmoid_gate": ("a * sigmoid(b) + c", ("a", "b", "c"), {}, {}, lambda a, b, c: a * torch.sigmoid(b) + c),
    "swish_beta": ("x * sigmoid(beta * x)", ("x",), {}, {"beta": 1.7}, lambda x, beta: x * torch.sigmoid(beta * x)),
    # Run-time exponents: a hyper-parameter (a fractional power of |x|; an odd integer power of a negative base)
    # and a tensor.
    "pow_hyper": ("abs(a) ** p * b", ("a", "b"), {}, {"p": 1.5}, lambda a, b, p: a.abs() ** p * b),
    "pow_odd_hyper": ("x ** p", ("x",), {}, {"p": 3.0}, lambda x, p: x**p),
    "pow_tensor": ("(abs(a) + 1) ** b", ("a", "b"), {}, {}, lambda a, b: (a.abs() + 1) ** b),
    # tanh and log(1 + v), the functions a pass may take from libdevice (tiling.forward_math / backward_math).
    "mish": ("mish(x)", ("x",), {}, {}, F.mish),
    "logsigmoid_gate": ("logsigmoid(a) * b", ("a", "b"), {}, {}, lambda a, b: F.logsigmoid(a) * b),
    "softplus_log1p_gate": (
        "softplus(a) * log1p(abs(b))",
        ("a", "b"),
        {},
        {},
        lambda a, b: F.softplus(a) * torch.log1p(b.abs()),
    ),
    "leaky_hyper": (
        "leaky_relu(x, negative_slope=slope) + eps",
        ("x",),
        {},
        {"slope": 0.3, "eps": 1e-3},
        lambda x, slope, eps: F.leaky_relu(x, slope) + eps,
    ),
}


@pytest.mark.parametrize("name", list(FUSED_CASES))
def test_fused_formulas_match_torch(name):
    formula, inputs, parameters, hypers, torch_fn = FUSED_CASES[name]
    check_against_torch(formula, inputs, torch_fn, parameters=parameters, hyperparameters=hypers)


def test_dyt_uses_and_shared_subexpressions():
    expr = parse_formula("tanh(alpha * x) * weight + bias", ["x", "alpha", "weight", "bias"])
    math = synthesize_elementwise({"y": expr}, ["x"], {"alpha": "scalar", "weight": "channel", "bias": "channel"})
    assert math.forward_uses == ["alpha", "bias", "weight", "x"]
    assert math.backward_uses == ["alpha", "grad_y", "weight", "x"]  # bias is not needed to differentiate
    assert [line.split(" = ")[0] for line in math.backward][-4:] == ["grad_x", "grad_alpha", "grad_weight", "grad_bias"]
    # tanh(alpha * x) is computed once and shared by three gradients.
    assert sum("tanh_from_exp(" in line for line in math.backward) == 1
    assert math.precision_sensitive_ops == ["tanh"]
    assert set(math.gradient_formulas) == {"grad_x", "grad_alpha", "grad_weight", "grad_bias"}
    assert math.gradient_formulas["grad_bias"] == "grad_y"


def test_snake_backward_evaluates_two_transcendentals_not_three():
    # sympy simplifies d/dx sin(a x)^2 / a to sin(2 a x); beside grad_alpha's sin(a x) and cos(a x) that is a third
    # call per element, in a backward that transcendental throughput bounds.
    expr = parse_formula("x + sin(alpha * x) ** 2 / alpha", ["x", "alpha"])
    math = synthesize_elementwise({"y": expr}, ["x"], {"alpha": "channel"})
    calls = [call for line in math.backward for call in ("tl.sin(", "tl.cos(") for _ in range(line.count(call))]
    assert sorted(calls) == ["tl.cos(", "tl.sin("], math.backward


@pytest.mark.parametrize(
    "exprs, calls_after",
    [
        # sin(2u) and cos(2u) onto the sin(u)/cos(u) the kernel evaluates anyway.
        (lambda x, y: {"a": sympy.sin(2 * x) + sympy.sin(x) * sympy.cos(x)}, 2),
        (lambda x, y: {"a": sympy.cos(2 * x), "b": sympy.sin(x)}, 1),
        (lambda x, y: {"a": sympy.cos(4 * x * y), "b": sympy.cos(2 * x * y)}, 1),
        # Nothing to share: trading sin(2x) for sin(x) and cos(x) would add a call; sin(x) alone gains nothing.
        (lambda x, y: {"a": sympy.sin(2 * x)}, 1),
        (lambda x, y: {"a": sympy.sin(2 * x) + sympy.sin(x)}, 2),
        (lambda x, y: {"a": sympy.sin(3 * x) + sympy.sin(x)}, 2),
    ],
)
def test_double_angle_calls_are_shared_only_when_that_saves_a_call(exprs, calls_after):
    x, y = sympy.symbols("x y", real=True)
    before = exprs(x, y)
    after = share_transcendentals(before)
    assert len(transcendental_calls(after.values())) == calls_after
    for name in before:  # the same function, exactly
        assert sympy.simplify(sympy.expand_trig(after[name] - before[name])) == 0
    values = {x: 0.7, y: -1.3}
    for name in before:
        assert abs(float(after[name].evalf(subs=values)) - float(before[name].evalf(subs=values))) < 1e-12


def _calls(statements) -> dict[str, int]:
    names = ("tl.exp(", "tl.log(", "log1p_unit(", "tanh_from_exp(", "tl.sigmoid(")
    return {name[:-1]: n for name in names if (n := sum(line.count(name) for line in statements))}


@pytest.mark.parametrize(
    "formula, forward_calls, backward_calls",
    [
        # Mish's tanh(softplus(x)) and its backward's sigmoid(x) from one exp(x) (before: exp, log, exp; and a
        # fourth exp for the sigmoid), written as F.mish, as log1p(exp(x)), as log(1 + exp(x)).
        ("mish(x)", {"tl.exp": 1}, {"tl.exp": 1}),
        ("x * tanh(log1p(exp(x)))", {"tl.exp": 1}, {"tl.exp": 1}),
        ("x * tanh(log(1 + exp(x)))", {"tl.exp": 1}, {"tl.exp": 1}),
        # torch's thresholded softplus: the selection's tanh is the selection of tanhs, 1 above 20 (tanh(x) is 1 in
        # fp32 from 10 on).
        ("x * tanh(softplus(x))", {"tl.exp": 1}, {"tl.exp": 1}),
        ("x * tanh(where(x > 5, x, softplus(x, threshold=None)))", {"tl.exp": 1, "tanh_from_exp": 1}, None),
        # A logsigmoid beside sigmoids of the same argument: its exp(-|x|) serves them all (the backward has two).
        ("logsigmoid(x) * sigmoid(x)", {"tl.exp": 1, "log1p_unit": 1}, {"tl.exp": 1, "log1p_unit": 1}),
        # Nothing cheaper: a softplus alone, a sigmoid without the exponential of its argument.
        ("softplus(x, threshold=None) * sigmoid(2 * x)", {"tl.exp": 1, "log1p_unit": 1, "tl.sigmoid": 1}, None),
    ],
)
def test_tanh_of_softplus_and_sigmoid_share_one_exponential(formula, forward_calls, backward_calls):
    math = synthesize_elementwise({"y": parse_formula(formula, ["x"])}, ["x"])
    assert _calls(math.forward) == forward_calls, math.forward
    if backward_calls is not None:
        assert _calls(math.backward) == backward_calls, math.backward


@pytest.mark.parametrize(
    "formula, reference",
    [
        ("mish(x)", F.mish),
        ("x * tanh(log1p(exp(x)))", lambda x: x * torch.tanh(torch.log1p(torch.exp(x)))),
        ("x * tanh(softplus(x))", lambda x: x * torch.tanh(F.softplus(x))),
    ],
)
def test_the_cheaper_forms_of_mish_match_torch_in_fp32_over_the_whole_range(formula, reference):
    """fp32 statements against the float64 reference from -100 to 100 and at the edges: where exp(x) underflows (the
    values are then subnormal), where the rational forms' guard switches (exp(x) > 1e9, x ~ 20.7), where exp(x)
    overflows; infinities and NaN as torch gives them (mish(-inf) is NaN there too: -inf * 0)."""
    x = torch.cat([torch.linspace(-100, 100, 4001), torch.tensor([-87.5, 20.6, 20.8, 44.0, 88.8, 1e30])])
    x = torch.cat([x, torch.tensor([float("inf"), float("-inf"), float("nan")])]).float()
    math = synthesize_elementwise({"y": parse_formula(formula, ["x"])}, ["x"])
    forward = run_statements(math.forward, {"x": x})["y"]
    backward = run_statements(math.backward, {"x": x, "grad_y": torch.ones_like(x)})["grad_x"]
    leaf = x.double().requires_grad_()
    expected = reference(leaf)
    expected.backward(torch.ones_like(leaf))
    assert torch.allclose(forward, expected.detach().float(), rtol=2e-6, atol=1e-37, equal_nan=True)
    # Gradients where the reference's own fp32 autograd has one (log1p(exp(x))'s is inf / inf once exp(x)
    # overflows, ours too; at +-inf torch's is NaN, inf * 0). It cancels to 0 near x = -1.19 (terms of ~0.2), so
    # compared absolutely there, and relatively in the small gradients of negative x (no cancellation, down to 1e-33).
    fp32 = x.clone().requires_grad_()
    reference(fp32).backward(torch.ones_like(fp32))
    has = ~fp32.grad.isnan() & (x.abs() < float("inf"))
    grad = leaf.grad.float()
    assert torch.allclose(backward[has], grad[has], rtol=2e-6, atol=1e-6)
    tail = (x > -75) & (x < -5)
    assert torch.allclose(backward[tail], grad[tail], rtol=1e-5, atol=0)


def test_logaddexp_prints_its_overflow_free_form_and_its_backward_takes_both_sigmoids_from_one_exponential():
    """max(a, b) + log(1 + exp(-|a - b|)) in the kernel; the backward's sigmoid(a - b) and sigmoid(b - a) from one
    exp(-|a - b|) (logaddexp2's from one of its own), and in fp32 over magnitudes where exp(a) + exp(b) overflows or underflows, and at -inf, the
    values and gradients are torch's."""
    a, b = make_symbols(["a", "b"]).values()
    assert print_triton(apply_op("logaddexp", a, b)) == "(tl.maximum(a, b) + log1p_unit(tl.exp(-tl.abs(a - b))))"
    math = synthesize_elementwise({"y": parse_formula("logaddexp(a, b) + logaddexp2(a, b)", ["a", "b"])}, ["a", "b"])
    assert _calls(math.backward) == {"tl.exp": 2}, math.backward  # exp(-|a - b|) and exp(-|a - b| ln 2)
    big = torch.tensor([0.0, 1.0, -3.0, 200.0, -200.0, 1e4, -1e4, 88.0, -104.0, float("-inf")])
    pairs = torch.cartesian_prod(big, big)
    first, second = pairs[:, 0].contiguous(), pairs[:, 1].contiguous()
    both_infinite = first.isinf() & second.isinf()  # torch gives -inf, the overflow-free form nan: not compared
    forward = run_statements(math.forward, {"a": first, "b": second})["y"]
    grads = run_statements(math.backward, {"a": first, "b": second, "grad_y": torch.ones_like(first)})
    leaves = [first.double().requires_grad_(), second.double().requires_grad_()]
    expected = torch.logaddexp(*leaves) + torch.logaddexp2(*leaves)
    expected.backward(torch.ones_like(expected))
    keep = ~both_infinite
    assert torch.allclose(forward[keep], expected.detach().float()[keep], rtol=1e-6, atol=1e-6)
    for name, leaf in zip(("a", "b"), leaves):
        assert torch.allclose(grads[f"grad_{name}"][keep], leaf.grad.float()[keep], rtol=1e-6, atol=1e-6), name


def test_a_sigmoid_of_minus_u_reuses_exp_u_and_a_log_not_provably_of_one_plus_w_is_left_alone():
    x = sympy.Symbol("x", real=True)
    exp_x = sympy.exp(x)
    # exp(x) sigmoid(-x) = exp(x) / (exp(x) + 1): one exp, and that quotient guarded against inf / inf.
    assert share_transcendentals({"a": exp_x * apply_op("sigmoid", -x)}) == {"a": SigmoidOfLog(exp_x)}
    assert share_transcendentals({"a": x * apply_op("sigmoid", -x)}) == {"a": x * apply_op("sigmoid", -x)}
    for kept in (sympy.tanh(sympy.log(x)), sympy.tanh(sympy.log(2 + exp_x)), apply_op("sigmoid", x)):
        assert share_transcendentals({"a": kept}) == {"a": kept}  # log(x) may be of x <= 0; 1 + exp: a constant
    plain = sympy.tanh(sympy.log(1 + x**2))
    rational = share_transcendentals({"a": plain})["a"]
    assert not transcendental_calls([rational.kernel_form()])  # x**2 (x**2 + 2) / (x**2 (x**2 + 2) + 2)
    assert abs(float(rational.kernel_form().subs(x, 0.3)) - float(plain.subs(x, 0.3))) < 1e-12


def test_several_outputs_sum_their_incoming_gradients():
    a, b = make_symbols(["a", "b"]).values()
    math = synthesize_elementwise({"p": a * b, "q": apply_op("sin", a)}, ["a", "b"])
    assert math.forward[-2:][0].startswith("p = ") and math.forward[-1].startswith("q = ")
    values = {"a": sample("real"), "b": sample("real")}
    grads = {"grad_p": torch.randn(64, dtype=torch.float64), "grad_q": torch.randn(64, dtype=torch.float64)}
    backward = run_statements(math.backward, {**values, **grads})
    expected_a = grads["grad_p"] * values["b"] + grads["grad_q"] * torch.cos(values["a"])
    assert_verbose_allclose(backward["grad_a"], expected_a, rtol=1e-12)
    assert_verbose_allclose(backward["grad_b"], grads["grad_p"] * values["a"], rtol=1e-12)


@pytest.mark.parametrize("name", ["geglu", "dyt", "relu_squared", "swish_beta"])
def test_gradient_formulas_parse_back_to_the_printed_gradients(name):
    formula, inputs, parameters, hypers, _ = FUSED_CASES[name]
    names = [*inputs, *parameters, *hypers]
    math = synthesize_elementwise({"y": parse_formula(formula, names)}, list(inputs), parameters, list(hypers))
    values = {n: sample("real") for n in names} | {"grad_y": torch.randn(64, dtype=torch.float64)}
    backward = run_statements(math.backward, values)
    for gradient, text in math.gradient_formulas.items():
        reparsed = parse_formula(text, [*names, "grad_y"])
        assert_verbose_allclose(evaluate(reparsed, values), backward[gradient], rtol=1e-6, extra_info=gradient)


# ---------------------------------------------------------------------------------------------------------------
# The table documents each gradient convention; the documentation must agree with sympy's derivative.
# ---------------------------------------------------------------------------------------------------------------

POSITIVE_DOMAIN_OPS = {"log", "log1p", "log2", "log10", "sqrt", "rsqrt", "div", "reciprocal", "xlogy", "root", "entr"}
# Ops of probabilities (a binary cross entropy's p): samples mapped into (0, 1), away from its clamped logs.
UNIT_DOMAIN_OPS = {"bce_pointwise", "logit", "atanh"}
# Ops of values above 1.
ABOVE_ONE_OPS = {"acosh"}


@pytest.mark.parametrize("op", sorted(name for name, rule in OPS.items() if rule.derivative))
def test_documented_derivatives_match_sympy(op):
    names = tensor_arguments(op)
    symbols = make_symbols(names)
    expr = apply_op(op, *symbols.values())
    # A half-step grid puts samples exactly on kinks (0, +-1) and on ties (a == b).
    grid = torch.randint(-6, 7, (128,)).double() / 2
    values = {n: grid[torch.randperm(128)] for n in names}
    if op in POSITIVE_DOMAIN_OPS:
        values = {n: v.abs() + 0.25 for n, v in values.items()}
    if op in UNIT_DOMAIN_OPS:
        values = {n: torch.sigmoid(v) for n, v in values.items()}
    if op in ABOVE_ONE_OPS:
        values = {n: v.abs() + 1.25 for n, v in values.items()}
    derived = synthesize_elementwise({"out": expr}, names)
    backward = run_statements(derived.backward, {**values, "grad_out": torch.ones(128, dtype=torch.float64)})
    for argument, text in OPS[op].derivative.items():
        documented = evaluate(parse_formula(text, names), values)
        assert_verbose_allclose(backward[f"grad_{argument}"], documented, rtol=1e-12, extra_info=f"{op}: d/d{argument}")


# ---------------------------------------------------------------------------------------------------------------
# Numerical safety: no NaN/Inf at large or tiny magnitudes where torch has none (fp32, as kernels compute).
# ---------------------------------------------------------------------------------------------------------------

EXTREMES = [-1e4, -100.0, -30.0, -1.0, -1e-30, 0.0, 1e-30, 1.0, 30.0, 100.0, 1e4]
SAFETY_CASES = {
    "tanh(x)": torch.tanh,
    "sigmoid(x)": torch.sigmoid,
    "softplus(x)": F.softplus,
    "softplus(x, beta=2, threshold=30)": lambda x: F.softplus(x, 2.0, 30.0),
    "logsigmoid(x)": F.logsigmoid,
    "silu(x)": F.silu,
    "mish(x)": F.mish,
    "gelu(x, approximate='tanh')": lambda x: F.gelu(x, approximate="tanh"),
    "elu(x)": F.elu,
    "tanh(0.5 * x) * 2": lambda x: torch.tanh(0.5 * x) * 2,
}


@pytest.mark.parametrize("formula", list(SAFETY_CASES))
def test_no_overflow_at_extreme_magnitudes(formula):
    torch_fn = SAFETY_CASES[formula]
    math = synthesize_elementwise({"y": parse_formula(formula, ["x"])}, ["x"])
    x = torch.tensor(EXTREMES, dtype=torch.float32)
    leaf = x.clone().requires_grad_(True)
    expected = torch_fn(leaf)
    expected.backward(torch.ones_like(x))
    forward = run_statements(math.forward, {"x": x})["y"]
    grad = run_statements(math.backward, {"x": x, "grad_y": torch.ones_like(x)})["grad_x"]
    for got, want, what in [(forward, expected.detach(), "forward"), (grad, leaf.grad, "grad_x")]:
        assert torch.isfinite(got[torch.isfinite(want)]).all(), f"{what} of {formula}: {got.tolist()}"
        assert_verbose_allclose(got, want, rtol=1e-5, atol=1e-6, extra_info=f"({what} of {formula})")


# ---------------------------------------------------------------------------------------------------------------
# The printer's conventions.
# ---------------------------------------------------------------------------------------------------------------


def test_printer_conventions():
    x, y = make_symbols(["x", "y"]).values()
    assert print_triton(x**2) == "x * x"
    assert print_triton(x**3) == "x * x * x"
    assert print_triton(x**4) == "x * x * x * x"
    assert print_triton(x**-1) == "1.0 / x"
    assert print_triton(y / x**2) == "y / (x * x)"
    assert print_triton(x ** sympy.Rational(1, 2)) == "tl.sqrt(x)"
    assert print_triton(x ** -sympy.Rational(1, 2)) == "tl.rsqrt(x)"
    assert print_triton(x ** sympy.Float(1.7)) == "tl.exp2(1.7 * tl.log2(x))"
    assert print_triton(2 * x) == "2.0 * x"
    assert print_triton(x + 1) == "x + 1.0"
    assert print_triton(x - y) == "x - y"
    assert print_triton(sympy.sqrt(2 / sympy.pi) * x) == f"{(2 / 3.141592653589793) ** 0.5!r} * x"
    assert print_triton(sympy.tanh(x)) == "tanh_from_exp(x)"
    assert print_triton(apply_op("sigmoid", x)) == "tl.sigmoid(x)"
    assert print_triton(apply_op("where", apply_op("gt", x, 0), x, 0.5 * y)) == "tl.where(x > 0.0, x, 0.5 * y)"
    assert print_triton((x + y) ** 2) == "(x + y) * (x + y)"
    assert print_triton(-(x**2)) == "-x * x"
    assert print_triton(sympy.exp(-x) + sympy.log(x) + sympy.erf(x)).count("tl.") == 3
    assert print_triton(apply_op("log1p", x)) == "tl.log(x + 1.0)"
    with pytest.raises(ValueError, match="no Triton printing rule"):
        print_triton(sympy.cosh(x))


def test_the_libdevice_printer_takes_tanh_and_log1p_from_the_utils_and_prints_the_rest_alike():
    x, y = make_symbols(["x", "y"]).values()
    libdevice = TritonLibdevicePrinter()
    assert libdevice.doprint(sympy.tanh(x)) == "tanh(x)"
    # Both print log(1 + v) by the utils' log1p (written out it would lose a small v's digits).
    assert libdevice.doprint(Log1p(x)) == "log1p(x)" and print_triton(Log1p(x)) == "log1p(x)"
    # print_elementwise gives the libdevice printer log(1 + v) as Log1p(v) before 1 + v can become a temporary.
    derivation = derive_elementwise(
        {"out": parse_formula("log1p(x * y) + 1 / (1 + x * y) + log(2 + x)", ["x", "y"])}, ["x"], {}, ["y"]
    )
    forward = print_elementwise(derivation, TritonPrinter, "libdevice", "core").forward
    assert "log1p(x_y)" in forward[-1] and "tl.log(x + 2.0)" in forward[-1], forward  # no 1 + v in log(2 + x)
    softplus = apply_op("softplus", x, threshold=None)
    assert libdevice.doprint(softplus) == "(tl.maximum(x, 0.0) + log1p(tl.exp(-tl.abs(x))))"
    assert print_triton(softplus) == "(tl.maximum(x, 0.0) + log1p_unit(tl.exp(-tl.abs(x))))"
    assert libdevice.doprint(apply_op("logsigmoid", x)) == "(tl.minimum(x, 0.0) - log1p(tl.exp(-tl.abs(x))))"
    assert libdevice.doprint(sympy.exp(x) * apply_op("sigmoid", y)) == print_triton(
        sympy.exp(x) * apply_op("sigmoid", y)
    )


def test_divisions_by_kernel_uniform_values_multiply_by_a_reciprocal_computed_once():
    """A hyper-parameter's or a scalar parameter's division is a product with its reciprocal, defined with the
    constants (once a program, above a backward's row loop); a per-channel parameter and an input still divide. The
    values are the reference's; TileLang prints its divisions as they are."""
    formula = "x / beta + x / (beta * s) + x / w + x / (x + 2) + x / (2 * beta)"
    derivation = derive_elementwise(
        {"y": parse_formula(formula, ["x", "beta", "s", "w"])}, ["x"], {"s": "scalar", "w": "channel"}, ["beta"]
    )
    math = print_elementwise(derivation)
    reciprocals = ["inv_beta = 1.0 / beta", "inv_s = 1.0 / s"]
    assert math.forward[:2] == reciprocals and math.backward_constants == reciprocals, math.forward
    body = math.forward[2:] + math.backward[2:]
    assert not any(re.search(r"/ \(?(beta|s)\b", line) for line in body), body
    assert any("/ w" in line for line in math.forward) and any("/ (w * w)" in line for line in math.backward)
    x, w = torch.linspace(-3, 3, 13, dtype=torch.float64), torch.linspace(0.5, 2, 13, dtype=torch.float64)
    values = {"x": x, "w": w, "beta": 0.7, "s": torch.tensor(-1.3, dtype=torch.float64)}
    expected = x / 0.7 + x / (0.7 * -1.3) + x / w + x / (x + 2) + x / (2 * 0.7)
    assert torch.allclose(run_statements(math.forward, values)["y"], expected)
    grads = run_statements(math.backward, {**values, "grad_y": torch.ones_like(x)})
    assert torch.allclose(grads["grad_s"], -x / (0.7 * 1.3**2))
    assert not any("inv_" in line for line in print_elementwise(derivation, TileLangPrinter).forward)


def test_only_values_provably_in_the_unit_interval_print_with_log1p_unit():
    x, y = make_symbols(["x", "y"]).values()
    assert in_unit_interval(sympy.exp(-sympy.Abs(x * y))) and in_unit_interval(sympy.exp(-(x**2)) / 2)
    assert in_unit_interval(apply_op("sigmoid", x) * sympy.exp(-sympy.Abs(y)))
    assert not in_unit_interval(sympy.exp(x)) and not in_unit_interval(2 * sympy.exp(-sympy.Abs(x)))
    formulas = {"u": "log(1 + exp(-abs(x)))", "v": "log1p(sigmoid(2 * x))", "w": "log(1 + exp(x))"}
    forward = synthesize_elementwise({name: parse_formula(f, ["x"]) for name, f in formulas.items()}, ["x"]).forward
    printed = {line.split(" = ")[0]: line for line in forward}
    assert "log1p_unit(" in printed["u"] and "log1p_unit(" in printed["v"], forward
    assert "log1p_unit(" not in printed["w"] and "log1p(tl.exp(x))" in printed["w"], forward
    # The rational forms' overflow guard (w > 1e9) only where w can get there: exp(x) can, exp(-|x|) cannot.
    guarded = synthesize_elementwise({"y": parse_formula("log(1 + exp(x))", ["x"])}, ["x"]).backward
    unreachable = synthesize_elementwise({"y": parse_formula("log1p(exp(-abs(x))) + relu(x)", ["x"])}, ["x"]).backward
    assert any("> 1000000000.0" in line for line in guarded), guarded
    assert any("sigmoid_log" in line for line in unreachable) and not any(
        "1000000000.0" in line for line in unreachable
    )


def test_each_pass_prints_the_math_library_asked_of_it():
    """``tiling.forward_math`` / ``backward_math``: None keeps the measured default (libdevice's tanh in a forward whose
    only transcendental is tanh, core formulas elsewhere); ``core`` and ``libdevice`` say it for one pass."""
    geglu = derive_elementwise({"y": parse_formula("gelu(a, approximate='tanh') * b", ["a", "b"])}, ["a", "b"], {}, [])
    tanh_softplus = derive_elementwise(
        {"y": parse_formula("tanh(a) * softplus(a, threshold=None)", ["a"])}, ["a"], {}, []
    )

    def called(derivation, *libraries):
        math = print_elementwise(derivation, TritonPrinter, *libraries)
        return jit_helpers_called(math.forward), jit_helpers_called(math.backward)

    assert called(geglu) == (["tanh"], ["tanh_from_exp"])
    assert called(geglu, "core", "libdevice") == (["tanh_from_exp"], ["tanh"])
    # Core formulas: softplus's log(1 + exp(-|a|)) by the utils polynomial of [0, 1] (log1p_unit).
    assert called(tanh_softplus) == (["log1p_unit", "tanh_from_exp"], ["log1p_unit", "tanh_from_exp"])
    assert called(tanh_softplus, "libdevice", None) == (["log1p", "tanh"], ["log1p_unit", "tanh_from_exp"])
    assert called(tanh_softplus, None, "libdevice") == (["log1p_unit", "tanh_from_exp"], ["log1p", "tanh"])


def test_conditions_print_alike_as_triton_and_as_formulas():
    x, y = make_symbols(["x", "y"]).values()
    condition = sympy.And(x > 0, sympy.Or(sympy.Le(y, 1), sympy.Eq(x, y)))
    expr = sympy.Piecewise((x, condition), (y, sympy.Ne(x, 2)), (x * y, True))
    assert print_triton(expr) == "tl.where((x > 0.0) & ((x == y) | (y <= 1.0)), x, tl.where(x != 2.0, y, x * y))"
    assert format_formula(expr) == "where((x > 0) & ((x == y) | (y <= 1)), x, where(x != 2, y, x*y))"
    for relation, spelled in ((sympy.Gt, ">"), (sympy.Ge, ">="), (sympy.Lt, "<"), (sympy.Le, "<=")):
        assert print_triton(relation(x, y)) == f"x {spelled} y"
        assert format_formula(relation(x, y)) == f"x {spelled} y"
    # Only Triton needs a value everywhere: a Piecewise without a default branch is refused there.
    with pytest.raises(ValueError, match="without a default branch"):
        print_triton(sympy.Piecewise((x, x > 0)))


def test_temporaries_are_named_after_what_they_compute():
    x, y, alpha, lse_max, lse_sum, limit = make_symbols(["x", "y", "alpha", "lse_max", "lse_sum", "limit"]).values()
    log_p, log_q = make_symbols(["log_p", "log_q"]).values()
    names = TemporaryNames({"x", "y", "alpha"})
    t = names.name(sympy.tanh(alpha * x))
    s = names.name(apply_op("sigmoid", y))
    named = {
        sympy.exp(x): "exp_x",
        1 / sympy.sqrt(x + y): "rsqrt_x_plus_y",
        1 / lse_sum: "inv_lse_sum",
        x - y: "x_minus_y",
        -limit: "neg_limit",
        x / 2: "half_x",
        x**2 * alpha: "alpha_x_sq",
        sympy.sin(x) / alpha: "sin_x_over_alpha",
        sympy.sin(alpha * x) / alpha: "sin_term",  # five words: the leading factor's function
        x > limit: "x_gt_limit",
        x > 0: "x_gt_zero",
        alpha * y * (1 - t**2): "alpha_y_dtanh_alpha_x",  # tanh's derivative, written with its temporary
        y * s * (1 - s): "y_dsigmoid_y",
        lse_max + sympy.log(lse_sum): "lse",  # a statistic's pieces make the statistic's value
        log_p - log_q: "log_p_minus_log_q",  # inputs whose common stem is a function's word: no "log"
        sympy.tanh(sympy.sqrt(2) * (x + x**3 / 20)): "tanh_inner",  # a long argument
        sympy.erf(x * y * alpha) + 1: "erf_term",
        x**7: "term",
    }
    assert {expr: names.name(expr).name for expr in named} == named
    assert (t.name, s.name) == ("tanh_alpha_x", "sigmoid_y")
    # A name already taken gets a number; the templates' own names and the jit helpers are never used.
    assert names.name(sympy.exp(x)).name == "exp_x1"
    assert TemporaryNames(set()).name(sympy.Symbol("mask") * 1).name == "mask1"


def test_constants_are_named_after_their_factors_and_keep_their_rational_multiple():
    cases = {
        sympy.sqrt(2) / sympy.sqrt(sympy.pi): (1, "sqrt_2_over_pi"),
        sympy.sqrt(2) / 2: (1, "inv_sqrt_2"),
        1 / sympy.sqrt(2 * sympy.pi): (sympy.S.Half, "sqrt_2_over_pi"),  # sympy's sqrt(2) / (2 * sqrt(pi))
        1 / sympy.sqrt(sympy.pi): (1, "inv_sqrt_pi"),
        2 * sympy.pi: (2, "pi"),
        sympy.log(2): (1, "ln2"),
        3 / sympy.log(2): (3, "inv_ln2"),
        sympy.pi**2 / 6: (sympy.Rational(1, 6), "pi_sq"),
    }
    for value, (coefficient, name) in cases.items():
        got, got_name, named = constant_parts(value)
        assert (got, got_name) == (coefficient, name)
        assert sympy.simplify(got * named - value) == 0
    # The reference's own decimals, rationals and anything else stay literals.
    for value in (sympy.Rational(8943, 200000), sympy.Float(0.5), sympy.exp(sympy.sqrt(2)), sympy.S(7)):
        assert constant_parts(value) is None
    math = synthesize_elementwise({"y": parse_formula("gelu(a, approximate='tanh') * b", ["a", "b"])}, ["a", "b"])
    assert math.forward[0] == "sqrt_2_over_pi = 0.7978845608028654"
    assert math.backward_constants == ["sqrt_2_over_pi = 0.7978845608028654"] == math.backward[:1]
    assert not any("0.79788" in line for line in math.forward[1:] + math.backward[1:])


def test_precision_sensitive_ops_are_named_after_their_functions():
    math = synthesize_elementwise(
        {"z": parse_formula("sigmoid(x) * sqrt(y) + exp(x) * rsqrt(y)", ["x", "y"])}, ["x", "y"]
    )
    # y ** -1.5 in grad_y: a fractional power; where() alone is not precision-sensitive.
    assert math.precision_sensitive_ops == ["exp", "pow", "rsqrt", "sigmoid"]
    math = synthesize_elementwise(
        {"z": parse_formula("where(x > y, sin(x), cos(y)) * x ** 1.5", ["x", "y"])}, ["x", "y"]
    )
    assert math.precision_sensitive_ops == ["cos", "pow", "sin", "sqrt"]


@pytest.mark.parametrize("formula", ["tanh(x)", "gelu(x, approximate='tanh')", "mish(x)", "softplus(x)"])
def test_no_libdevice_is_emitted(formula):
    math = synthesize_elementwise({"y": parse_formula(formula, ["x"])}, ["x"])
    assert not any("libdevice" in line for line in math.forward + math.backward)


# ---------------------------------------------------------------------------------------------------------------
# Errors: unknown ops, unsafe formulas, misuse.
# ---------------------------------------------------------------------------------------------------------------


def test_unsupported_op_names_the_nearest_ops():
    with pytest.raises(UnsupportedOpError, match=r"'sigmod'.*sigmoid") as error:
        apply_op("sigmod", make_symbols(["x"])["x"])
    assert "\n" not in str(error.value)
    with pytest.raises(UnsupportedOpError, match="leaky_relu"):
        parse_formula("leakyrelu(x)", ["x"])


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('echo hacked')",
        "x.__class__.__bases__",
        "(lambda: 1)()",
        "[x for x in ()]",
        "x[0]",
        "open('/etc/passwd')",
        "sigmoid(**{'x': 1})",
        "y + x",
    ],
)
def test_parse_formula_rejects_anything_that_is_not_a_formula(text):
    with pytest.raises(ValueError):
        parse_formula(text, ["x"])


def test_misuse_raises_clear_errors():
    x = make_symbols(["x"])["x"]
    with pytest.raises(ValueError, match="exponent must be real"):
        apply_op("pow", x, sympy.I)
    with pytest.raises(ValueError, match="approximate"):
        apply_op("gelu", x, approximate="erf")
    with pytest.raises(ValueError, match="at least one of min and max"):
        apply_op("clamp", x)
    with pytest.raises(ValueError, match="undeclared"):
        synthesize_elementwise({"y": sympy.Symbol("z") * x}, ["x"])
    with pytest.raises(ValueError, match="kind"):
        synthesize_elementwise({"y": x}, ["x"], {"w": "matrix"})
    with pytest.raises(ValueError, match="reserved"):
        make_symbols(["tl"], reserved=RESERVED_NAMES)  # printed into a hand-written kernel, tl would shadow triton's
    assert str(make_symbols(["tl"])["tl"]) == "tl"  # a generated ops file renames it (render/hygiene.py)


def test_constants_keep_their_exact_values():
    x = make_symbols(["x"])["x"]
    assert apply_op("pow", x, 2.0) == x**2
    assert apply_op("pow", x, 0.5) == sympy.sqrt(x)
    assert apply_op("mul", x, 0.044715).args[0] == sympy.Rational(44715, 1000000)
    assert float(apply_op("mul", x, 0.7978845608028654).args[0]) == 0.7978845608028654


def test_a_derivative_s_multiple_of_a_written_constant_prints_as_that_multiple():
    """d/dx of 0.044715 * x ** 3 is 3 * 0.044715 * x ** 2 as a reader derives it, not 0.134145 * x ** 2; the forward's
    own numbers, and multiples of short ones such as 0.5, print as literals."""
    formula = parse_formula("tanh(0.044715 * x ** 3 + x) + 0.5 * w ** 3", ["x", "w"])
    math = synthesize_elementwise({"y": formula}, ["x", "w"], {}, [])
    backward = "\n".join(math.backward)
    assert "3 * 0.044715 * x * x" in backward and "0.134145" not in backward
    assert "1.5" in backward and "3 * 0.5" not in backward
    assert "0.044715 * x * x * x" in "\n".join(math.forward)
    x = torch.linspace(-2.0, 2.0, 9, dtype=torch.float64)
    namespace = {"tl": TorchTL(torch.float64), "x": x, "w": x.flip(0), "grad_y": torch.ones_like(x)}
    namespace.update(tanh_from_exp=torch.tanh, tanh=torch.tanh)
    exec(compile("\n".join(math.backward), "<synthesized>", "exec"), namespace)
    inner = 0.044715 * x**3 + x
    torch.testing.assert_close(namespace["grad_x"], (1 - torch.tanh(inner) ** 2) * (3 * 0.044715 * x**2 + 1))
    torch.testing.assert_close(namespace["grad_w"], 1.5 * x.flip(0) ** 2)


def _bf16_silu_mul(round_each_op: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """The synthesized ``silu(a) * b`` on bf16 values (computed in fp32, stored as bf16) and eager bf16's result."""
    a = (torch.randn(4096) * 3).to(torch.bfloat16)
    b = (torch.randn(4096) * 3).to(torch.bfloat16)
    math = synthesize_elementwise({"y": parse_formula("silu(a) * b", ["a", "b"], round_each_op)}, ["a", "b"], {}, [])
    namespace = {"tl": TorchTL(torch.float32), "input_dtype": torch.bfloat16, "a": a.float(), "b": b.float()}
    exec(compile("\n".join(math.forward), "<synthesized>", "exec"), namespace)
    return namespace["y"].to(torch.bfloat16), F.silu(a) * b


def test_rounding_each_op_reproduces_eager_bf16():
    """math.rounding: per_op rounds silu(a) to bf16 before the product, as eager does: the same bits. Rounding once
    (the default) differs from eager in about a quarter of the elements, by one bf16 step."""
    rounded, eager = _bf16_silu_mul(("a", "b"))
    assert torch.equal(rounded, eager)
    once, eager = _bf16_silu_mul(())
    assert (once != eager).float().mean() > 0.1
    # Only tensor-valued intermediates round; the formula's own result is left to the store.
    assert (
        str(parse_formula("a * (1 + alpha) * b", ["a", "b", "alpha"], ("a", "b"))) == "b*cast_to_input(a*(alpha + 1))"
    )


def _bf16_glu_gradients(formula, eager, round_each_op):
    """The synthesized backward of ``formula`` (a GLU of a, b) on bf16 values, computed in fp32 and stored as bf16,
    and eager bf16 autograd's gradients of ``eager``."""
    a = (torch.randn(8192) * 3).to(torch.bfloat16).requires_grad_()
    b = (torch.randn(8192) * 3).to(torch.bfloat16).requires_grad_()
    grad_y = torch.randn(8192).to(torch.bfloat16)
    math = synthesize_elementwise({"y": parse_formula(formula, ["a", "b"], round_each_op)}, ["a", "b"], {}, [])
    namespace = {
        "tl": TorchTL(torch.float32),
        "input_dtype": torch.bfloat16,
        "tanh_from_exp": torch.tanh,
        "tanh": torch.tanh,
    }
    namespace.update(a=a.detach().float(), b=b.detach().float(), grad_y=grad_y.float())
    exec(compile("\n".join(math.backward), "<synthesized>", "exec"), namespace)
    eager(a, b).backward(grad_y)
    return [(namespace[f"grad_{x}"].to(torch.bfloat16), x_.grad) for x, x_ in (("a", a), ("b", b))]


@pytest.mark.parametrize(
    "formula, eager",
    [
        ("silu(a) * b", lambda a, b: F.silu(a) * b),
        ("gelu(a, approximate='tanh') * b", lambda a, b: F.gelu(a, approximate="tanh") * b),
    ],
)
def test_rounding_each_op_rounds_the_backward_as_eager_does(formula, eager):
    """With per-op rounding, every op's backward hands on gradients rounded to bf16, as autograd does: d(b) is
    grad_y times the rounded activation and d(a) multiplies the activation's derivative
    by the rounded grad_y * b. Only the activation and its derivative are computed by other fp32 formulas than
    torch's, so a few elements may round one bf16 step apart; rounding once differs in many more."""
    (grad_a, eager_a), (grad_b, eager_b) = _bf16_glu_gradients(formula, eager, ("a", "b"))
    assert (grad_b != eager_b).float().mean() < 0.02
    assert (grad_a != eager_a).float().mean() < 0.02
    (grad_a, eager_a), _ = _bf16_glu_gradients(formula, eager, ())
    assert (grad_a != eager_a).float().mean() > 0.1


def test_rounded_reverse_mode_sums_rounded_contributions():
    """A value read by two rounded ops gets each op's gradient rounded, then their sum (autograd accumulates bf16
    gradients); without roundings the derivation is the plain chain rule."""
    a, b = sympy.symbols("a b", real=True)
    rounded = synthesize_elementwise({"y": parse_formula("sigmoid(a) * a * b", ["a", "b"], ("a", "b"))}, ["a", "b"])
    assert rounded.gradient_formulas["grad_a"].count("cast_to_input") >= 3
    plain = synthesize_elementwise({"y": parse_formula("sigmoid(a) * a * b", ["a", "b"])}, ["a", "b"])
    assert "cast_to_input" not in plain.gradient_formulas["grad_a"]


def test_synthesis_is_deterministic_across_processes():
    formula = "gelu(a, approximate='tanh') * b + mish(a)"
    script = textwrap.dedent(
        f"""
        from tools.kernelgen.synth import parse_formula, synthesize_elementwise
        math = synthesize_elementwise({{"y": parse_formula({formula!r}, ["a", "b"])}}, ["a", "b"])
        print("\\n".join(math.forward + math.backward))
        """
    )
    # Another string-hash seed in the child: set and dict orders differ, the printed kernel must not.
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO_ROOT)}
    child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    math = synthesize_elementwise({"y": parse_formula(formula, ["a", "b"])}, ["a", "b"])
    assert child.stdout.strip() == "\n".join(math.forward + math.backward)


# ---------------------------------------------------------------------------------------------------------------
# Real @triton.jit kernels built from the printed statements (the interpreter runs them on CPU).
# ---------------------------------------------------------------------------------------------------------------


def _indent(lines: list[str]) -> str:
    return "\n".join(f"    {line}" for line in lines)


def _load_lines(names, parameters):
    lines = []
    for name in names:
        if parameters.get(name) == "channel":
            lines.append(f"{name} = tl.load({name}_ptr + cols, mask=mask, other=0.0).to(tl.float32)")
        elif parameters.get(name) == "scalar":
            lines.append(f"{name} = tl.load({name}_ptr).to(tl.float32)")
        else:
            lines.append(f"{name} = tl.load({name}_ptr + offsets, mask=mask, other=0.0).to(tl.float32)")
    return lines


RUN_AS_KERNEL = [
    "geglu",
    "swiglu",
    "dyt",
    "relu_squared",
    "sigmoid_gate",
    "swish_beta",
    "pow_hyper",
    "pow_odd_hyper",
    "mish",
    "softplus_log1p_gate",
    "logsigmoid_gate",
]


def render_kernels(math, inputs, parameters, hypers) -> str:
    tensors = [*inputs, *parameters]
    grads = [f"grad_{name}" for name in tensors]
    forward_loads = [n for n in tensors if n in math.forward_uses]
    backward_loads = [n for n in [*tensors, "grad_y"] if n in math.backward_uses]
    prologue = [
        "row = tl.program_id(0).to(tl.int64)",
        "cols = tl.arange(0, BLOCK)",
        "mask = cols < n_cols",
        "offsets = row * n_cols + cols",
    ]
    hyper_args = "".join(f"{h}, " for h in hypers)
    forward_args = ", ".join(f"{n}_ptr" for n in tensors)
    backward_args = ", ".join(f"{n}_ptr" for n in [*tensors, "grad_y", *grads])
    forward_body = prologue + _load_lines(forward_loads, parameters) + math.forward
    forward_body.append("tl.store(y_ptr + offsets, y, mask=mask)")
    backward_body = prologue + _load_lines(backward_loads, parameters) + math.backward
    # Parameter gradients are stored per element (one row each) and reduced by the caller, like the templates.
    backward_body += [f"tl.store({g}_ptr + offsets, {g}, mask=mask)" for g in grads]
    return (
        "import triton\nimport triton.language as tl\n\nfrom liger_kernel.ops.utils import pow\n"
        "from liger_kernel.ops.utils import tanh\nfrom liger_kernel.ops.utils import tanh_from_exp\n"
        "from liger_kernel.ops.utils import log1p\nfrom liger_kernel.ops.utils import log1p_unit\n\n\n"
        f"@triton.jit\ndef forward_kernel({forward_args}, y_ptr, {hyper_args}n_cols, BLOCK: tl.constexpr):\n"
        f"{_indent(forward_body)}\n\n\n"
        f"@triton.jit\ndef backward_kernel({backward_args}, {hyper_args}n_cols, BLOCK: tl.constexpr):\n"
        f"{_indent(backward_body)}\n"
    )


def import_module_from_source(source: str, path: Path):
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "name, libraries",
    [
        *((name, (None, None)) for name in RUN_AS_KERNEL),
        ("geglu", ("core", "libdevice")),
        ("dyt", ("core", "libdevice")),
        ("softplus_log1p_gate", ("core", "libdevice")),
        ("softplus_log1p_gate", ("libdevice", "libdevice")),
    ],
)
def test_printed_statements_run_as_a_triton_kernel(name, libraries, tmp_path):
    """Each case's printed forward and backward in a kernel match torch in float64; ``libraries`` are the passes'
    ``tiling.forward_math`` / ``backward_math`` (under the interpreter libdevice's helpers are core-op formulas of
    the same values; compiled, libdevice's own)."""
    formula, inputs, parameters, hypers, torch_fn = FUSED_CASES[name]
    names = [*inputs, *parameters, *hypers]
    derivation = derive_elementwise({"y": parse_formula(formula, names)}, list(inputs), parameters, list(hypers))
    math = print_elementwise(derivation, TritonPrinter, *libraries)
    if "libdevice" in libraries:
        pass_statements = math.forward if libraries[0] == "libdevice" else math.backward
        assert any(f"{helper}(" in line for line in pass_statements for helper in ("tanh", "log1p"))
    source = render_kernels(math, inputs, parameters, hypers)
    module = import_module_from_source(source, tmp_path / f"k_{name}_{'_'.join(map(str, libraries))}.py")

    device = infer_device()
    n_rows, n_cols = (4, 37) if device == "cpu" else (64, 4099)
    block = triton.next_power_of_2(n_cols)
    shapes = {"channel": (n_cols,), "scalar": (1,)}
    tensors = {n: torch.randn(n_rows, n_cols, device=device) for n in inputs}
    tensors |= {n: torch.randn(shapes[kind], device=device) for n, kind in parameters.items()}
    y = torch.empty(n_rows, n_cols, device=device)
    module.forward_kernel[(n_rows,)](*tensors.values(), y, *hypers.values(), n_cols, BLOCK=block)

    leaves = {n: t.double().requires_grad_(True) for n, t in tensors.items()}
    expected = torch_fn(*leaves.values(), *hypers.values())
    assert_verbose_allclose(y, expected.float(), rtol=1e-5, atol=1e-5, extra_info="(kernel forward)")

    grad_y = torch.randn(n_rows, n_cols, device=device)
    expected.backward(grad_y.double())
    grads = {n: torch.empty(n_rows, n_cols, device=device) for n in tensors}
    module.backward_kernel[(n_rows,)](*tensors.values(), grad_y, *grads.values(), *hypers.values(), n_cols, BLOCK=block)
    for n, leaf in leaves.items():
        got = grads[n]
        if parameters.get(n) == "channel":
            got = got.sum(0)
        elif parameters.get(n) == "scalar":
            got = got.sum().reshape(1)
        assert_verbose_allclose(got, leaf.grad.float(), rtol=1e-4, atol=1e-4, extra_info=f"(kernel grad_{n})")


@pytest.mark.parametrize("source", ["Abs(x)**p", "x**p", "x*Abs(x)**p", "(1 - exp(x))**p"])
def test_power_gradients_do_not_divide_by_their_base(source):
    """sympy.diff writes d(b**p)/db as p*b**p/b, NaN at b = 0 where torch's p*b**(p - 1) is finite."""
    x, p = sympy.Symbol("x", real=True), sympy.Symbol("p", real=True)
    derivation = derive_elementwise({"y": sympy.sympify(source, locals={"x": x, "p": p})}, ["x"], hyperparameters=["p"])
    gradient = derivation.gradients["grad_x"]
    divided = [n for n in sympy.preorder_traversal(gradient) if isinstance(n, sympy.Pow) and n.exp.is_negative]
    assert not divided, gradient


def test_a_divisor_of_the_row_length_alone_divides_when_triton_makes_the_length_a_constant(tmp_path):
    """Compiled Triton turns an integer argument equal to 1 into a compile-time constant, so a one-column row
    reaches an unbiased variance's ``1 / (n_cols - 1)`` as constants: it must divide when the kernel runs (inf,
    as torch's nan standard deviation needs), not fold into a ZeroDivisionError while compiling. The interpreter
    does constexpr arithmetic the same way, so a ``tl.constexpr`` argument shows it on the CPU."""
    n_cols = sympy.Symbol("n_cols", real=True)
    printed = TritonPrinter().reciprocal(n_cols - 1)
    assert printed == "1.0 / tl.cast(n_cols - 1.0, tl.float32)"
    assert TritonPrinter().doprint(sympy.Symbol("v", real=True) / n_cols) == "v / n_cols"  # never zero: as is
    source = (
        "import triton\nimport triton.language as tl\n\n\n"
        f"@triton.jit\ndef kernel(out_ptr, n_cols: tl.constexpr):\n    tl.store(out_ptr, {printed})\n"
    )
    module = import_module_from_source(source, tmp_path / "one_column.py")
    out = torch.zeros(1, device=infer_device())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's divide-by-zero warning under the interpreter
        module.kernel[(1,)](out, 1)
    assert out.item() == float("inf")
