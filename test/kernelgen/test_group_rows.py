"""Statistics over groups of channels (issue 42, part 3): a GroupNorm written out (``x.view(b, groups, -1)``, the
view back, ``self.weight[:, None]``) and ``F.group_norm`` with its affine as inputs are tier-2 kernels whose rows are
the groups of a sample, the per-channel affine read at each element's channel; references in ``fixtures/groups/``.
The generated kernels run in test_row_kernels.py's checkout (their generated tests and the checks against torch)."""

import importlib.util

from pathlib import Path

import pytest
import torch

from liger_kernel.ops.layout_utils import channel_rows
from liger_kernel.ops.row_utils import combine_chunks
from liger_kernel.ops.row_utils import group_chunks
from liger_kernel.ops.row_utils import group_layout
from liger_kernel.ops.row_utils import group_rows
from liger_kernel.ops.row_utils import group_tile_settings
from tools.kernelgen.analyze import AnalyzeError
from tools.kernelgen.analyze import analyze
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.render import render_kernel

FIXTURES = Path(__file__).parent / "fixtures" / "groups"
# PolyNorm as upstream's test writes it: its module holds the weight vector it reads by index (issue 42, part 6).
POLY_NORM = Path(__file__).parent / "fixtures" / "norms" / "poly_norm.py"
# fixture -> (the groups hyper-parameter and its default, the per-channel affine: group parameters or * _ inputs)
REFERENCES = {
    "group_norm": (("num_groups", 4), {"weight": "group", "bias": "group"}),
    "group_norm_functional": (("num_groups", 2), {"weight": "* _", "bias": "* _"}),
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_a_group_norm_is_a_row_kernel_over_groups(name):
    (hyper, count), affine = REFERENCES[name]
    profile = analyze(str(FIXTURES / f"{name}.py"))
    assert profile.tier == 2, profile.notes.tier_reason
    assert profile.math.groups == hyper
    assert {(hp.name, hp.type, hp.default, hp.choices) for hp in profile.hyperparameters if hp.name == hyper} == {
        (hyper, "int", count, None)
    }
    found = {p.name: p.shape for p in profile.parameters} | {t.name: t.broadcast for t in profile.inputs[1:]}
    assert found == affine
    assert all(len(shape) == 3 and shape[1] % count == 0 for shape in profile.test.cpu_shapes)
    assert validate_profile(profile) == []


@pytest.mark.parametrize(
    "read", ["self.weight[None, :, None]", "self.weight.view(1, -1, 1)", "self.weight.unsqueeze(-1)"]
)
def test_every_spelling_of_a_per_channel_read_is_a_group_parameter(read, tmp_path):
    reference = tmp_path / "group_norm.py"
    source = (FIXTURES / "group_norm.py").read_text()
    reference.write_text(source.replace("self.weight[:, None]", read))
    profile = analyze(str(reference))
    assert {p.name: p.shape for p in profile.parameters} == {"weight": "group", "bias": "group"}


def test_an_nn_group_norm_submodule_is_the_same_row_kernel(tmp_path):
    reference = tmp_path / "wrapped.py"
    reference.write_text(
        "import torch.nn as nn\n\n\nclass Wrapped(nn.Module):\n"
        "    def __init__(self, num_channels, num_groups=4):\n"
        "        super().__init__()\n"
        "        self.norm = nn.GroupNorm(num_groups, num_channels)\n\n"
        "    def forward(self, x):\n"
        "        return self.norm(x)\n"
    )
    profile = analyze(str(reference))
    assert (profile.tier, profile.math.groups) == (2, "num_groups")
    assert {p.name: (p.shape, p.attribute) for p in profile.parameters} == {
        "norm_weight": ("group", "norm.weight"),
        "norm_bias": ("group", "norm.bias"),
    }


@pytest.mark.parametrize("held", ["nn.GroupNorm(num_groups, num_channels, eps=eps)", "None"])
def test_a_group_count_without_a_default_is_a_constructor_argument(held, tmp_path):
    """torch's own signature, ``(num_groups, num_channels, eps)`` with no default for either: the module is built at
    a count that divides the hidden size, and the count is found as the constructor argument whether the module keeps
    it itself (``self.num_groups``) or only its nn.GroupNorm does."""
    reference = tmp_path / "torch_signature.py"
    forward = "self.norm(x)" if held != "None" else "x.view(b, self.num_groups, -1)"
    body = (
        f"        return {forward}\n"
        if held != "None"
        else (
            "        b, c, h = x.shape\n"
            f"        g = {forward}\n"
            "        g = (g - g.mean(-1, keepdim=True)) * torch.rsqrt(g.var(-1, keepdim=True, unbiased=False) + self.eps)\n"
            "        return g.view(b, c, h) * self.weight[:, None]\n"
        )
    )
    reference.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass TorchSignature(nn.Module):\n"
        "    def __init__(self, num_groups, num_channels, eps=1e-5):\n"
        "        super().__init__()\n"
        "        self.num_groups, self.eps = num_groups, eps\n"
        f"        self.norm = {held}\n"
        "        self.weight = nn.Parameter(torch.ones(num_channels))\n\n"
        f"    def forward(self, x):\n{body}"
    )
    profile = analyze(str(reference))
    assert (profile.tier, profile.math.groups, profile.module.size_param) == (2, "num_groups", "num_channels")
    assert {(ip.name, ip.default) for ip in profile.module.init_params if ip.name != "eps"} == {
        ("num_groups", None),
        ("num_channels", None),
    }


def test_a_head_dim_sizes_a_qk_norm_module(tmp_path):
    reference = tmp_path / "qk_norm.py"
    reference.write_text(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass QKNorm(nn.Module):\n"
        "    def __init__(self, head_dim: int, eps: float = 1e-6):\n"
        "        super().__init__()\n"
        "        self.q_scale = nn.Parameter(torch.ones(head_dim))\n"
        "        self.eps = eps\n\n"
        "    def forward(self, q):\n"
        "        return F.rms_norm(q, (q.shape[-1],), self.q_scale, self.eps)\n"
    )
    profile = analyze(str(reference))
    assert (profile.tier, profile.module.size_param) == (2, "head_dim")
    assert {p.name: p.shape for p in profile.parameters} == {"q_scale": "channel"}


@pytest.mark.parametrize(
    "body, line, construct",
    [
        pytest.param(
            "    g = x.view(b, num_groups, -1)\n    return (g - g.mean(1, keepdim=True)).view(b, c, h)\n",
            7,
            "`.mean()` (line 7) reduces dim 1 of the groups `.view()` (line 6) makes",
            id="reduction_over_the_groups",
        ),
        pytest.param(
            "    g = x.view(b, num_groups, -1)\n    return g - g.mean(-1, keepdim=True)\n",
            6,
            "`.view()` regroups x into groups, and no view brings the result back to the shape of x",
            id="no_view_back",
        ),
    ],
)
def test_what_stays_out_of_group_statistics_is_one_line_naming_it(body, line, construct, tmp_path):
    reference = tmp_path / "grouped.py"
    reference.write_text(f"import torch\n\n\ndef grouped(x, num_groups: int = 2):\n    b, c, h = x.shape\n{body}")
    with pytest.raises(AnalyzeError, match=rf"grouped.py:{line}: ") as caught:
        analyze(str(reference))
    assert construct in str(caught.value)


def test_groups_given_by_no_argument_are_one_line(tmp_path):
    reference = tmp_path / "fixed_groups.py"
    reference.write_text(
        "import torch\n\n\ndef fixed_groups(x, eps: float = 1e-5):\n"
        "    b, c, h = x.shape\n"
        "    g = x.view(b, 3, -1)\n"
        "    g = (g - g.mean(-1, keepdim=True)) * torch.rsqrt(g.var(-1, keepdim=True, unbiased=False) + eps)\n"
        "    return g.view(b, c, h)\n"
    )
    with pytest.raises(AnalyzeError, match=r"fixed_groups.py:6: .*splits the channels into 3 groups, which no int"):
        analyze(str(reference))


def test_groups_longer_than_one_program_are_cut_into_chunks_of_whole_channels():
    """The shared helpers a grouped kernel's wrappers call: 32 channels of 4096 in one group (upstream's test case)
    are 2 chunks of 16 channels, 65536 elements each; a chunk's part of a statistic is combined over its group's
    chunks in place (every chunk then reads the group's value)."""
    assert group_rows("k", "x", (16, 32, 1, 4096), 1, "g") == (32, 16, (16, 32, 4096), 2)
    assert group_rows("k", "x", (2, 6, 3, 5), 3, "g") == (6, 2, (2, 6, 15), 1)
    assert group_chunks("k", 7, 10000) == 7  # the fewest chunks that divide the channels and fit
    parts = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, -1.0, 0.5, 0.25]])
    combine_chunks(2)(parts, "sum")
    assert parts.tolist() == [[3.0, 3.0, 7.0, 7.0], [4.0, 4.0, 0.75, 0.75]]
    maxima = torch.tensor([1.0, 2.0, 3.0, -4.0])
    combine_chunks(2)(maxima, "max")
    assert maxima.tolist() == [2.0, 2.0, 3.0, 3.0]


def test_grouped_kernels_walk_whole_groups_in_tiles_of_channels_by_elements():
    """The kernels without per-column parameters take one group per program (no chunks, whatever its length) and
    walk it in [channels, elements of a channel] tiles: a channel's elements across first, short channels stacked;
    a per-channel input is read at its channel's row, and one that varies within a channel is refused."""
    assert group_layout("k", "x", (16, 32, 1, 4096), 1, "g") == (16, 32, (16, 32, 4096))
    assert group_layout("k", "x", (2, 12), 2, "g") == (4, 6, (2, 12, 1))
    assert group_tile_settings(4, 4096, 4096) == (1, 4096, 8)
    assert group_tile_settings(4, 1024, 4096) == (4, 1024, 8)
    assert group_tile_settings(4, 4096, 2048, per_thread=8) == (1, 2048, 8)
    assert group_tile_settings(6, 1, 4096) == (8, 1, 1)
    weight = torch.arange(6.0)
    held, (row_stride, inner, period) = channel_rows("k", "w", weight, "x", (2, 6, 5), (-1,), 1)
    channel_row = torch.arange(12)  # [batch * channels] rows of x's channels: each reads its channel's value
    assert torch.equal(held[(channel_row // period * inner + channel_row % inner) * row_stride], weight.repeat(2))
    with pytest.raises(ValueError, match=r"^k: w has shape \(6, 5\): against \(2, 6, 5\) of x it varies within a"):
        channel_rows("k", "w", torch.ones(6, 5), "x", (2, 6, 5))


def test_a_vector_read_by_index_is_held_and_taken_whole():
    """PolyNorm reads self.weight[0], [1], [2]: the generated module holds that [3] vector, as the reference does
    (its state dict loads into it), and the Function and the functional take it whole, as upstream's
    ``LigerPolyNormFunction.apply(x, weight, bias, eps)`` does: the kernels read its elements (views), and its
    gradient is one [3] tensor summed from one [3, n_programs] buffer of partial sums (test_row_kernels.py runs
    the generated PolyNorm's tests, whose gradients of the vector are checked against autograd)."""
    rendered = render_kernel(analyze(str(POLY_NORM)))
    files, paths = rendered.files, kernel_paths("poly_norm")
    module, ops = files[paths["module"]], files[paths["ops"]]
    assert "self.weight = nn.Parameter(torch.tensor([0.33333334, 0.33333334, 0.33333334]))" in module
    assert "self.bias = nn.Parameter(torch.ones(()))" in module
    assert "LigerPolyNormFunction.apply(x, self.weight, self.bias, self.eps)" in module
    assert "def forward(ctx, x, weight, bias, eps=1e-06):" in ops
    assert "def liger_poly_norm(x, weight, bias, eps=1e-06):" in rendered.functional_source
    assert ops.count("weight_0, weight_1, weight_2 = weight\n") == 4  # the fused and split forward and backward
    assert "grad_weight_partial = torch.empty((3, n_programs)" in ops
    assert "grad_weight = grad_weight_partial.sum(dim=1).view_as(weight).to(weight.dtype)" in ops
    assert "return grad_x, grad_weight, grad_bias, None" in ops


def test_a_group_norm_of_images_runs_at_its_own_rank(tmp_path):
    """``B, C, H, W = x.shape`` and ``weight.view(1, -1, 1, 1)``: the reference says its input has 4 dims; its tests and
    the kernel take [batch, channels, height, width], the affine read per channel."""
    reference = tmp_path / "image_group_norm.py"
    reference.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass ImageGroupNorm(nn.Module):\n"
        "    def __init__(self, num_channels, num_groups=4, eps=1e-5):\n"
        "        super().__init__()\n        self.num_groups, self.eps = num_groups, eps\n"
        "        self.weight = nn.Parameter(torch.ones(num_channels))\n"
        "        self.bias = nn.Parameter(torch.zeros(num_channels))\n\n"
        "    def forward(self, x):\n        B, C, H, W = x.shape\n        xg = x.view(B, self.num_groups, -1)\n"
        "        mean = xg.mean(dim=-1, keepdim=True)\n        var = ((xg - mean) ** 2).mean(dim=-1, keepdim=True)\n"
        "        x = ((xg - mean) * torch.rsqrt(var + self.eps)).view(B, C, H, W)\n"
        "        return x * self.weight.view(1, -1, 1, 1) + self.bias[None, :, None, None]\n"
    )
    profile = analyze(str(reference))
    assert {p.name: p.shape for p in profile.parameters} == {"weight": "group", "bias": "group"}
    assert all(len(shape) == 4 for shape in profile.test.cpu_shapes + profile.test.gpu_shapes)
    ops_file = tmp_path / "image_group_norm_ops.py"
    ops_file.write_text(render_kernel(profile).files[kernel_paths(profile.operation_name)["ops"]])
    spec = importlib.util.spec_from_file_location("image_group_norm_ops", ops_file)
    ops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ops)
    torch.manual_seed(0)
    x = torch.randn(2, 8, 3, 5, requires_grad=True)
    weight, bias = (torch.rand(8) + 0.5).requires_grad_(), torch.randn(8).requires_grad_()
    y = ops.LigerImageGroupNormFunction.apply(x, weight, bias, 4, 1e-5)
    y.backward(grad := torch.randn_like(y))
    leaves = [t.detach().double().requires_grad_() for t in (x, weight, bias)]
    expected = torch.nn.functional.group_norm(leaves[0], 4, leaves[1], leaves[2], 1e-5)
    expected.backward(grad.double())
    torch.testing.assert_close(y.double(), expected, atol=1e-5, rtol=1e-5)
    for ours, theirs in zip((x, weight, bias), leaves):
        torch.testing.assert_close(ours.grad.double(), theirs.grad, atol=1e-4, rtol=1e-4)


def test_a_grouped_max_and_sum_walked_over_tiles_match_torch(tmp_path):
    """A softmax over each group (a max, then a sum that reads it): each program walks its group once per statistic,
    the tiles' parts combined by max and by sum, then once to write; groups of several column blocks (5000-element
    channels) and channel blocks padded past the group's channels (3 channels of 1 element in blocks of 4)."""
    reference = tmp_path / "group_softmax.py"
    reference.write_text(
        "import torch\n\n\ndef group_softmax(x, num_groups: int = 2):\n"
        "    b, c, h = x.shape\n"
        "    return torch.softmax(x.view(b, num_groups, -1), dim=-1).view(b, c, h)\n"
    )
    ops_file = tmp_path / "group_softmax_ops.py"
    ops_file.write_text(render_kernel(analyze(str(reference))).files[kernel_paths("group_softmax")["ops"]])
    spec = importlib.util.spec_from_file_location("group_softmax_ops", ops_file)
    ops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ops)
    torch.manual_seed(0)
    for shape, groups in [((1, 2, 5000), 1), ((2, 6, 1), 2)]:
        x = 4 * torch.randn(shape)
        x.view(-1)[:10] += 200.0  # the group's max in its first tile: a walk that lost it would overflow exp()
        x.requires_grad_()
        y = ops.LigerGroupSoftmaxFunction.apply(x, groups)
        y.backward(grad := torch.randn(shape))
        leaf = x.detach().double().requires_grad_()
        expected = torch.softmax(leaf.view(shape[0], groups, -1), dim=-1).view(shape)
        expected.backward(grad.double())
        torch.testing.assert_close(y.double(), expected, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(x.grad.double(), leaf.grad, atol=1e-6, rtol=1e-5)
