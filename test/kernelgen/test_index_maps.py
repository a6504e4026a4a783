"""Index maps within a row (issue 42, points 1 and 2): references that read other positions of their row (halves taken by
slicing, chunk or split, gpt-oss's interleaved SwiGLU, rotate_half and RoPE, flip, stack-then-flatten) become tier-1
kernels over lanes, forward and backward derived; the generated tests compare values and every gradient with
torch.autograd of the reference under the Triton interpreter. Inputs that broadcast against the first (HF RoPE's
cos and sin) are read at their own rows, and outputs computed alike from inputs of other rows (RoPE's q and k) are
row groups of one launch. What no cut into lanes expresses is refused in one line naming the construct and its line.
References: fixtures/index_maps/ (functions and modules)."""

import ast

from pathlib import Path

import pytest
import torch

from test.kernelgen.conftest import WITHOUT_DTENSOR
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import failures_by_kernel
from test.kernelgen.conftest import import_generated_ops
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import run_pytest
from test.kernelgen.conftest import snapshot
from test.kernelgen.fixtures.index_maps import functional
from test.kernelgen.fixtures.index_maps import helium_rope
from test.kernelgen.fixtures.index_maps import hf_rope
from test.kernelgen.fixtures.index_maps import modules
from tools.kernelgen.analyze import AnalyzeError
from tools.kernelgen.analyze import analyze
from tools.kernelgen.analyze.written import written_computation
from tools.kernelgen.generate import plan_new
from tools.kernelgen.lane_maps import LaneMap
from tools.kernelgen.lane_maps import parse_lane
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import ProfileError
from tools.kernelgen.profile import dump_yaml
from tools.kernelgen.profile import load_yaml
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

FIXTURES = Path(__file__).parent / "fixtures" / "index_maps"
# The kernels called here run on the GPU where there is one, else under the Triton interpreter.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FUNCTIONAL, MODULES = FIXTURES / "functional.py", FIXTURES / "modules.py"
WRITTEN_RANK = FIXTURES / "written_rank.py"

# kernel name -> (reference, lanes per input row, input lanes as the profile writes them, output lanes)
GENERATED = {
    "rotate_half_map": (f"{FUNCTIONAL}:rotate_half", 2, ["x[cols]", "x[cols + n_cols]"], ["[cols]", "[cols + n_cols]"]),
    "rope_map": (f"{FUNCTIONAL}:rope", 2, ["q[cols]", "q[cols + n_cols]"], ["[cols]", "[cols + n_cols]"]),
    "sliced_swiglu_map": (f"{FUNCTIONAL}:sliced_swiglu", 2, ["x[cols]", "x[cols + n_cols]"], ["[cols]"]),
    "interleaved_swiglu_map": (f"{FUNCTIONAL}:interleaved_swiglu", 2, ["x[2 * cols]", "x[2 * cols + 1]"], ["[cols]"]),
    "quarter_mix_map": (f"{FUNCTIONAL}:quarter_mix", 4, ["x[cols]", "x[cols + 3 * n_cols]"], ["[cols + n_cols]"]),
    "split_reglu_map": (f"{MODULES}:SplitReGLU", 2, ["x[cols]", "x[cols + n_cols]"], ["[cols]"]),
    "scaled_flip_map": (f"{MODULES}:ScaledFlip", 1, ["x[-cols + n_cols - 1]"], ["[cols]"]),
    "pair_interleave_map": (f"{MODULES}:PairInterleave", 1, ["a[cols]", "b[cols]"], ["[2 * cols]", "[2 * cols + 1]"]),
    # GPT-J's interleaved rotary embedding: every other element, stacked back and flattened
    "gptj_rope_map": (f"{FUNCTIONAL}:gptj_rope", 2, ["x[2 * cols]", "x[2 * cols + 1]"], ["[2 * cols + 1]"]),
    # partial rotary: the first half rotated (quarters of the row), the rest passed through; cos and sin read in part
    "partial_rope_map": (
        f"{FUNCTIONAL}:partial_rope",
        4,
        ["q[cols + 3 * n_cols]", "cos[cols]"],
        ["[cols + 2 * n_cols]"],
    ),
    # narrow, and a slice bound counted from the end
    "narrow_geglu_map": (
        f"{MODULES}:NarrowGeGLU",
        2,
        ["hidden_states[cols]", "hidden_states[cols + n_cols]"],
        ["[cols]"],
    ),
    # one position read through two maps: the flipped lane's gradient goes to a buffer of its own, added after
    "flip_self_map": (f"{FUNCTIONAL}:flip_against_itself", 1, ["x[cols]", "x[-cols + n_cols - 1]"], ["[cols]"]),
    # two outputs of different widths: a half and a whole row
    "gate_and_swap_map": (f"{FUNCTIONAL}:gate_and_swap", 2, ["x[cols]", "x[cols + n_cols]"], ["[cols + n_cols]"]),
    # HF's RoPE: cos and sin broadcast (unsqueezed at unsqueeze_dim), q and k rows of their own in one launch
    "hf_rope_map": (
        f"{FIXTURES / 'hf_rope.py'}:apply_rotary_pos_emb",
        2,
        ["q[cols + n_cols]", "cos[cols]"],
        ["[cols + n_cols]"],
    ),
    # ... as a module: chunk, torch.unsqueeze at the dim its constructor fixes
    "rotary_module_map": (
        f"{MODULES}:RotaryEmbeddingApply",
        2,
        ["query[cols + n_cols]", "cos[cols]"],
        ["[cols + n_cols]"],
    ),
    # cos and sin of one batch row, declared by the shapes hint
    "broadcast_rope_map": (f"{FIXTURES / 'broadcast_rope.py'}:rope", 2, ["q[cols]", "sin[cols + n_cols]"], ["[cols]"]),
    # indexing that spells out 4 dims: GPT-J's x[:, :, :, ::2], cos[:, None, :, :] for the heads
    "gptj_rope_4d_map": (
        f"{WRITTEN_RANK}:gptj_rope_4d",
        2,
        ["tensor[2 * cols]", "tensor[2 * cols + 1]"],
        ["[2 * cols]"],
    ),
    "indexed_heads_rope_map": (f"{WRITTEN_RANK}:rope_indexed_heads", 2, ["q[cols + n_cols]", "cos[cols]"], ["[cols]"]),
    "half_tables_rope_map": (f"{WRITTEN_RANK}:rope_half_tables", 1, ["x1[cols]", "cos[cols]"], ["[cols + n_cols]"]),
    # repeat_interleave: an output of each element twice; a scale per pair (x strided, scale blocked: cut apart)
    "doubled_gate_map": (f"{FUNCTIONAL}:doubled_gate", 1, ["x[cols]"], ["[2 * cols]", "[2 * cols + 1]"]),
    "pair_scaled_map": (f"{FUNCTIONAL}:pair_scaled", 2, ["x[2 * cols + 1]", "scale[cols]"], ["[2 * cols + 1]"]),
    # cos and sin of rows half as long as the first input's (pattern ... /2): one lane each
    "gptj_half_tables_map": (f"{FUNCTIONAL}:gptj_half_tables", 2, ["x[2 * cols]", "cos[cols]"], ["[2 * cols + 1]"]),
    "neox_half_tables_map": (f"{FUNCTIONAL}:neox_half_tables", 2, ["q[cols + n_cols]", "sin[cols]"], ["[cols]"]),
    # HF's GPT-J: half-width sin and cos unsqueezed and repeat_interleave'd to the head width inside the function
    "hf_gptj_rope_map": (f"{FIXTURES / 'hf_gptj_rope.py'}:apply_rotary_pos_emb", 2, ["sin[cols]"], ["[2 * cols]"]),
    # halves, then every other element of each: pairs of strided lanes in blocks (4 lanes, in blocks of 2)
    "interleaved_halves_map": (
        f"{MODULES}:InterleavedHalves",
        4,
        ["x[2 * cols]", "x[2 * cols + 2 * n_cols + 1]"],
        ["[cols]"],
    ),
    # GLM's RoPE: the first half of q and k rotated as pairs, the rest passed; cos and sin of half the head width
    "glm_rope_map": (
        f"{FIXTURES / 'glm_rope.py'}:apply_rotary_pos_emb",
        4,
        ["q[2 * cols]", "q[2 * cols + 2 * n_cols + 1]", "cos[cols]"],
        ["[2 * cols + 1]", "[2 * cols + 2 * n_cols]"],
    ),
    # Helium's RoPE: pairs of q and k rotated, the first half of cos and sin repeated to meet them
    "helium_rope_map": (
        f"{FIXTURES / 'helium_rope.py'}:apply_rotary_pos_emb",
        2,
        ["q[2 * cols]", "q[2 * cols + 1]", "cos[cols]", "sin[cols]"],
        ["[2 * cols]", "[2 * cols + 1]"],
    ),
}


@pytest.fixture(scope="module")
def profiles():
    return {name: analyze(reference, name=name) for name, (reference, *_) in GENERATED.items()}


@pytest.fixture(scope="module")
def generated_checkout(tmp_path_factory, profiles):
    root = copy_checkout(tmp_path_factory.mktemp("index_maps") / "liger")
    for profile in profiles.values():
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    return root


@pytest.mark.parametrize("name", list(GENERATED))
def test_a_reference_that_moves_elements_within_the_row_is_tier_one_over_lanes(profiles, name):
    """The profile holds the cut into lanes, where each lane lies, a formula per output lane and no hand-written
    Triton; every input lane's gradient is derived."""
    _, count, inputs, outputs = GENERATED[name]
    profile = profiles[name]
    assert profile.tier == 1 and profile.math.triton is None, profile.notes.tier_reason
    assert "move elements within the row" in profile.notes.tier_reason
    lanes = profile.math.lanes
    assert lanes.count == count
    assert set(inputs) <= set(lanes.inputs.values()), lanes.inputs
    assert all(any(text.endswith(end) for text in lanes.outputs.values()) for end in outputs), lanes.outputs
    assert list(profile.math.outputs) == list(lanes.outputs)
    assert set(profile.notes.gradient_formulas) == {f"grad_{lane}" for lane in lanes.inputs}


def test_generated_kernels_match_torch_autograd_of_the_reference(generated_checkout):
    names = list(GENERATED)
    result = run_pytest(generated_checkout, *[kernel_paths(name)["test"] for name in names], *WITHOUT_DTENSOR)
    assert result.returncode == 0, failures_by_kernel(result.stdout, names) + result.stdout[-3000:]
    passed = int(result.stdout.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    assert passed >= 5 * len(names)


def _function(checkout: Path, name: str):
    ops = import_generated_ops(checkout, name)
    return next(getattr(ops, attr) for attr in dir(ops) if attr.endswith("Function"))


@pytest.mark.parametrize(
    "name, reference, widths, hypers",
    [
        ("rope_map", functional.rope, [40, 40, 40], ()),
        ("interleaved_swiglu_map", functional.interleaved_swiglu, [50], (1.702, 7.0)),
        ("quarter_mix_map", functional.quarter_mix, [36], ()),
        ("gptj_rope_map", functional.gptj_rope, [34, 34, 34], ()),
        ("partial_rope_map", functional.partial_rope, [44, 44, 44], ()),
        ("scaled_flip_map", lambda x, scale: modules.ScaledFlip(scale)(x), [33], (0.5,)),
        ("pair_interleave_map", lambda a, b: modules.PairInterleave()(a, b), [33, 33], ()),
        ("flip_self_map", functional.flip_against_itself, [33], ()),
        ("doubled_gate_map", functional.doubled_gate, [33], ()),
        ("pair_scaled_map", functional.pair_scaled, [34, 34], ()),
        ("gptj_half_tables_map", functional.gptj_half_tables, [34, 17, 17], ()),
        ("neox_half_tables_map", functional.neox_half_tables, [34, 17, 17], ()),
    ],
)
def test_many_rows_of_strided_inputs_match_the_reference(generated_checkout, name, reference, widths, hypers):
    """More rows than one tile holds (each tile's pointers move by whole rows, lanes stay within them), inputs that
    are slices of wider rows (read in place by their row stride): values and gradients as autograd's."""
    torch.manual_seed(0)
    function = _function(generated_checkout, name)
    wide = [torch.randn(300, width + 6, dtype=torch.float64, device=DEVICE) for width in widths]
    inputs = [w[..., :width].float().requires_grad_() for w, width in zip(wide, widths)]
    strided = [
        torch.empty(300, width + 3, device=DEVICE)[..., :width].copy_(x.detach()).requires_grad_()
        for x, width in zip(inputs, widths)
    ]
    out = function.apply(*strided, *hypers)
    grad = torch.randn_like(out)
    out.backward(grad)
    expected = reference(*inputs, *hypers)
    expected.backward(grad)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for x, leaf in zip(inputs, strided):
        torch.testing.assert_close(leaf.grad, x.grad, rtol=1e-5, atol=1e-5)


def test_a_position_read_twice_takes_its_gradient_rounded_once(generated_checkout):
    """x * flip(x) in half precision: each position's gradient is two terms (as itself, as the flipped lane) chosen
    to nearly cancel. Added in fp32 and rounded once, the sum is fp16's rounding of the exact one; two halves each
    rounded first would be off by a rounding of the terms (a GPU's bf16 run of the generated test caught that)."""
    torch.manual_seed(0)
    function = _function(generated_checkout, "flip_self_map")
    x = (torch.rand(64, 2, dtype=torch.float64) * 20 + 10).half()
    grad = torch.empty(64, 2, dtype=torch.float64)
    grad[:, 0] = torch.rand(64, dtype=torch.float64) * 20 + 10
    # grad_x = (grad + flip(grad)) * flip(x): each row's two upstream gradients almost each other's negative
    grad[:, 1] = -grad[:, 0] * 1.001
    grad = grad.half()
    leaf = x.clone().requires_grad_()
    function.apply(leaf).backward(grad)
    exact = (grad.double() + grad.double().flip(-1)) * x.double().flip(-1)
    torch.testing.assert_close(leaf.grad, exact.half(), rtol=1e-3, atol=0)


def test_an_output_without_a_gradient_of_its_own_takes_zeros_of_its_width(generated_checkout):
    """Only the half-width output reaches the loss: autograd passes None for the whole-row one."""
    torch.manual_seed(0)
    function = _function(generated_checkout, "gate_and_swap_map")
    x = torch.randn(5, 12, device=DEVICE, requires_grad=True)
    gated, _ = function.apply(x)
    gated.sum().backward()
    kernel_grad, x.grad = x.grad, None
    functional.gate_and_swap(x)[0].sum().backward()
    torch.testing.assert_close(kernel_grad, x.grad)


def test_positions_no_lane_reads_take_a_zero_gradient(profiles, generated_checkout):
    """Partial rotary reads the first half of cos and sin only: the rest of their gradients is zero."""
    assert set(profiles["partial_rope_map"].math.lanes.inputs.values()) >= {"cos[cols]", "cos[cols + n_cols]"}
    assert "cos[cols + 2 * n_cols]" not in profiles["partial_rope_map"].math.lanes.inputs.values()
    function = _function(generated_checkout, "partial_rope_map")
    q, cos, sin = (torch.randn(3, 16, device=DEVICE, requires_grad=True) for _ in range(3))
    function.apply(q, cos, sin).sum().backward()
    assert not cos.grad[:, 8:].any() and not sin.grad[:, 8:].any()
    assert cos.grad[:, :8].abs().min() > 0


def test_inputs_cut_apart_say_each_cut_and_read_half_a_table(profiles, generated_checkout):
    """Helium's RoPE: q and k in strided lanes, cos and sin in blocked ones, of which the second half is never read
    (its gradient is zero) and the first half's gradient sums both elements of each pair and both row groups."""
    reason = profiles["helium_rope_map"].notes.tier_reason
    assert "2 lanes: q, k strided; cos, sin blocked" in reason, reason
    module = import_generated_ops(generated_checkout, "helium_rope_map")
    function = next(getattr(module, attr) for attr in dir(module) if attr.endswith("Function"))
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 5, 8, device=DEVICE), torch.randn(2, 2, 5, 8, device=DEVICE)
    cos, sin = torch.randn(2, 5, 8, device=DEVICE), torch.randn(2, 5, 8, device=DEVICE)
    leaves = [t.clone().requires_grad_() for t in (q, k, cos, sin)]
    outputs = function.apply(*leaves, 1)
    grads = [torch.randn_like(out) for out in outputs]
    torch.autograd.backward(outputs, grads)
    expected_leaves = [t.clone().requires_grad_() for t in (q, k, cos, sin)]
    expected = helium_rope.apply_rotary_pos_emb(*expected_leaves)
    torch.autograd.backward(expected, grads)
    for out, reference in zip(outputs, expected):
        torch.testing.assert_close(out, reference)
    for leaf, reference in zip(leaves, expected_leaves):
        torch.testing.assert_close(leaf.grad, reference.grad)
    assert not leaves[2].grad[..., 4:].any() and leaves[2].grad[..., :4].abs().min() > 0


@pytest.mark.parametrize(
    "source, line, construct",
    [
        ("return x.repeat_interleave(2, dim=0) * 2", 5, "moves elements along dim 0, not the last (the row)"),
        ("return torch.repeat_interleave(x, 2) * 2", 5, "without dim repeats the flattened tensor"),
        ("return x.repeat_interleave(counts, dim=-1)", 5, "repeats must be a positive integer, not a tensor"),
    ],
)
def test_a_repeat_no_lane_expresses_is_one_line(tmp_path, source, line, construct):
    path = tmp_path / "repeats.py"
    path.write_text(f"import torch\n\n\ndef f(x, counts):\n    {source}\n")
    with pytest.raises(AnalyzeError) as raised:
        analyze(f"{path}:f")
    message = str(raised.value)
    assert message.startswith(f"{path}:{line}: ") and construct in message, message


def test_rows_that_hold_no_whole_number_of_lanes_are_refused_by_the_kernel(generated_checkout):
    function = _function(generated_checkout, "interleaved_swiglu_map")
    with pytest.raises(ValueError, match=r"x has 7 columns, not a multiple of the 2 lanes its row is cut into"):
        function.apply(torch.randn(3, 7, device=DEVICE), 1.702, 7.0)


@pytest.mark.parametrize(
    "reference, line, construct",
    [
        (f"{FUNCTIONAL}:off_lane_slice", 36, "`x[..., 1:]` cuts the row at 1, not at a lane boundary"),
        (f"{FUNCTIONAL}:rotate_half_scaled", 70, "reads scale as one value per row ('* * _')"),
        (f"{MODULES}:EveryThird", 39, "`x[..., ::3]` takes one element in 3, which this cut's lanes do not"),
    ],
)
def test_an_index_map_no_cut_expresses_is_one_line_naming_its_construct_and_line(checkout, reference, line, construct):
    before = snapshot(checkout)
    error = one_line_error(run_kernelgen("new", "unmapped", "--reference", reference, "--repo", str(checkout)))
    path = reference.rsplit(":", 1)[0]
    assert error.startswith(f"kernelgen: error: {path}:{line}: "), error
    assert construct in error, error
    assert snapshot(checkout) == before


def test_a_hand_edited_lane_that_overlaps_another_is_refused_naming_it(profiles):
    text = dump_yaml(profiles["interleaved_swiglu_map"]).replace("x[2 * cols + 1]", "x[2 * cols + 2]")
    with pytest.raises(ProfileError, match=r"math\.lanes\.inputs\.x_1: x\[2 \* cols \+ 2\] reads outside a row"):
        load_yaml(text, "edited.yaml")
    text = dump_yaml(profiles["rope_map"]).replace("q[cols + n_cols]", "q[cols * cols]")
    with pytest.raises(ProfileError, match=r"math\.lanes\.inputs\.q_1: .* must be affine"):
        load_yaml(text, "edited.yaml")


def test_a_lane_reads_back_as_written():
    for lane in (LaneMap("x", 0, 1, 2), LaneMap("x", 1, -1, -1), LaneMap("y", 3, 0, 1), LaneMap("x", 0, 0, 4)):
        assert parse_lane(lane.written()) == lane
        assert parse_lane(lane.reversed().written()).reversed() == lane
    assert LaneMap("x", 1, -1, -1).positions(4) == [3, 2, 1, 0]


class _Launches:
    """A kernel whose launches are counted (``kernel[grid](...)``), and the storage of the tensors the last read."""

    def __init__(self, kernel):
        self.kernel, self.count, self.storage = kernel, 0, set()

    def __getitem__(self, grid):
        self.count += 1
        launch = self.kernel[grid]

        def recorded(*args, **kwargs):
            self.storage = {a.data_ptr() for a in args if isinstance(a, torch.Tensor)}
            return launch(*args, **kwargs)

        return recorded


@pytest.mark.parametrize(
    "layout, cos_batch, cos_grad",
    [("heads_first", (2,), False), ("heads_first", (1,), True), ("seq_first", (2,), True), ("heads_first", (), True)],
)
def test_hf_rope_takes_q_and_k_of_their_own_heads_in_one_launch(generated_checkout, layout, cos_batch, cos_grad):
    """Llama's shapes, small: q of 4 heads and k of 2 ([batch, heads, seq, dim], or [batch, seq, heads, dim] with
    unsqueeze_dim=2), cos and sin of [batch or 1, seq, dim] broadcast over the heads, or of [seq, dim] (a vision
    table without the batch dim, against HF fed it as [1, seq, dim]); one launch each way; values and gradients as
    autograd's, cos and sin's summed over the heads (and batch) to their own shape only where they require one."""
    torch.manual_seed(0)
    ops = import_generated_ops(generated_checkout, "hf_rope_map")
    unsqueeze_dim = 1 if layout == "heads_first" else 2
    q_shape, k_shape = ((2, 4, 5, 8), (2, 2, 5, 8)) if unsqueeze_dim == 1 else ((2, 5, 4, 8), (2, 5, 2, 8))
    table = (*cos_batch, 5, 8)
    tensors = [torch.randn(shape, device=DEVICE) for shape in (q_shape, k_shape, table, table)]
    mine = [t.clone().requires_grad_(index < 2 or cos_grad) for index, t in enumerate(tensors)]
    theirs = [t.clone().requires_grad_(index < 2 or cos_grad) for index, t in enumerate(tensors)]
    forward, backward = (_Launches(getattr(ops, f"_hf_rope_map_{way}_kernel")) for way in ("forward", "backward"))
    ops._hf_rope_map_forward_kernel, ops._hf_rope_map_backward_kernel = forward, backward
    try:
        out = ops.LigerHfRopeMapFunction.apply(*mine, unsqueeze_dim)
        grads = [torch.randn_like(o) for o in out]
        torch.autograd.backward(out, grads)
    finally:
        ops._hf_rope_map_forward_kernel, ops._hf_rope_map_backward_kernel = forward.kernel, backward.kernel
    # HF's own rule for a table: [batch or 1, seq, dim]
    fed = [t if index < 2 or cos_batch else t.unsqueeze(0) for index, t in enumerate(theirs)]
    expected = hf_rope.apply_rotary_pos_emb(*fed, unsqueeze_dim=unsqueeze_dim)
    torch.autograd.backward(expected, grads)
    assert (forward.count, backward.count) == (1, 1)
    assert {mine[2].data_ptr(), mine[3].data_ptr()} <= forward.storage  # the tables read in place, never expanded
    for got, want in zip(out, expected):
        torch.testing.assert_close(got, want)
    for got, want in zip(mine, theirs):
        assert (got.grad is None) == (want.grad is None)
        if want.grad is not None:
            torch.testing.assert_close(got.grad, want.grad, rtol=1e-5, atol=1e-5)


def test_a_broadcast_the_layout_cannot_index_is_one_line_at_run_time(generated_checkout):
    """cos of one batch row against [batch, seq, heads, dim] broadcasts over two runs of dims (batch, heads), held
    expanded over the batch; over the sequence and the last head only it cannot be indexed; a cos of one value per
    row would be cut into lanes; k of another row length cannot share q's lanes."""
    ops = import_generated_ops(generated_checkout, "hf_rope_map")
    q, k, cos = torch.randn(2, 5, 4, 8), torch.randn(2, 5, 2, 8), torch.randn(1, 5, 8)
    leaves = [t.clone().requires_grad_() for t in (q, k, cos, cos)]
    outputs = ops.LigerHfRopeMapFunction.apply(*leaves, 2)
    expected_leaves = [t.clone().requires_grad_() for t in (q, k, cos, cos)]
    expected = hf_rope.apply_rotary_pos_emb(*expected_leaves, unsqueeze_dim=2)
    torch.autograd.backward(outputs, [torch.ones_like(out) for out in outputs])
    torch.autograd.backward(expected, [torch.ones_like(out) for out in expected])
    for out, reference in zip(
        [*outputs, *(leaf.grad for leaf in leaves)], [*expected, *(e.grad for e in expected_leaves)]
    ):
        torch.testing.assert_close(out, reference)
    q, k = torch.randn(2, 5, 3, 4, 8), torch.randn(2, 5, 3, 2, 8)
    with pytest.raises(ValueError, match=r"cos has shape \(2, 1, 3, 8\): .*\(one run of broadcast dims\)"):
        ops.LigerHfRopeMapFunction.apply(q, k, torch.randn(2, 1, 3, 8), torch.randn(2, 1, 3, 8), 3)
    q, k, cos = torch.randn(2, 5, 4, 8), torch.randn(2, 5, 2, 8), torch.randn(1, 5, 8)
    with pytest.raises(
        ValueError, match=r"cos has shape \(2, 5, 1\): its rows are cut into lanes as q's, which needs 8"
    ):
        ops.LigerHfRopeMapFunction.apply(q, k, torch.randn(2, 5, 1), torch.randn(2, 5, 1), 2)
    with pytest.raises(ValueError, match=r"k has shape \(2, 5, 2, 6\) .* needs rows of 8"):
        ops.LigerHfRopeMapFunction.apply(q, torch.randn(2, 5, 2, 6), cos.expand(2, 5, 8), cos.expand(2, 5, 8), 2)
    # A table without the batch dim still has to match q's sequence; one wider than the head (upstream's head_dim
    # 41 against a 42-column table, which HF's reference cannot broadcast either) is no table of it.
    q, k = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8)
    with pytest.raises(ValueError, match=r"^hf_rope_map: cos has shape \(6, 8\), which does not broadcast against"):
        ops.LigerHfRopeMapFunction.apply(q, k, torch.randn(6, 8), torch.randn(6, 8), 1)
    q, k, table = torch.randn(2, 4, 5, 41), torch.randn(2, 2, 5, 41), torch.randn(1, 5, 42)
    with pytest.raises(RuntimeError, match="must match"):
        hf_rope.apply_rotary_pos_emb(q, k, table, table)
    with pytest.raises(
        ValueError, match=r"cos has shape \(1, 5, 42\), which does not broadcast against \(2, 4, 5, 41\)"
    ):
        ops.LigerHfRopeMapFunction.apply(q, k, table, table, 1)


def test_outputs_computed_differently_are_no_row_groups(profiles):
    """q_embed and k_embed are one program on two inputs; a gate of one input and a rotation of another are not:
    they stay one launch over inputs of one shape."""
    assert profiles["hf_rope_map"].math.lanes.groups == [{"q": "k", "q_embed": "k_embed"}]
    assert [t.unsqueeze for t in profiles["hf_rope_map"].inputs] == ["", "", "unsqueeze_dim", "unsqueeze_dim"]
    assert analyze(f"{FUNCTIONAL}:gate_one_rotate_other").math.lanes.groups == []


def test_rope_whose_unsqueeze_dim_defaults_to_2_reads_cos_per_position(tmp_path):
    """unsqueeze(2) is written for [batch, seq, heads, dim] inputs: traced at rank 3 it would insert the last dim
    (cos one value per row), which the rotation's lanes cannot take."""
    reference = tmp_path / "rope_seq_first.py"
    reference.write_text(
        "import torch\n\n\ndef rotate_half(x):\n    x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)\n"
        "\n\ndef apply_rope(q, k, cos, sin, unsqueeze_dim: int = 2):\n    cos = cos.unsqueeze(unsqueeze_dim)\n"
        "    sin = sin.unsqueeze(unsqueeze_dim)\n    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin\n"
    )
    profile = analyze(f"{reference}:apply_rope")
    assert profile.tier == 1 and profile.math.lanes.groups == [{"q": "k", "y1": "y2"}]
    assert [t.unsqueeze for t in profile.inputs] == ["", "", "unsqueeze_dim", "unsqueeze_dim"]
    # cos's gradient sums over the heads: the model-sized tests keep a model's few heads, the long dim the sequence
    assert [shape[-2] for shape in profile.test.gpu_shapes] == [4, 2, 3]
    assert [shape[-3] for shape in profile.test.gpu_shapes] == [512, 256, 333]


def test_a_broadcast_inputs_gradient_over_row_groups_is_rounded_once(generated_checkout):
    """cos's gradient has a part from q's rows and one from k's: summed in fp32 and rounded to cos's dtype once (in bf16
    each part rounded first lost their sum where the parts cancel: 0.03125 against 7e-5 on an H100)."""
    ops = (generated_checkout / kernel_paths("hf_rope_map")["ops"]).read_text()
    summed = (
        "(broadcast_sum(grad_cos,ctx.cos_shape,torch.float32,(ctx.unsqueeze_dim,))"
        "+broadcast_sum(grad_cos_1,ctx.cos_shape,torch.float32,(ctx.unsqueeze_dim,))).to(ctx.cos_dtype)"
    )
    assert summed in "".join(ops.split())


def test_the_module_file_takes_the_references_own_arguments(generated_checkout):
    """The hint module_function names a function of the module file with HF's signature (upstream's
    liger_rotary_pos_emb); position_ids, which the kernel does not take, is refused at other values than None."""
    source = (generated_checkout / kernel_paths("hf_rope_map")["module"]).read_text()
    assert "def liger_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):" in source
    assert "if position_ids is not None:" in source
    assert "return LigerHfRopeMapFunction.apply(q, k, cos, sin, unsqueeze_dim)" in source


def test_a_rope_module_takes_q_and_k_of_any_rank(generated_checkout):
    """The module's unsqueeze(1) is a literal dim: inserted as torch does at the rank q comes in ([batch, heads, seq,
    dim] here, traced with three dims), cos of one batch row against q and k of their own heads."""
    torch.manual_seed(0)
    ops = import_generated_ops(generated_checkout, "rotary_module_map")
    tensors = [torch.randn(shape, device=DEVICE) for shape in ((2, 4, 5, 8), (2, 2, 5, 8), (1, 5, 8), (1, 5, 8))]
    mine, theirs = ([t.clone().requires_grad_() for t in tensors] for _ in range(2))
    out = ops.LigerRotaryModuleMapFunction.apply(*mine)
    expected = modules.RotaryEmbeddingApply()(*theirs)
    grads = [torch.randn_like(o) for o in out]
    torch.autograd.backward(out, grads)
    torch.autograd.backward(expected, grads)
    for got, want in zip([*out, *(t.grad for t in mine)], [*expected, *(t.grad for t in theirs)]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def _docstrings(source: str, name: str) -> str:
    """The docstring of the class or function ``name`` of ``source``, on one line."""
    node = next(
        n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name
    )
    return " ".join(ast.get_docstring(node).split())


def test_docstrings_quote_the_references_own_code(profiles, generated_checkout):
    """The Function, module and functional of an index map say what the reference computes as its source writes it
    (helpers by name, slices as written), not as the trace records it (slices at computed bounds)."""
    written = "q_embed = (q * cos) + (rotate_half(q) * sin); k_embed = (k * cos) + (rotate_half(k) * sin)"
    assert profiles["hf_rope_map"].forward_computation == (
        f"cos = cos.unsqueeze(unsqueeze_dim); sin = sin.unsqueeze(unsqueeze_dim); {written}"
    )
    paths = kernel_paths("hf_rope_map")
    ops, module = ((generated_checkout / paths[role]).read_text() for role in ("ops", "module"))
    functional = (generated_checkout / "src" / "liger_kernel" / "transformers" / "functional.py").read_text()
    for docstring in (
        _docstrings(ops, "LigerHfRopeMapFunction"),
        _docstrings(module, "LigerHfRopeMap"),
        _docstrings(functional, "liger_hf_rope_map"),
    ):
        assert written in docstring and "slice(" not in docstring, docstring
    assert profiles["interleaved_swiglu_map"].forward_computation.startswith(
        "x_glu, x_linear = x[..., ::2], x[..., 1::2]; x_glu = x_glu.clamp(min=None, max=limit); "
    )
    assert profiles["rotary_module_map"].forward_computation.endswith(
        "y1 = query * cos + self._rotate(query) * sin; y2 = key * cos + self._rotate(key) * sin"
    )


def test_only_straight_line_code_is_quoted():
    """The statements the returned values read, in order (an update in place included, an unused one left out); a
    statement over several lines as Python prints it; a branch or a call for its effect: None (the traced
    description stays)."""
    source = """
class Gate(nn.Module):
    def forward(self, x, b):
        unused = x * 3
        h = x[..., : x.shape[-1] // 2]
        h += 1
        scaled = (
            h  # the first half
            * 2
        )
        return scaled * b[..., None], torch.flip(x, dims=[-1])
"""
    assert written_computation(source, "Gate", "module", ["y1", "y2"]) == (
        "h = x[..., : x.shape[-1] // 2]; h += 1; scaled = h * 2; y1 = scaled * b[..., None]; "
        "y2 = torch.flip(x, dims=[-1])"
    )
    assert written_computation(source, "Gate", "module", ["y"]) is None  # two values returned
    branch = "def f(x, flag: bool = True):\n    if flag:\n        x = -x\n    return x[..., ::2]\n"
    assert written_computation(branch, "f", "function", ["y"]) is None
    effect = "def f(x):\n    print(x)\n    return x[..., ::2]\n"
    assert written_computation(effect, "f", "function", ["y"]) is None


def test_inputs_of_shorter_rows_are_found_and_held_so(profiles, generated_checkout):
    """A reference that runs only with cos and sin half as wide as the first input: their patterns say so (HF's GPT-J
    also unsqueezes them at 2), the reason names them, and the kernel refuses tables of the first input's width."""
    patterns = {t.name: t.broadcast for t in profiles["hf_gptj_rope_map"].inputs}
    assert patterns == {"tensor": "", "sin": "* * _ /2", "cos": "* * _ /2"}, patterns
    assert "sin, cos: rows 2 times shorter, one lane" in profiles["hf_gptj_rope_map"].notes.tier_reason
    assert {t.name: t.broadcast for t in profiles["neox_half_tables_map"].inputs}["cos"] == "... /2"
    function = _function(generated_checkout, "neox_half_tables_map")
    q, whole, half = (
        torch.randn(3, 8, device=DEVICE),
        torch.randn(3, 8, device=DEVICE),
        torch.randn(3, 4, device=DEVICE),
    )
    with pytest.raises(ValueError, match=r"cos has shape \(3, 8\), which does not broadcast against \(3, 4\) of q"):
        function.apply(q, whole, half)


def test_rows_no_cut_into_lanes_shortens_enough_are_one_line():
    """w of rows a third as long (one value per three elements): no cut gives it whole lanes, and the line says that
    the reference runs only with inputs narrower than the first's, which an index map does not read."""
    with pytest.raises(AnalyzeError) as raised:
        analyze(f"{FUNCTIONAL}:thirds_scale")
    message = str(raised.value)
    assert "combines values of different row lengths" in message, message
    assert "does not run with every input as wide as x's rows" in message, message


def test_a_profile_with_rows_shorter_than_the_first_needs_lanes_that_hold_them(profiles):
    text = dump_yaml(profiles["neox_half_tables_map"])
    with pytest.raises(ProfileError, match=r"rows 4 times shorter than the first input's hold no whole number"):
        load_yaml(text.replace("'... /2'", "'... /4'"))
    plain = analyze(f"{FUNCTIONAL}:neox_half_tables", name="no_lanes")
    plain.math.lanes = None
    assert "inputs[1].broadcast: rows shorter than the first input's are read by index maps (math.lanes) only" in (
        "\n".join(validate_profile(plain))
    )
