"""Types and ranges of the profile values generated code prints as literals (shapes, tolerances, defaults, sizes,
providers) or as names (constructor arguments, attributes): each problem is one ``path: what`` phrase.

YAML loading checks only a field's outer type (a list, a dict); what is inside is checked here, so that a value
reaches a template only as what its printer expects (a positive int, a finite float, an identifier).
"""

from __future__ import annotations

import ast
import keyword
import math
import re

from typing import Any

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# An attribute path (``norm.weight``); a parameter's may end in one constant index (a vector read by element:
# ``weight[0]``).
ATTRIBUTE_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
INDEXED_ATTRIBUTE_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\[-?\d+\])?$")
# What a generated benchmark runs (templates/benchmark*.j2 know these three).
PROVIDERS = ("liger", "torch", "torch_compile")
TOLERANCE_DTYPES = ("float32", "bfloat16", "float16")
REFERENCE_KINDS = ("function", "module")
TEST_DOMAINS = ("real", "positive")  # what the tests draw every input from, unless an input names its own
MAX_SHAPE_DIMS = 8
MAX_DIM = 2**31 - 1
SCALAR_CHECKS = {
    "float": lambda v: _is_number(v) and math.isfinite(v),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_identifier(value: Any) -> bool:
    return isinstance(value, str) and bool(IDENTIFIER.match(value)) and not keyword.iskeyword(value)


def _text(problems: list[str], path: str, value: Any, *, lines: bool) -> None:
    """Free text a comment (one line) or a docstring (``lines``) quotes: no control characters, which would end
    the comment or make the file unreadable to Python."""
    if not isinstance(value, str):
        problems.append(f"{path}: expected str, got {type(value).__name__}")
        return
    allowed = value.replace("\n", "").replace("\t", "") if lines else value
    if not allowed.isprintable():
        problems.append(f"{path}: must be {'printable text' if lines else 'one line of printable text'}")


def _shapes(problems: list[str], path: str, shapes: Any, dims: tuple[int, int]) -> None:
    low, high = dims
    if not isinstance(shapes, list) or not shapes:
        problems.append(f"{path}: expected a non-empty list of shapes")
        return
    for index, shape in enumerate(shapes):
        ok = isinstance(shape, list) and low <= len(shape) <= high
        ok = ok and all(isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= MAX_DIM for d in shape)
        if not ok:
            size = f"{low}" if low == high else f"{low} to {high}"
            problems.append(f"{path}[{index}]: {shape!r} is not a shape ({size} positive integers)")


def _tolerances(problems: list[str], tolerances: Any) -> None:
    if not isinstance(tolerances, dict):
        return  # reported by loading
    for dtype, pair in tolerances.items():
        path = f"test.tolerances.{dtype}"
        if dtype not in TOLERANCE_DTYPES:
            problems.append(f"test.tolerances: {dtype!r} is not one of {', '.join(TOLERANCE_DTYPES)}")
        elif not (
            isinstance(pair, list)
            and len(pair) == 2
            and all(_is_number(v) and math.isfinite(v) and v >= 0 for v in pair)
        ):
            problems.append(f"{path}: {pair!r} is not [atol, rtol] (two finite numbers >= 0)")


def _hyperparameters(problems: list[str], hyperparameters: list) -> None:
    for index, hyper in enumerate(hyperparameters):
        check = SCALAR_CHECKS.get(hyper.type)
        if check is None:
            continue  # the type itself is reported by validate_profile
        if hyper.default is not None and not check(hyper.default):
            problems.append(
                f"hyperparameters[{index}].default: {hyper.default!r} is not a {hyper.type}"
                + (" (finite)" if hyper.type == "float" else "")
            )
        if hyper.choices is not None:
            if not isinstance(hyper.choices, list):
                problems.append(f"hyperparameters[{index}].choices: expected a list")
                continue
            for position, choice in enumerate(hyper.choices):
                if not check(choice):
                    problems.append(f"hyperparameters[{index}].choices[{position}]: {choice!r} is not a {hyper.type}")


def _benchmark(problems: list[str], benchmark) -> None:
    providers = benchmark.providers
    if not isinstance(providers, list) or not providers:
        problems.append(f"benchmark.providers: expected a non-empty list of {', '.join(PROVIDERS)}")
    else:
        for index, provider in enumerate(providers):
            if provider not in PROVIDERS:
                problems.append(f"benchmark.providers[{index}]: {provider!r} is not one of {', '.join(PROVIDERS)}")
        if len(set(map(repr, providers))) != len(providers):
            problems.append("benchmark.providers: a provider is listed twice")
    fixed = benchmark.fixed_config
    if isinstance(fixed, dict):
        for key, value in fixed.items():
            if not is_identifier(key):
                problems.append(f"benchmark.fixed_config: {key!r} is not a name (a model config key)")
            elif not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_DIM):
                problems.append(f"benchmark.fixed_config.{key}: {value!r} is not a positive integer")


def _module(problems: list[str], module) -> None:
    for index, init in enumerate(module.init_params):
        if not is_identifier(init.name):
            problems.append(f"module.init_params[{index}].name: {init.name!r} is not a Python identifier")
        if not _literal(init.default):
            problems.append(f"module.init_params[{index}].default: {init.default!r} is not a number, bool, str or null")
    if not is_identifier(module.size_param):
        problems.append(f"module.size_param: {module.size_param!r} is not a Python identifier")
    if module.hidden_act and not is_identifier(module.hidden_act):
        problems.append(f"module.hidden_act: {module.hidden_act!r} is not an activation name (an identifier)")


def _is_expression(text: Any) -> bool:
    try:
        ast.parse(text, mode="eval")
    except (SyntaxError, TypeError, ValueError):
        return False
    return True


def _literal(value: Any) -> bool:
    return value is None or isinstance(value, (bool, str)) or (_is_number(value) and math.isfinite(value))


def _parameters(problems: list[str], parameters: list) -> None:
    for index, param in enumerate(parameters):
        path = f"parameters[{index}]"
        for key in ("init_arg", "enabled_by"):
            value = getattr(param, key)
            if value and not is_identifier(value):
                problems.append(f"{path}.{key}: {value!r} is not a Python identifier")
        if param.attribute and not (isinstance(param.attribute, str) and INDEXED_ATTRIBUTE_PATH.match(param.attribute)):
            problems.append(f"{path}.attribute: {param.attribute!r} is not an attribute path (a.b, or a.b[0])")
        if param.init_value is not None and not (_is_number(param.init_value) and math.isfinite(param.init_value)):
            problems.append(f"{path}.init_value: {param.init_value!r} is not a finite number")
        if param.init_expr and not _is_expression(param.init_expr):
            problems.append(f"{path}.init_expr: {param.init_expr!r} is not a Python expression")
        if not isinstance(param.requires_grad, bool):
            problems.append(f"{path}.requires_grad: {param.requires_grad!r} is not true or false")


def _input_flags(problems: list[str], inputs: list) -> None:
    """Flags templates branch on (``if t.per_row``): a YAML string such as "no" would read as true."""
    for index, tensor in enumerate(inputs):
        init_expr = getattr(tensor, "init_expr", "")
        if init_expr and not _is_expression(init_expr):
            problems.append(f"inputs[{index}].init_expr: {init_expr!r} is not a Python expression")
        for key in ("requires_grad", "per_class", "per_row"):
            value = getattr(tensor, key, False)
            if not isinstance(value, bool):
                problems.append(f"inputs[{index}].{key}: {value!r} is not true or false")


def _loss_choices(problems: list[str], loss) -> None:
    if loss is None:
        return
    for index, choice in enumerate(loss.choices):
        if not isinstance(choice.value, str) or not choice.value.isprintable():
            problems.append(f"math.loss.choices[{index}].value: {choice.value!r} is not one line of text")


def check_values(profile) -> list[str]:
    """Every problem of the values ``profile`` prints into generated code."""
    problems: list[str] = []
    test = profile.test
    _shapes(problems, "test.cpu_shapes", test.cpu_shapes, (1, MAX_SHAPE_DIMS))
    _shapes(problems, "test.gpu_shapes", test.gpu_shapes, (1, MAX_SHAPE_DIMS))
    _shapes(problems, "test.mlp_shapes", test.mlp_shapes, (3, 3))
    _tolerances(problems, test.tolerances)
    if test.input_domain not in TEST_DOMAINS:
        problems.append(f"test.input_domain: {test.input_domain!r} is not one of {', '.join(TEST_DOMAINS)}")
    if not (_is_number(test.input_scale) and math.isfinite(test.input_scale) and test.input_scale > 0):
        problems.append(f"test.input_scale: {test.input_scale!r} is not a positive finite number")
    _hyperparameters(problems, profile.hyperparameters)
    _benchmark(problems, profile.benchmark)
    _module(problems, profile.module)
    _parameters(problems, profile.parameters)
    _input_flags(problems, profile.inputs)
    _loss_choices(problems, profile.math.loss)
    if profile.math.triton is not None:
        for index, name in enumerate(profile.math.triton.saved_row_statistics):
            if not is_identifier(name):
                problems.append(f"math.triton.saved_row_statistics[{index}]: {name!r} is not a Python identifier")
    reference = profile.reference
    if reference.kind not in REFERENCE_KINDS:
        problems.append(f"reference.kind: {reference.kind!r} is not one of {', '.join(REFERENCE_KINDS)}")
    if reference.entry and not is_identifier(reference.entry):
        problems.append(f"reference.entry: {reference.entry!r} is not a Python identifier")
    if reference.origin:
        _text(problems, "reference.origin", reference.origin, lines=False)
    if profile.forward_computation:
        _text(problems, "forward_computation", profile.forward_computation, lines=True)
    return problems


# Hand-written Triton (math.triton) is math: assignments of expressions over names, numbers, ``tl``/``libdevice``
# and the helpers the ops file imports (tanh, pow). A call of anything else (``__import__``, ``open``) or an
# attribute outside those modules is no math, and would run wherever the kernel runs.
TRITON_MODULES = ("tl", "libdevice")
TRITON_HELPERS = ("tanh", "pow")
TENSOR_METHODS = ("to",)
_EXPRESSION_NODES = (
    ast.Expression,
    ast.Name,
    ast.Load,
    ast.Store,
    ast.Constant,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Tuple,
    ast.Subscript,
    ast.Slice,
    ast.keyword,
    ast.operator,
    ast.unaryop,
    ast.boolop,
    ast.cmpop,
    ast.expr_context,
)


def _rooted_in_triton(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in TRITON_MODULES


def triton_statement_problem(statement: ast.stmt) -> str | None:
    """Why one parsed statement of ``math.triton`` is not math (a phrase), or None."""
    if isinstance(statement, ast.Assign):
        targets = [
            t for target in statement.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])
        ]
        value = statement.value
    elif isinstance(statement, ast.AugAssign):
        targets, value = [statement.target], statement.value
    else:
        return "is not an assignment"
    if not all(isinstance(target, ast.Name) for target in targets):
        return "assigns something other than a name"
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            function = node.func
            method = isinstance(function, ast.Attribute) and function.attr in TENSOR_METHODS
            helper = isinstance(function, ast.Name) and function.id in TRITON_HELPERS
            if not (helper or method or _rooted_in_triton(function)):
                return f"calls {ast.unparse(function)}, which is no tl/libdevice function (nor {', '.join(TRITON_HELPERS)})"
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") or not (_rooted_in_triton(node) or node.attr in TENSOR_METHODS):
                return f"reads {ast.unparse(node)}: only tl and libdevice attributes"
        elif not isinstance(node, _EXPRESSION_NODES):
            return f"holds a {type(node).__name__}, which is no part of an expression kernelgen copies"
    return None
