"""The kernel profile: one typed object that every kernelgen stage reads and fills.

analyze -> profile (YAML the user may edit) -> synth fills ``math`` -> render -> insert -> validate.

Names used inside ``math`` fragments (Triton statements, computed in fp32):
- tier 1 (element-wise): every input and learnable parameter by its name, hyper-parameters by name; the
  forward assigns every output; the backward reads ``grad_{output}`` and assigns ``grad_{input}`` for each
  input that requires a gradient and ``grad_{parameter}`` for each learnable parameter (the element-wise
  contribution: the template sums it over rows).
- tier 2 (row reduction): ``x`` (the row, masked with ``mask``), ``n_cols``, parameters and hyper-parameters
  by name; ``row_statistics`` assigns every name in ``backward.saved_row_statistics``; ``forward`` assigns
  ``y``; ``backward`` reads ``grad_y`` and the statistics and assigns ``grad_x`` and ``grad_{parameter}``.
- tier 3 (fused loss over a long row): see ``templates/ops_tier3.py.j2``.
"""

from __future__ import annotations

import dataclasses
import functools
import keyword
import re
import types
import typing

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

import yaml

PROFILE_VERSION = 1
SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TIER_DESCRIPTIONS = {
    1: "element-wise: every output element depends only on the input elements at the same position",
    2: "row reduction: each output row depends on a reduction (sum, mean, max) over its input row",
    3: "fused / complex: multi-pass over long rows, losses over a class dimension, gathers by index",
}
CLOSEST_KERNEL_BY_TIER = {1: "swiglu", 2: "rms_norm", 3: "cross_entropy"}
MODULE_KINDS = ("mlp", "elementwise", "norm", "loss")
TIER3_HYPERPARAMETERS = ("ignore_index", "lse_square_scale", "label_smoothing", "reduction", "softcap", "return_z_loss")
SCALAR_TYPES = ("float", "int", "bool", "str")
PARAMETER_SHAPES = ("channel", "scalar")
INIT_KINDS = ("ones", "zeros", "constant")
DTYPES = ("same", "float32", "int64", "int32", "bool")
DERIVED_NAMES = ("function_class_name", "module_class_name", "functional_name")  # from operation_name


class ProfileError(ValueError):
    """A profile that cannot be used; ``problems`` lists every one of them with its YAML path."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"invalid profile {source}: " + "; ".join(problems))


def pascal_case(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


@dataclass
class TensorSpec:
    name: str
    shape: list[str] = field(default_factory=lambda: ["*", "H"])
    dtype: str = "same"
    requires_grad: bool = True
    description: str = ""


@dataclass
class HyperParameter:
    """A scalar argument of the op (eps, negative_slope, ...): a runtime float unless ``constexpr``."""

    name: str
    type: str = "float"
    default: Any = None
    constexpr: bool = False
    choices: list[Any] | None = None
    description: str = ""


@dataclass
class LearnableParameter:
    """An ``nn.Parameter`` the module owns: ``channel`` broadcasts over rows (shape [H]); ``scalar`` is one value."""

    name: str
    shape: str = "channel"
    init: str = "ones"
    init_value: float | None = None
    description: str = ""


@dataclass
class Backward:
    saved_tensors: list[str] = field(default_factory=list)
    recompute: list[str] = field(default_factory=list)
    gradient_formulas: dict[str, str] = field(default_factory=dict)
    saved_row_statistics: list[str] = field(default_factory=list)
    in_place_gradients: bool | None = None  # None: only where the module made the inputs (mlp)


@dataclass
class Tiling:
    grid: str = "rows x column blocks"
    block_size_source: str = "n_cols"
    needs_sm_parallelism: bool = False


@dataclass
class BenchmarkSpec:
    variable: str = "BT"
    x_label: str = "B * T"
    x_values: list[int] = field(default_factory=lambda: [1024, 2048, 4096, 8192, 16384])
    providers: list[str] = field(default_factory=lambda: ["liger", "torch", "torch_compile"])
    fixed_config: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModuleSpec:
    """How the nn.Module wrapper looks: ``mlp`` (gate/up/down projections from an HF config), ``elementwise``
    (forward takes the tensor inputs), ``norm`` (owns a weight of ``hidden_size``), ``loss`` (input, target)."""

    kind: str = "elementwise"
    init_params: list[HyperParameter] = field(default_factory=list)
    size_param: str = "hidden_size"  # the init param that sizes per-channel parameters


@dataclass
class Reference:
    """The PyTorch reference: ``source`` defines ``entry`` (a function or an nn.Module class)."""

    source: str = ""
    entry: str = ""
    kind: str = "function"
    origin: str = ""


@dataclass
class Math:
    """Triton fragments (statement lists) the templates wrap; ``synthesized`` says kernelgen derived them."""

    forward: list[str] = field(default_factory=list)
    backward: list[str] = field(default_factory=list)
    row_statistics: list[str] = field(default_factory=list)
    synthesized: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class TestSpec:
    cpu_shapes: list[list[int]] = field(default_factory=lambda: [[2, 3, 31], [1, 5, 64], [3, 127]])
    gpu_shapes: list[list[int]] = field(default_factory=lambda: [[2, 512, 4096], [1, 256, 14336], [4, 333, 1023]])
    tolerances: dict[str, list[float]] = field(
        default_factory=lambda: {"float32": [1e-5, 1e-5], "bfloat16": [1e-2, 1e-2]}
    )
    input_scale: float = 1.0
    input_domain: str = "real"  # "positive" when the reference takes log/sqrt/fractional powers of its inputs


@dataclass
class KernelProfile:
    operation_name: str
    function_class_name: str = ""
    module_class_name: str = ""
    functional_name: str = ""
    tier: int = 1
    tier_description: str = ""
    tier_reason: str = ""
    closest_existing_kernel: str = ""
    inputs: list[TensorSpec] = field(default_factory=list)
    outputs: list[TensorSpec] = field(default_factory=list)
    hyperparameters: list[HyperParameter] = field(default_factory=list)
    parameters: list[LearnableParameter] = field(default_factory=list)
    forward_computation: str = ""
    precision_sensitive_ops: list[str] = field(default_factory=list)
    backward: Backward = field(default_factory=Backward)
    tiling: Tiling = field(default_factory=Tiling)
    module: ModuleSpec = field(default_factory=ModuleSpec)
    benchmark: BenchmarkSpec = field(default_factory=BenchmarkSpec)
    reference: Reference = field(default_factory=Reference)
    math: Math = field(default_factory=Math)
    test: TestSpec = field(default_factory=TestSpec)
    profile_version: int = PROFILE_VERSION

    def __post_init__(self):
        self.fill_defaults()

    def fill_defaults(self) -> None:
        """Derive identity and classification fields that were left empty from ``operation_name`` and ``tier``."""
        pascal = pascal_case(self.operation_name) if SNAKE_CASE.match(self.operation_name or "") else ""
        if not self.function_class_name and pascal:
            self.function_class_name = f"Liger{pascal}Function"
        if not self.module_class_name and pascal:
            suffix = {"loss": "Loss", "mlp": "MLP"}.get(self.module.kind, "")
            self.module_class_name = f"Liger{pascal}{suffix}"
        if not self.functional_name and self.operation_name:
            self.functional_name = f"liger_{self.operation_name}"
        if not self.tier_description and self.tier in TIER_DESCRIPTIONS:
            self.tier_description = TIER_DESCRIPTIONS[self.tier]
        if not self.closest_existing_kernel and self.tier in CLOSEST_KERNEL_BY_TIER:
            self.closest_existing_kernel = CLOSEST_KERNEL_BY_TIER[self.tier]

    # Names of the rendered artefacts ------------------------------------------------------------------------
    @property
    def forward_wrapper(self) -> str:
        return f"{self.operation_name}_forward"

    @property
    def backward_wrapper(self) -> str:
        return f"{self.operation_name}_backward"

    @property
    def grad_inputs(self) -> list[TensorSpec]:
        return [t for t in self.inputs if t.requires_grad]

    def renamed(self, new_name: str) -> KernelProfile:
        """A copy for another kernel name; class and function names are re-derived from the new name."""
        clone = from_dict(to_dict(self), source=f"<renamed {self.operation_name}>", validate=False)
        clone.operation_name = new_name
        clone.function_class_name = clone.module_class_name = clone.functional_name = ""
        clone.fill_defaults()
        return clone

    def validate(self, source: str = "<profile>") -> None:
        problems = validate_profile(self)
        if problems:
            raise ProfileError(source, problems)


# Validation -------------------------------------------------------------------------------------------------
def _check_identifier(problems: list[str], path: str, value: Any) -> None:
    if not isinstance(value, str) or not IDENTIFIER.match(value) or keyword.iskeyword(value):
        problems.append(f"{path}: {value!r} is not a Python identifier")


def validate_profile(profile: KernelProfile) -> list[str]:
    """Every problem of the profile at once, each prefixed with its YAML path."""
    problems: list[str] = []
    name_valid = isinstance(profile.operation_name, str) and SNAKE_CASE.match(profile.operation_name)
    if not name_valid:
        problems.append(f"operation_name: {profile.operation_name!r} is not a snake_case identifier")
    for attr in DERIVED_NAMES:
        value = getattr(profile, attr)
        if value or name_valid:  # empty ones are derived from operation_name, whose problem is reported above
            _check_identifier(problems, attr, value)
    if profile.tier not in TIER_DESCRIPTIONS:
        problems.append(f"tier: {profile.tier!r} is not one of 1, 2, 3")
    if profile.module.kind not in MODULE_KINDS:
        problems.append(f"module.kind: {profile.module.kind!r} is not one of {', '.join(MODULE_KINDS)}")
    elif profile.module.kind == "loss" and profile.tier != 3:
        problems.append("module.kind: 'loss' needs tier 3 (the softmax-loss template makes the loss module)")
    elif profile.tier == 3 and profile.module.kind != "loss":
        problems.append(f"module.kind: {profile.module.kind!r} with tier 3: the softmax-loss template needs 'loss'")
    if not profile.inputs:
        problems.append("inputs: at least one tensor input is required")
    if not profile.outputs:
        problems.append("outputs: at least one output is required")
    seen: dict[str, str] = {}
    groups = (
        ("inputs", profile.inputs),
        ("outputs", profile.outputs),
        ("hyperparameters", profile.hyperparameters),
        ("parameters", profile.parameters),
    )
    for group, items in groups:
        for index, item in enumerate(items):
            path = f"{group}[{index}].name"
            _check_identifier(problems, path, item.name)
            if item.name in seen:
                problems.append(f"{path}: {item.name!r} already used in {seen[item.name]}")
            seen[item.name] = group
    for group, tensors in (("inputs", profile.inputs), ("outputs", profile.outputs)):
        for index, tensor in enumerate(tensors):
            if tensor.dtype not in DTYPES:
                problems.append(f"{group}[{index}].dtype: {tensor.dtype!r} is not one of {', '.join(DTYPES)}")
    for index, hyper in enumerate(profile.hyperparameters):
        if hyper.type not in SCALAR_TYPES:
            problems.append(f"hyperparameters[{index}].type: {hyper.type!r} is not one of {', '.join(SCALAR_TYPES)}")
        if hyper.choices is not None and hyper.default not in hyper.choices:
            problems.append(f"hyperparameters[{index}].default: {hyper.default!r} is not one of its choices")
    for index, param in enumerate(profile.parameters):
        if param.shape not in PARAMETER_SHAPES:
            problems.append(f"parameters[{index}].shape: {param.shape!r} is not one of {', '.join(PARAMETER_SHAPES)}")
        if param.init not in INIT_KINDS:
            problems.append(f"parameters[{index}].init: {param.init!r} is not one of {', '.join(INIT_KINDS)}")
        if param.init == "constant" and param.init_value is None:
            problems.append(f"parameters[{index}].init_value: required when init is 'constant'")
    todo = profile.math.extra.get("todo")
    if todo:  # analyze leaves it in tier 2/3 profiles; whoever writes the math removes it
        problems.append(f"math.extra.todo: the math is still to be written ({todo}); write it, then remove the todo")
    if profile.tier == 1:
        if not profile.math.forward:
            problems.append("math.forward: tier 1 needs the forward statements (run synthesis or write them)")
        if not profile.math.backward and any(t.requires_grad for t in profile.inputs):
            problems.append("math.backward: tier 1 needs the backward statements (run synthesis or write them)")
    if profile.tier == 2:
        if len(profile.inputs) != 1:
            problems.append("inputs: tier 2 (row-reduction template) takes exactly one input, the row x")
        if not profile.math.row_statistics:
            problems.append("math.row_statistics: tier 2 needs the per-row statistics statements")
        if not profile.backward.saved_row_statistics:
            problems.append("backward.saved_row_statistics: tier 2 needs the names of the saved row statistics")
    if profile.tier == 3:
        # The tier-3 template is the softmax-loss family (ops_tier3.py.j2): logits and targets, and a switch for
        # each feature it implements.
        if len(profile.inputs) != 2:
            problems.append("inputs: tier 3 (softmax-loss template) takes exactly [logits, target]")
        names = {hp.name for hp in profile.hyperparameters}
        missing = [name for name in TIER3_HYPERPARAMETERS if name not in names]
        if missing:
            problems.append(f"hyperparameters: tier 3 (softmax-loss template) needs {', '.join(missing)}")
    for index, statement in enumerate(profile.math.forward + profile.math.backward + profile.math.row_statistics):
        if not isinstance(statement, str):
            problems.append(f"math: statement {index} is not a string")
            continue
        try:
            compile(statement, "<fragment>", "exec")
        except SyntaxError as error:
            problems.append(f"math: statement {statement!r} does not parse ({error.msg})")
    if not profile.reference.source.strip():
        problems.append("reference.source: the PyTorch reference is required (tests compare against it)")
    elif not profile.reference.entry:
        problems.append("reference.entry: name of the function or module in reference.source is required")
    if not profile.benchmark.x_values or not all(isinstance(v, int) and v > 0 for v in profile.benchmark.x_values):
        problems.append("benchmark.x_values: a list of positive integers is required")
    return problems


# YAML ------------------------------------------------------------------------------------------------------
class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings (reference source) as readable ``|`` blocks."""


def _str_representer(dumper: yaml.SafeDumper, data: str):
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_representer)


def to_dict(profile: KernelProfile) -> dict[str, Any]:
    return dataclasses.asdict(profile)


MISSING_VALUE = ""  # stands in for a missing required field while the rest of a profile is checked


def dump_yaml(profile: KernelProfile) -> str:
    header = f"# kernelgen kernel profile for '{profile.operation_name}' (edit, then: new NAME --profile FILE)\n"
    return header + yaml.dump(to_dict(profile), Dumper=_LiteralDumper, sort_keys=False, width=120)


def _build(cls, data: Any, path: str, problems: list[str]):
    """Build dataclass ``cls`` from ``data``, recording unknown keys and wrong types with their path."""
    if not isinstance(data, dict):
        problems.append(f"{path or '<root>'}: expected a mapping, got {type(data).__name__}")
        return None
    kwargs = {}
    for key, value in data.items():
        child = f"{path}.{key}" if path else str(key)
        if key not in _field_kinds(cls):
            problems.append(f"{child}: unknown field")
            continue
        kind, expected = _field_kinds(cls)[key]
        if kind == "nested_list":
            if not isinstance(value, list):
                problems.append(f"{child}: expected a list")
                continue
            items = [_build(expected, item, f"{child}[{i}]", problems) for i, item in enumerate(value)]
            kwargs[key] = [item for item in items if item is not None]
            continue
        if kind == "nested":
            built = _build(expected, value, child, problems)
            if built is not None:
                kwargs[key] = built
            continue
        # bool is an int to isinstance, but ``tier: true`` is a mistake, not tier 1.
        wrong_bool = isinstance(value, bool) and expected is int
        if expected is not None and value is not None and (not isinstance(value, expected) or wrong_bool):
            problems.append(f"{child}: expected {_type_name(expected)}, got {type(value).__name__}")
            continue
        kwargs[key] = value
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [name for name in required if name not in kwargs]
    reported = {problem.split(":")[0] for problem in problems}
    for name in missing:
        field_path = f"{path}.{name}" if path else name
        if field_path not in reported:  # a value of the wrong type was reported already
            problems.append(f"{field_path}: missing")
        # A stand-in (every required field is a name) so the rest of the profile is still checked: every problem
        # is reported at once. Problems validation finds at these paths are dropped (see from_dict).
        kwargs[name] = MISSING_VALUE
    return cls(**kwargs)


def _type_name(expected) -> str:
    if isinstance(expected, tuple):
        return " or ".join(t.__name__ for t in expected)
    return expected.__name__


def _field_kind(annotation: Any) -> tuple[str, Any]:
    """How ``_build`` reads a field of this annotation: ("nested", cls), ("nested_list", cls) or ("scalar", types)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if dataclasses.is_dataclass(annotation):
        return "nested", annotation
    if origin is list and args and dataclasses.is_dataclass(args[0]):
        return "nested_list", args[0]
    if origin in (types.UnionType, typing.Union):  # ``X | None``: None is always accepted (the field's default)
        (annotation,) = [arg for arg in args if arg is not type(None)]
        origin = typing.get_origin(annotation)
    if annotation is Any:
        return "scalar", None
    if annotation is float:
        return "scalar", (int, float)
    return "scalar", origin or annotation


@functools.cache
def _field_kinds(cls) -> dict[str, tuple[str, Any]]:
    """Every field of dataclass ``cls`` with how it is read, from its type annotation."""
    return {name: _field_kind(annotation) for name, annotation in typing.get_type_hints(cls).items()}


def from_dict(data: Any, source: str = "<profile>", validate: bool = True) -> KernelProfile:
    problems: list[str] = []
    profile = _build(KernelProfile, data, "", problems)
    if profile is not None and validate:
        already = {problem.split(":")[0] for problem in problems}  # a missing field's stand-in is not checked again
        problems.extend(problem for problem in validate_profile(profile) if problem.split(":")[0] not in already)
    if problems:
        raise ProfileError(source, problems)
    return profile


def load_yaml(text: str, source: str = "<profile>", validate: bool = True) -> KernelProfile:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ProfileError(source, [f"<yaml>{where}: {getattr(error, 'problem', error)}"]) from None
    return from_dict(data, source=source, validate=validate)


def load_profile(path: str | Path, validate: bool = True) -> KernelProfile:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ProfileError(str(path), [f"cannot read the file ({error.strerror})"]) from None
    return load_yaml(text, source=str(path), validate=validate)
