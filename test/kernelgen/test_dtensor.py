"""Generated kernels under torch.distributed (issue 21): DTensor inputs compute on their local shards, a row
reduction whose reduced (last) dim is sharded runs its split path (per-row statistics all-reduced, the rows never
gathered), and modules made of generated kernels train under FSDP2.

Tier 1: geglu (two inputs, no parameter), dyt (a scalar and two per-channel parameters, one optional), a
two-output reference and an ill-conditioned one (its tolerance floor is eager fp32's own error, as in the
single-process test). Tier 2: rms_norm (a per-channel weight), layer_norm (a mean, then a variance about it, two
per-channel parameters), a log-softmax that also returns its per-row logsumexp, a softmax with a learnt scalar
temperature, and a centred value over torch.var's unbiased std minus the row's maximum (a max with a gradient).
Each is generated into a scratch checkout; its generated DTensor test runs the kernel on two processes (gloo,
Triton's interpreter on the CPU) with the inputs sharded along each dim (unevenly: 3 rows and 7 columns on 2 ranks)
or replicated, and compares outputs, input gradients and parameter gradients with the reference on the whole
tensors. The checks below run in a fresh interpreter that imports the generated library: a 2 x 2 mesh (rows and
columns sharded at once, columns split twice, a rank without columns) and FSDP2 training steps.
"""

import copy
import os
import socket
import tempfile
import warnings

from pathlib import Path

import pytest
import torch

from test.kernelgen.conftest import REPO_ROOT
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import run_pytest
from tools.kernelgen.layout import DTENSOR_UTILS
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.pyrun import run_python

# Two outputs: when only one is used, autograd hands the kernel plain zeros for the other's gradient.
TWO_OUTPUTS = "import torch\n\n\ndef two_out(a, b):\n    return torch.sigmoid(a) * b, torch.tanh(a) + b\n"
# A row reduction with a per-row output (keepdim): wrapped as a DTensor of the rows' shape.
LSE_NORM = "import torch\n\n\ndef lse_norm(x):\n    m = torch.logsumexp(x, dim=-1, keepdim=True)\n    return x - m, m\n"
# A scalar parameter of a row reduction: its gradient sums per-row values, whole on every rank of a row.
SCALED_SOFTMAX = """import torch
import torch.nn as nn


class ScaledSoftmax(nn.Module):
    def __init__(self, hidden_size=None):
        super().__init__()
        self.temperature = nn.Parameter(torch.tensor(1.5))

    def forward(self, x):
        return torch.softmax(x * self.temperature, dim=-1)
"""
# torch.var's correction reads the whole row's n_cols; the max passes its gradient to the row's largest element.
VAR_PEAK = """import torch


def var_peak(x):
    centred = x - x.mean(-1, keepdim=True)
    return centred / x.std(-1, keepdim=True) - x.amax(-1, keepdim=True)
"""
# snake written with 1 - cos(2u): fp32 loses digits to the cancellation where alpha * x is small, eager fp32 too.
ILL_CONDITIONED = """import torch


def cos_snake(x, alpha):
    return x + (1 - torch.cos(2 * alpha * x)) / (2 * alpha)
"""
# kernel name -> the reference (a built-in name or a snippet on stdin)
KERNELS = {
    "geglu": "geglu",
    "dyt": "dyt",
    "two_out": TWO_OUTPUTS,
    "cos_snake": ILL_CONDITIONED,
    "rms_norm_gen": "rms_norm",
    "layer_norm_gen": "layer_norm",
    "lse_norm": LSE_NORM,
    "scaled_softmax": SCALED_SOFTMAX,
    "var_peak": VAR_PEAK,
}

needs_gloo = pytest.mark.skipif(
    not torch.distributed.is_available() or not torch.distributed.is_gloo_available(), reason="needs gloo"
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = copy_checkout(tmp_path_factory.mktemp("dtensor") / "liger")
    for name, reference in KERNELS.items():
        if "\n" in reference:
            result = run_kernelgen("new", name, "--reference", "-", "--repo", str(root), stdin=reference)
        else:  # rms_norm_gen is the host's rms_norm: --force-new generates it all the same
            result = run_kernelgen("new", name, "--reference", reference, "--repo", str(root), "--force-new")
        assert result.returncode == 0, result.stderr
    return root


@needs_gloo
def test_generated_dtensor_tests_pass_on_two_gloo_processes(generated):
    result = run_pytest(generated, *[kernel_paths(name)["test"] for name in KERNELS], "-k", "dtensor")
    assert result.returncode == 0, result.stdout[-5000:]
    assert result.stdout.strip().splitlines()[-1].startswith(f"{len(KERNELS)} passed"), result.stdout[-2000:]


def test_plain_tensors_never_touch_torch_distributed(generated):
    """The DTensor code only runs when an argument is a DTensor: the generated ops files and the shared
    dtensor_utils import nothing of torch.distributed at module level, and their Functions unwrap and wrap nothing for plain tensors."""
    for name in KERNELS:
        source = (generated / kernel_paths(name)["ops"]).read_text()
        module_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
        assert not [line for line in module_level if "distributed" in line], name
        assert source.count("if ctx.layout is not None:") == 4, name
    shared = (generated / DTENSOR_UTILS).read_text()  # the DTensor helpers they call
    assert not [line for line in shared.splitlines() if line.startswith(("import ", "from ")) and "distributed" in line]


@pytest.mark.parametrize(
    "reference, forward, backward",
    [
        # The statistics that wait for others' all-reduces come later: one pass per all-reduce, however spelled.
        ("rms_norm", [["variance"]], [["row_sum"]]),
        ("layer_norm", [["mean"], ["variance"]], [["row_sum", "row_sum0"]]),
        ("softmax", [["softmax_max"], ["softmax_sum"]], [["row_sum"]]),
        (LSE_NORM, [["m_max"], ["m_sum"]], [["row_sum"]]),
        # The max's gradient goes to the elements equal to the recomputed max, split between ties: their count is a
        # row sum of its own, after the max's all-reduce.
        (VAR_PEAK, [["mean", "amax"], ["std_var"]], [["amax_recomputed", "row_sum", "row_sum0"], ["row_sum1"]]),
    ],
    ids=["rms_norm", "layer_norm", "softmax", "lse_norm", "var_peak"],
)
def test_split_passes_follow_the_statistics_dependencies(tmp_path, reference, forward, backward):
    """The split path's reduction passes, derived from the row program: each pass holds the reductions whose
    operands read only all-reduced values, the last pass none."""
    # Imported here: the rank functions below also run where the generator's own dependencies are not installed.
    from tools.kernelgen.analyze import analyze
    from tools.kernelgen.derivation import row_math

    if "\n" in reference:
        path = tmp_path / "reference.py"
        path.write_text(reference)
        reference = str(path)
    math = row_math(analyze(reference, name="split_check"))
    for split, expected in ((math.split_forward, forward), (math.split_backward, backward)):
        assert [sorted(name for name, _ in p.reductions) for p in split[:-1]] == [sorted(e) for e in expected]
        assert not split[-1].reductions
    # A mean's part is divided by the whole row's n_cols (a kernel argument apart from the local width), so the
    # ranks' parts add up to it.
    for split_pass in math.split_forward:
        for name, kind in split_pass.reductions:
            (line,) = [line for line in split_pass.lines if line.startswith(f"{name} = ")]
            assert line.endswith("/ n_cols") == (kind == "mean"), line


# --- checks run on ranks of a fresh interpreter importing the generated library ------------------------------------


def _run_ranks(root: Path, check: str, world_size: int) -> None:
    """Runs the rank function ``check`` of this module on ``world_size`` gloo ranks in a new interpreter whose
    ``liger_kernel`` is the generated checkout's (this process imported the repository's own)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(REPO_ROOT)])}
    code = f"from test.kernelgen.test_dtensor import launch_ranks; launch_ranks({check!r}, {world_size}, 'gloo')"
    result = run_python(["-c", code], cwd=REPO_ROOT, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-6000:]


def launch_ranks(check: str, world_size: int, backend: str) -> None:
    """``check`` on ``world_size`` ranks (gloo: forked, on the CPU; nccl: spawned, one GPU each). Also the entry
    point on a machine with GPUs, where the generated library comes first on PYTHONPATH (.gpu-run/src, which has
    rms_norm_gen, layer_norm_gen and geglu):
    ``PYTHONPATH=.gpu-run/src:. python3 -c "from test.kernelgen.test_dtensor import launch_ranks;
    launch_ranks('_fsdp2_training', 2, 'nccl')"``."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    passed = tempfile.mkdtemp()
    try:
        torch.multiprocessing.start_processes(
            _rank,
            args=(check, world_size, port, backend, passed),
            nprocs=world_size,
            start_method="fork" if backend == "gloo" else "spawn",
        )
    except torch.multiprocessing.ProcessExitedException as crash:
        # Killed by a signal after every rank passed: gloo's teardown on a loaded machine, not the kernel.
        if crash.signal_name is None or len(os.listdir(passed)) != world_size:
            raise
        warnings.warn(f"every check passed on every rank, then the process group's teardown crashed: {crash}")


def _rank(rank, check, world_size, port, backend, passed):
    import torch.distributed as dist

    torch.set_num_threads(1)  # a forked rank must not wait for the parent's OpenMP threads
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        globals()[check](rank, "cuda" if backend == "nccl" else "cpu")
        Path(passed, f"rank{rank}").touch()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _close(actual, expected, what, tolerance=2e-5):
    torch.testing.assert_close(actual.double(), expected.double(), atol=tolerance, rtol=tolerance, msg=what)


def _layer_norm_on_2x2_mesh(rank, device):
    """layer_norm_gen and lse_norm on a 2 x 2 mesh against float64 references on the whole tensors."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor import distribute_tensor

    from liger_kernel.ops import LigerLayerNormGenFunction
    from liger_kernel.ops import LigerLseNormFunction

    mesh = init_device_mesh(device, (2, 2))
    both, whole = (Shard(0), Shard(0)), (Replicate(), Replicate())
    # (inputs, parameters): rows over one mesh dim and columns over the other (parameters replicated or sharded
    # like the columns), or columns split twice (7 -> 4 + 3 -> 2 + 2, 2 + 1; 3 -> 2 + 1 -> 1 + 1, 1 + 0: one rank
    # holds no column at all).
    cases = [
        ((Shard(0), Shard(2)), whole, 7),
        ((Shard(0), Shard(2)), (Replicate(), Shard(0)), 7),
        ((Shard(2), Shard(1)), (Shard(0), Replicate()), 7),
        ((Shard(2), Shard(2)), whole, 7),
        ((Shard(2), Shard(2)), both, 7),
        ((Shard(2), Shard(2)), both, 3),
    ]
    for placements, param_placements, n_cols in cases:
        where = f"[{placements}, parameters {param_placements}, {n_cols} columns, rank {rank}]"
        torch.manual_seed(0)
        x, dy = torch.randn(3, 2, n_cols, device=device), torch.randn(3, 2, n_cols, device=device)
        weight, bias = torch.rand(n_cols, device=device) + 0.5, torch.randn(n_cols, device=device)
        ref = [t.double().requires_grad_(True) for t in (x, weight, bias)]
        torch.nn.functional.layer_norm(ref[0], (n_cols,), ref[1], ref[2], 1e-5).backward(dy.double())
        shards = distribute_tensor(x, mesh, placements).requires_grad_(True)
        params = [distribute_tensor(p, mesh, param_placements).requires_grad_(True) for p in (weight, bias)]
        y = LigerLayerNormGenFunction.apply(shards, *params, 1e-5)
        y.backward(distribute_tensor(dy, mesh, placements))
        assert y.placements == placements and shards.grad.placements == placements, where
        expected = torch.nn.functional.layer_norm(ref[0], (n_cols,), ref[1], ref[2], 1e-5)
        _close(y.full_tensor(), expected, f"{where} forward")
        _close(shards.grad.full_tensor(), ref[0].grad, f"{where} grad x")
        for p, ref_p in zip(params, ref[1:]):
            assert p.grad.placements == param_placements, where
            _close(p.grad.full_tensor(), ref_p.grad, f"{where} parameter")
        # A per-row output is replicated over the mesh dims that split the columns.
        ref_x = x.double().requires_grad_(True)
        ref_lse = torch.logsumexp(ref_x, -1, keepdim=True)
        ((ref_x - ref_lse) * dy.double()).sum().add(ref_lse.sum()).backward()
        shards = distribute_tensor(x, mesh, placements).requires_grad_(True)
        out, lse = LigerLseNormFunction.apply(shards)
        row_placements = tuple(Replicate() if p == Shard(2) else p for p in placements)
        assert lse.placements == row_placements, where
        ((out * distribute_tensor(dy, mesh, placements)).sum() + lse.sum()).backward()
        _close(out.full_tensor(), ref_x.detach() - ref_lse.detach(), f"{where} lse_norm forward")
        _close(lse.full_tensor(), ref_lse.detach(), f"{where} lse_norm logsumexp")
        _close(shards.grad.full_tensor(), ref_x.grad, f"{where} lse_norm grad")
    # A parameter sharded over the other mesh dim than the inputs' columns holds other columns: refused in one line.
    shards = distribute_tensor(torch.randn(3, 2, 7, device=device), mesh, [Shard(2), Shard(2)])
    params = [distribute_tensor(torch.ones(7, device=device), mesh, [Replicate(), Shard(0)]) for _ in range(2)]
    with pytest.raises(ValueError, match="parameter weight"):
        LigerLayerNormGenFunction.apply(shards, *params, 1e-5)


@needs_gloo
def test_row_reductions_on_a_2x2_mesh(generated):
    _run_ranks(generated, "_layer_norm_on_2x2_mesh", 4)


def _fsdp2_training(rank, device):
    """Three SGD steps of a model of generated modules (rms_norm_gen, the geglu MLP) with nn.Linear, under
    fully_shard on two ranks (each a half of the batch) against the same model unsharded on the whole batch:
    losses, gradients and the parameters after each step agree."""
    import torch.distributed as dist
    import torch.nn as nn

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from liger_kernel.transformers import LigerGEGLUMLP
    from liger_kernel.transformers import LigerRmsNormGen

    class Config:
        hidden_size, intermediate_size, hidden_act = 8, 12, "gelu_pytorch_tanh"

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = LigerRmsNormGen(Config.hidden_size)
            self.mlp = LigerGEGLUMLP(Config())
            self.proj = nn.Linear(Config.hidden_size, Config.hidden_size)

        def forward(self, x):
            return self.proj(x + self.mlp(self.norm(x)))

    torch.manual_seed(0)
    reference = nn.Sequential(Block(), Block()).to(device)
    with torch.no_grad():
        for block in reference:
            block.norm.weight.copy_(torch.rand(Config.hidden_size) + 0.5)  # not all ones: its gradient matters
    model = copy.deepcopy(reference)
    mesh = init_device_mesh(device, (2,))
    for block in model:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (reference, model)]
    for step in range(3):
        batch = torch.randn(4, 3, Config.hidden_size, device=device)  # the same on both ranks
        ref_loss = reference(batch).pow(2).mean()
        ref_loss.backward()
        loss = model(batch.chunk(2)[rank]).pow(2).mean()
        loss.backward()  # FSDP averages the gradients over the ranks: the whole batch's mean
        total = loss.detach().clone()
        dist.all_reduce(total)
        _close(total / 2, ref_loss.detach(), f"[step {step}] loss", 1e-5)
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            _close(p.grad.full_tensor(), q.grad, f"[step {step}] grad {name}", 1e-5)
        for optimizer in optimizers:
            optimizer.step()
            optimizer.zero_grad()
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            _close(p.full_tensor(), q.detach(), f"[step {step}] {name} after the step", 1e-5)


@needs_gloo
def test_generated_modules_train_under_fsdp2(generated):
    _run_ranks(generated, "_fsdp2_training", 2)


@needs_gloo
def test_sharded_rms_norm_benchmark_smoke_runs(generated):
    """benchmark/scripts/benchmark_dtensor_rms_norm.py --smoke: both paths on two gloo ranks, checked against each
    other, with times and the bytes their collectives move."""
    script = generated / "benchmark" / "scripts" / "benchmark_dtensor_rms_norm.py"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(generated / "src"), str(generated)])}
    result = run_python([str(script), "--smoke"], cwd=script.parent, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-5000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert [row.split("|")[1].strip() for row in rows[2:]] == ["generated (split rows)", "gather (upstream)"]
