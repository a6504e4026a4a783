"""The analyzer: REF forms, tracing, classification, parameter discovery, errors, and for every tier-1 built-in
the synthesized Triton statements executed on torch (a ``tl`` shim, float64) against the reference and autograd."""

import dataclasses
import functools
import math
import textwrap

import pytest
import torch

from test.kernelgen.conftest import EXAMPLES
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.torch_tl import _tensor
from test.kernelgen.torch_tl import run_statements
from tools.kernelgen.analyze import AnalyzeError
from tools.kernelgen.analyze import analyze
from tools.kernelgen.analyze import list_builtin_references
from tools.kernelgen.analyze.classify import classify
from tools.kernelgen.analyze.closest import _op_names
from tools.kernelgen.analyze.load import _without_no_grad
from tools.kernelgen.analyze.load import load_reference
from tools.kernelgen.analyze.trace import trace_reference
from tools.kernelgen.derivation import elementwise_math
from tools.kernelgen.profile import BACKENDS
from tools.kernelgen.profile import dump_yaml
from tools.kernelgen.profile import load_profile
from tools.kernelgen.profile import load_yaml
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.render import render_kernel

TIER1_BUILTINS = [
    "clamp_mul",
    "dyt",
    "elu_select",
    "gated_sin",
    "geglu",
    "gelu_erf_mul",
    "hardtanh",
    "leaky_relu_mul",
    "log_ratio",
    "logsigmoid",
    "mish",
    "reglu",
    "relu_squared",
    "snake",
    "softplus_gate",
    "swiglu",
]
TIER2_BUILTINS = [
    "fused_add_rms_norm",
    "gemma_rms_norm",
    "l2_normalize",
    "layer_norm",
    "log_softmax",
    "rms_norm",
    "softmax",
]
EXPECTED_TIERS = {**{name: 1 for name in TIER1_BUILTINS}, **{name: 2 for name in TIER2_BUILTINS}}
EXPECTED_TIERS["cross_entropy"] = 3


@functools.lru_cache(maxsize=None)
def analyzed(name):
    """Sympy synthesis costs up to a second or two per reference: analyze each built-in once per session."""
    return analyze(name)


def write(tmp_path, filename, source):
    path = tmp_path / filename
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


# REF forms -----------------------------------------------------------------------------------------------------
def test_builtin_library_lists_required_references():
    names = list_builtin_references()
    assert set(EXPECTED_TIERS) <= set(names)
    assert names == sorted(names)


def test_builtin_reference_profile_identity():
    profile = analyzed("geglu")
    assert profile.operation_name == "geglu"
    assert profile.function_class_name == "LigerGELUMulFunction"
    assert profile.module_class_name == "LigerGEGLUMLP"
    assert profile.module.kind == "mlp"
    assert [p.name for p in profile.module.init_params] == ["config"]
    assert profile.reference.origin == "builtin:geglu"
    assert profile.reference.entry == "geglu"
    assert profile.reference.kind == "function"
    assert 'F.gelu(a, approximate="tanh") * b' in profile.reference.source
    assert profile.forward_computation == "y = gelu_tanh(a) * b"
    # The math is the reference's own formula, in canonical op names; rendering derives the Triton from it.
    assert profile.math.outputs == {"y": "gelu(a, approximate='tanh') * b"}
    assert profile.math.triton is None
    assert set(profile.notes.gradient_formulas) == {"grad_a", "grad_b"}
    assert "tanh" in elementwise_math(profile).precision_sensitive_ops
    assert profile.benchmark.providers == ["liger", "torch", "torch_compile"]
    assert profile.benchmark.fixed_config["hidden_size"] == 4096
    assert validate_profile(profile) == []


FILE_SOURCE = """
import torch


def scaled_swish(x, gate, beta: float = 1.5):
    return x * torch.sigmoid(beta * gate)
"""


def test_file_reference_single_function(tmp_path):
    path = write(tmp_path, "swish.py", FILE_SOURCE)
    profile = analyze(str(path))
    assert profile.operation_name == "scaled_swish"
    assert profile.reference.origin == str(path)
    assert profile.reference.entry == "scaled_swish"
    assert [t.name for t in profile.inputs] == ["x", "gate"]
    assert [(h.name, h.type, h.default, h.constexpr) for h in profile.hyperparameters] == [
        ("beta", "float", 1.5, False)
    ]
    assert profile.tier == 1
    assert profile.forward_computation == "y = x * sigmoid(beta * gate)"
    assert validate_profile(profile) == []


def test_a_reference_s_tiling_hint_becomes_the_profile_s_tiling(tmp_path):
    """``KERNELGEN = {"tiling": {...}}`` in a reference file pins launch settings ``tune`` found (the rest keep the
    template's defaults); a field the tiling does not have is one line naming the file."""
    hinted = FILE_SOURCE + '\nKERNELGEN = {"tiling": {"backward_math": "libdevice", "max_block_cols": 4096}}\n'
    profile = analyze(str(write(tmp_path, "hinted.py", hinted)))
    assert (profile.tiling.backward_math, profile.tiling.max_block_cols) == ("libdevice", 4096)
    assert profile.tiling.forward_math is None and profile.tiling.block_elements == 4096
    assert validate_profile(profile) == []
    wrong = FILE_SOURCE + '\nKERNELGEN = {"tiling": {"fast_math": True}}\n'
    with pytest.raises(AnalyzeError, match=r"KERNELGEN hint 'tiling' has unknown fields \['fast_math'\]"):
        analyze(str(write(tmp_path, "wrong.py", wrong)))


def test_file_symbol_reference_and_name_override(tmp_path):
    path = write(
        tmp_path,
        "acts.py",
        """
        import torch
        import torch.nn as nn


        def helper_gate(a, b):
            return torch.tanh(a) * b


        class SquarePlusOne(nn.Module):
            def forward(self, x):
                return x * x + 1.0
        """,
    )
    profile = analyze(f"{path}:SquarePlusOne")
    assert profile.operation_name == "square_plus_one"
    assert profile.reference.kind == "module"
    assert profile.reference.entry == "SquarePlusOne"
    renamed = analyze(f"{path}:helper_gate", name="tanh_gate")
    assert renamed.operation_name == "tanh_gate"
    assert renamed.function_class_name == "LigerTanhGateFunction"
    assert renamed.tier == 1


def test_stdin_source_reference():
    profile = analyze("-", stdin_source=textwrap.dedent(FILE_SOURCE))
    assert profile.reference.origin == "<stdin>"
    assert profile.operation_name == "scaled_swish"
    assert profile.reference.source == textwrap.dedent(FILE_SOURCE)
    by_symbol = analyze("-:scaled_swish", stdin_source=textwrap.dedent(FILE_SOURCE), name="swish_gate")
    assert by_symbol.operation_name == "swish_gate"


def test_cli_reads_a_stdin_reference_with_a_symbol():
    result = run_kernelgen(
        "analyze", "--name", "swish_gate", "--", "-:scaled_swish", stdin=textwrap.dedent(FILE_SOURCE)
    )
    assert result.returncode == 0, result.stderr
    assert "operation_name: swish_gate" in result.stdout
    empty = run_kernelgen("analyze", "--", "-:scaled_swish", stdin="")
    assert empty.returncode == 2
    assert empty.stderr.strip() == "kernelgen: error: reference '-': nothing on standard input"


def test_stdin_without_source_is_an_error():
    with pytest.raises(AnalyzeError, match="stdin"):
        analyze("-")


# Bad REF forms -------------------------------------------------------------------------------------------------
def analyze_error(reference: str) -> str:
    """The message of the AnalyzeError ``analyze(reference)`` raises, which must be one line."""
    with pytest.raises(AnalyzeError) as info:
        analyze(reference)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.py"
    message = analyze_error(str(missing))
    assert message == f"{missing}: no such file"


def test_an_empty_symbol_and_a_profile_given_as_a_reference_say_what_to_give(tmp_path):
    path = write(tmp_path, "swish.py", FILE_SOURCE)
    assert analyze_error(f"{path}:").startswith(f"no symbol after ':' in '{path}:'")
    profile = write(tmp_path, "swish.yaml", "operation_name: swish\n")
    assert (
        analyze_error(str(profile))
        == f"{profile}: is a YAML file, not a Python reference: a profile is given with --profile"
    )


def test_unknown_builtin_lists_the_available_ones():
    message = analyze_error("not_a_kernel")
    assert "unknown reference 'not_a_kernel'" in message and "geglu" in message


def test_missing_symbol_names_file_and_candidates(tmp_path):
    path = write(tmp_path, "swish.py", FILE_SOURCE)
    message = analyze_error(f"{path}:Nope")
    assert message.startswith(f"{path}: no symbol 'Nope'")
    assert "scaled_swish" in message


def test_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "broken.py", "import torch\n\n\ndef f(x):\n    return x +* 2\n")
    message = analyze_error(str(path))
    assert message.startswith(f"{path}:5: syntax error")


def test_error_while_executing_names_the_line(tmp_path):
    path = write(tmp_path, "raises.py", "import torch\n\nSCALE = undefined_name * 2\n\n\ndef f(x):\n    return x\n")
    message = analyze_error(str(path))
    assert message.startswith(f"{path}:3: executing the reference failed: NameError")


def test_ambiguous_file_asks_for_a_symbol(tmp_path):
    path = write(
        tmp_path,
        "two.py",
        """
        import torch


        def first(x):
            return torch.exp(x)


        def second(x):
            return torch.log(x)
        """,
    )
    message = analyze_error(str(path))
    assert "several candidates (first, second)" in message
    assert f"{path}:first" in message


def test_several_candidates_on_stdin_name_the_option_that_picks_one():
    """``--reference -:first`` would read as an option: the hint spells it with ``=``."""
    source = "import torch\n\n\ndef first(x):\n    return torch.exp(x)\n\n\ndef second(x):\n    return x * 2.0\n"
    with pytest.raises(AnalyzeError, match=r"several candidates \(first, second\); pick one with --reference=-:first"):
        analyze("-", stdin_source=source)


def test_helpers_the_entry_calls_are_not_candidates(tmp_path):
    """A public helper function, a lambda and a module class that the entry reads by name leave it the one entry."""
    path = write(
        tmp_path,
        "helpers.py",
        """
        import torch
        import torch.nn as nn

        swish = lambda t, beta=1.0: t * torch.sigmoid(beta * t)


        def scaled_tanh(t):
            return 2.0 * torch.tanh(t)


        class Gate(nn.Module):
            @staticmethod
            def act(t):
                return scaled_tanh(t) + swish(t)

            def forward(self, x, y):
                return self.act(x) * y
        """,
    )
    assert analyze(str(path)).reference.entry == "Gate"


def test_arguments_defaulting_to_none_are_inputs_where_read_as_tensors(tmp_path):
    """HF's gated norms take gate=None and read it as a tensor: an input. An argument only passed on by keyword (an
    option of the call) or never read (position_ids=None) keeps its default."""
    path = write(
        tmp_path,
        "gated.py",
        """
        import torch
        import torch.nn.functional as F


        def gated(x, gate=None, position_ids=None, weight=None):
            if gate is not None:
                x = x * F.silu(gate.to(torch.float32))
            return F.layer_norm(x, (x.shape[-1],), weight=weight)
        """,
    )
    profile = analyze(str(path))
    assert [t.name for t in profile.inputs] == ["x", "gate"]
    # Left out, but said: a class weight or norm weight passed on as None is no argument of the kernel.
    assert (
        "interface: weight (None by default) reaches F.layer_norm only as weight= (line 8): traced at None, the "
        "kernel computes without it and takes no weight; give it no default to make it a tensor input"
    ) in profile.notes.remarks
    assert (
        "interface: gate (None by default) is read as a tensor: the kernel takes it always, and the reference's path "
        "without it is not generated"
    ) in profile.notes.remarks


MASKED_REVERSE_KL = """
import torch.nn.functional as F


def reverse_kl(student, teacher, labels=None, ignore_index: int = -100):
    s = F.log_softmax(student, dim=-1)
    per_token = (s.exp() * (s - F.log_softmax(teacher, dim=-1))).sum(-1)
    mask = (labels != ignore_index).float()
    return (per_token * mask).sum() / mask.sum()


def labels_last(student, teacher, ignore_index: int = -100, labels=None):
    return reverse_kl(student, teacher, labels, ignore_index)
"""


def test_an_argument_defaulting_to_none_compared_by_value_is_an_input(tmp_path):
    """``labels != ignore_index`` reads labels as a tensor (traced as None, the comparison gave a Python bool)."""
    path = write(tmp_path, "reverse_kl.py", MASKED_REVERSE_KL)
    assert [t.name for t in analyze(f"{path}:reverse_kl").inputs] == ["student", "teacher", "labels"]


def test_an_argument_defaulting_to_none_read_as_a_tensor_after_a_hyper_parameter_is_one_line(tmp_path):
    path = write(tmp_path, "reverse_kl.py", MASKED_REVERSE_KL)
    message = analyze_error(f"{path}:labels_last")
    assert "'labels' defaults to None and is read as a tensor after the hyper-parameter 'ignore_index'" in message


def test_an_argument_defaulting_to_none_that_the_trace_fails_on_is_named(tmp_path):
    path = write(
        tmp_path,
        "optional.py",
        """
        import torch.nn.functional as F


        def scaled(x, weight=None):
            return F.layer_norm(x, (x.shape[-1],), weight=weight) * weight.sum()
        """,
    )
    message = analyze_error(str(path))
    assert message.startswith(f"{path}:5: tracing failed: AttributeError")
    assert "'weight' defaults to None and is traced so; a tensor input takes no default" in message


def test_file_without_candidates(tmp_path):
    path = write(tmp_path, "empty.py", "SCALE = 2.0\n")
    with pytest.raises(AnalyzeError, match="defines no public function"):
        analyze(str(path))


# Unsupported constructs --------------------------------------------------------------------------------------
def test_unknown_op_names_op_and_line(tmp_path):
    path = write(
        tmp_path,
        "bessel.py",
        """
        import torch


        def bessel_gate(x, y):
            scaled = x * 2.0
            return torch.special.bessel_j0(scaled) * y
        """,
    )
    message = analyze_error(str(path))
    assert message.startswith(f"{path}:6: `torch.special.bessel_j0`")
    assert "is not an op kernelgen knows" in message
    assert "--profile" in message


@pytest.mark.parametrize(
    "body, expected",
    [
        # an argument that defaults to None is an optional tensor input: `or` on it is control flow on a tensor
        (
            "def scale(x, eps=None):\n    eps = eps or 1e-6\n",
            "'eps' defaults to None and is traced as an optional tensor input",
        ),
        # HF's default epsilon
        ("def scale(x):\n    eps = torch.finfo(x.dtype).eps\n", "torch.finfo(x.dtype) cannot be traced"),
        # a shape unpacked into a view (QK-norm over heads)
        ("def scale(x):\n    x = x.view(*x.shape[:-1], 2, -1)\n    eps = 1e-6\n", "a traced value cannot be unpacked"),
    ],
)
def test_what_tracing_cannot_take_is_named_with_its_fix(tmp_path, body, expected):
    path = tmp_path / "scale.py"
    path.write_text(f"import torch\n\n\n{body}    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n")
    message = analyze_error(str(path))
    assert message.startswith(f"{path}:5: ") and expected in message, message


def test_a_torch_distribution_is_named_with_the_math_to_write_instead(tmp_path):
    """``Categorical(logits=x)`` validates its values in Python: the refusal names the class, not torch.where."""
    source = (
        "from torch.distributions import Categorical\n\n\ndef entropy(logits):\n"
        "    return Categorical(logits=logits).entropy().mean()\n"
    )
    message = analyze_error(str(write(tmp_path, "entropy.py", source)))
    assert "entropy.py:5: torch.distributions.Categorical cannot be traced" in message
    assert "-(p * log_p).sum(-1)" in message and "torch.where" not in message


def test_data_dependent_control_flow_names_line(tmp_path):
    path = write(
        tmp_path,
        "branchy.py",
        """
        import torch


        def branchy(x):
            if x.sum() > 0:
                return x
            return -x
        """,
    )
    message = analyze_error(str(path))
    assert message.startswith(f"{path}:5: data-dependent Python control flow")
    assert "torch.where" in message


def test_control_flow_on_a_run_time_hyper_parameter_names_it(tmp_path):
    path = write(
        tmp_path,
        "hyper_branch.py",
        """
        import torch


        def leaky_gate(x, y, alpha: float = 0.1):
            return torch.sigmoid(x) * y if alpha == 0 else torch.sigmoid(x) * y + alpha * x
        """,
    )
    message = analyze_error(str(path))
    assert message.startswith(f"{path}:5: Python control flow on the hyper-parameter 'alpha'")
    assert "torch.where" in message


def test_branching_on_a_module_s_float_attribute_names_its_line(tmp_path):
    """``if self.leak:`` tests the attribute's own input, made before any line of the forward ran: the refusal still
    names the ``if``'s line."""
    source = (
        "import torch\nimport torch.nn as nn\n\n\nclass Truthy(nn.Module):\n"
        "    def __init__(self, leak: float = 0.0):\n        super().__init__()\n        self.leak = leak\n\n"
        "    def forward(self, x):\n        y = torch.relu(x)\n        if self.leak:\n"
        "            y = y + self.leak * torch.clamp(x, max=0.0)\n        return y\n"
    )
    path = write(tmp_path, "truthy.py", source)
    assert analyze_error(f"{path}:Truthy").startswith(f"{path}:12: Python control flow on the hyper-parameter 'leak'")


def test_unsynthesizable_element_wise_use_names_line(tmp_path):
    path = write(tmp_path, "fmodx.py", "import torch\n\n\ndef fmod_x(x):\n    return torch.fmod(x, 2.0)\n")
    message = analyze_error(str(path))
    assert message.startswith(f"{path}:5: `torch.fmod` is not an op kernelgen knows")


def test_a_power_with_a_tensor_exponent_is_element_wise(tmp_path):
    path = write(tmp_path, "powx.py", "import torch\n\n\ndef pow_x(x):\n    return torch.pow(2.0, x)\n")
    profile = analyze(str(path))
    assert profile.tier == 1 and profile.math.outputs["y"] == "2.0 ** x"


def test_an_input_read_only_through_detach_takes_no_gradient(tmp_path):
    source = "import torch\n\n\ndef gate(x, y):\n    return x * torch.sigmoid(y).detach()\n"
    profile = analyze(str(write(tmp_path, "gate.py", source)))
    assert [(t.name, t.requires_grad) for t in profile.inputs] == [("x", True), ("y", False)]
    assert profile.math.outputs["y_out"] == "x * detach(sigmoid(y))"


def test_module_needing_unknown_init_argument(tmp_path):
    path = write(
        tmp_path,
        "needs.py",
        """
        import torch.nn as nn


        class Scaled(nn.Module):
            def __init__(self, factor_table):
                super().__init__()
                self.factor_table = factor_table

            def forward(self, x):
                return x * 2.0
        """,
    )
    with pytest.raises(AnalyzeError, match="__init__ needs 'factor_table'.*init_args"):
        analyze(str(path))


# Classification ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(EXPECTED_TIERS))
def test_builtin_classification(name):
    profile = analyzed(name)
    assert profile.tier == EXPECTED_TIERS[name]
    assert profile.notes.tier_reason.endswith(".")
    assert profile.tier_description
    assert profile.notes.closest_existing_kernel
    # Every profile must dump to YAML and read back, complete or not.
    again = load_yaml(dump_yaml(profile), validate=False)
    assert again.tier == profile.tier and again.reference.source == profile.reference.source


def test_tier_reasons_name_the_deciding_ops():
    assert analyzed("swiglu").notes.tier_reason.startswith("only element-wise ops (silu, mul)")
    assert "`.mean()` (line 17) reduces each row along the last dimension" in analyzed("rms_norm").notes.tier_reason
    assert "`torch.softmax`" in analyzed("softmax").notes.tier_reason
    assert (
        "`F.cross_entropy` (line 17) is a loss over the class dimension" in analyzed("cross_entropy").notes.tier_reason
    )


def test_tier3_math_is_statistics_per_row_and_a_reduction():
    profile = analyzed("cross_entropy")
    assert profile.math.triton is None and list(profile.math.outputs) == ["loss"]
    assert {s.reduce for s in profile.math.statistics} == {"max", "sum"}
    assert profile.math.loss.reduction == "reduction"
    assert profile.math.loss.denominator == "where(ignore_index != target, 1, 0)"


def test_cross_entropy_inputs_hyperparameters_and_kind():
    profile = analyzed("cross_entropy")
    logits, target = profile.inputs
    assert (logits.name, logits.dtype, logits.requires_grad) == ("logits", "same", True)
    assert (target.name, target.dtype, target.requires_grad) == ("target", "int64", False)
    hypers = {h.name: h for h in profile.hyperparameters}
    assert (hypers["ignore_index"].type, hypers["ignore_index"].default) == ("int", -100)
    assert (hypers["label_smoothing"].type, hypers["label_smoothing"].constexpr) == ("float", False)
    assert (hypers["reduction"].type, hypers["reduction"].constexpr) == ("str", True)
    assert profile.module.kind == "loss"


@pytest.mark.parametrize(
    "body, tier, fragment",
    [
        ("return x.sum(dim=0)", 3, "reduces over dim 0"),
        ("return x - x.mean()", 3, "reduces the whole tensor"),
        ("return torch.matmul(x, x.transpose(-1, -2))", 3, "`torch.matmul`"),
        ("return torch.log_softmax(x, -1).logsumexp(-1, keepdim=True).softmax(-1)", 3, "not the inputs' row"),
        # Chains of row reductions are one row program: softmax of log_softmax is two maxima and two sums.
        ("return torch.softmax(torch.log_softmax(x, -1) * 2.0, -1)", 2, "reduce each row"),
        ("return x.sum(-1), x.amax(-1, keepdim=True)", 2, "reduce each row"),
        ("return x / x.norm(dim=-1, keepdim=True)", 2, "reduces each row"),
        # A reduction of a reduction (or of a flattened tensor) does not reduce a row of the inputs: the last two
        # are losses instead (per-row sums, a sum of everything); the first sums some rows of [B, T, H] inputs.
        ("return x.sum(-1).sum(-1)", 3, "`.sum()` (line 5) reduces a last dimension that is not the inputs' row"),
        ("return x.sum(-1, keepdim=True).sum(-1)", 3, "not the inputs' row"),
        ("return x.flatten().sum(-1)", 3, "not the inputs' row"),
        ("return x.amax(-1, keepdim=True).sum(-1, keepdim=True) + x", 3, "not the inputs' row"),
        ("return x.float().exp().type_as(x)", 1, "only element-wise ops (exp)"),
    ],
)
def test_classification_of_small_references(tmp_path, body, tier, fragment):
    path = write(tmp_path, "ref.py", f"import torch\n\n\ndef ref(x):\n    {body}\n")
    classification = classify(trace_reference(load_reference(str(path))))
    assert classification.tier == tier
    assert fragment in classification.reason
    if tier == 3 and body in LOSSES_OF_ROWS:
        assert analyze(str(path)).math.loss.reduction == LOSSES_OF_ROWS[body]
    elif tier == 3 and body in TWO_STAGES:  # per-token statistics, then math over tokens (issue 44)
        assert analyze(str(path)).math.loss.sequence.startswith("def sequence_stage(")
    elif tier == 3:  # no loss over rows: analysis stops on one line that names the op's line
        with pytest.raises(AnalyzeError) as caught:
            analyze(str(path))
        assert "ref.py:5:" in str(caught.value) and "\n" not in str(caught.value)


LOSSES_OF_ROWS = {
    "return x.sum(-1, keepdim=True).sum(-1)": "none",
    "return x.flatten().sum(-1)": "sum",
}
# A per-token statistic of the vocabulary, then a sum over the tokens of each sequence: a loss in two stages.
TWO_STAGES = {"return x.sum(-1).sum(-1)"}


def test_casts_are_noted(tmp_path):
    path = write(tmp_path, "cast.py", "import torch\n\n\ndef ref(x):\n    return x.float().exp().type_as(x)\n")
    profile = analyze(str(path))
    assert profile.notes.casts == [".float() at line 5", ".type_as() at line 5"]


# Parameter and hyper-parameter discovery ---------------------------------------------------------------------
def test_dyt_parameters():
    profile = analyzed("dyt")
    params = {(p.name, p.shape, p.init, p.init_value, p.init_arg, p.enabled_by) for p in profile.parameters}
    assert params == {
        ("alpha", "scalar", "constant", None, "init_alpha", ""),  # starts at the constructor's init_alpha
        ("gamma", "channel", "ones", None, "", ""),
        ("beta", "channel", "zeros", None, "", "beta"),  # DyT(beta=False) has none: it computes as zeros
    }
    assert profile.hyperparameters == []  # init_alpha only initialises alpha
    assert [(p.name, p.default) for p in profile.module.init_params] == [
        ("hidden_size", None),
        ("beta", True),
        ("init_alpha", 0.5),
    ]
    assert profile.module.size_param == "hidden_size"
    # beta is only added: the backward reads neither it nor anything but x, alpha and gamma.
    assert elementwise_math(profile).backward_uses == ["alpha", "gamma", "grad_y", "x"]
    assert profile.forward_computation == "y = gamma * tanh(alpha * x) + beta"
    assert profile.function_class_name == "LigerDyTFunction"


def test_constructor_arguments_are_linked_only_when_the_probe_proves_it(tmp_path):
    """A flag whose absence is not the parameter's initial value (a scale that becomes 2.0, not its ones), and a
    float the parameter does not start at, stay unlinked; a tier-2 reference's optional weight is noted, not
    made optional (its templates take every parameter)."""
    source = (
        "import torch\nimport torch.nn as nn\n\n\n"
        "class Scaled(nn.Module):\n"
        "    def __init__(self, hidden_size: int, learn: bool = True, start: float = 0.25):\n"
        "        super().__init__()\n"
        "        self.scale = nn.Parameter(torch.ones(hidden_size)) if learn else None\n"
        "        self.shift = nn.Parameter(torch.full((1,), 0.5))\n"
        "        self.start = start\n\n"
        "    def forward(self, x):\n"
        "        scale = self.scale if self.scale is not None else 2.0\n"
        "        return scale * x + self.shift\n"
    )
    profile = analyze(str(write(tmp_path, "scaled.py", source)))
    assert [(p.name, p.init_arg, p.enabled_by) for p in profile.parameters] == [("scale", "", ""), ("shift", "", "")]
    norm = (
        "import torch\nimport torch.nn as nn\n\n\n"
        "class Norm(nn.Module):\n"
        "    def __init__(self, hidden_size: int, affine: bool = True):\n"
        "        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.ones(hidden_size)) if affine else None\n\n"
        "    def forward(self, x):\n"
        "        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
        "        return y * self.weight if self.weight is not None else y\n"
    )
    profile = analyze(str(write(tmp_path, "norm.py", norm)))
    assert profile.tier == 2 and profile.parameters[0].enabled_by == ""
    assert any("weight is optional in the reference" in remark for remark in profile.notes.remarks)


SIZE_FOLLOWING_START = """
import math

import torch
import torch.nn as nn


class ScaledUnitNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        start = 1.0 / math.sqrt(dim)
        self.g = nn.Parameter(torch.ones(1) * start * dim)
        self.eps = eps

    def forward(self, x):
        return x / x.norm(dim=-1, keepdim=True).clamp(min=self.eps) * self.g
"""


def test_a_starting_value_that_follows_the_constructors_size_is_written_as_the_reference_writes_it(tmp_path):
    """``g`` starts at sqrt(dim): the traced size's 2.83 would start every other size wrong. The module writes the
    reference's expression (its local written out, math imported) and starts where the reference does at any size;
    a value the text cannot say (read from a helper) is refused, naming the parameter."""
    profile = analyze(str(write(tmp_path, "scaled_unit_norm.py", SIZE_FOLLOWING_START)))
    (g,) = profile.parameters
    assert g.init_expr == "torch.ones(1) * (1.0 / math.sqrt(dim)) * dim", g
    module_source = render_kernel(profile).files["src/liger_kernel/transformers/scaled_unit_norm.py"]
    assert module_source.startswith("import math\n\nimport torch\n"), module_source[:80]
    namespace = {}
    exec(compile(module_source.replace("from liger_kernel.ops import", "# "), "module", "exec"), namespace)
    module = namespace["LigerScaledUnitNorm"](dim=50)
    assert torch.allclose(module.g.detach(), torch.full((1,), math.sqrt(50)))
    assert profile.module.fixed == []  # dim is followed by the start written as the reference writes it
    helper = SIZE_FOLLOWING_START.replace("start = 1.0 / math.sqrt(dim)", "start = _start(dim)") + (
        "\n\ndef _start(dim):\n    return 1.0 / math.sqrt(dim)\n"
    )
    with pytest.raises(AnalyzeError, match="the parameter 'g' starts at 2.82843 when the module is built with dim=8"):
        analyze(str(write(tmp_path, "helper_start.py", helper)))


HELD_ACTIVATIONS = """
import torch.nn as nn


class HeldActivations(nn.Module):
    def __init__(self, beta=2.0, alpha=0.5, slope=0.3):
        super().__init__()
        self.sp = nn.Softplus(beta=beta, threshold=10.0)
        self.elu = nn.ELU(alpha=alpha)
        self.lrelu = nn.LeakyReLU(negative_slope=slope)

    def forward(self, x, y):
        return self.sp(x) * self.elu(y) + self.lrelu(x - y)
"""


def test_the_floats_held_activation_modules_keep_follow_the_constructor(tmp_path):
    """nn.Softplus(beta), nn.ELU(alpha), nn.LeakyReLU(slope): each option is a number of the graph that follows its
    constructor argument, all three at once (one argument's numbers replaced must not hide the others')."""
    profile = analyze(str(write(tmp_path, "held_activations.py", HELD_ACTIVATIONS)))
    assert [hp.name for hp in profile.hyperparameters] == ["beta", "alpha", "slope"]
    assert profile.module.fixed == []
    formula = profile.math.outputs["y_out"]
    assert "beta=beta" in formula and "alpha=alpha" in formula and "negative_slope=slope" in formula


@pytest.mark.parametrize(
    "body",
    [
        "    if scale is None:\n        scale = 1.5\n",
        "    scale = 1.5 if scale is None else scale\n",
        "    scale = scale if scale is not None else 1.5\n",
    ],
)
def test_an_argument_set_to_a_number_where_absent_is_a_hyper_parameter_of_that_default(tmp_path, body):
    """``def f(x, scale=None)`` that sets scale to 1.5 when absent takes a number, not an optional tensor."""
    source = f"import torch\n\n\ndef scaled_tanh(x, scale=None):\n{body}    return torch.tanh(x * scale)\n"
    profile = analyze(str(write(tmp_path, "scaled_tanh.py", source)))
    assert [t.name for t in profile.inputs] == ["x"]
    assert [(hp.name, hp.type, hp.default) for hp in profile.hyperparameters] == [("scale", "float", 1.5)]


NONE_HELD = """
import torch
import torch.nn as nn


class NoneTemperature(nn.Module):
    def __init__(self, temperature=None):
        super().__init__()
        if temperature is None:
            temperature = 2.0
        self.temperature = temperature

    def forward(self, x):
        return torch.log_softmax(x / self.temperature, dim=-1)
"""


def test_a_module_argument_defaulting_to_none_holds_the_number_the_reference_sets_in_its_place(tmp_path):
    profile = analyze(str(write(tmp_path, "none_temperature.py", NONE_HELD)))
    assert [(hp.name, hp.default) for hp in profile.hyperparameters] == [("temperature", 2.0)]
    module = render_kernel(profile).files["src/liger_kernel/transformers/none_temperature.py"]
    assert "def __init__(self, temperature=None):" in module
    assert "self.temperature = 2.0 if temperature is None else temperature" in module


LOCAL_START = """
import math

import torch
import torch.nn as nn


class LocalStart(nn.Module):
    def __init__(self, hidden: int = 32, init: float = 0.5):
        super().__init__()
        w = torch.full((hidden,), init)
        w = w * 2.0 + math.log(hidden)
        self.weight = nn.Parameter(w)

    def forward(self, x):
        return torch.tanh(x) * self.weight
"""


def test_an_argument_read_only_by_a_start_written_as_the_reference_writes_it_is_taken_at_any_value(tmp_path):
    """``init`` sets nothing but the weight's start, which the module builds with it: not held at its default."""
    profile = analyze(str(write(tmp_path, "local_start.py", LOCAL_START)))
    assert profile.parameters[0].init_expr == "torch.full((hidden,), init) * 2.0 + math.log(hidden)"
    assert profile.module.fixed == []


def test_leaky_relu_mul_hyperparameter():
    profile = analyzed("leaky_relu_mul")
    (slope,) = profile.hyperparameters
    assert (slope.name, slope.type, slope.default, slope.constexpr) == ("negative_slope", "float", 0.01, False)
    assert "negative_slope" in profile.math.outputs["y"]
    assert any("negative_slope" in statement for statement in elementwise_math(profile).forward)
    assert profile.parameters == []


def test_rms_norm_module_eps_and_weight(tmp_path):
    path = write(
        tmp_path,
        "norm.py",
        """
        import torch
        import torch.nn as nn


        class MyRMSNorm(nn.Module):
            def __init__(self, dim, eps=1e-5):
                super().__init__()
                self.eps = eps
                self.weight = nn.Parameter(torch.ones(dim))

            def forward(self, hidden_states):
                variance = hidden_states.float().pow(2).mean(-1, keepdim=True)
                return self.weight * (hidden_states * torch.rsqrt(variance + self.eps))
        """,
    )
    profile = analyze(str(path))
    assert profile.operation_name == "my_rms_norm"
    assert profile.tier == 2
    assert [(h.name, h.type, h.default) for h in profile.hyperparameters] == [("eps", "float", 1e-5)]
    assert [(p.name, p.shape, p.init) for p in profile.parameters] == [("weight", "channel", "ones")]
    assert profile.module.kind == "norm"
    assert profile.module.size_param == "dim"
    assert "eps" in profile.forward_computation and "rsqrt" in profile.forward_computation
    assert profile.test.input_domain == "real"  # rsqrt of a mean of squares plus eps is always defined


def test_positive_input_domain(tmp_path):
    path = write(tmp_path, "root.py", "import torch\n\n\ndef root_gate(x, y):\n    return torch.sqrt(x) * y\n")
    assert analyze(str(path)).test.input_domain == "positive"
    assert analyzed("logsigmoid").test.input_domain == "real"


def test_string_hyperparameter_is_constexpr_and_specialized(tmp_path):
    path = write(
        tmp_path,
        "gelu_mul.py",
        """
        import torch.nn.functional as F


        def gelu_mul(a, b, approximate: str = "none"):
            return F.gelu(a, approximate=approximate) * b
        """,
    )
    profile = analyze(str(path))
    (hyper,) = profile.hyperparameters
    assert (hyper.name, hyper.type, hyper.default, hyper.constexpr) == ("approximate", "str", "none", True)
    assert profile.notes.specialized == {"approximate": "none"}
    assert "erf" in " ".join(elementwise_math(profile).forward)


# Tier 1 math, executed on torch ------------------------------------------------------------------------------
# Hyper-parameters set away from their defaults prove they reach the math as runtime values.
HYPER_OVERRIDES = {"leaky_relu_mul": {"negative_slope": 0.2}, "softplus_gate": {"beta": 2.0, "threshold": 3.0}}
HYPER_OVERRIDES["hardtanh"] = {"min_val": -0.5, "max_val": 0.75}
HYPER_OVERRIDES["clamp_mul"] = {"limit": 0.8}


def reference_callable(profile, params, cols):
    loaded = load_reference(profile.reference.origin.removeprefix("builtin:"))
    if loaded.kind == "function":
        return loaded.obj
    module = loaded.obj(**{profile.module.size_param: cols}).double()
    for name, value in params.items():
        module.get_parameter(name).data.copy_(value)
    return module


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", TIER1_BUILTINS)
def test_tier1_math_matches_reference_and_autograd(name, backend):
    """The statements of either kernel language (the same derivation, printed as Triton or as TileLang)."""
    profile = dataclasses.replace(analyzed(name), backend=backend)
    generator = torch.Generator().manual_seed(len(name))
    rows, cols = 4, 5
    inputs = {t.name: torch.randn(rows, cols, generator=generator, dtype=torch.float64) * 2 for t in profile.inputs}
    if profile.test.input_domain == "positive":  # logs and roots of the inputs: draw them in their domain
        inputs = {key: value.abs() + 0.1 for key, value in inputs.items()}
    params = {}
    for param in profile.parameters:
        shape = (cols,) if param.shape == "channel" else ()
        # Away from 0 so snake's 1/alpha stays tame; random so the gradients test more than the init value.
        params[param.name] = torch.rand(shape, generator=generator, dtype=torch.float64) + 0.5
    hypers = {h.name: h.default for h in profile.hyperparameters}
    hypers.update(HYPER_OVERRIDES.get(name, {}))

    leaves = {key: value.clone().requires_grad_(True) for key, value in {**inputs, **params}.items()}
    reference = reference_callable(profile, params, cols)
    if profile.reference.kind == "function":
        expected = reference(*[leaves[t.name] for t in profile.inputs], **hypers)
    else:
        expected = reference(*[leaves[t.name] for t in profile.inputs])
        leaves.update({key: reference.get_parameter(key) for key in params})
    (output,) = profile.outputs
    grad_output = torch.randn(rows, cols, generator=generator, dtype=torch.float64)
    differentiable = [t.name for t in profile.inputs] + list(params)
    expected_grads = torch.autograd.grad(expected, [leaves[key] for key in differentiable], grad_output)

    math = elementwise_math(profile)
    forward_scope = run_statements(math.forward, {**inputs, **params, **hypers})
    torch.testing.assert_close(
        _tensor(forward_scope[output.name]).expand(rows, cols), expected.detach(), rtol=1e-6, atol=1e-9
    )

    backward_scope = run_statements(math.backward, {**inputs, **params, **hypers, f"grad_{output.name}": grad_output})
    for key, want in zip(differentiable, expected_grads):
        got = _tensor(backward_scope[f"grad_{key}"]).expand(rows, cols)
        if key in params:
            # The kernel stores per-element contributions; the template sums them over rows (or everything).
            # A scalar parameter may be held as shape () or (1,) (DyT's alpha, as Liger's).
            got = got.sum(dim=0) if params[key].dim() == 1 else got.sum().reshape(want.shape)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-9, msg=lambda m, key=key: f"{name} grad_{key}: {m}")


@pytest.mark.parametrize("name", TIER1_BUILTINS)
def test_tier1_profiles_validate_and_round_trip(name):
    profile = analyzed(name)
    assert validate_profile(profile) == []
    again = load_yaml(dump_yaml(profile))
    assert again == profile
    assert elementwise_math(again).backward == elementwise_math(profile).backward


def test_archived_kernel_sharing_the_most_ops_is_named_closest(tmp_path):
    knowledge = tmp_path / ".claude" / "skills" / "liger-kernel-gen" / "knowledge"
    for archived in ("mish", "logsigmoid"):
        (knowledge / archived).mkdir(parents=True)
        (knowledge / archived / "profile.yaml").write_text(dump_yaml(analyze(archived)))
    # softplus_gate computes softplus(a) * b: its kernels share log(1 + exp(-|u|)) and sigmoid with logsigmoid's,
    # where mish's compute tanh(softplus(x)) and sigmoid(x) from one exp(x) and divisions.
    assert analyze("softplus_gate", knowledge_root=tmp_path).notes.closest_existing_kernel == "logsigmoid"
    # A reference whose hints name its closest kernel keeps it; with no archive the tier default stays.
    assert analyze("reglu", knowledge_root=tmp_path).notes.closest_existing_kernel == "swiglu"
    assert analyze("softplus_gate", knowledge_root=tmp_path / "none").notes.closest_existing_kernel == "swiglu"


def test_archived_tier2_kernel_is_named_closest_by_the_functions_its_statements_call(tmp_path):
    knowledge = tmp_path / ".claude" / "skills" / "liger-kernel-gen" / "knowledge"
    archived = {
        "rms_norm_ex": load_profile(EXAMPLES / "rms_norm.yaml").renamed("rms_norm_ex"),
        "log_softmax_ex": analyzed("log_softmax"),
        "mish": analyzed("mish"),
    }
    for name, profile in archived.items():
        (knowledge / name).mkdir(parents=True)
        (knowledge / name / "profile.yaml").write_text(dump_yaml(profile))
    # The archived rms_norm's hand-written statements call tl.rsqrt and tl.sum (its forward calls nothing); a derived
    # profile is compared by the statements derived from its formulas. mish is tier 1, never a candidate.
    assert _op_names(archived["rms_norm_ex"]) == {"rsqrt", "sum"}
    assert {"exp", "log", "max", "sum"} <= _op_names(archived["log_softmax_ex"])
    # layer_norm's statements reduce with sums and take an rsqrt; softmax's take a max, a sum and exponentials.
    assert analyze("layer_norm", knowledge_root=tmp_path).notes.closest_existing_kernel == "rms_norm_ex"
    assert analyze("softmax", knowledge_root=tmp_path).notes.closest_existing_kernel == "log_softmax_ex"
    assert analyze("softmax", knowledge_root=tmp_path / "none").notes.closest_existing_kernel == "rms_norm"


def test_closest_kernel_op_names_drop_qualifiers_and_method_calls():
    profile = load_profile(EXAMPLES / "rms_norm.yaml")
    profile.math.triton.forward = ["y = (libdevice.tanh(x) * tl.extra.cuda.libdevice.exp(x)).to(tl.float32) * _tanh(x)"]
    assert _op_names(profile) == {"rsqrt", "sum", "tanh", "exp"}


def test_a_float_attribute_is_named_after_the_constructor_argument_that_sets_it(tmp_path):
    """Hugging Face's norms keep eps as ``self.variance_epsilon``: the hyper-parameter is ``eps``, the name the
    reference module, the generated module and the tests are built with."""
    source = (
        "import torch\nimport torch.nn as nn\n\n\nclass T5Norm(nn.Module):\n"
        "    def __init__(self, hidden_size, eps=1e-6, scale=2.0):\n        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.ones(hidden_size))\n        self.variance_epsilon = eps\n"
        "        self.factor = scale\n\n    def forward(self, x):\n"
        "        variance = x.pow(2).mean(-1, keepdim=True)\n"
        "        return self.factor * self.weight * x * torch.rsqrt(variance + self.variance_epsilon)\n"
    )
    profile = analyze(f"{write(tmp_path, 't5norm.py', source)}:T5Norm")
    assert [(hp.name, hp.default) for hp in profile.hyperparameters] == [("eps", 1e-6), ("scale", 2.0)]
    assert "eps" in profile.math.outputs["y"] and "variance_epsilon" not in profile.math.outputs["y"]


LABEL_SMOOTHING_MODULES = """
import torch.nn as nn
import torch.nn.functional as F


class KeepsBoth(nn.Module):
    def __init__(self, smoothing=0.1):
        super().__init__()
        self.smoothing = smoothing
        self.confidence = 1.0 - smoothing

    def forward(self, x, target):
        logprobs = F.log_softmax(x, dim=-1)
        nll = -logprobs.gather(dim=-1, index=target.unsqueeze(1)).squeeze(1)
        return (self.confidence * nll - self.smoothing * logprobs.mean(dim=-1)).mean()


class KeepsDerivedOnly(nn.Module):
    def __init__(self, smoothing=0.1):
        super().__init__()
        self.confidence = 1.0 - smoothing
        self.spread = smoothing / 4.0

    def forward(self, x, target):
        logprobs = F.log_softmax(x, dim=-1)
        nll = -logprobs.gather(dim=-1, index=target.unsqueeze(1)).squeeze(1)
        return (self.confidence * nll - 4.0 * self.spread * logprobs.mean(dim=-1)).mean()


class InverseTemperature(nn.Module):
    def __init__(self, temperature=2.0):
        super().__init__()
        self.inverse = 1.0 / temperature

    def forward(self, x):
        return x.tanh() * self.inverse
"""


@pytest.mark.parametrize("entry", ["KeepsBoth", "KeepsDerivedOnly"])
def test_an_attribute_init_computes_from_an_argument_follows_it(tmp_path, entry):
    """timm's ``self.confidence = 1.0 - smoothing``: one hyper-parameter, smoothing, and the traced math computes
    confidence from it, so a module built with another smoothing gives the reference's loss (as its own hyper-parameter,
    confidence kept 0.9 whatever the smoothing)."""
    reference = write(tmp_path, "smoothing.py", LABEL_SMOOTHING_MODULES)
    traced = trace_reference(load_reference(f"{reference}:{entry}"))
    assert [(hp.name, hp.default) for hp in traced.hyperparameters] == [("smoothing", 0.1)]
    x, target = torch.randn(5, 7), torch.randint(0, 7, (5,))
    module = load_reference(f"{reference}:{entry}").obj(smoothing=0.35)
    torch.testing.assert_close(traced.graph_module(x, target, 0.35), module(x, target))


def test_an_attribute_init_computes_other_than_on_a_line_is_one_line(tmp_path):
    reference = write(tmp_path, "smoothing.py", LABEL_SMOOTHING_MODULES)
    message = analyze_error(f"{reference}:InverseTemperature")
    expected = "smoothing.py:32: __init__ computes self.inverse from temperature (0.5 at temperature=2.0) other than"
    assert expected in message
    assert "keep self.temperature = temperature and compute inverse from it in forward" in message


SCALE_NORMS = """
import math

import torch
import torch.nn as nn


class ScaleNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.scale = dim**-0.5
        self.g = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return x / (torch.norm(x, dim=-1, keepdim=True) * self.scale).clamp(min=self.eps) * self.g


class HeadsScaled(nn.Module):
    def __init__(self, heads=4, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.unused = heads / 2.0
        self.scale = heads**-0.5

    def forward(self, x):
        return torch.tanh(x * self.scale)


class KeyScaledSoftmax(nn.Module):
    def __init__(self, head_dim: int = 64):
        super().__init__()
        self.head_dim = head_dim

    def forward(self, scores):
        return (scores * self.head_dim**-0.5).softmax(dim=-1)


class LogSizeScale(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.w = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * math.log(self.dim) * self.w


class OffByOneScale(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = 1.0 / (dim + 1)
        self.w = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * self.scale * self.w
"""


def test_a_number_init_computes_from_the_row_size_follows_the_row_length(tmp_path):
    """ScaleNorm's ``self.scale = dim ** -0.5``: traced, it is the number at the traced dim; it becomes the row's
    length to that power, so the kernel follows any dim."""
    reference = write(tmp_path, "scale_norm.py", SCALE_NORMS)
    profile = analyze(f"{reference}:ScaleNorm")
    assert "x.shape[-1] ** (-0.5)" in profile.forward_computation
    assert [hp.name for hp in profile.hyperparameters] == ["eps"]


def test_a_size_that_must_divide_into_heads_is_followed_at_sizes_it_takes(tmp_path):
    """``math.sqrt(self.dim // self.heads)`` with ``assert dim % heads == 0``: the module is built again at
    multiples of its size (an odd size would fail the assert and leave the number as traced)."""
    source = (
        "import math\n\nimport torch\nimport torch.nn as nn\n\n\nclass HeadScaled(nn.Module):\n"
        "    def __init__(self, dim, heads: int = 2):\n        super().__init__()\n"
        "        assert dim % heads == 0\n        self.dim, self.heads = dim, heads\n"
        "        self.w = nn.Parameter(torch.ones(dim))\n\n"
        "    def forward(self, x):\n        return torch.tanh(x / math.sqrt(self.dim // self.heads)) * self.w\n"
    )
    profile = analyze(f"{write(tmp_path, 'heads.py', source)}:HeadScaled")
    assert "x.shape[-1] ** 0.5 * 0.7071067811865475" in profile.forward_computation


def test_an_int_that_is_no_size_by_name_is_held_and_one_hot_s_class_count_is_a_size(tmp_path):
    """A hinted ``num_classes`` read by ``F.one_hot`` (which takes an int) and in a division is not followed as a
    float hyper-parameter (it was, and the tests built the reference with num_classes=11.0)."""
    from tools.kernelgen.analyze.load import load_reference
    from tools.kernelgen.analyze.trace import trace_reference

    source = (
        "import torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass OneHotCE(nn.Module):\n"
        "    def __init__(self, num_classes: int, smoothing: float = 0.1):\n        super().__init__()\n"
        "        self.num_classes, self.smoothing = num_classes, smoothing\n\n"
        "    def forward(self, logits, target):\n"
        "        onehot = F.one_hot(target, self.num_classes).to(logits.dtype)\n"
        "        soft = onehot * (1 - self.smoothing) + self.smoothing / self.num_classes\n"
        "        return -(soft * F.log_softmax(logits, -1)).sum(-1).mean()\n\n\n"
        "KERNELGEN = {'init_args': {'num_classes': 11}}\n"
    )
    traced = trace_reference(load_reference(f"{write(tmp_path, 'one_hot.py', source)}:OneHotCE"))
    assert [(hp.name, hp.type) for hp in traced.hyperparameters] == [("smoothing", "float")]


def test_a_size_that_is_not_the_row_s_becomes_a_hyper_parameter(tmp_path):
    """``scores * self.head_dim ** -0.5`` over a row of keys: head_dim sizes nothing of the row, so the kernel takes
    it as a hyper-parameter and the module passes its own."""
    reference = write(tmp_path, "scale_norm.py", SCALE_NORMS)
    profile = analyze(f"{reference}:KeyScaledSoftmax")
    assert "head_dim ** (-0.5)" in profile.forward_computation
    assert [(hp.name, hp.default) for hp in profile.hyperparameters] == [("head_dim", 64.0)]
    assert profile.module.size_param != "head_dim"


def test_a_float_a_held_submodule_keeps_is_a_hyper_parameter_of_the_constructor_s_name(tmp_path):
    """``self.act = ScaledTanh(scale)``: the child's ``self.scale`` is traced as the number it was built with; it
    follows the constructor's ``scale`` as a hyper-parameter instead of holding the module at its default."""
    source = """
    import torch
    import torch.nn as nn


    class ScaledTanh(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return torch.tanh(x * self.scale)


    class Block(nn.Module):
        def __init__(self, hidden_size, scale: float = 0.5):
            super().__init__()
            self.act = ScaledTanh(2.0 * scale + 1.0)
            self.weight = nn.Parameter(torch.ones(hidden_size))

        def forward(self, x):
            return self.act(x) * self.weight
    """
    profile = analyze(f"{write(tmp_path, 'block.py', source)}:Block")
    assert profile.forward_computation == "y = tanh(x * (scale * 2.0 + 1.0)) * weight"
    assert [(hp.name, hp.default) for hp in profile.hyperparameters] == [("scale", 0.5)]
    assert profile.module.fixed == []


@pytest.mark.parametrize(
    "norm, call",
    [
        ("nn.LayerNorm(hidden, eps=eps)", "self.norm(x.float())"),
        ("nn.RMSNorm(hidden, eps=eps)", "self.norm(x.float())"),
        ("nn.LayerNorm(hidden, eps=eps)", "self.norm(input=x.float())"),
    ],
)
def test_the_eps_of_a_held_torch_norm_follows_the_constructor_s(tmp_path, norm, call):
    """``self.norm = nn.LayerNorm(hidden, eps=eps)``: its eps is a hyper-parameter, not the module held at 1e-6;
    called by position or with ``input=``."""
    source = (
        "import torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass NormSiLU(nn.Module):\n"
        f"    def __init__(self, hidden, eps=1e-6):\n        super().__init__()\n        self.norm = {norm}\n\n"
        f"    def forward(self, x):\n        return F.silu({call}).to(x.dtype)\n"
    )
    profile = analyze(f"{write(tmp_path, 'norm_silu.py', source)}:NormSiLU")
    assert [(hp.name, hp.default) for hp in profile.hyperparameters] == [("eps", 1e-6)]
    assert "eps=eps" in profile.forward_computation and profile.module.fixed == []
    assert [p.attribute for p in profile.parameters][0] == "norm.weight"


def test_a_held_group_norm_s_groups_and_eps_follow_the_constructor_s(tmp_path):
    """``self.norm = nn.GroupNorm(groups, channels, eps=eps)``: groups and eps are hyper-parameters (none fixed)."""
    source = (
        "import torch.nn as nn\n\n\nclass HeldGroups(nn.Module):\n"
        "    def __init__(self, num_channels, num_groups=4, eps=1e-5):\n        super().__init__()\n"
        "        self.norm = nn.GroupNorm(num_groups, num_channels, eps=eps)\n\n"
        "    def forward(self, x):\n        return self.norm(x)\n"
    )
    profile = analyze(f"{write(tmp_path, 'held_groups.py', source)}:HeldGroups")
    assert [(hp.name, hp.default) for hp in profile.hyperparameters] == [("num_groups", 4), ("eps", 1e-5)]
    assert profile.module.fixed == []


def test_the_module_holds_a_held_norm_s_parameters_where_the_reference_does(tmp_path):
    """The reference's ``norm.weight`` stays ``norm.weight``: its state_dict loads into the generated module."""
    source = (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass NormSilu(nn.Module):\n"
        "    def __init__(self, hidden_size, eps=1e-6):\n        super().__init__()\n"
        "        self.norm = nn.LayerNorm(hidden_size, eps=eps)\n"
        "        self.scale = nn.Parameter(torch.ones(hidden_size))\n\n"
        "    def forward(self, x):\n        return F.silu(self.norm(x)) * self.scale\n"
    )
    profile = analyze(f"{write(tmp_path, 'norm_silu.py', source)}:NormSilu")
    module = render_kernel(profile).files["src/liger_kernel/transformers/norm_silu.py"]
    assert "self.norm = nn.Module()" in module and "self.norm.weight = nn.Parameter(" in module
    assert "LigerNormSiluFunction.apply(x, self.scale, self.norm.weight, self.norm.bias, self.eps)" in module
    # The formula in the docstrings names the normalized dims, not the probe's traced size.
    assert "normalized_shape=x.shape[-1:]" in profile.forward_computation


@pytest.mark.parametrize(
    "body, dtype",
    [
        ("F.cross_entropy(logits.float(), target, reduction='sum')", "float32"),
        ("F.cross_entropy(logits, target, reduction='sum')", "same"),
        ("F.cross_entropy(logits.float(), target, reduction='sum').to(logits.dtype)", "same"),
    ],
)
def test_a_loss_the_reference_computes_after_an_upcast_is_returned_in_fp32(tmp_path, body, dtype):
    """``F.cross_entropy(logits.float(), ...)`` returns fp32 whatever the logits' dtype: so does the kernel."""
    source = f"import torch.nn.functional as F\n\n\ndef upcast_ce(logits, target):\n    return {body}\n"
    profile = analyze(f"{write(tmp_path, 'upcast_ce.py', source)}:upcast_ce")
    assert [t.dtype for t in profile.outputs] == [dtype]
    ops = render_kernel(profile).files["src/liger_kernel/ops/upcast_ce.py"]
    fallback = "torch.float32" if dtype == "float32" else "logits.dtype"
    assert f"output_dtype = output_dtype or {fallback}" in ops


def test_the_label_smoothing_of_a_held_torch_loss_follows_the_constructor_s(tmp_path):
    """``self.crit = nn.CrossEntropyLoss(label_smoothing=smoothing)``: a hyper-parameter, not the module held at 0.1."""
    source = (
        "import torch.nn as nn\n\n\nclass HeldSmoothing(nn.Module):\n"
        "    def __init__(self, smoothing: float = 0.1):\n        super().__init__()\n"
        "        self.crit = nn.CrossEntropyLoss(label_smoothing=smoothing)\n\n"
        "    def forward(self, logits, target):\n        return self.crit(logits, target)\n"
    )
    profile = analyze(f"{write(tmp_path, 'held.py', source)}:HeldSmoothing")
    assert [(hp.name, hp.default) for hp in profile.hyperparameters] == [("smoothing", 0.1)]
    assert "label_smoothing=smoothing" in profile.forward_computation and profile.module.fixed == []


@pytest.mark.parametrize(
    "entry, expected",
    [
        ("LogSizeScale", "scale_norm.py:45: the traced forward computes a number from dim (dim=8) other than as"),
        ("OffByOneScale", "scale_norm.py:51: __init__ computes self.scale from dim (0.111111 at dim=8) other than"),
    ],
)
def test_a_number_of_a_size_other_than_a_power_of_it_is_one_line(tmp_path, entry, expected):
    """A function of a size other than k * size ** p: the kernel would keep its traced value for any size."""
    reference = write(tmp_path, "scale_norm.py", SCALE_NORMS)
    message = analyze_error(f"{reference}:{entry}")
    assert expected in message and "generated" in message


def test_an_attribute_of_an_int_argument_with_a_default_is_held_with_it(tmp_path):
    """An int argument with a default that changes the output is held at it (``module.fixed``): its attribute stays
    right; an attribute forward never reads is no reason to refuse."""
    reference = write(tmp_path, "scale_norm.py", SCALE_NORMS)
    profile = analyze(f"{reference}:HeadsScaled")
    assert profile.module.fixed == ["heads"]


OPTIONAL_NUMBERS = """
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn


class ScaledGelu(nn.Module):
    def __init__(self, scale: Optional[float] = None, device=None):
        super().__init__()
        self.scale = scale
        self.device = device

    def forward(self, x):
        y = F.gelu(x)
        if self.scale is not None:
            y = y * self.scale
        return y


class SoftcapCrossEntropy(nn.Module):
    def __init__(self, softcap: float | None = None):
        super().__init__()
        self.softcap = softcap

    def forward(self, logits, target):
        if self.softcap is not None:
            logits = self.softcap * torch.tanh(logits / self.softcap)
        return F.cross_entropy(logits, target)
"""


def test_a_constructor_number_of_default_none_the_forward_tests_is_held_at_none(tmp_path):
    """``if self.scale is not None``: traced at None, the kernel computes the None branch only, so the generated module
    refuses a number (``module.fixed``) rather than ignore it; an argument no number builds the module with
    (``device=None``) changes nothing that can be shown and stays free. A loss's optional number is never taken for
    its class weights (it was traced as a [V] tensor and refused as a buffer)."""
    reference = write(tmp_path, "optional_numbers.py", OPTIONAL_NUMBERS)
    assert analyze(f"{reference}:ScaledGelu").module.fixed == ["scale"]
    loss = analyze(f"{reference}:SoftcapCrossEntropy")
    assert loss.tier == 3 and loss.module.fixed == ["softcap"] and "tanh" not in loss.forward_computation


INIT_ARITHMETIC = """
import torch
import torch.nn as nn


class InitScale(nn.Module):
    def __init__(self, scale: float = 2.0):
        super().__init__()
        self.s = EXPRESSION

    def forward(self, x):
        return torch.tanh(x) * self.s
"""


@pytest.mark.parametrize(
    "expression", ["abs(scale)", "min(scale, 5.0)", "round(scale, 1)", "scale * 2.0 if scale > 0 else 1.0"]
)
def test_init_arithmetic_that_follows_a_line_only_near_the_default_is_refused(tmp_path, expression):
    """``self.s = abs(scale)`` is ``scale`` at every positive value: the probes above the default fitted a line and the
    generated module computed with scale itself at -3. Probes below zero, far above and at a fraction show it."""
    path = write(tmp_path, "init_scale.py", INIT_ARITHMETIC.replace("EXPRESSION", expression))
    message = analyze_error(f"{path}:InitScale")
    assert "__init__ computes self.s from scale" in message and "other than as a * scale + b" in message, message


def test_an_attribute_of_the_argument_s_name_computed_from_it_is_refused(tmp_path):
    """``self.eps = max(eps, 1e-2)`` keeps the argument's name but not its value: traced as ``eps``, the module would
    compute with 0.001 where the reference uses 0.01 (wrong at the defaults)."""
    source = (
        "import torch\nimport torch.nn as nn\n\n\nclass Floor(nn.Module):\n"
        "    def __init__(self, eps: float = 1e-3):\n        super().__init__()\n        self.eps = max(eps, 1e-2)\n\n"
        "    def forward(self, x):\n        return torch.sigmoid(x) + self.eps\n"
    )
    message = analyze_error(f"{write(tmp_path, 'floor.py', source)}:Floor")
    assert (
        "__init__ computes self.eps from eps (0.01 at eps=0.001) and keeps it under the argument's own name" in message
    )


OPTIONAL_BOUND_AND_HELD_INDEX = """
from typing import Optional

import torch.nn as nn
import torch.nn.functional as F


class CappedGelu(nn.Module):
    def __init__(self, limit: Optional[float] = None):
        super().__init__()
        self.limit = limit

    def forward(self, x):
        y = F.gelu(x)
        if self.limit is not None:
            y = y.clamp(max=self.limit)
        return y


class HeldCE(nn.Module):
    def __init__(self, ignore: int = -100):
        super().__init__()
        self.ce = nn.CrossEntropyLoss(ignore_index=ignore)

    def forward(self, logits, target):
        return self.ce(logits, target)
"""


def test_arguments_whose_effect_one_probe_misses_are_held_at_their_default(tmp_path):
    """A bound of default None that 2.5 leaves alone on random inputs (``clamp(max=limit)``), and an ignore_index under
    another name (-199 is in no target): probed at more values, with the targets drawn as small class indices, each
    is seen to change the output and the module refuses other values."""
    path = write(tmp_path, "probes.py", OPTIONAL_BOUND_AND_HELD_INDEX)
    assert analyze(f"{path}:CappedGelu").module.fixed == ["limit"]
    assert analyze(f"{path}:HeldCE").module.fixed == ["ignore"]


def test_a_frozen_parameter_stays_frozen(tmp_path):
    """``nn.Parameter(..., requires_grad=False)``: the profile says so, and the generated module holds it frozen (an
    optimizer would train it otherwise)."""
    source = (
        "import torch\nfrom torch import nn\n\n\nclass FrozenShiftNorm(nn.Module):\n"
        "    def __init__(self, hidden_size: int = 64):\n        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.ones(hidden_size))\n"
        "        self.shift = nn.Parameter(torch.full((hidden_size,), 0.5), requires_grad=False)\n\n"
        "    def forward(self, x):\n"
        "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight + self.shift\n"
    )
    profile = analyze(str(write(tmp_path, "frozen.py", source)))
    assert {p.name: p.requires_grad for p in profile.parameters} == {"weight": True, "shift": False}
    assert "requires_grad: false" in dump_yaml(profile) and dump_yaml(profile).count("requires_grad: false") == 1
    module = render_kernel(profile).files["src/liger_kernel/transformers/frozen_shift_norm.py"]
    assert "nn.Parameter(torch.full((hidden_size,), 0.5), requires_grad=False)" in module
    assert "nn.Parameter(torch.ones(hidden_size))" in module


def test_a_skew_divergence_with_logs_of_its_hyper_parameter_is_analysed(tmp_path):
    """``logaddexp(s + log(1 - beta), t + log(beta))``: the row checks draw beta above 1 too, where the logs are
    complex; those draws are no evidence (sympy's Max raised a ValueError out of the analysis before)."""
    source = (
        "import math\n\nimport torch.nn.functional as F\n\n\ndef skew(student, teacher, beta: float = 0.5):\n"
        "    s, t = F.log_softmax(student, dim=-1), F.log_softmax(teacher, dim=-1)\n"
        "    m = (s + math.log(1 - beta)).logaddexp(t + math.log(beta))\n"
        "    return (t.exp() * (t - m)).sum(-1).mean()\n"
    )
    profile = analyze(str(write(tmp_path, "skew.py", source)))
    assert profile.tier == 3 and [hp.name for hp in profile.hyperparameters] == ["beta"]


def test_a_scalar_argument_without_a_default_is_one_line(tmp_path):
    path = write(tmp_path, "noisy.py", "import torch\n\n\ndef scale(x, n: int):\n    return x * n\n")
    message = analyze_error(str(path))
    assert "'scale': 'n' is annotated int but has no default; a hyper-parameter needs one" in message


def test_in_place_methods_are_read_as_their_out_of_place_ops(tmp_path):
    source = "import torch\n\n\ndef f(x, y):\n    z = x.clone()\n    z.mul_(2.0)\n    return z.tanh() * y\n"
    profile = analyze(str(write(tmp_path, "inplace.py", source)))
    assert profile.math.outputs["y_out"] == "tanh(x * 2.0) * y"


def test_writing_in_place_into_an_input_is_one_line(tmp_path):
    path = write(tmp_path, "into_input.py", "import torch\n\n\ndef f(x, y):\n    x.mul_(2.0)\n    return x * y\n")
    message = analyze_error(str(path))
    assert message.startswith(f"{path}:5: `.mul_` writes in place into input 'x'")


def test_constants_shaped_like_a_tensor_and_max_values(tmp_path):
    source = (
        "import torch\n\n\ndef f(x, t: float = 0.5):\n"
        "    return torch.where(x > t, x, torch.zeros_like(x)) + torch.full_like(x, 2.0)\n\n\n"
        "def g(x):\n    e = (x - x.max(dim=-1, keepdim=True).values).exp()\n    return e / e.sum(-1, keepdim=True)\n"
    )
    path = write(tmp_path, "consts.py", source)
    assert analyze(f"{path}:f").math.outputs["y"] == "where(x > t, x, zeros_like(x)) + full_like(x, fill_value=2.0)"
    assert analyze(f"{path}:g").tier == 2


def test_writing_in_place_into_a_slice_is_one_line(tmp_path):
    """A slice shares its tensor's storage: reading the write as a new tensor would lose it in the tensor."""
    source = "import torch\n\n\ndef f(x, y):\n    z = x.clone()\n    w = z[:, :2]\n    w.mul_(2.0)\n    return z * y\n"
    path = write(tmp_path, "into_slice.py", source)
    message = analyze_error(str(path))
    assert message.startswith(f"{path}:7: `.mul_` writes in place into a view of another tensor")


def test_the_row_length_makes_a_row_kernel_and_other_sizes_are_one_line(tmp_path):
    scaled = write(
        tmp_path, "scaled.py", "import torch\n\n\ndef scaled(x):\n    return torch.tanh(x * x.size(-1) ** -0.5)\n"
    )
    profile = analyze(str(scaled))
    assert profile.tier == 2 and "reads the row length" in profile.notes.tier_reason
    assert "n_cols" in profile.math.outputs["y"]
    rows = write(tmp_path, "rows.py", "import torch\n\n\ndef by_rows(x):\n    return x * x.shape[0]\n")
    message = analyze_error(str(rows))
    assert message.startswith(f"{rows}:5: `[...]`: dim 0 of a 3-d tensor; a row kernel's math reads only the last dim")


@pytest.mark.parametrize(
    "body, starts, contains",
    [
        # fx makes the node of ``.values`` when the return uses it, outside the reference: the line is the sort's.
        (
            "return torch.sort(x).values",
            ":5: `return torch.sort(x).values`: `torch.sort` (line 5) (sort) moves elements between positions",
            "",
        ),
        # An accuracy beside a loss: argmax's output is a position, not a value (it was said to move elements).
        (
            "return torch.nn.functional.cross_entropy(x, idx), (x.argmax(-1) == idx).float().mean()",
            ":5: `.argmax()` (argmax) gives a position, not a value, of each row",
            "",
        ),
        # ``x[idx]`` reads x only at the indices (a value per class taken at a class index): no input holds rows.
        ("return x[idx]", ": no input holds rows of values: x, idx are read only as indices or at them", ""),
        (
            "return x.view(-1)",
            ":5: `return x.view(-1)`: it returns an output of shape [",
            "neither a row nor one value",
        ),
    ],
)
def test_a_refused_reference_is_named_by_what_it_does_not_as_a_loss(tmp_path, body, starts, contains):
    arguments = "x, idx" if "idx" in body else "x"
    path = write(tmp_path, "refused.py", f"import torch\n\n\ndef f({arguments}):\n    {body}\n")
    message = analyze_error(str(path))
    assert message.startswith(f"{path}{starts}"), message
    assert contains in message and "a loss returns" not in message


def test_one_value_tensors_a_module_holds_are_hyper_parameters(tmp_path):
    path = write(
        tmp_path,
        "held.py",
        """
        import torch
        import torch.nn as nn


        class Held(nn.Module):
            def __init__(self, gain: float = 2.0):
                super().__init__()
                self.register_buffer("gain", torch.tensor(gain))
                self.eps = torch.tensor([1e-6])

            def forward(self, x):
                return self.gain * x / (x.abs() + self.eps)
        """,
    )
    profile = analyze(str(path))
    assert {h.name: h.default for h in profile.hyperparameters} == {"gain": 2.0, "eps": 1e-6}  # as written, not fp32's
    assert profile.tier == 1 and profile.math.outputs["y"].count("gain") == 1


def test_switches_traced_at_their_default_are_the_only_choice(tmp_path):
    """An int, bool or str the trace specialised (the math was written for its default): the Function refuses others
    instead of computing the default's math."""
    path = write(
        tmp_path,
        "int_scale.py",
        "import torch\n\n\ndef int_scale(x, y, scale: int = 2):\n    return torch.sigmoid(x) * y * scale\n",
    )
    profile = analyze(str(path))
    assert next(hp.choices for hp in profile.hyperparameters if hp.name == "scale") == [2]


def test_a_float_annotated_argument_with_an_int_default_is_a_float(tmp_path):
    """``scale: float = 1`` is a float written as an int: a runtime hyper-parameter, not a switch held at 1."""
    path = write(
        tmp_path, "int_float.py", "import torch\n\n\ndef f(x, scale: float = 1):\n    return torch.tanh(x) * scale\n"
    )
    (hyper,) = analyze(str(path)).hyperparameters
    assert (hyper.name, hyper.type, hyper.default, hyper.choices) == ("scale", "float", 1.0, None)


def test_a_constructor_argument_a_parameter_starts_at_is_linked_whatever_its_value(tmp_path):
    """beta_init=1.0 makes a parameter of ones, which is still the argument's value (fp32-compared: 0.1 too)."""
    path = write(
        tmp_path,
        "swish.py",
        """
        import torch
        import torch.nn as nn


        class LearnableSwish(nn.Module):
            def __init__(self, beta_init: float = 1.0, gain_init: float = 0.1):
                super().__init__()
                self.beta = nn.Parameter(torch.tensor(beta_init))
                self.gain = nn.Parameter(torch.tensor(gain_init))

            def forward(self, x):
                return self.gain * x * torch.sigmoid(self.beta * x)
        """,
    )
    params = {p.name: p for p in analyze(str(path)).parameters}
    assert (params["beta"].init, params["beta"].init_arg) == ("constant", "beta_init")
    assert (params["gain"].init, params["gain"].init_arg) == ("constant", "gain_init")


def test_an_erf_of_x_over_an_inexact_root_two_is_analyzed(tmp_path):
    """Megatron's bias_gelu divides by 1.41421: the derivative's exp(1e10 * x**2 / 19999899241) made sympy.factor
    expand a polynomial of degree 1e10 until the memory ran out."""
    path = write(
        tmp_path, "gelu.py", "import torch\n\n\ndef gelu(x):\n    return x * 0.5 * (1.0 + torch.erf(x / 1.41421))\n"
    )
    assert analyze(str(path)).tier == 1


def test_constructor_arguments_fixed_at_their_default_are_those_that_change_the_output(tmp_path):
    """power is computed with (the module refuses other values); inplace=False, as torch's activations take it,
    changes nothing and stays free."""
    path = write(
        tmp_path,
        "act.py",
        """
        import torch
        import torch.nn as nn


        class Act(nn.Module):
            def __init__(self, inplace: bool = False, power: int = 2):
                super().__init__()
                self.inplace = inplace
                self.power = power

            def forward(self, x):
                return torch.relu(x) ** self.power
        """,
    )
    assert analyze(str(path)).module.fixed == ["power"]


def test_arguments_that_start_parameters_otherwise_than_as_their_value_are_held(tmp_path):
    """xIELU's ``log(expm1(alpha_p_init))``, PolyReLU's ``1 / order``, StarReLU's ``requires_grad=scale_learnable``:
    the generated module starts its parameters at the values the defaults give, so it refuses other values
    (``module.fixed``) rather than ignore them; ``init_alpha`` itself (a constant parameter's ``init_arg``) and
    ``inplace`` stay free."""
    path = write(
        tmp_path,
        "act.py",
        """
        import torch
        import torch.nn as nn


        class Act(nn.Module):
            def __init__(self, init: float = 0.8, order: int = 3, learnable: bool = True, init_alpha: float = 0.5,
                         inplace: bool = False):
                super().__init__()
                self.a = nn.Parameter(torch.log(torch.expm1(torch.tensor(init))).unsqueeze(0))
                self.w = nn.Parameter(torch.tensor(1.0 / order))
                self.s = nn.Parameter(torch.ones(1), requires_grad=learnable)
                self.alpha = nn.Parameter(torch.full((1,), init_alpha))

            def forward(self, x):
                return self.a * x + self.w * x * x + self.s * torch.tanh(self.alpha * x)
        """,
    )
    profile = analyze(str(path))
    assert profile.module.fixed == ["init", "order", "learnable"]
    assert [p.init_arg for p in profile.parameters if p.init_arg] == ["init_alpha"]


@pytest.mark.parametrize("read", ["self.alpha.unsqueeze(0).unsqueeze(-1)", "self.alpha[None, :, None]"])
def test_a_channel_parameter_laid_out_along_another_dim_is_one_line(tmp_path, read):
    """BigVGAN's Snake on ``[batch, channels, time]``: the view was dropped and the parameter read along the row,
    another function; only the smoke run caught it where the shapes differed, blaming the reference."""
    path = write(
        tmp_path,
        "snake_cf.py",
        f"""
        import torch
        import torch.nn as nn


        class Snake(nn.Module):
            def __init__(self, channels: int = 4):
                super().__init__()
                self.alpha = nn.Parameter(torch.ones(channels))

            def forward(self, x):
                alpha = {read}
                return x + torch.sin(alpha * x).pow(2) / alpha
        """,
    )
    message = analyze_error(str(path))
    assert "snake_cf.py:11: the parameter 'alpha' of 4 channels is laid out as (1, 4, 1), along dim 1" in message
    assert "write the reference for channels-last input" in message


def test_a_kl_div_that_reduces_nothing_is_element_wise(tmp_path):
    path = tmp_path / "kl_terms.py"
    path.write_text(
        "import torch.nn.functional as F\n\n\ndef kl_terms(input, target):\n"
        '    return F.kl_div(input, target, reduction="none")\n'
    )
    profile = analyze(str(path))
    assert profile.tier == 1 and profile.test.input_domain == "positive"  # the target is logged
    assert profile.math.outputs == {"y": "kl_div_pointwise(input, target, log_target=False)"}


def test_a_tensor_made_from_an_argument_names_the_fix_and_line(tmp_path):
    path = tmp_path / "sqrt_eps.py"
    path.write_text(
        "import torch\n\n\ndef sqrt_eps(x, eps: float = 1e-8):\n"
        "    return torch.sqrt(x * x + eps) - torch.sqrt(torch.tensor(eps))\n"
    )
    with pytest.raises(AnalyzeError, match=r"sqrt_eps.py:5: a tensor made from an argument .*math.sqrt\(eps\)"):
        analyze(str(path))
    path.write_text(
        "import math\n\nimport torch\n\n\ndef sqrt_eps(x, eps: float = 1e-8):\n"
        "    return torch.sqrt(x * x + eps) - math.sqrt(eps)\n"
    )
    assert analyze(str(path)).tier == 1


def test_an_item_assignment_names_the_out_of_place_form_and_line(tmp_path):
    """TRL's get_batch_logps writes ``labels[labels == -100] = 0``: fx's proxies take no item assignment."""
    path = tmp_path / "relu_gate.py"
    path.write_text("import torch\n\n\ndef relu_gate(x, g):\n    g = g.clone()\n    g[g < 0] = 0.0\n    return x * g\n")
    with pytest.raises(AnalyzeError, match=r"relu_gate.py:6: an item assignment .* torch.where\(mask, value, x\)"):
        analyze(str(path))
    path.write_text("import torch\n\n\ndef relu_gate(x, g):\n    return x * torch.where(g < 0, 0.0, g)\n")
    assert analyze(str(path)).tier == 1


def test_an_augmented_assignment_to_an_input_is_refused_and_one_to_a_new_tensor_is_not(tmp_path):
    """``x += y`` writes into the caller's tensor (fx traces it as ``x + y``): refused as ``x.add_(y)`` is."""
    path = tmp_path / "iadd.py"
    path.write_text("import torch\n\n\ndef iadd(x, y):\n    x += y\n    return torch.tanh(x)\n")
    assert analyze_error(str(path)).endswith(
        "iadd.py:5: `x += ...` writes in place into input 'x'; compute a new tensor instead (x = x + ...)"
    )
    path.write_text("import torch\n\n\ndef iadd(x, y):\n    x = x * 2.0\n    x += y\n    return torch.tanh(x)\n")
    assert analyze(str(path)).tier == 1


def test_a_boolean_output_is_refused_by_its_line_and_a_float_mask_output_is_its_numbers(tmp_path):
    path = tmp_path / "with_mask.py"
    path.write_text(
        "import torch\n\n\ndef as_float(x):\n    return x * 2.0, (x > 0).float()\n\n\n"
        "def as_bool(x):\n    return x * 2.0, x > 0\n"
    )
    profile = analyze(f"{path}:as_float")
    assert profile.math.outputs["y2"] == "where(x > 0, 1, 0)"
    with pytest.raises(AnalyzeError, match=r"with_mask.py:9: output 'y2' is a condition \(x > 0\), not a number"):
        analyze(f"{path}:as_bool")


def test_a_dict_of_outputs_is_refused_naming_its_keys(tmp_path):
    path = tmp_path / "dict_out.py"
    path.write_text("import torch\n\n\ndef dict_out(x):\n    return {'y': torch.sigmoid(x), 'z': x * 2.0}\n")
    assert "'dict_out' returns a dict (y, z); return its tensors instead (`return y, z`)" in analyze_error(str(path))


def test_a_keyword_only_tensor_input_is_refused_and_a_keyword_only_hyper_parameter_is_not(tmp_path):
    """Tensor inputs are passed by position (kernel, tests, the reference's own calls): a tensor after ``*`` failed
    new's smoke run with a TypeError that blamed the reference."""
    path = tmp_path / "kw.py"
    path.write_text(
        "import torch\n\n\n"
        "def scaled(x, *, scale):\n    return torch.tanh(x) * scale\n\n\n"
        "def tempered(x, *, temperature: float = 0.7):\n    return torch.tanh(x / temperature)\n"
    )
    message = analyze_error(f"{path}:scaled")
    assert (
        "'scaled': the tensor input 'scale' is keyword-only (after '*'); tensor inputs are passed by position"
        in message
    )
    assert [h.name for h in analyze(f"{path}:tempered").hyperparameters] == ["temperature"]


def test_a_shapes_hint_making_the_first_input_the_smaller_is_refused(tmp_path):
    """Megatron's ``bias_gelu(bias, y)``: the hint says bias broadcasts against y, but the others broadcast against
    the first input; new succeeded and the kernel refused the call the hint describes."""
    body = "\n\ndef bias_gelu(bias, y):\n    x = bias + y\n    return x * torch.sigmoid(1.702 * x)\n"
    path = tmp_path / "bias_gelu.py"
    path.write_text('import torch\n\nKERNELGEN = {"shapes": {"bias": "hidden", "y": "... hidden"}}\n' + body)
    message = analyze_error(str(path))
    assert "bias ('hidden') is the first input, whose shape the others broadcast against, and y" in message
    assert message.endswith("put a full input first (y, then bias)")
    path.write_text(
        'import torch\n\nKERNELGEN = {"shapes": {"bias": "batch seq hidden", "y": "batch 1 hidden"}}\n' + body
    )
    assert [t.name for t in analyze(str(path)).inputs] == ["bias", "y"]


def test_a_parameter_drawn_at_random_is_started_at_ones_and_new_says_so(tmp_path):
    from tools.kernelgen.cli import role_remarks

    path = tmp_path / "rand_gate.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass RandGate(nn.Module):\n"
        "    def __init__(self, dim: int = 64):\n        super().__init__()\n"
        "        self.w = nn.Parameter(torch.randn(dim) * 0.02)\n\n"
        "    def forward(self, x):\n        return x * torch.sigmoid(self.w * x)\n"
    )
    profile = analyze(str(path))
    assert [p.init for p in profile.parameters] == ["ones"]
    assert "init: the reference draws w at random; the generated module starts it at ones" in role_remarks(profile)[0]


def test_a_module_built_from_a_config_object_is_refused_at_analysis_not_in_new_s_smoke_run(tmp_path):
    """HF's ``__init__(self, config)`` with the hint giving a config object: the analysis built it, but the tests and
    the smoke run build the reference from numbers, and new failed there blaming the reference."""
    path = tmp_path / "config_norm.py"
    path.write_text(
        "from types import SimpleNamespace\n\nimport torch\nimport torch.nn as nn\n\n"
        "KERNELGEN = {'init_args': {'config': SimpleNamespace(hidden_size=64, rms_norm_eps=1e-6)}}\n\n\n"
        "class ConfigNorm(nn.Module):\n    def __init__(self, config):\n        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.ones(config.hidden_size))\n"
        "        self.eps = config.rms_norm_eps\n\n"
        "    def forward(self, x):\n        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)\n"
    )
    message = analyze_error(str(path))
    assert "cannot generate from ConfigNorm, built from 'config' (SimpleNamespace)" in message
    assert message.endswith("take what it reads of 'config' as arguments (hidden_size, eps, ...) instead")


def test_labels_clamped_beside_a_mask_give_formulas_that_read_back(tmp_path):
    """``F.cross_entropy(logits, labels.clamp(min=0), reduction="none")`` masked by ``labels >= 0``: the ignore
    condition on the clamped labels is a condition chosen by a condition (sympy's ITE), which the written formula
    did not read back as (an internal error)."""
    path = tmp_path / "clamp_ce.py"
    path.write_text(
        "import torch.nn.functional as F\n\n\ndef clamp_ce(logits, labels):\n"
        "    valid = (labels >= 0).float()\n"
        '    per = F.cross_entropy(logits, labels.clamp(min=0), reduction="none")\n'
        "    return (per * valid).sum() / valid.sum()\n"
    )
    profile = analyze(str(path))
    assert profile.tier == 3
    assert all("ITE" not in formula for formula in profile.math.outputs.values())


def test_a_norm_weight_held_as_one_by_one_by_channels_is_a_per_channel_parameter(tmp_path):
    """An RMSNorm whose weight is ``nn.Parameter(torch.ones(1, 1, d))`` (as LayerScale holds its scale): its length
    sizes the rows as a ``[d]`` weight's does; it was refused as "not a per-channel or scalar parameter"."""
    path = tmp_path / "rms_w3d.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass RMSNorm3D(nn.Module):\n"
        "    def __init__(self, d: int = 32, eps: float = 1e-6):\n        super().__init__()\n"
        "        self.g = nn.Parameter(torch.ones(1, 1, d))\n        self.eps = eps\n\n"
        "    def forward(self, x):\n"
        "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.g\n"
    )
    profile = analyze(str(path))
    assert profile.tier == 2
    assert [(p.name, p.shape, p.rank) for p in profile.parameters] == [("g", "channel", 3)]


CHUNKED_GLUS = """import torch
import torch.nn.functional as F


def geglu_chunked(x):
    a, b = x.chunk(2, dim=-1)
    return F.gelu(a) * b


def scaled_glu(hidden_states: torch.Tensor, alpha: float = 1.702):
    \"\"\"the first half keeps the argument's name\"\"\"
    hidden_states, gate = torch.chunk(hidden_states, 2, dim=-1)
    return hidden_states * torch.sigmoid(alpha * gate)


def reads_x_again(x):
    a, b = x.chunk(2, dim=-1)
    return a * b + x


def unknown_after_split(x):
    a, b = x.chunk(2, dim=-1)
    return torch.special.log_ndtr(a) * b
"""


def test_a_glu_that_chunks_its_argument_takes_the_two_halves(tmp_path):
    path = tmp_path / "glus.py"
    path.write_text(CHUNKED_GLUS)
    profile = analyze(f"{path}:geglu_chunked")
    assert [t.name for t in profile.inputs] == ["a", "b"] and profile.tier == 1
    assert profile.operation_name == "geglu_chunked" and profile.math.outputs == {"y": "gelu(a) * b"}
    assert any("x.chunk(2, dim=-1) is taken as two inputs" in remark for remark in profile.notes.remarks)
    # the reference the tests run: the same body on the halves, every other line where it was
    assert "def geglu_chunked(a, b):" in profile.reference.source
    assert profile.reference.source.count("\n") == CHUNKED_GLUS.count("\n")
    scaled = analyze(f"{path}:scaled_glu")
    assert [t.name for t in scaled.inputs] == ["hidden_states", "gate"]
    assert [h.name for h in scaled.hyperparameters] == ["alpha"]
    with pytest.raises(AnalyzeError, match=r"glus.py:18: `operator.add` combines values of different row lengths"):
        analyze(f"{path}:reads_x_again")  # x itself is read again: not two inputs, and a half added to the row
    with pytest.raises(AnalyzeError, match=r"glus.py:23: `torch\.special\.log_ndtr` is not an op"):
        analyze(f"{path}:unknown_after_split")  # lines still point into the file as written


def test_a_dtype_compared_in_control_flow_is_taken_as_the_inputs_half_dtype(tmp_path):
    """HF's T5LayerNorm rounds to its weight's dtype when that is a half one: traced so, the rounding is kept (a
    no-op in fp32), as it happens when the weight has the bf16 inputs' dtype."""
    path = tmp_path / "t5_norm.py"
    path.write_text(
        "import torch\nfrom torch import nn\n\n\nclass T5Norm(nn.Module):\n"
        "    def __init__(self, hidden_size, eps=1e-6):\n        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.ones(hidden_size))\n        self.variance_epsilon = eps\n\n"
        "    def forward(self, hidden_states):\n"
        "        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)\n"
        "        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)\n"
        "        if self.weight.dtype in [torch.float16, torch.bfloat16]:\n"
        "            hidden_states = hidden_states.to(self.weight.dtype)\n"
        "        return self.weight * hidden_states\n"
    )
    profile = analyze(str(path))
    assert profile.tier == 2 and "cast_to_input(" in profile.math.outputs["y"]
    path.write_text(
        "import torch\n\n\ndef branch_on_values(x):\n    if x.sum() > 0:\n        return x\n    return -x\n"
    )
    with pytest.raises(AnalyzeError, match="data-dependent Python control flow"):
        analyze(str(path))  # a value, not a dtype, still refuses


def test_a_torchscript_or_compiled_function_is_traced_as_its_python(tmp_path):
    """Megatron's fused bias-GeLU is a @torch.jit.script function; fx traces the Python under the decorator (lines
    kept), and the reference the generated tests run keeps it."""
    path = tmp_path / "scripted.py"
    source = (
        "import torch\n\n\n@torch.jit.script\ndef bias_gelu(bias: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n"
        "    x = bias + y\n    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))\n\n\n"
        "@torch.compile(dynamic=False)\ndef _unused(x):\n    return x\n"
    )
    path.write_text(source)
    profile = analyze(str(path))
    assert profile.tier == 1 and [t.name for t in profile.inputs] == ["bias", "y"]
    assert "@torch.jit.script\n" in profile.reference.source
    path.write_text(source.replace("    x = bias + y", "    x = bias + y.sort().values"))
    with pytest.raises(AnalyzeError, match=r"scripted.py:6: "):
        analyze(str(path))  # messages still point at the file's own lines


def test_losses_of_each_element_are_element_wise_and_their_row_sums_losses(tmp_path):
    """reduction="none" leaves a binary cross entropy (or a KL, a squared error) per element: tier 1; summed over
    each row and averaged over rows it is a loss over the class dim (multi-label BCE): tier 3, as the same loss
    reduced by torch over every element is (a mean over rows * columns). Targets torch checks are in [0, 1] are
    drawn as probabilities. A weighted one stays the loss, refused."""
    path = tmp_path / "bce.py"
    path.write_text(
        "import torch.nn.functional as F\n\n\ndef bce_each(x, y):\n"
        '    return F.binary_cross_entropy_with_logits(x, y, reduction="none")\n\n\n'
        'def multilabel(x, y):\n    return F.binary_cross_entropy_with_logits(x, y, reduction="none").sum(-1).mean()\n\n\n'
        "def whole(x, y):\n    return F.binary_cross_entropy_with_logits(x, y)\n\n\n"
        "def weighted(x, y):\n    return F.binary_cross_entropy_with_logits(x, y, pos_weight=y)\n"
    )
    each = analyze(f"{path}:bce_each")
    assert each.tier == 1 and [t.domain for t in each.inputs] == ["", "probabilities"]
    multilabel = analyze(f"{path}:multilabel")
    assert multilabel.tier == 3 and multilabel.math.loss.reduction == "mean"
    whole = analyze(f"{path}:whole")
    assert whole.tier == 3 and (whole.math.loss.reduction, whole.math.loss.denominator) == ("mean", "n_cols")
    assert [t.domain for t in whole.inputs] == ["real", "probabilities"]
    with pytest.raises(AnalyzeError, match=r"bce.py:17: .* is a loss that reduces the whole tensor"):
        analyze(f"{path}:weighted")


def test_a_per_channel_buffer_is_named_as_a_buffer(tmp_path):
    path = tmp_path / "buffered.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass ShiftedTanh(nn.Module):\n"
        "    def __init__(self, hidden_size: int):\n        super().__init__()\n"
        '        self.register_buffer("shift", torch.linspace(-1.0, 1.0, hidden_size))\n\n'
        "    def forward(self, x):\n        return torch.tanh(x - self.shift)\n"
    )
    with pytest.raises(AnalyzeError, match=r"buffered.py:11: `self.shift` is a buffer, not a learnable parameter"):
        analyze(str(path))


GLU_CALLS = """import torch
import torch.nn.functional as F


def glu_scaled(x, scale: float = 2.0):
    return scale * F.glu(x, dim=-1)


def glu_named(a, x):
    \"\"\"the halves cannot be a and b: a is taken\"\"\"
    return torch.nn.functional.glu(x) + a


def glu_other_dim(x):
    return F.glu(x, dim=0)


class HeldGLU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.glu = torch.nn.GLU(dim=-1)

    def forward(self, hidden):
        return self.glu(hidden) * 2.0
"""


def test_torch_s_glu_of_the_last_dim_takes_the_two_halves(tmp_path):
    path = tmp_path / "glu_calls.py"
    path.write_text(GLU_CALLS)
    profile = analyze(f"{path}:glu_scaled")
    assert [t.name for t in profile.inputs] == ["a", "b"] and profile.tier == 1
    assert profile.math.outputs == {"y": "scale * a * sigmoid(b)"}
    assert "    return scale * (a * b.sigmoid())\n" in profile.reference.source
    named = analyze(f"{path}:glu_named")
    assert [t.name for t in named.inputs] == ["a", "x_a", "x_b"]
    with pytest.raises(AnalyzeError, match=r"glu_calls.py:15: `F.glu`"):
        analyze(f"{path}:glu_other_dim")  # halves along rows: not two inputs of the row kernel
    held = analyze(f"{path}:HeldGLU")  # an nn.GLU module the reference holds
    assert [t.name for t in held.inputs] == ["a", "b"] and held.math.outputs == {"y": "a * sigmoid(b) * 2.0"}


def test_a_module_whose_forward_chunks_its_input_takes_the_two_halves(tmp_path):
    path = tmp_path / "chunk_module.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass ChunkSwiGLU(nn.Module):\n"
        "    def __init__(self, beta: float = 1.0):\n        super().__init__()\n        self.beta = beta\n\n"
        "    def forward(self, x):\n        x, gate = x.chunk(2, dim=-1)\n"
        "        return x * gate * torch.sigmoid(self.beta * gate)\n"
    )
    profile = analyze(str(path))
    assert profile.reference.kind == "module" and [t.name for t in profile.inputs] == ["x", "gate"]
    assert [h.name for h in profile.hyperparameters] == ["beta"] and profile.tier == 1
    assert "    def forward(self, x, gate):\n" in profile.reference.source


def test_an_input_read_only_through_comparisons_takes_no_gradient_and_a_boolean_one_is_refused(tmp_path):
    """``torch.where(mask != 0, ...)``: torch gives the mask no gradient (a comparison carries none), so neither
    does the kernel; an element-wise or row kernel refuses a mask the reference selects by as a boolean, saying how
    to pass it as numbers."""
    path = tmp_path / "masked.py"
    path.write_text(
        "import torch\n\n\ndef by_float(x, mask):\n    return torch.where(mask != 0, torch.relu(x), x * 0.1)\n\n\n"
        "def by_bool(x, mask):\n    return torch.where(mask, torch.relu(x), x * 0.1)\n"
    )
    profile = analyze(f"{path}:by_float")
    assert profile.tier == 1 and [t.requires_grad for t in profile.inputs] == [True, False]
    with pytest.raises(AnalyzeError, match=r"masked.py:9: input 'mask' is a boolean mask .* select by 'mask != 0'"):
        analyze(f"{path}:by_bool")


def test_casts_to_a_dtype_the_reference_names_round_as_torch_does_or_are_refused(tmp_path):
    """A cast to an integer dtype truncates (and stops the gradient, as torch's does), one to ``torch.bool`` tests
    against zero, one of a comparison is exact; a cast to a fixed half precision (``.half()``, ``.to(torch.bfloat16)``)
    would round where the fp32 kernel does not, so it is refused by its line; a device move changes nothing."""
    path = tmp_path / "casts.py"
    path.write_text(
        "import torch\n\n\ndef truncated(x, y):\n    return x.to(torch.int32) * y + (x > 0).half() * y\n\n\n"
        "def tested(x, y):\n    return torch.where(x.to(torch.bool), y, x).to(x.device)\n\n\n"
        "def halved(x, y):\n    h = torch.sigmoid(x).half()\n    return (h * y).to(x.dtype)\n\n\n"
        "def loss(logits, target):\n    return torch.nn.functional.cross_entropy(logits.to(torch.bfloat16), target)\n"
    )
    profile = analyze(f"{path}:truncated")
    assert [t.requires_grad for t in profile.inputs] == [False, True]
    assert profile.math.outputs == {"y_out": "y*where(x > 0, 1, 0) + y*where(x >= 0, floor(x), -floor(-x))"}
    profile = analyze(f"{path}:tested")
    assert profile.math.outputs == {"y_out": "where(x, y, x)"}  # a number as a condition: where it is not 0
    with pytest.raises(AnalyzeError, match=r"casts.py:13: `.half\(\)` casts to torch.float16, a fixed precision"):
        analyze(f"{path}:halved")
    with pytest.raises(AnalyzeError, match=r"casts.py:18: `.to\(\)` casts to torch.bfloat16, a fixed precision"):
        analyze(f"{path}:loss")


def test_a_loss_takes_its_labels_through_long_and_its_rows_cast_back_whole(tmp_path):
    """``labels.long()`` is an integer cast of integers (nothing to derive); a per-row loss computed in fp32 and cast
    back to the logits' dtype as a whole is the store's own rounding (its rendered kernel read an undefined
    ``input_dtype`` before)."""
    path = tmp_path / "ce.py"
    path.write_text(
        "import torch.nn.functional as F\n\n\ndef ce(logits, labels):\n"
        "    return F.cross_entropy(logits.float(), labels.long(), reduction='none').to(logits.dtype)\n"
    )
    profile = analyze(str(path))
    assert profile.tier == 3 and profile.outputs[0].dtype == "same"
    assert "cast_to_input" not in profile.math.outputs["loss"]
    assert "input_dtype" not in render_kernel(profile).files["src/liger_kernel/ops/ce.py"]


def test_a_loss_refuses_a_learnable_parameter_by_the_line_that_reads_it(tmp_path):
    path = tmp_path / "clip.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Clip(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.logit_scale = nn.Parameter(torch.tensor(2.0))\n\n"
        "    def forward(self, logits, labels):\n        return F.cross_entropy(logits * self.logit_scale.exp(), labels)\n"
    )
    with pytest.raises(AnalyzeError, match=r"clip.py:12: the loss reads the learnable parameter 'logit_scale'; loss"):
        analyze(str(path))


def test_a_loss_refuses_a_boolean_mask_of_its_classes(tmp_path):
    """A [rows, classes] mask the loss selects by is taken as numbers (as element-wise kernels take one), so a
    boolean one is refused, saying how to pass it; the float mask it names generates."""
    path = tmp_path / "allowed.py"
    path.write_text(
        "import torch\nimport torch.nn.functional as F\n\n\ndef by_bool(logits, target, allowed):\n"
        "    return F.cross_entropy(logits.masked_fill(~allowed, float('-inf')), target)\n\n\n"
        "def by_float(logits, target, allowed):\n"
        "    return F.cross_entropy(logits.masked_fill(allowed == 0, float('-inf')), target)\n"
    )
    with pytest.raises(AnalyzeError, match=r"allowed.py:6: input 'allowed' is a boolean mask .* 'allowed != 0'"):
        analyze(f"{path}:by_bool")
    profile = analyze(f"{path}:by_float")
    assert profile.tier == 3 and [t.requires_grad for t in profile.inputs if t.name == "allowed"] == [False]


@pytest.mark.parametrize(
    "body, rank",
    [
        ("return F.normalize(x)", 2),  # dim=1 by default: the row of [rows, columns] only
        ("return torch.softmax(x, dim=1)", 2),
        ("return torch.softmax(x, dim=-1)", 0),
        ("return x / x.norm(dim=-1, keepdim=True)", 0),
    ],
)
def test_a_row_kernel_whose_reference_reduces_dim_1_takes_two_dim_inputs_only(tmp_path, body, rank):
    source = f"import torch\nimport torch.nn.functional as F\n\n\ndef rows(x):\n    {body}\n"
    profile = analyze(str(write(tmp_path, "rows.py", source)))
    assert profile.tier == 2 and profile.math.input_rank == rank
    said = [remark for remark in profile.notes.remarks if remark.startswith("shape: x is [rows, columns]")]
    assert len(said) == (1 if rank else 0)
    assert all(len(shape) == 2 for shape in profile.test.cpu_shapes) == bool(rank)


def test_a_no_grad_block_of_assignments_is_traced_as_detached_values_and_others_are_left_as_written():
    source = textwrap.dedent(
        """
        def f(x):
            with torch.no_grad():
                s = x.abs().amax(-1, keepdim=True)  # the scale
            with torch.no_grad():
                x.mul_(2)
            return x / s
        """
    )
    rewritten = _without_no_grad(source).splitlines()
    assert rewritten[2].startswith("    if True:  # kernelgen: traced as .detach()")
    assert rewritten[3] == "        s = (x.abs().amax(-1, keepdim=True)).detach()  # the scale"
    assert rewritten[4:6] == ["    with torch.no_grad():", "        x.mul_(2)"]  # not only assignments: as written
    assert len(rewritten) == len(source.splitlines())  # line numbers kept for messages


@pytest.mark.parametrize(
    "spread, columns",
    [
        ("x.std(-1, keepdim=True)", 2),
        ("x.var(-1, keepdim=True, correction=2)", 3),
        ("x.std(-1, unbiased=False, keepdim=True)", 1),
    ],
)
def test_a_row_kernels_narrowest_test_rows_have_as_many_columns_as_its_statistics_need(tmp_path, spread, columns):
    """The narrowest test rows see a statistic of as few values as it is defined for: one column, or one more than
    an unbiased variance's correction (where the reference and the kernel would both give NaN, comparing nothing)."""
    path = tmp_path / "spread_norm.py"
    path.write_text(
        f"import torch\n\n\ndef spread_norm(x):\n    return (x - x.mean(-1, keepdim=True)) / ({spread} + 1e-6)\n"
    )
    test = analyze(str(path)).test
    assert test.cpu_shapes[-1][-1] == columns and test.gpu_shapes[-1][-1] == columns
    assert all(shape[-1] > columns for shape in test.cpu_shapes[:-1])


@pytest.mark.parametrize(
    "source, entry",
    [
        (
            "def masked_nll(logits, target, ignore_index: int = -100):\n"
            "    keep = target != ignore_index\n"
            "    safe = torch.where(keep, target, torch.zeros_like(target))\n"
            "    logp = torch.log_softmax(logits, -1).gather(-1, safe.unsqueeze(-1)).squeeze(-1)\n"
            "    return -(logp * keep).sum() / keep.sum()\n",
            "masked_nll",
        ),
        (
            "class MaskedNLL(torch.nn.Module):\n"
            "    def __init__(self, ignore_index: int = -100):\n"
            "        super().__init__()\n"
            "        self.ignore_index = ignore_index\n\n"
            "    def forward(self, logits, target):\n"
            "        keep = target != self.ignore_index\n"
            "        safe = torch.where(keep, target, torch.zeros_like(target))\n"
            "        logp = torch.log_softmax(logits, -1).gather(-1, safe.unsqueeze(-1)).squeeze(-1)\n"
            "        return -(logp * keep).sum() / keep.sum()\n",
            "MaskedNLL",
        ),
    ],
)
def test_the_written_computation_names_the_ignored_class_by_its_hyper_parameter(tmp_path, source, entry):
    """The trace holds ints as numbers; the readable formula (the Function's docstring) says ``target !=
    ignore_index``, which the kernel takes at run time, not ``target != -100``."""
    path = tmp_path / "masked.py"
    path.write_text("import torch\n\n\n" + source)
    written = analyze(f"{path}:{entry}").forward_computation
    assert "keep = target != ignore_index" in written and "-100" not in written, written


@pytest.mark.parametrize("view", ["q.view(b, t, -1, self.head_dim)", "q.reshape(b, t, -1, self.head_dim)"])
def test_a_row_split_into_heads_by_a_size_argument_is_refused(tmp_path, view):
    """Traced with head_dim at the row's length the split is one head; built smaller it normalizes per head, which
    a kernel over whole rows would not: one line naming the split, not a kernel over the whole row."""
    source = (
        "import torch\nimport torch.nn as nn\n\n\nclass HeadwiseNorm(nn.Module):\n"
        "    def __init__(self, head_dim, eps=1e-6):\n        super().__init__()\n"
        "        self.head_dim = head_dim\n        self.eps = eps\n\n"
        f"    def forward(self, q):\n        b, t, _ = q.shape\n        q = {view}\n"
        "        q = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + self.eps)\n        return q.view(b, t, -1)\n"
    )
    with pytest.raises(AnalyzeError, match=r"splits each row into pieces of head_dim") as error:
        analyze(f"{write(tmp_path, 'headwise.py', source)}:HeadwiseNorm")
    assert error.value.line == 13


@pytest.mark.parametrize("call, rank", [("F.softmax(x, dim=2)", 3), ("x - x.mean(2, keepdim=True)", 3)])
def test_a_row_named_by_a_positive_dim_fixes_the_input_rank(tmp_path, call, rank):
    """``dim=2`` is the row of 3-d inputs only (as ``dim=1`` is of 2-d ones): the kernel takes that rank, and every
    test shape has it, the tier's [rows, columns] extras too."""
    source = f"import torch.nn.functional as F\n\n\ndef by_position(x):\n    return {call}\n"
    profile = analyze(f"{write(tmp_path, 'by_position.py', source)}:by_position")
    assert profile.math.input_rank == rank
    assert {len(shape) for shape in profile.test.cpu_shapes + profile.test.gpu_shapes} == {rank}
