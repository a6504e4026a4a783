"""dtensor_utils: the columns a rank holds, DTensor arguments as local shards and results wrapped back."""

import itertools
import os
import socket

import pytest
import torch

from liger_kernel.ops.dtensor_utils import PLAIN_TYPES
from liger_kernel.ops.dtensor_utils import dtensor_layout
from liger_kernel.ops.dtensor_utils import local_columns


class _Mesh:
    """The two things local_columns asks of a device mesh: its size along a dim and this rank's index there."""

    def __init__(self, sizes, ranks):
        self.sizes, self.ranks = sizes, ranks

    def size(self, mesh_dim):
        return self.sizes[mesh_dim]

    def get_local_rank(self, mesh_dim):
        return self.ranks[mesh_dim]


def _chunks(width, parts):
    """Shard's split of range(width) into ``parts`` pieces, written out: ceil-sized, trailing ones short or empty."""
    size = -(-width // parts) if width else 0
    return [list(range(width))[i * size : (i + 1) * size] for i in range(parts)]


@pytest.mark.parametrize("width", [0, 1, 5, 7, 12])
def test_local_columns_split_like_shard_over_one_and_two_mesh_dims(width):
    for parts in (1, 2, 3, 4):
        for rank in range(parts):
            cols = local_columns(_Mesh([parts], [rank]), [0], width)
            assert list(range(width))[cols] == _chunks(width, parts)[rank]
    sizes = [2, 3]
    for ranks in itertools.product(range(2), range(3)):
        first = _chunks(width, 2)[ranks[0]]
        expected = _chunks(len(first), 3)[ranks[1]]
        cols = local_columns(_Mesh(sizes, list(ranks)), [0, 1], width)
        assert [c - (first[0] if first else 0) for c in range(width)[cols]] == expected


def test_plain_tensors_need_no_layout():
    x = torch.randn(3, 4)
    weight = torch.nn.Parameter(torch.ones(4))
    assert {type(x), type(weight), type(None)} <= PLAIN_TYPES
    assert dtensor_layout("k", {"x": x}, {"weight": weight, "bias": None}, ("weight", "bias")) is None


@pytest.fixture(scope="module")
def one_rank_mesh():
    import torch.distributed as dist

    from torch.distributed.device_mesh import init_device_mesh

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


def test_dtensor_layout_wraps_local_results_and_refuses_mixed_arguments(one_rank_mesh):
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor import Partial
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor import distribute_tensor

    x = distribute_tensor(torch.randn(3, 4), one_rank_mesh, [Shard(1)])
    weight = distribute_tensor(torch.randn(4), one_rank_mesh, [Replicate()])
    layout = dtensor_layout("k", {"x": x}, {"weight": weight}, ("weight",))
    local_x, local_weight = layout.local((x,), (weight,))
    assert torch.equal(local_x, x.to_local()) and torch.equal(local_weight, weight.to_local())
    (y,) = layout.wrap(local_x * 2)
    assert isinstance(y, DTensor) and y.placements == x.placements and torch.equal(y.full_tensor(), x.full_tensor() * 2)
    grad_x, grad_weight = layout.wrap_grads((local_x,), (torch.ones(4),))
    assert grad_weight.placements == weight.placements and torch.equal(grad_weight.full_tensor(), torch.ones(4))

    with pytest.raises(ValueError, match="k: weight is a plain tensor"):
        dtensor_layout("k", {"x": x}, {"weight": torch.randn(4)}, ("weight",))
    other = distribute_tensor(torch.randn(3, 4), one_rank_mesh, [Shard(0)])
    with pytest.raises(ValueError, match="k: b has placements"):
        dtensor_layout("k", {"a": x, "b": other}, {}, ())
    partial = DTensor.from_local(torch.randn(3, 4), one_rank_mesh, [Partial()])
    with pytest.raises(ValueError, match="only Shard and Replicate"):
        dtensor_layout("k", {"x": partial}, {}, ())
    scalar = distribute_tensor(torch.randn(4), one_rank_mesh, [Shard(0)])
    with pytest.raises(ValueError, match="k: parameter scale has placements"):
        dtensor_layout("k", {"x": x}, {"scale": scalar}, ())
