"""Inputs that broadcast against the first one (issue 42, part 2): one row per sequence (``[batch, 1, hidden]``),
``[hidden]`` inputs that are no parameters, one value per row (``[batch, seq, 1]``), and inputs the reference
unsqueezes itself (DiT's ``scale.unsqueeze(1)``). The analysis learns their shapes from the ``shapes`` hint or from
the unsqueezes, the kernels read them at their own rows and sum their gradients over the broadcast dims; the
references are in ``fixtures/broadcast/`` (a module and two functions)."""

import textwrap

from pathlib import Path

import pytest
import torch

from test.kernelgen.conftest import assert_generated_tests_pass
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import import_generated_ops
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import snapshot
from tools.kernelgen.analyze import analyze
from tools.kernelgen.broadcast import declared_pattern
from tools.kernelgen.broadcast import inserted_dims
from tools.kernelgen.broadcast import shape_expression
from tools.kernelgen.broadcast import shape_for
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.pyrun import run_python

FIXTURES = Path(__file__).parent / "fixtures" / "broadcast"
# fixture -> (tier, each broadcast input's pattern)
REFERENCES = {
    "modulated_rms_norm": (2, {"scale": "* 1 *", "shift": "* 1 *"}),
    "gated_modulate": (1, {"shift": "* _ *", "scale": "* _ *", "gate": "* * _"}),
    "row_scaled_norm": (2, {"weight": "*", "bias": "*", "row_scale": "* * 1"}),
}


@pytest.mark.parametrize(
    "declared, first, pattern",
    [
        ("batch 1 hidden", "batch seq hidden", "* 1 *"),
        ("batch 1 hidden", None, "* 1 *"),
        ("hidden", "batch seq hidden", "*"),
        ("batch seq hidden", "batch seq hidden", ""),
        # Against a first input of any rank, a fixed rank is its trailing dims (it was read as the whole shape).
        ("hidden", "... hidden", "*"),
        ("... hidden", "... hidden", ""),
        ("... 1", None, "... 1"),
        ((2, 1, 8), (2, 5, 8), "* 1 *"),
        ((8,), (2, 5, 8), "*"),
        ((2, 5, 1), (2, 5, 8), "* * 1"),
        ((2, 5, 8), (2, 5, 8), ""),
        # rows shorter than the first input's (an index map's half-width tables), named with a factor or shown
        ("batch seq dim/2", "batch heads seq dim", "* * /2"),
        ("... dim/4", None, "... /4"),
        ((1, 5, 4), (2, 4, 5, 8), "1 * /2"),
        ((2, 5, 2), (2, 5, 8), "* * /4"),
    ],
)
def test_a_declared_shape_is_read_as_its_pattern(declared, first, pattern):
    assert declared_pattern(declared, first) == pattern


@pytest.mark.parametrize(
    "declared, first, problem",
    [
        ((3, 8), (2, 5, 8), "does not broadcast"),
        ((2, 1, 8), None, "give the first input's example shape too"),
        ("hidden", None, "declare the first input's shape too"),
        ("a b c d", "batch seq hidden", "more than the first input's 3"),
        (3.0, None, "neither dim names"),
        ("batch seq dim/3", None, "a shorter row is written NAME/2, NAME/4 or NAME/8"),
        ((2, 5, 3), (2, 5, 8), "does not broadcast"),
    ],
)
def test_a_declared_shape_that_cannot_broadcast_says_why(declared, first, problem):
    with pytest.raises(ValueError, match=problem):
        declared_pattern(declared, first)


def test_patterns_give_the_shapes_tests_draw_and_the_dims_kernels_insert():
    assert shape_for("* 1 *", (2, 5, 8)) == (2, 1, 8)
    assert shape_for("... 1", (2, 5, 8)) == (2, 5, 1)
    assert shape_for("* _ * *", (2, 4, 5, 8)) == (2, 5, 8)
    first = {"shape": (2, 4, 5, 8)}
    assert eval(shape_expression("* _ * *"), first) == (2, 5, 8)
    assert eval(shape_expression("... 1"), first) == (2, 4, 5, 1)
    assert inserted_dims("_ _ *") == (-2, -3)
    assert torch.empty(8).unsqueeze(-2).unsqueeze(-3).shape == (1, 1, 8)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_the_analysis_reads_each_broadcast_input_from_the_reference(name):
    tier, patterns = REFERENCES[name]
    profile = analyze(str(FIXTURES / f"{name}.py"))
    assert profile.tier == tier, profile.notes.tier_reason
    assert {t.name: t.broadcast for t in profile.inputs if t.broadcast} == patterns
    assert not profile.inputs[0].broadcast
    assert all(len(shape) >= 3 for shape in profile.test.cpu_shapes + profile.test.gpu_shapes)
    assert validate_profile(profile) == []


# The same modulation written other ways: each tells shift and scale are [batch, hidden] by what it does to them.
UNSQUEEZE_STYLES = {
    "unsqueeze": "x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)",
    "none_index": "x * (1 + scale[:, None, :]) + shift[:, None]",
    "view_of_ones": "x * (1 + scale.view(x.shape[0], 1, x.shape[-1])) + shift.reshape(-1, 1, x.shape[-1])",
    "layer_norm_first": "torch.nn.functional.layer_norm(x, x.shape[-1:]) * (1 + scale.unsqueeze(-2)) + shift.unsqueeze(1)",
}


@pytest.mark.parametrize("style", sorted(UNSQUEEZE_STYLES))
def test_inputs_the_reference_unsqueezes_are_read_in_every_spelling(style, tmp_path):
    reference = tmp_path / "modulate.py"
    reference.write_text(f"import torch\n\n\ndef modulate(x, shift, scale):\n    return {UNSQUEEZE_STYLES[style]}\n")
    profile = analyze(str(reference))
    assert {t.name: t.broadcast for t in profile.inputs} == {"x": "", "shift": "* _ *", "scale": "* _ *"}
    assert validate_profile(profile) == []


@pytest.mark.parametrize(
    "body, affine",
    [
        ("return F.rms_norm(x, (x.shape[-1],), w, 1e-6)", {"w": "*"}),
        ("return F.layer_norm(x, x.shape[-1:], weight=w, bias=b)", {"w": "*", "b": "*"}),
        ("return F.layer_norm(x, x.shape[-1:], w, b) * 2.0", {"w": "*", "b": "*"}),
    ],
)
def test_the_weight_and_bias_of_a_functional_norm_are_one_value_per_column(body, affine, tmp_path):
    """torch requires F.rms_norm's and F.layer_norm's weight and bias to have the normalized shape: passed in as
    function arguments they are [hidden] inputs broadcast over the rows (their gradients summed over them), not
    per-element ones (the generated test drew them like x, and the reference refused them)."""
    reference = tmp_path / "norm.py"
    names = ", ".join(["x", *affine])
    reference.write_text(f"import torch.nn.functional as F\n\n\ndef norm({names}):\n    {body}\n")
    profile = analyze(str(reference))
    assert {t.name: t.broadcast for t in profile.inputs} == {"x": "", **affine}
    assert profile.tier == 2 and validate_profile(profile) == []


@pytest.mark.parametrize(
    "signature, body, per_column",
    [
        # A norm written out, its weight an argument: one value per column, as callers pass a norm's weight.
        (
            "x, w",
            "v = x.float().pow(2).mean(-1, keepdim=True)\n    return (x.float() * torch.rsqrt(v + 1e-6)).to(x.dtype) * w",
            {"w": "*"},
        ),
        (
            "x, gamma, beta",
            "m = x - x.mean(-1, keepdim=True)\n    return m / m.std(-1, keepdim=True) * gamma + beta",
            {
                "gamma": "*",
                "beta": "*",
            },
        ),
        # The weight is reduced with x (inside the statistic): whole, as written.
        ("x, weight", "h = x * weight\n    return h / h.pow(2).mean(-1, keepdim=True).sqrt()", {"weight": ""}),
        # No reduction: an element-wise product keeps both whole.
        ("x, w", "return torch.tanh(x) * w", {"w": ""}),
        # Named otherwise: whole.
        ("x, mask", "return torch.softmax(x, -1) * mask", {"mask": ""}),
    ],
)
def test_a_norms_weight_passed_as_an_argument_is_one_value_per_column(signature, body, per_column, tmp_path):
    """A row reduction's input named as a norm's weight or bias (weight, w, gamma, beta, bias) that no reduction
    reads is ``[hidden]``: callers pass a norm's weight so, and a kernel of full-shape inputs refused it. ``new``
    says so in a ``shape:`` line; a ``shapes`` hint declares a whole one."""
    reference = tmp_path / "written_norm.py"
    reference.write_text(f"import torch\n\n\ndef written_norm({signature}):\n    {body}\n")
    profile = analyze(str(reference))
    assert {t.name: t.broadcast for t in profile.inputs} == {"x": "", **per_column}
    decided = [remark for remark in profile.notes.remarks if remark.startswith("shape: ")]
    assert len(decided) == sum(bool(pattern) for pattern in per_column.values())
    # The hint it offers is one the analysis takes as it stands: the first input declared beside the weight.
    assert all('{"x": "batch seq hidden", ' in remark for remark in decided)
    assert validate_profile(profile) == []


def test_a_norms_weight_declared_whole_stays_whole(tmp_path):
    reference = tmp_path / "whole_weight_norm.py"
    hint = 'KERNELGEN = {"shapes": {"x": "batch seq hidden", "w": "batch seq hidden"}}'
    body = "return x / x.pow(2).mean(-1, keepdim=True).sqrt() * w"
    reference.write_text(f"{hint}\n\n\ndef whole_weight_norm(x, w):\n    {body}\n")
    profile = analyze(str(reference))
    assert {t.name: t.broadcast for t in profile.inputs} == {"x": "", "w": ""}
    assert not [remark for remark in profile.notes.remarks if remark.startswith("shape: ")]


@pytest.fixture(scope="module")
def broadcast_checkout(tmp_path_factory) -> Path:
    """A checkout with the three references generated through the CLI (smoke run included)."""
    root = copy_checkout(tmp_path_factory.mktemp("broadcast") / "liger")
    for name in REFERENCES:
        result = run_kernelgen("new", name, "--reference", str(FIXTURES / f"{name}.py"), "--repo", str(root))
        assert result.returncode == 0, result.stderr
    return root


def test_generated_tests_of_broadcast_inputs_pass(broadcast_checkout):
    """Values and gradients of every input and parameter against autograd of the reference, at shapes whose
    broadcast dims repeat, on the fused and the split paths (interpreter on the CPU)."""
    assert_generated_tests_pass(broadcast_checkout, list(REFERENCES), at_least_per_kernel=8)


# A tier-1 and a tier-2 kernel; the per-row scale's kernel (row_scaled_norm) runs its generated tests above.
@pytest.mark.parametrize("name", ["gated_modulate", "modulated_rms_norm"])
def test_validate_passes_broadcast_kernels(broadcast_checkout, name):
    """Purity (the reduction over broadcast dims is a Triton kernel; wrappers only take shapes) and the staged
    correctness checks, whose data draws broadcast inputs in their shapes."""
    result = run_kernelgen("validate", name, "--repo", str(broadcast_checkout), "--skip-tests")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "purity: PASS" in result.stdout


def _modulated_rms_norm(x, scale, shift, weight, eps):
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return normed * weight * (1 + scale) + shift


@pytest.mark.parametrize(
    "x_shape, side_shape",
    [
        pytest.param((3, 5, 16), (3, 1, 16), id="per_sequence"),
        pytest.param((3, 5, 16), (16,), id="per_channel_input"),
        pytest.param((3, 5, 16), (3, 5, 1), id="per_row"),
        pytest.param((3, 5, 16), (1, 5, 16), id="per_position"),
        pytest.param((2, 3, 4, 16), (2, 1, 4, 16), id="between_kept_dims"),
        pytest.param((3, 5, 16), (3, 5, 16), id="full"),
        # two runs, the first leading: held expanded over it ([2, 3, 1, 16]), its gradient summed over both
        pytest.param((2, 3, 4, 16), (1, 3, 1, 16), id="leading_and_inner_runs"),
        pytest.param((2, 3, 4, 16), (3, 1, 16), id="missing_leading_and_inner_runs"),
    ],
)
def test_a_generated_row_kernel_takes_any_shape_that_broadcasts_as_one_run(broadcast_checkout, x_shape, side_shape):
    """The kernel generated for [batch, 1, hidden] reads whatever broadcasts against x with its broadcast dims in
    one run (or in two, the first leading), as torch would, gradients summed to each input's own shape."""
    ops = import_generated_ops(broadcast_checkout, "modulated_rms_norm")
    torch.manual_seed(0)
    x = torch.randn(x_shape, requires_grad=True)
    scale, shift = (torch.randn(side_shape, requires_grad=True) for _ in range(2))
    weight = (torch.rand(x_shape[-1]) + 0.5).requires_grad_(True)
    y = ops.LigerModulatedRmsNormFunction.apply(x, scale, shift, weight, 1e-6)
    grad = torch.randn_like(y)
    y.backward(grad)
    got = [t.grad for t in (x, scale, shift, weight)]
    leaves = [t.detach().double().requires_grad_(True) for t in (x, scale, shift, weight)]
    expected = _modulated_rms_norm(*leaves, 1e-6)
    expected.backward(grad.double())
    torch.testing.assert_close(y.double(), expected, atol=1e-5, rtol=1e-5)
    for name, mine, leaf in zip(("x", "scale", "shift", "weight"), got, leaves):
        assert mine.shape == leaf.shape, name
        torch.testing.assert_close(mine.double(), leaf.grad, atol=1e-4, rtol=1e-4, msg=name)


def test_a_broadcast_the_kernels_cannot_index_is_one_line(broadcast_checkout):
    ops = import_generated_ops(broadcast_checkout, "modulated_rms_norm")
    x, weight = torch.randn(2, 3, 4, 5, 16), torch.ones(16)
    with pytest.raises(ValueError, match=r"scale has shape \(2, 1, 4, 1, 16\): against \(2, 3, 4, 5, 16\) of x it "):
        ops.LigerModulatedRmsNormFunction.apply(x, torch.randn(2, 1, 4, 1, 16), torch.randn(16), weight, 1e-6)
    x = torch.randn(2, 3, 4, 16)
    with pytest.raises(
        ValueError, match=r"shift has shape \(3, 16\), which does not broadcast against \(2, 3, 4, 16\)"
    ):
        ops.LigerModulatedRmsNormFunction.apply(x, torch.randn(16), torch.randn(3, 16), weight, 1e-6)


def test_an_unsqueezed_input_keeps_its_own_shape(broadcast_checkout):
    """gated_modulate's shift and scale are [batch, hidden] and its gate [batch, seq], as the reference takes them:
    the kernel inserts the dims the reference unsqueezes and hands back gradients in the inputs' own shapes."""
    ops = import_generated_ops(broadcast_checkout, "gated_modulate")
    torch.manual_seed(1)
    x = torch.randn(2, 5, 8, requires_grad=True)
    shift, scale = (torch.randn(2, 8, requires_grad=True) for _ in range(2))
    gate = torch.randn(2, 5, requires_grad=True)
    y = ops.LigerGatedModulateFunction.apply(x, shift, scale, gate)
    y.backward(torch.ones_like(y))
    expected = (x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)) * torch.sigmoid(gate)[..., None]
    torch.testing.assert_close(y, expected)
    assert [t.grad.shape for t in (shift, scale, gate)] == [(2, 8), (2, 8), (2, 5)]
    # Where unsqueeze(1) inserts its dim depends on the rank: another rank is refused, not read another way.
    with pytest.raises(ValueError, match=r"shift has shape \(2, 1, 8\); the reference unsqueezes it, .* for 2 dims"):
        ops.LigerGatedModulateFunction.apply(x, shift.detach().unsqueeze(1), scale, gate)
    with pytest.raises(ValueError, match=r"scale has shape \(3, 8\), which does not broadcast against \(2, 5, 8\)"):
        ops.LigerGatedModulateFunction.apply(x, shift, torch.randn(3, 8), gate)


DTENSOR_SCRIPT = """
import sys

import torch
import torch.distributed as dist

from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate
from torch.distributed.tensor import distribute_tensor

sys.path.insert(0, "src")
from liger_kernel.ops.modulated_rms_norm import LigerModulatedRmsNormFunction

dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1)
mesh = init_device_mesh("cpu", (1,))
x, scale, shift = (distribute_tensor(t, mesh, [Replicate()]) for t in (torch.randn(2, 3, 8), torch.randn(2, 1, 8), torch.randn(2, 1, 8)))
weight = distribute_tensor(torch.ones(8), mesh, [Replicate()])
try:
    LigerModulatedRmsNormFunction.apply(x, scale, shift, weight, 1e-6)
except TypeError as error:
    print(error)
dist.destroy_process_group()
"""


def test_dtensor_inputs_with_a_broadcast_input_are_refused_in_one_line(broadcast_checkout, tmp_path):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "dtensor_refusal.py"
    script.write_text(DTENSOR_SCRIPT.format(port=port))
    result = run_python([str(script)], cwd=broadcast_checkout)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "modulated_rms_norm: DTensor inputs are not supported: scale broadcasts against x, whose shards it would not "
        "line up with"
    )


@pytest.mark.parametrize(
    "hint, message",
    [
        ('{"shapes": {"scale": "batch 1 hidden", "z": "hidden"}}', "names ['z'], which are no tensor inputs"),
        ('{"shapes": {"x": "batch 1 hidden"}}', "x is the first input, whose shape the others broadcast against"),
        ('{"shapes": {"x": (2, 5, 8), "scale": (3, 8)}}', "scale: (3, 8) (3, 8) does not broadcast against"),
        ('{"shapes": ["x"]}', "must map input names to shapes"),
    ],
)
def test_a_bad_shapes_hint_is_one_line_and_writes_nothing(checkout, tmp_path, hint, message):
    reference = tmp_path / "modulated.py"
    reference.write_text(
        textwrap.dedent(
            f"""
            def modulate(x, scale):
                return x * (1 + scale)


            KERNELGEN = {hint}
            """
        )
    )
    before = snapshot(checkout)
    error = one_line_error(run_kernelgen("new", "modulated", "--reference", str(reference), "--repo", str(checkout)))
    assert error.startswith(f"kernelgen: error: {reference}: KERNELGEN hint 'shapes'"), error
    assert message in error, error
    assert snapshot(checkout) == before


def test_an_undeclared_broadcast_is_refused_naming_it_not_as_a_loss(checkout, tmp_path):
    """An input read both unsqueezed and as it is cannot be told a shape from the code: the refusal names the op
    that broadcasts and the hint that declares shapes, never "a loss returns one value per row"."""
    reference = tmp_path / "mixed.py"
    reference.write_text("import torch\n\n\ndef mixed(x, scale):\n    return x * scale.unsqueeze(1) + scale\n")
    error = one_line_error(run_kernelgen("new", "mixed", "--reference", str(reference), "--repo", str(checkout)))
    assert error.startswith(f"kernelgen: error: {reference}:5: "), error
    assert "broadcasts operands of shapes" in error and 'KERNELGEN = {"shapes"' in error, error
    assert "a loss returns" not in error, error


def test_a_loss_with_a_broadcast_input_is_refused(checkout, tmp_path):
    reference = tmp_path / "weighted.py"
    reference.write_text(
        "import torch.nn.functional as F\n\n\ndef weighted(x, t, w):\n    return F.cross_entropy(x * w, t)\n\n\n"
        'KERNELGEN = {"shapes": {"x": "rows classes", "w": "classes"}}\n'
    )
    error = one_line_error(run_kernelgen("new", "weighted", "--reference", str(reference), "--repo", str(checkout)))
    assert "w broadcasts against x, which element-wise and row kernels take but this reference is tier 3" in error


@pytest.mark.parametrize(
    "index, pattern, problem",
    [
        (1, "* 2 *", "has '2'"),
        (0, "* 1 *", "the first input sets the shape"),
        (1, "... *", "broadcasts nothing"),
        (1, "... _ *", "both '...' and '_'"),
    ],
)
def test_a_profile_broadcast_pattern_is_validated(index, pattern, problem):
    profile = analyze(str(FIXTURES / "modulated_rms_norm.py"))
    profile.inputs[index].broadcast = pattern
    problems = validate_profile(profile)
    assert any(f"inputs[{index}].broadcast" in p and problem in p for p in problems), problems
