"""DTensor arguments of generated kernels (torch.distributed.tensor): each rank computes on its local shard.

Element-wise kernels compute every element from its own position, so each rank runs them on its local shard and the
results take the inputs' placements. Row reductions do likewise while the reduced (last) dim is whole on every rank;
when it is sharded, they run in passes that all-reduce their per-row statistics (``DTensorLayout.reduce_rows``)."""

import torch

# The types of arguments that need no DTensor layout: tensors, parameters, and None for an absent optional parameter.
PLAIN_TYPES = frozenset((torch.Tensor, torch.nn.Parameter, type(None)))


def local_columns(mesh, mesh_dims, width: int) -> slice:
    """The columns (a slice of range(width)) this rank holds when the mesh dims ``mesh_dims`` shard them: as Shard
    splits, like torch.chunk (ceil-sized pieces, trailing ranks smaller or empty), again for each further mesh dim
    in mesh-dim order."""
    start = 0
    for mesh_dim in mesh_dims:
        chunk = -(-width // mesh.size(mesh_dim))
        before = chunk * mesh.get_local_rank(mesh_dim)
        start, width = start + min(before, width), max(0, min(chunk, width - before))
    return slice(start, start + width)


class DTensorLayout:
    """How DTensor inputs lie on their mesh. The kernel runs on each rank's local shard (uneven shards included);
    outputs and input gradients are wrapped with the inputs' placements. A per-channel parameter is read at the
    local shard's columns: cut from a replicated parameter, or as it is when it is sharded like them (Shard on its
    last dim over mesh dims that shard the inputs' last dim). Each parameter's gradient is built as it lies on the
    ranks, then redistributed to the parameter's placements: a per-channel gradient holds this rank's columns
    (Shard) where the columns are split and is one rank's share of the sum over rows (Partial) where other dims
    are; a replicated parameter thus gets its gradient gathered (n_cols values) and summed, a sharded one keeps it
    sharded. ``reduces_rows``: the kernel all-reduces its per-row values over the ranks that split the columns
    (row reductions), so a scalar parameter's gradient is whole on those ranks."""

    def __init__(self, first, params, channel, reduces_rows: bool = False):
        from torch.distributed.tensor import Partial
        from torch.distributed.tensor import Replicate
        from torch.distributed.tensor import Shard

        self.mesh, self.placements, self.shape = first.device_mesh, first.placements, first.shape
        last = len(self.shape) - 1
        # The mesh dims that split every row's columns between ranks.
        self.column_dims = [d for d, p in enumerate(self.placements) if isinstance(p, Shard) and p.dim == last]
        self.cols = local_columns(self.mesh, self.column_dims, self.shape[-1])
        self.params = []
        for p, per_channel in zip(params, channel):
            if p is None:  # an absent optional parameter
                self.params.append(None)
                continue
            grad_placements = []
            for mesh_dim, placement in enumerate(self.placements):
                if not isinstance(placement, Shard):
                    grad_placements.append(Replicate())  # every rank computed the whole gradient
                elif mesh_dim in self.column_dims and per_channel:
                    grad_placements.append(Shard(p.dim() - 1))  # the gradient of this rank's columns
                elif mesh_dim in self.column_dims and reduces_rows:
                    grad_placements.append(Replicate())  # per-row values are whole after the all-reduces
                else:
                    grad_placements.append(Partial())  # this rank's rows' share of the sum
            cols = None
            if per_channel:  # the local columns, relative to what this rank holds of the parameter
                held = [d for d, q in enumerate(p.placements) if isinstance(q, Shard)]
                start = local_columns(self.mesh, held, p.shape[-1]).start
                cols = slice(self.cols.start - start, self.cols.stop - start)
            self.params.append((p.shape, p.stride(), p.placements, per_channel, tuple(grad_placements), cols))
        # Per-row values (statistics, per-row outputs) are the same on every rank of a row once all-reduced.
        self.row_placements = [Replicate() if d in self.column_dims else p for d, p in enumerate(self.placements)]
        self.split_rows = bool(self.column_dims)

    def reduce_rows(self, values, op):
        """Combines per-row values over the ranks that hold the other columns of the same rows, in place: op "sum",
        "max" or "min" (an all-reduce of a [rows] fp32 tensor per mesh dim that splits the columns)."""
        from torch.distributed import ReduceOp

        reduce_op = {"sum": ReduceOp.SUM, "max": ReduceOp.MAX, "min": ReduceOp.MIN}[op]
        for mesh_dim in self.column_dims:
            torch.distributed.all_reduce(values, op=reduce_op, group=self.mesh.get_group(mesh_dim))

    def local(self, inputs, params):
        """The local shards of ``inputs`` and the local part of each parameter (its local columns, if per channel)."""
        shards = [x.to_local() for x in inputs]
        for p, kept in zip(params, self.params):
            if p is None:
                shards.append(None)
            elif kept[3]:  # per channel
                shards.append(p.to_local().reshape(-1)[kept[5]])
            else:
                shards.append(p.to_local())
        return shards

    def wrap(self, *outputs):
        """Local results as DTensors shaped and placed like the inputs (None stays None)."""
        from torch.distributed.tensor import DTensor

        # The global shape and stride are given: DTensor would otherwise assume even shards.
        stride = torch.empty(self.shape, device="meta").stride()
        return [
            y
            if y is None
            else DTensor.from_local(y, self.mesh, self.placements, run_check=False, shape=self.shape, stride=stride)
            for y in outputs
        ]

    def wrap_rows(self, *outputs):
        """Local per-row results (one value per row, the last dim dropped or kept as 1) as DTensors."""
        from torch.distributed.tensor import DTensor

        wrapped = []
        for y in outputs:
            shape = (*self.shape[:-1], 1) if y.dim() == len(self.shape) else self.shape[:-1]
            stride = torch.empty(shape, device="meta").stride()
            wrapped.append(
                DTensor.from_local(y, self.mesh, self.row_placements, run_check=False, shape=shape, stride=stride)
            )
        return wrapped

    def local_grads(self, *grads):
        """Upstream gradients placed like the outputs, as local shards. Autograd may hand them over otherwise placed,
        or, for an output nobody used, as plain zeros of the global shape (the same on every rank: replicated)."""
        return self._local(grads, self.placements)

    def local_row_grads(self, *grads):
        """Upstream gradients of per-row outputs placed like those outputs, as local tensors (see local_grads)."""
        return self._local(grads, self.row_placements)

    def _local(self, grads, placements):
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor import Replicate

        shards = []
        for g in grads:
            if g is not None and not isinstance(g, DTensor):
                g = DTensor.from_local(g, self.mesh, [Replicate()] * self.mesh.ndim, run_check=False)
            shards.append(g if g is None else g.redistribute(self.mesh, placements).to_local())
        return shards

    def wrap_grads(self, input_grads, param_grads):
        """Input gradients placed like the inputs; parameter gradients placed like the parameters."""
        from torch.distributed.tensor import DTensor

        grads = self.wrap(*input_grads)
        for g, kept in zip(param_grads, self.params):
            if g is None or kept is None:
                grads.append(None)
                continue
            shape, stride, placements, per_channel, grad_placements, _ = kept
            if per_channel:
                g = g.reshape(*shape[:-1], -1)
            local = DTensor.from_local(g, self.mesh, grad_placements, run_check=False, shape=shape, stride=stride)
            grads.append(local.redistribute(self.mesh, placements))
        return grads


def dtensor_layout(kernel, inputs, params, channel, reduces_rows=False):
    """None when no tensor is a DTensor: plain tensors take the path they always took. Otherwise the inputs' common
    layout; inputs on different meshes or placements, partial inputs and parameters that are neither replicated
    nor (per channel) sharded like the inputs' columns are refused in one line naming the tensor. ``kernel`` names
    the kernel in those lines; ``inputs`` and ``params`` map names to tensors (None: an absent optional parameter);
    ``channel`` names the per-channel parameters. Callers skip this when every argument's type is in PLAIN_TYPES:
    the imports below cost several microseconds of host time."""
    present = {**inputs, **{name: p for name, p in params.items() if p is not None}}
    if not torch.distributed.is_available():
        return None
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor import Shard

    if not any(isinstance(t, DTensor) for t in present.values()):
        return None
    names = list(inputs)
    first = inputs[names[0]]
    for name, t in present.items():
        if not isinstance(t, DTensor):
            raise ValueError(
                f"{kernel}: {name} is a plain tensor but other arguments are DTensors: pass DTensors on one mesh"
            )
        if t.device_mesh != first.device_mesh:
            raise ValueError(
                f"{kernel}: {name} lies on {t.device_mesh}, {names[0]} on {first.device_mesh}: use one mesh"
            )
    for name in names:
        placements = inputs[name].placements
        if placements != first.placements:
            raise ValueError(
                f"{kernel}: {name} has placements {placements}, {names[0]} {first.placements}: redistribute them alike"
            )
        if any(type(p) not in (Shard, Replicate) for p in placements):
            raise ValueError(f"{kernel}: {name} has placements {placements}: only Shard and Replicate are supported")
    last = len(first.shape) - 1
    column_dims = [d for d, p in enumerate(first.placements) if isinstance(p, Shard) and p.dim == last]
    for name, p in params.items():
        if p is None:
            continue
        # Per channel, sharded on its last dim over the first mesh dims of those that split the inputs' columns: each
        # rank then holds its columns (the same on every rank, so no rank computes while another refuses).
        sharded = [d for d, q in enumerate(p.placements) if not isinstance(q, Replicate)]
        channel_dim = len(p.shape) - 1
        by_columns = [d for d, q in enumerate(p.placements) if isinstance(q, Shard) and q.dim == channel_dim]
        if sharded and not (name in channel and sharded == by_columns == column_dims[: len(sharded)]):
            raise ValueError(
                f"{kernel}: parameter {name} has placements {p.placements}, the inputs {first.placements}: replicate "
                "it on the mesh or, per channel, shard its last dim over the first of the mesh dims that shard the "
                "inputs' last dim"
            )
    return DTensorLayout(first, list(params.values()), [name in channel for name in params], reduces_rows)
