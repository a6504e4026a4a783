"""The text ``patch`` writes: ``apply_liger_kernel_to_<model>`` with the Liger classes it swaps in, the model-type
table machinery a target lacks, and the generated tests.

The code follows the target where the target has a way of its own: its apply functions' ``model`` annotation and
their cross entropy switch are copied from an existing apply function of the target.
"""

from __future__ import annotations

import ast
import textwrap

from collections import Counter
from dataclasses import dataclass
from dataclasses import field

from tools.kernelgen.patch.mapping import Row
from tools.kernelgen.patch.model import ModelSource

# The apply function's keywords in the order they are written (upstream's names).
FLAG_ORDER = ("rope", "rms_norm", "layer_norm", "swiglu", "geglu", "relu_squared")
LOSS_FLAGS = ("cross_entropy", "fused_linear_cross_entropy")
DOCSTRING_WIDTH = 116


@dataclass
class TargetStyle:
    """What the target's own apply functions say about how to write one."""

    model_annotation: str = "nn.Module | None"
    cross_entropy_body: list[str] = field(default_factory=list)  # statements under ``if cross_entropy:``
    cross_entropy_imports: list[tuple[str, str]] = field(default_factory=list)


def target_style(monkey_patch: str) -> TargetStyle:
    """Read from the first apply function of the target that has a ``model`` parameter and a cross entropy switch."""
    tree = ast.parse(monkey_patch)
    style = TargetStyle()
    annotations, bodies = Counter(), Counter()
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("apply_liger_kernel_to_")):
            continue
        args = {arg.arg: arg for arg in node.args.args}
        if "model" in args and args["model"].annotation is not None:
            annotations[ast.unparse(args["model"].annotation)] += 1
        for statement in ast.walk(node):
            if isinstance(statement, ast.If) and ast.unparse(statement.test) == "cross_entropy":
                bodies[tuple(ast.unparse(item) for item in statement.body)] += 1
                break
    # The most common way of the target's functions (older ones may keep a way of an older transformers).
    if annotations:
        style.model_annotation = annotations.most_common(1)[0][0]
    if bodies:
        style.cross_entropy_body = list(bodies.most_common(1)[0][0])
    return style


def display_name(source: ModelSource) -> str:
    return source.causal_lm.removesuffix("ForCausalLM")


def function_name(source: ModelSource) -> str:
    return f"apply_liger_kernel_to_{source.model_type}"


def _liger_name(row: Row) -> str:
    """The class written for a block, or the Liger class used as it is."""
    if row.strategy == "class" and row.block.kind == "norm" or row.strategy in ("act_fn", "forward"):
        return f"Liger{row.block.name}"
    return row.liger_class


def flags(rows: list[Row]) -> list[str]:
    """The apply function's switches, one per kind of kernel the mapping found."""
    present = {row.flag for row in rows if row.status == "kernel" and row.flag}
    known = [flag for flag in FLAG_ORDER if flag in present]
    others = sorted(present - set(FLAG_ORDER) - set(LOSS_FLAGS))
    return [*known, *others, *[flag for flag in LOSS_FLAGS if flag in present]]


def _value_text(value) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def norm_class(row: Row) -> str:
    """A subclass of the Liger norm with the model norm's constructor and the options the search found."""
    (hidden, _), *rest = row.init_params
    eps = "eps" in dict(rest)
    # the model norm's own arguments in its order: eps, and any its __init__ never reads (CohereLayerNorm's bias=False)
    signature = ", ".join([hidden, *(name if default is None else f"{name}={default}" for name, default in rest)])
    options = ", ".join(f"{name}={_value_text(value)}" for name, value in row.options.items())
    found = ", ".join(f"{name}={_value_text(value)}" for name, value in row.options.items() if name != "in_place")
    return (
        f"class {_liger_name(row)}({row.liger_class}):\n"
        f'    """``{row.block.name}`` through the {row.kernel} kernel{": " + found if found else ""}.\n\n'
        f"    in_place=False: the gradient reaching the norm is not overwritten, since a residual add may read it\n"
        f'    again."""\n\n'
        f"    def __init__(self, {signature}):\n"
        f"        super().__init__({', '.join([hidden, *(['eps=eps'] if eps else []), *([options] if options else [])])})\n"
    )


def act_fn_class(row: Row, source: ModelSource) -> str:
    return (
        f"class {_liger_name(row)}({source.short_module}.{row.block.name}):\n"
        f'    """``{row.block.name}`` with its activation through the {row.kernel} kernel ({row.liger_class})."""\n\n'
        # The model's own constructor arguments, whatever they are (GPT-J's MLP takes the intermediate size first).
        f"    def __init__(self, *args, **kwargs):\n"
        f"        super().__init__(*args, **kwargs)\n"
        f"        self.{row.block.detail['act']} = {row.liger_class}()\n"
    )


def forward_class(row: Row, source: ModelSource) -> str:
    forward = "".join(f"    {line}\n" if line else "\n" for line in row.forward.splitlines())
    return (
        f"class {_liger_name(row)}({source.short_module}.{row.block.name}):\n"
        f'    """``{row.block.name}`` with its activation through the {row.kernel} kernel ({row.liger_class})."""\n\n'
        f"{forward}"
    )


def module_definitions(rows: list[Row], source: ModelSource) -> list[str]:
    texts = []
    for row in rows:
        if row.status != "kernel":
            continue
        if row.strategy == "class" and row.block.kind == "norm":
            texts.append(norm_class(row))
        elif row.strategy == "act_fn":
            texts.append(act_fn_class(row, source))
        elif row.strategy == "forward":
            texts.append(forward_class(row, source))
    return texts


def imports(rows: list[Row], source: ModelSource) -> list[tuple[str, str]]:
    """(module, name) of every top-level import the written code needs."""
    needed = []
    for row in rows:
        if row.status != "kernel" or row.strategy in ("cross_entropy", "lce_forward"):
            continue
        needed.append((row.liger_module, row.liger_class))
        if row.strategy in ("act_fn", "forward"):
            needed.append((source.package, source.short_module))
    return sorted(set(needed))


def apply_function(rows: list[Row], source: ModelSource, style: TargetStyle) -> str:
    name, model = function_name(source), display_name(source)
    served = [row for row in rows if row.status == "kernel"]
    switches = flags(rows)
    defaults = {"cross_entropy": False}
    params = [f"    {flag}: bool = {defaults.get(flag, True)}," for flag in switches]
    params.append(f"    model: {style.model_annotation} = None,")
    lines = [f"def {name}(", *params, ") -> None:"]
    lines.append(f'    """Use Liger kernels in Hugging Face {model} models (written by ``kernelgen patch``).')
    lines.append("")
    described = [f"``{row.flag}``: {_row_summary(row)}." for row in served if row.strategy != "cross_entropy"]
    if "cross_entropy" in switches:
        described.append("``cross_entropy``: the causal LM loss through the cross_entropy kernel.")
    described.append(
        "Models built afterwards get the Liger modules; pass an already built ``model`` to convert its modules in "
        "place, keeping their weights."
    )
    for paragraph in described:
        lines.extend(textwrap.wrap(paragraph, DOCSTRING_WIDTH, initial_indent="    ", subsequent_indent="    "))
    lines.append('    """')
    if "cross_entropy" in switches and "fused_linear_cross_entropy" in switches:
        lines.append("    if cross_entropy and fused_linear_cross_entropy:")
        lines.append('        raise ValueError("cross_entropy and fused_linear_cross_entropy cannot both be True")')
    lines.append(f"    from {source.package} import {source.short_module}")
    lce = next((row for row in served if row.strategy == "lce_forward"), None)
    if lce is not None:
        lines.append("")
        lines.append(f"    from {lce.liger_module} import lce_forward")
    lines.append("")
    module = source.short_module
    for flag in switches:
        rows_of_flag = [row for row in served if row.flag == flag]
        lines.append(f"    if {flag}:")
        for row in rows_of_flag:
            if row.strategy == "rope":
                lines.append(f"        {module}.{row.block.name} = {row.liger_class}")
            elif row.strategy in ("class", "act_fn", "forward"):
                lines.append(f"        {module}.{row.block.name} = {_liger_name(row)}")
            elif row.strategy == "cross_entropy":
                lines.extend(f"        {text}" for text in _cross_entropy_lines(style))
            elif row.strategy == "lce_forward":
                lines.append("        if model is not None:")
                lines.append("            model.forward = MethodType(lce_forward, model)")
                lines.append("        else:")
                lines.append(f"            {module}.{source.causal_lm}.forward = lce_forward")
    converted = [row for row in served if row.strategy in ("class", "act_fn", "forward")]
    lines.append("")
    lines.append("    if model is None:")
    lines.append("        return")
    if not converted:
        return "\n".join(lines) + "\n"
    if any(row.block.kind != "norm" and row.strategy == "class" for row in converted):
        lines.append("    config = model.config.get_text_config()")
    lines.append("    # The templates only give their class and settings: no memory is allocated for their weights.")
    lines.append('    with torch.device("meta"):')
    lines.append("        for module in list(model.modules()):")
    lines.append("            name = type(module).__name__")
    keyword = "if"
    for row in converted:
        lines.append(f'            {keyword} {row.flag} and name == "{row.block.name}":')
        keyword = "elif"
        if row.strategy == "act_fn":
            lines.append(f"                module.{row.block.detail['act']} = {row.liger_class}()")
            lines.append(f"                module.__class__ = {_liger_name(row)}")
        elif row.strategy == "forward":
            lines.append(f"                module.__class__ = {_liger_name(row)}")
        elif row.block.kind == "norm":
            lines.append(
                f"                _convert_to_liger(module, {_liger_name(row)}(module.weight.shape[0], "
                f"{_eps_expression()}))"
            )
        else:
            lines.append(f"                _convert_to_liger(module, {row.liger_class}(config))")
    return "\n".join(lines) + "\n"


def _eps_expression() -> str:
    return 'getattr(module, "variance_epsilon", getattr(module, "eps", 1e-6))'


def _cross_entropy_lines(style: TargetStyle) -> list[str]:
    if style.cross_entropy_body:
        return style.cross_entropy_body
    return [
        "from transformers.loss import loss_utils",
        "",
        "loss_utils.nn.functional.cross_entropy = liger_cross_entropy",
    ]


def _row_summary(row: Row) -> str:
    if row.strategy == "rope":
        return f"``{row.block.name}`` as ``{row.liger_class}``"
    if row.strategy == "lce_forward":
        return f"the causal LM's forward as ``{row.liger_module}.lce_forward`` (no logits materialized in training)"
    if row.block.kind == "norm":
        return f"``{row.block.name}`` as ``{_liger_name(row)}`` ({row.kernel})"
    if row.strategy in ("act_fn", "forward"):
        return f"``{row.block.name}``'s activation as ``{row.liger_class}``"
    return f"``{row.block.name}`` as ``{row.liger_class}`` ({row.kernel})"


CONVERT_HELPER = '''def _convert_to_liger(module: torch.nn.Module, template: torch.nn.Module) -> None:
    """Turn ``module`` into ``template``'s class in place: it takes the template's settings (its plain attributes)
    and keeps its own parameters, buffers and submodules, so its weights and state dict stay as they are."""
    for name, value in vars(template).items():
        if not name.startswith("_") and name != "training":
            setattr(module, name, value)
    module.__class__ = type(template)
'''


def table_machinery(existing: list[tuple[str, str]]) -> str:
    """The model-type table (its entries: (model type, function)) and the two entry points that read it."""
    entries = "".join(f'    "{model_type}": {function},\n' for model_type, function in existing)
    return f'''# Model types as transformers names them (config.model_type) -> the function patching that model.
MODEL_TYPE_TO_APPLY_LIGER_FN = {{
{entries}}}


def _accepted_keywords(apply_fn, kwargs: dict) -> dict:
    """The keyword arguments ``apply_fn`` takes; an option one model type lacks is not an error for it."""
    parameters = inspect.signature(apply_fn).parameters
    return {{name: value for name, value in kwargs.items() if name in parameters}}


def _apply_liger_kernel(model_type: str, **kwargs) -> None:
    """Patch the classes of ``model_type`` before a model of it is built (kwargs as its apply function takes
    them). Models built earlier keep their modules: pass them to ``_apply_liger_kernel_to_instance``."""
    apply_fn = MODEL_TYPE_TO_APPLY_LIGER_FN.get(model_type) if model_type else None
    if apply_fn is None:
        logger.info("No Liger kernels for model type %r", model_type)
        return
    apply_fn(**_accepted_keywords(apply_fn, kwargs))


def _apply_liger_kernel_to_instance(model: nn.Module, **kwargs) -> None:
    """Patch an already built ``model`` in place, by the model type its config names."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    apply_fn = MODEL_TYPE_TO_APPLY_LIGER_FN.get(model_type) if model_type else None
    if apply_fn is None:
        logger.info("No Liger kernels for model type %r", model_type)
        return
    apply_fn(model=model, **_accepted_keywords(apply_fn, kwargs))
'''
