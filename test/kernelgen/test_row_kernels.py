"""Tier-2 synthesis end to end: every row-reduction built-in, and references written in other styles, become
kernels whose generated tests pass.

Each generated test compares the kernel's forward and every gradient (inputs and learnable parameters) with
torch.autograd of the embedded reference: fp32 against float64 with tolerances that grow with the row length,
bf16 against fp32 where the device supports it, plus rows of one column and rows of large or offset values. On
the CPU the kernels run under the Triton interpreter with small shapes; on a GPU the same tests use model-sized
shapes.
"""

from pathlib import Path

import pytest
import torch

from liger_kernel.ops import row_utils
from liger_kernel.ops.row_utils import backward_schedule
from liger_kernel.ops.row_utils import row_tile_settings
from test.kernelgen.conftest import WITHOUT_DTENSOR
from test.kernelgen.conftest import assert_generated_tests_pass
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import import_generated_ops
from test.kernelgen.test_analyze import TIER2_BUILTINS
from test.kernelgen.test_rows import STYLE_ENTRIES
from test.kernelgen.test_rows import STYLES
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

GROUPS = Path(__file__).parent / "fixtures" / "groups"
# Styles beyond the built-ins that the generated kernels are run for (the derivation covers all of them); logsumexp_rows
# has only a per-row output (its split passes combine per-row values and touch no columns).
# HeldEpsNorm's test sets its eps on the built module and passes forward's own hyper-parameter; mean_by_size reads
# the row length (an integer in the kernel) inside a square root; WideWeightRMSNorm holds its weight as (1, 1, H);
# CosineGate gives one value per row from two inputs; DtypeBranchNorm branches on its weight's dtype; cosine_logits
# rounds to the input's dtype in its forward only; ClipLayerNorm runs torch's LayerNorm on a float32 copy (its
# test's float64 reference keeps float64 there); CosineRows normalizes dim 1, 2-d inputs only (its test checks that
# a 3-d one is refused); SqrtSizeNorm reads its size as a number (math.sqrt(self.dim)): the row's length.
STYLE_KERNELS = [
    "WrappedLayerNorm",
    "NormWithRstd",
    "ScaledRMSNorm",
    "max_shift",
    "standardize",
    "logsumexp_rows",
    "HeldEpsNorm",
    "mean_by_size",
    "WideWeightRMSNorm",
    "CosineGate",
    "DtypeBranchNorm",
    "logaddexp_rms",
    "PolyNorm",
    "IndexedPolyNorm",
    "cosine_logits",
    "ClipLayerNorm",
    "CosineRows",
    "SqrtSizeNorm",
]


@pytest.fixture(scope="module")
def generated_checkout(tmp_path_factory):
    """One checkout holding a generated kernel per reference (generation is checked as it goes)."""
    root = copy_checkout(tmp_path_factory.mktemp("rows") / "liger")
    styles = root / "styles.py"
    styles.write_text(STYLES)
    names = []
    for reference, name in [(r, f"{r}_gen") for r in TIER2_BUILTINS] + [
        (f"{styles}:{entry}", f"style_{entry.lower()}") for entry in STYLE_KERNELS
    ]:
        profile = analyze(reference, name=name)
        assert profile.tier == 2, f"{reference}: {profile.notes.tier_reason}"
        assert profile.math.statistics and profile.math.triton is None  # derived, not hand-written
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
        names.append(name)
    # GroupNorm as written out (per-channel parameters) and as F.group_norm (its affine as inputs): rows over groups
    # of channels. The functional's generated tests are the module's less the module: it is checked against torch
    # below instead.
    for name in ("group_norm", "group_norm_functional"):
        profile = analyze(str(GROUPS / f"{name}.py"))
        assert profile.tier == 2 and profile.math.groups == "num_groups", profile.notes.tier_reason
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    return root, names + ["group_norm"]


def test_generated_row_kernels_run_under_the_interpreter(generated_checkout):
    root, names = generated_checkout
    for name in names:
        ops_source = (root / kernel_paths(name)["ops"]).read_text()
        assert "libdevice." not in ops_source  # must also run under the Triton interpreter
        assert "keep_dims=True" in ops_source  # reduces rows in its tiles


def test_generated_row_kernels_match_torch_autograd(generated_checkout):
    root, names = generated_checkout
    assert set(STYLE_KERNELS) <= set(STYLE_ENTRIES)
    assert_generated_tests_pass(root, names, at_least_per_kernel=6, extra=WITHOUT_DTENSOR)


def test_the_backward_schedule_follows_the_register_budget(generated_checkout, monkeypatch):
    """Fused with pipelined loads while a thread's live tiles fit 64 registers, fused without past that, the split
    path past 96 (H200: benchmark/data/tier2_backward_schedule_h200.log), as compiled (the interpreter runs the
    while loop). The schedule is the shared module's; the tiles a kernel holds live are its own."""
    root, _ = generated_checkout
    layer_norm, rms_norm = import_generated_ops(root, "layer_norm_gen"), import_generated_ops(root, "rms_norm_gen")
    assert (layer_norm._BACKWARD_ROWS_HELD, rms_norm._BACKWARD_ROWS_HELD) == (4, 3)  # + grad_y, x; 2 or 1 accumulators

    def schedule(module, n_cols, load_bytes=4):  # x and grad_y in bf16
        held = module._BACKWARD_ROWS_HELD
        block_rows, block_cols, num_warps = row_tile_settings("k", 16384, n_cols, 4096, backward=True, rows_held=held)
        return backward_schedule(block_rows * block_cols, num_warps, load_bytes, held)

    assert schedule(layer_norm, 4096) == (False, False)  # interpreted: never pipelined
    # As compiled on an H200: the shared memory a program may use is the device's (227 KB there).
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(row_utils, "_shared_memory_bytes", lambda device: 232448)
    assert [schedule(layer_norm, n) for n in (4096, 8192, 14336)] == [(False, True), (False, True), (True, False)]
    assert [schedule(rms_norm, n) for n in (4096, 8192, 14336)] == [(False, True), (False, True), (False, False)]
    # Pipelined loads buffer two tiles in shared memory: fp32 rows of 16384 columns would need 256 KB (a
    # learnable-temperature softmax at 14336 columns failed to launch so on an H200).
    assert backward_schedule(16384, 32, 4, 3) == (False, True)  # 48 live registers, 128 KB
    assert backward_schedule(16384, 32, 8, 3) == (False, False)  # fp32: 256 KB
    # The limit is the device's: where a program may use 99 KB, the bf16 tiles above do not fit either.
    monkeypatch.setattr(row_utils, "_shared_memory_bytes", lambda device: 101376)
    assert backward_schedule(16384, 32, 4, 3) == (False, False)


def test_rows_past_the_register_budget_take_the_split_backward_and_match_torch(generated_checkout):
    """Rows of 9000 columns: the generated layer norm's backward runs the split path (a row-sum pass, then its own
    kernel in SPLIT mode over blocks of 2048 columns), and its gradients are torch.autograd's."""
    root, _ = generated_checkout
    module = import_generated_ops(root, "layer_norm_gen")
    held = module._BACKWARD_ROWS_HELD
    block_rows, block_cols, num_warps = row_tile_settings("k", 3, 9000, 4096, backward=True, rows_held=held)
    assert backward_schedule(block_rows * block_cols, num_warps, 8, held)[0]
    torch.manual_seed(0)
    x, weight, bias = torch.randn(3, 9000), torch.rand(9000) + 0.5, torch.randn(9000)
    leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
    module.LigerLayerNormGenFunction.apply(*leaves, 1e-5).backward(grad := torch.randn(3, 9000))
    reference = [t.double().requires_grad_() for t in (x, weight, bias)]
    torch.nn.functional.layer_norm(reference[0], (9000,), reference[1], reference[2], 1e-5).backward(grad.double())
    for name, ours, theirs in zip(["x", "weight", "bias"], leaves, reference):
        torch.testing.assert_close(ours.grad.double(), theirs.grad, atol=1e-4, rtol=1e-4, msg=name)


SCALED_LOG_SOFTMAX = """
import torch
import torch.nn as nn


class ScaledLogSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(self, x):
        return torch.log_softmax(x * self.scale, dim=-1)
"""


@pytest.mark.parametrize("n_cols", [131072, 139264])
def test_rows_longer_than_one_program_holds_go_through_the_split_path_in_pieces(generated_checkout, n_cols):
    """Rows of 131072 and 139264 columns (a vocabulary's), cut into 2 pieces of 65536 and 4 of 34816: softmax's
    forward and backward, and a log-softmax's scalar parameter gradient (each piece holds its row's value whole,
    counted once), are torch's; rows no cut divides, and a kernel with a per-row output, keep the one line."""
    root, _ = generated_checkout
    softmax = import_generated_ops(root, "softmax_gen")
    reference = root / "scaled_log_softmax.py"
    if not reference.exists():
        reference.write_text(SCALED_LOG_SOFTMAX)
        profile = analyze(f"{reference}:ScaledLogSoftmax", name="long_scaled_log_softmax")
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    scaled = import_generated_ops(root, "long_scaled_log_softmax")
    torch.manual_seed(0)
    x, grad = torch.randn(2, n_cols) * 3, torch.randn(2, n_cols)
    ours, theirs = x.clone().requires_grad_(), x.double().requires_grad_()
    softmax.LigerSoftmaxGenFunction.apply(ours).backward(grad)
    torch.softmax(theirs, dim=-1).backward(grad.double())
    torch.testing.assert_close(ours.grad.double(), theirs.grad, atol=1e-7, rtol=1e-4)
    scale = torch.tensor(1.5, requires_grad=True)
    ours, theirs, reference_scale = x.clone().requires_grad_(), x.double().requires_grad_(), scale.double().detach()
    reference_scale.requires_grad_()
    scaled.LigerLongScaledLogSoftmaxFunction.apply(ours, scale).backward(grad)
    torch.log_softmax(theirs * reference_scale, dim=-1).backward(grad.double())
    torch.testing.assert_close(ours.grad.double(), theirs.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(scale.grad.double(), reference_scale.grad, atol=1e-3, rtol=1e-5)
    with pytest.raises(ValueError, match="rows of 131101 columns exceed the 65536 one program holds, and no cut"):
        softmax.LigerSoftmaxGenFunction.apply(torch.randn(1, 131101))
    logsumexp = import_generated_ops(root, "style_logsumexp_rows")
    with pytest.raises(ValueError, match="rows of 70000 columns exceed the 65536 one program holds$"):
        logsumexp.LigerStyleLogsumexpRowsFunction.apply(torch.randn(1, 70000))


@pytest.mark.parametrize(
    "shape, groups",
    [
        pytest.param((2, 6, 3, 5), 3, id="spatial_dims"),
        pytest.param((1, 4, 9000), 2, id="long_group_rows"),  # groups of 18000 elements, walked in column blocks
        pytest.param((3, 5, 7), 5, id="a_group_per_channel"),
        # Groups of 66000 elements: each program walks its group tile by tile, once per reduction pass and once to
        # write, the tiles' parts of each statistic combined in registers.
        pytest.param((1, 4, 16500), 1, id="groups_of_many_tiles"),
        # Channels of one element: a tile holds several channels of a group (8 of a group of 6, two padded).
        pytest.param((2, 12), 2, id="channels_of_one_element"),
    ],
)
def test_a_generated_group_norm_matches_torch(generated_checkout, shape, groups):
    """The functional kernel against torch's group_norm: inputs with several trailing dims, rows walked in column
    blocks, one channel per group, groups of many tiles, channels of one element."""
    ops = import_generated_ops(generated_checkout[0], "group_norm_functional")
    torch.manual_seed(0)
    x = torch.randn(shape, requires_grad=True)
    weight, bias = (torch.randn(shape[1], requires_grad=True) for _ in range(2))
    y = ops.LigerGroupNormFunctionalFunction.apply(x, weight, bias, groups, 1e-5)
    grad = torch.randn_like(y)
    y.backward(grad)
    leaves = [t.detach().double().requires_grad_(True) for t in (x, weight, bias)]
    expected = torch.nn.functional.group_norm(leaves[0], groups, leaves[1], leaves[2], 1e-5)
    expected.backward(grad.double())
    torch.testing.assert_close(y.double(), expected, atol=1e-5, rtol=1e-5)
    for name, mine, leaf in zip(("x", "weight", "bias"), (x.grad, weight.grad, bias.grad), leaves):
        torch.testing.assert_close(mine.double(), leaf.grad, atol=1e-3, rtol=1e-4, msg=name)


def test_channels_that_do_not_split_into_the_groups_are_one_line(generated_checkout):
    ops = import_generated_ops(generated_checkout[0], "group_norm_functional")
    x, weight = torch.randn(2, 6, 5), torch.ones(6)
    with pytest.raises(
        ValueError, match=r"x has shape \(2, 6, 5\); it takes \[batch, channels, \.\.\.\] with channels a"
    ):
        ops.LigerGroupNormFunctionalFunction.apply(x, weight, weight, 4, 1e-5)
