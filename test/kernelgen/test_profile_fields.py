"""Every field of a profile a person can edit changes what kernelgen generates (the notes section and free-text
descriptions excepted, as documented in kernel-profile-format.md).

``EDITS`` has one edit per field of the profile's schema; the completeness test fails when a field is added to
the dataclasses without an edit here, so a field that does nothing cannot slip in.
"""

import copy
import dataclasses
import tempfile
import types
import typing

from pathlib import Path

import pytest

from test.kernelgen.conftest import EXAMPLES
from tools.kernelgen.analyze import analyze
from tools.kernelgen.profile import HyperParameter
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import benchmark_size
from tools.kernelgen.profile import load_profile
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.render import render_fused_linear
from tools.kernelgen.render import render_kernel

# Documentation only, and said so in kernel-profile-format.md.
INFORMATIONAL = {"notes", "profile_version"}
INFORMATIONAL_SUFFIX = ".description"


def _schema_paths(cls, prefix: str = "") -> set[str]:
    paths = set()
    for name, annotation in typing.get_type_hints(cls).items():
        path = f"{prefix}{name}"
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin in (types.UnionType, typing.Union):
            annotation = next(arg for arg in args if arg is not type(None))
            origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if dataclasses.is_dataclass(annotation):
            paths |= _schema_paths(annotation, f"{path}.")
        elif origin is list and args and dataclasses.is_dataclass(args[0]):
            paths |= _schema_paths(args[0], f"{path}[].")
        else:
            paths.add(path)
    return paths


def _example(name: str) -> KernelProfile:
    return load_profile(EXAMPLES / f"{name}.yaml")


NONE_DEFAULT_MODULE = """
import torch
import torch.nn as nn


class ScaledRows(nn.Module):
    def __init__(self, hidden_size, eps=1e-6, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size, dtype=dtype))
        self.eps = eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
"""

PROFILES = {
    "swiglu": lambda: _example("swiglu"),  # tier 1, derived from a formula, mlp module
    "rms_norm": lambda: _example("rms_norm"),  # tier 2, hand-written Triton, norm module
    "cross_entropy": lambda: _example("cross_entropy"),  # tier 3, loss module
    "dyt": lambda: analyze("dyt"),  # tier 1 with scalar, per-channel and optional parameters, a module reference
    "dyt_fixed_alpha": lambda: _fixed_alpha(analyze("dyt")),
    "leaky_relu_mul": lambda: analyze("leaky_relu_mul"),  # tier 1 with a runtime hyper-parameter
    "layer_norm": lambda: analyze("layer_norm"),  # tier 2, derived from its statistics and formulas
    "kl_div": lambda: analyze("kl_div"),
    "cross_entropy_fused": lambda: _with_fused_linear(
        _example("cross_entropy")
    ),  # and its fused linear kernel  # tier 3 with a reduction picked among values of its own
    "logsumexp": lambda: _analyze_source("import torch\n\n\ndef logsumexp(x):\n    return torch.logsumexp(x, -1)\n"),
    # tier 3 with class weights the reference module holds itself (a buffer set from its constructor)
    "weighted_cross_entropy": lambda: _analyze_source(WEIGHTED_MODULE),
    # a module whose constructor takes arguments that default to None (dtype=None)
    "none_default": lambda: _analyze_source(NONE_DEFAULT_MODULE),
    # tier 1 over lanes: an index map within the row (math.lanes)
    "rotate_half": lambda: _analyze_source(ROTATE_HALF),
    # ... with inputs that broadcast and row groups (HF's RoPE: cos unsqueezed at a hyper-parameter's dim, q and k)
    "hf_rope": lambda: _analyze_source(ROTATE_HALF + HF_ROPE),
    # tier 3 adding means over different counts (math.loss.scales): Hinton's distillation
    "hinton": lambda: _analyze_source(HINTON),
}

HINTON = """import torch.nn.functional as F


def hinton(student_logits, teacher_logits, labels, ignore_index: int = -100):
    ce = F.cross_entropy(student_logits, labels, ignore_index=ignore_index)
    kl = F.kl_div(F.log_softmax(student_logits, -1), F.softmax(teacher_logits, -1), reduction="batchmean")
    return ce + kl
"""

HF_ROPE = """

def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


KERNELGEN = {"entry": "apply_rotary_pos_emb"}
"""

ROTATE_HALF = """import torch


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)
"""


WEIGHTED_MODULE = """import torch.nn as nn
import torch.nn.functional as F


class WeightedCrossEntropy(nn.Module):
    def __init__(self, weight=None):
        super().__init__()
        self.register_buffer("weight", weight)

    def forward(self, logits, target):
        return F.cross_entropy(logits, target, weight=self.weight)
"""


def _with_fused_linear(profile: KernelProfile) -> KernelProfile:
    profile.fused_linear.enabled = True
    return profile


def _analyze_source(source: str) -> KernelProfile:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "reference.py"
        path.write_text(source)
        return analyze(str(path))


def _rename_statistic(profile):
    profile.math.statistics[1].name = "var"
    profile.math.outputs["y"] = profile.math.outputs["y"].replace("variance", "var")


def _rename_input(profile):
    profile.inputs[1].name = "up"
    profile.math.outputs["y"] = "silu(a) * up"


def _rename_output(profile):
    profile.outputs[0].name = "out"
    profile.math.outputs = {"out": profile.math.outputs["y"]}


def _rename_hyper(profile):
    profile.hyperparameters[0].name = "slope"
    profile.math.outputs["y"] = profile.math.outputs["y"].replace("=negative_slope", "=slope")
    # The tests call the reference with every hyper-parameter: it takes the new name too.
    profile.reference.source = profile.reference.source.replace("negative_slope", "slope")


def _rename_parameter(profile):
    profile.parameters[1].name = "scale"
    profile.math.outputs["y"] = profile.math.outputs["y"].replace("gamma", "scale")


def _fixed_alpha(profile):
    """DyT whose alpha starts at a number of the profile instead of the init_alpha argument."""
    profile.parameters[0].init_arg = ""
    profile.parameters[0].init_value = 0.5
    return profile


def _set_reduction_sum(profile):
    profile.math.loss.reduction = "sum"
    profile.hyperparameters = [hp for hp in profile.hyperparameters if hp.name != "reduction"]
    profile.reference.source = profile.reference.source.replace(', reduction="mean"', "")


def _retype_hyper(profile):
    """An int hyper-parameter takes an int default (a float one is refused), the module's constructor too."""
    profile.hyperparameters[0].type = "int"
    _set_hyper_default(profile, 1)


def _set_hyper_default(profile, value):
    """A hyper-parameter's default and the module constructor's of the same name (the profile keeps them equal)."""
    profile.hyperparameters[0].default = value
    for ip in profile.module.init_params:
        if ip.name == profile.hyperparameters[0].name:
            ip.default = value


def _two_dim_rows(profile):
    """A row kernel written for [rows, columns] inputs: its Function refuses other ranks (its test shapes have 2)."""
    profile.math.input_rank = 2
    profile.test.cpu_shapes = [shape[-2:] for shape in profile.test.cpu_shapes]
    profile.test.gpu_shapes = [shape[-2:] for shape in profile.test.gpu_shapes]


def _rename_scale(profile):
    profile.math.loss.scales[0].name = "inv_kept"
    profile.math.outputs["loss"] = profile.math.outputs["loss"].replace("inv_n_kept", "inv_kept")


def _set(path: str, value):
    def edit(profile):
        *parents, last = path.split(".")
        target = profile
        for part in parents:
            target = target[int(part)] if part.isdigit() else getattr(target, part)
        setattr(target, last, value)

    return edit


# path -> (profile, edit, what changes: "files" (the rendered kernel) or "validation" (the profile is refused))
EDITS = {
    "operation_name": ("swiglu", lambda p: p.__dict__.update(p.renamed("swiglu_other").__dict__), "files"),
    "function_class_name": ("swiglu", _set("function_class_name", "LigerOtherFunction"), "files"),
    "module_class_name": ("swiglu", _set("module_class_name", "LigerOtherMLP"), "files"),
    "functional_name": ("swiglu", _set("functional_name", "liger_other"), "files"),
    "tier": ("swiglu", _set("tier", 2), "validation"),
    "backend": ("swiglu", _set("backend", "tilelang"), "files"),
    "inputs[].name": ("swiglu", _rename_input, "files"),
    "inputs[].dtype": ("swiglu", _set("inputs.1.dtype", "int64"), "validation"),
    "inputs[].requires_grad": ("swiglu", _set("inputs.1.requires_grad", False), "files"),
    "outputs[].name": ("swiglu", _rename_output, "files"),
    "outputs[].dtype": ("swiglu", _set("outputs.0.dtype", "float32"), "validation"),
    "hyperparameters[].name": ("leaky_relu_mul", _rename_hyper, "files"),
    "hyperparameters[].type": ("leaky_relu_mul", _retype_hyper, "files"),
    "hyperparameters[].default": ("leaky_relu_mul", lambda profile: _set_hyper_default(profile, 0.2), "files"),
    "hyperparameters[].constexpr": ("leaky_relu_mul", _set("hyperparameters.0.constexpr", True), "files"),
    "hyperparameters[].choices": ("leaky_relu_mul", _set("hyperparameters.0.choices", [0.01, 0.1]), "files"),
    "parameters[].name": ("dyt", _rename_parameter, "files"),
    "parameters[].shape": ("dyt", _set("parameters.1.shape", "scalar"), "files"),
    "parameters[].rank": ("dyt", _set("parameters.1.rank", 3), "files"),
    "parameters[].init": ("dyt", _set("parameters.1.init", "zeros"), "files"),
    "parameters[].init_value": ("dyt_fixed_alpha", _set("parameters.0.init_value", 0.25), "files"),
    "parameters[].init_arg": ("dyt", _set("parameters.0.init_arg", ""), "validation"),
    "parameters[].init_expr": ("dyt", _set("parameters.1.init_expr", "torch.ones(hidden_size) * 2.0"), "files"),
    "parameters[].enabled_by": ("dyt", _set("parameters.2.enabled_by", ""), "files"),
    "parameters[].attribute": ("dyt", _set("parameters.1.attribute", "affine.weight"), "files"),
    "parameters[].requires_grad": ("dyt", _set("parameters.1.requires_grad", False), "files"),
    "forward_computation": ("swiglu", _set("forward_computation", "y = silu(gate) * up"), "files"),
    "math.statistics[].name": ("layer_norm", _rename_statistic, "files"),
    "math.statistics[].reduce": ("layer_norm", _set("math.statistics.1.reduce", "sum"), "files"),
    "math.statistics[].of": ("layer_norm", _set("math.statistics.1.of", "abs(x - mean)"), "files"),
    "outputs[].keepdim": ("logsumexp", _set("outputs.0.keepdim", True), "files"),
    "math.outputs": ("swiglu", _set("math.outputs", {"y": "silu(a) * b * 2.0"}), "files"),
    "math.rounding": ("swiglu", _set("math.rounding", "per_op"), "files"),
    "math.groups": ("layer_norm", _set("math.groups", "eps"), "validation"),
    "math.input_rank": ("layer_norm", _two_dim_rows, "files"),
    "math.triton.forward": (
        "rms_norm",
        _set("math.triton.forward", ["y = x * rstd * (offset + weight) * 2.0"]),
        "files",
    ),
    "math.triton.backward": (
        "rms_norm",
        lambda p: p.math.triton.backward.__setitem__(-1, "grad_weight = 2.0 * grad_y * x_hat"),
        "files",
    ),
    "math.triton.row_statistics": (
        "rms_norm",
        _set("math.triton.row_statistics", ["rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + 2.0 * eps)"]),
        "files",
    ),
    "math.triton.saved_row_statistics": (
        "rms_norm",
        lambda p: (
            p.math.triton.row_statistics.append("rms = 1.0 / rstd"),
            p.math.triton.saved_row_statistics.append("rms"),
        ),
        "files",
    ),
    "backward.in_place_gradients": ("swiglu", _set("backward.in_place_gradients", False), "files"),
    "tiling.block_elements": ("dyt", _set("tiling.block_elements", 8192), "files"),
    "tiling.max_block_cols": ("swiglu", _set("tiling.max_block_cols", 4096), "files"),
    "tiling.programs_per_sm": ("dyt", _set("tiling.programs_per_sm", 4), "files"),
    "tiling.num_warps": ("swiglu", _set("tiling.num_warps", 16), "files"),
    "tiling.backward_num_warps": ("swiglu", _set("tiling.backward_num_warps", 16), "files"),
    "tiling.forward_math": ("dyt", _set("tiling.forward_math", "core"), "files"),
    "tiling.backward_math": ("dyt", _set("tiling.backward_math", "libdevice"), "files"),
    "module.kind": (
        "swiglu",
        lambda p: (_set("module.kind", "elementwise")(p), _set("module.hidden_act", "")(p)),
        "files",
    ),
    "module.init_params[].name": ("leaky_relu_mul", _set("module.init_params.0.name", "slope"), "files"),
    "module.init_params[].default": ("dyt", _set("module.init_params.2.default", 0.25), "files"),
    "module.init_params[].optional": ("none_default", _set("module.init_params.2.optional", False), "files"),
    "module.size_param": ("dyt", _set("module.size_param", "dim"), "files"),
    "module.fixed": ("dyt", _set("module.fixed", ["init_alpha"]), "files"),
    "module.hidden_act": ("swiglu", _set("module.hidden_act", "silu"), "files"),
    "module.variants": ("swiglu", _set("module.variants", ["gemma4"]), "files"),
    "benchmark.providers": ("swiglu", _set("benchmark.providers", ["liger", "torch"]), "files"),
    "benchmark.fixed_config": ("swiglu", _set("benchmark.fixed_config", {"intermediate_size": 14336}), "measured"),
    "reference.source": (
        "swiglu",
        lambda p: setattr(p.reference, "source", p.reference.source.replace("F.silu(a) * b", "b * F.silu(a)")),
        "files",
    ),
    "reference.entry": (
        "swiglu",
        lambda p: (
            setattr(p.reference, "source", p.reference.source.replace("def swiglu(", "def swiglu_ref(")),
            setattr(p.reference, "entry", "swiglu_ref"),
        ),
        "files",
    ),
    "reference.kind": ("dyt", _set("reference.kind", "function"), "files"),
    "reference.origin": ("swiglu", _set("reference.origin", "somewhere else"), "files"),
    "test.cpu_shapes": ("swiglu", _set("test.cpu_shapes", [[7, 129]]), "files"),
    "test.gpu_shapes": ("swiglu", _set("test.gpu_shapes", [[8, 4096]]), "files"),
    "test.tolerances": (
        "swiglu",
        _set("test.tolerances", {"float32": [1e-6, 1e-6], "bfloat16": [1e-2, 1e-2]}),
        "files",
    ),
    "test.input_scale": ("swiglu", _set("test.input_scale", 3.0), "files"),
    "test.input_domain": ("swiglu", _set("test.input_domain", "positive"), "files"),
    "test.mlp_shapes": ("swiglu", _set("test.mlp_shapes", [[2, 16, 40]]), "files"),
    "inputs[].domain": ("kl_div", _set("inputs.1.domain", "positive"), "files"),
    "inputs[].per_class": ("cross_entropy", _set("inputs.0.per_class", True), "validation"),
    "inputs[].per_row": ("cross_entropy", _set("inputs.0.per_row", True), "validation"),
    "inputs[].attribute": ("weighted_cross_entropy", _set("inputs.2.attribute", ""), "files"),
    "inputs[].init_expr": ("weighted_cross_entropy", _set("inputs.2.init_expr", "torch.ones(8)"), "files"),
    "inputs[].broadcast": ("swiglu", _set("inputs.1.broadcast", "*"), "files"),
    # Read by a loss in two stages alone (test_sequence_stages.py generates them): elsewhere refused.
    "inputs[].sequence_shape": ("cross_entropy", _set("inputs.0.sequence_shape", "B"), "validation"),
    "math.loss.sequence": (
        "cross_entropy",
        _set("math.loss.sequence", "def sequence_stage(loss):\n    return loss.mean()\n"),
        "validation",
    ),
    "math.loss.sequence_groups": ("cross_entropy", _set("math.loss.sequence_groups", "pair"), "validation"),
    "inputs[].unsqueeze": ("hf_rope", _set("inputs.2.unsqueeze", ""), "files"),
    # A causal LM's labels shifted one token left: the Function shifts them before the kernel.
    "inputs[].shift": ("cross_entropy", _set("inputs.1.shift", "ignore_index"), "files"),
    "math.lanes.groups": ("hf_rope", _set("math.lanes.groups", []), "validation"),
    "module.function": ("hf_rope", _set("module.function", "liger_rotary_pos_emb"), "files"),
    "math.loss.reduction": ("cross_entropy", _set_reduction_sum, "files"),
    "math.loss.denominator": ("cross_entropy", _set("math.loss.denominator", "1"), "files"),
    "math.loss.denominator_min": ("cross_entropy", _set("math.loss.denominator_min", 1.0), "files"),
    "math.loss.choices[].value": ("kl_div", _set("math.loss.choices.0.value", "per_row"), "validation"),
    "math.loss.choices[].reduction": ("kl_div", _set("math.loss.choices.0.reduction", "sum"), "files"),
    "math.loss.choices[].denominator": ("kl_div", _set("math.loss.choices.0.denominator", "2"), "files"),
    # Per-row values of a reference that flattens its [B, T, V] logits come flat ([B*T]) under reduction none.
    "math.loss.flat_rows": ("cross_entropy", _set("math.loss.flat_rows", True), "files"),
    "math.loss.scales[].name": ("hinton", _rename_scale, "files"),
    "math.loss.scales[].denominator": ("hinton", _set("math.loss.scales.0.denominator", "1"), "files"),
    "math.loss.scales[].denominator_min": ("hinton", _set("math.loss.scales.0.denominator_min", 1.0), "files"),
    "math.lanes.count": ("rotate_half", _set("math.lanes.count", 3), "files"),
    "math.lanes.inputs": (
        "rotate_half",
        _set("math.lanes.inputs", {"x_0": "x[cols + n_cols]", "x_1": "x[cols]"}),
        "files",
    ),
    "math.lanes.outputs": (
        "rotate_half",
        _set("math.lanes.outputs", {"y_0": "y[2 * cols]", "y_1": "y[2 * cols + 1]"}),
        "files",
    ),
    "fused_linear.enabled": ("cross_entropy", _set("fused_linear.enabled", True), "fused"),
    "fused_linear.chunk_size": ("cross_entropy_fused", _set("fused_linear.chunk_size", 1024), "fused"),
}


def _outcome(profile: KernelProfile, what: str):
    if what == "validation":
        return validate_profile(profile)
    if what == "measured":
        return benchmark_size(profile)
    if what == "fused":  # the fused linear kernel new writes beside the loss
        return render_fused_linear(profile).files if profile.fused_linear.enabled else None
    rendered = render_kernel(profile)
    return rendered.files, rendered.functional_source


def test_every_field_of_the_schema_has_an_edit():
    fields = {
        path
        for path in _schema_paths(KernelProfile)
        if path.split(".")[0] not in INFORMATIONAL and not path.endswith(INFORMATIONAL_SUFFIX)
    }
    assert fields == set(EDITS)


@pytest.mark.parametrize("path", sorted(EDITS))
def test_editing_the_field_changes_the_output(path):
    name, edit, what = EDITS[path]
    original = PROFILES[name]()
    assert validate_profile(original) == []
    edited = copy.deepcopy(original)
    edit(edited)
    if what != "validation":
        assert validate_profile(edited) == [], f"the edit of {path} must keep the profile valid"
    assert _outcome(edited, what) != _outcome(original, what), f"editing {path} changed nothing"


def test_notes_change_nothing_generated():
    original = _example("swiglu")
    edited = copy.deepcopy(original)
    edited.notes.tier_reason = "another reason"
    edited.notes.gradient_formulas = {"grad_a": "0"}
    edited.notes.remarks = ["a remark"]
    assert _outcome(edited, "files") == _outcome(original, "files")


def test_a_hyper_parameter_s_default_is_the_module_s(tmp_path):
    """An edit of a hyper-parameter's default alone leaves the module's constructor at the old one: the two would
    compute different things by default, so the profile says so in a line naming both fields."""
    path = tmp_path / "eps_norm.py"
    path.write_text(
        "import torch\nfrom torch import nn\n\n\nclass EpsNorm(nn.Module):\n"
        "    def __init__(self, hidden_size: int = 64, eps: float = 1e-6):\n        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.ones(hidden_size))\n        self.eps = eps\n\n"
        "    def forward(self, x):\n"
        "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight\n"
    )
    profile = analyze(f"{path}:EpsNorm")
    assert validate_profile(profile) == []
    profile.hyperparameters[0].default = 1e-5
    assert validate_profile(profile) == [
        "module.init_params[1].default: 1e-06 for 'eps', where hyperparameters[0].default is 1e-05; the module and the "
        "functional would start at different values: make them equal"
    ]


@pytest.mark.parametrize("reference", ["leaky_relu_mul", "snake"])
def test_a_hyper_parameter_the_reference_does_not_take_is_refused(reference):
    """The tests call the reference with every hyper-parameter: one added to the profile alone (not to
    ``reference.source``) is a problem naming its path, not a generated test that fails with a TypeError."""
    profile = analyze(reference)
    assert validate_profile(profile) == []
    profile.hyperparameters.append(HyperParameter(name="scale", type="float", default=1.0))
    problems = validate_profile(profile)
    assert any(p.startswith(f"hyperparameters[{len(profile.hyperparameters) - 1}].name: ") for p in problems), problems
    assert any("does not take 'scale'" in p for p in problems), problems
