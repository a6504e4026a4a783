"""RMSNorm of rows whose hidden dim is sharded over two ranks (issue 21), forward + backward, two ways:

- generated (split rows): kernelgen's rms_norm (``rms_norm_gen``) on the DTensor shards: each rank reduces its own
  columns, one all-reduce of a [rows] fp32 tensor per statistic (forward: the mean square; backward: one row sum),
  the output and input gradient stay sharded, the weight gradient of each rank's columns is gathered (n_cols
  values) because the weight is replicated;
- gather (upstream): what upstream Liger's RMSNorm does with a DTensor, ``X.full_tensor()`` and the hand-written
  kernel on whole rows: every element crosses the network, each rank computes all rows, the output is replicated.

The split path suits consumers that take the hidden dim sharded (a row-parallel linear layer, element-wise ops);
one that needs whole rows gathers the output instead, which costs what the gather path does.

Reports per path the median milliseconds of forward + backward (the slower rank's) and what the collectives move
per rank: their tensors' bytes and a ring estimate of the bytes each rank sends (all-reduce 2(w-1)/w, all-gather
(w-1) times the shard). Both paths' results are compared first; a mismatch exits 1.

Two GPUs, NCCL, from a checkout where ``rms_norm_gen`` is generated (``python3 .ci/make_gpu_checkout.py`` builds
``.gpu-run``):  ``cd .gpu-run && python3 benchmark/scripts/benchmark_dtensor_rms_norm.py``  (BT=16384, H=8192,
bf16). ``--smoke``: tiny fp32 shapes on the CPU with gloo and Triton's interpreter, the same code paths.
"""

import argparse
import os
import socket
import statistics
import sys
import time

from collections import Counter
from pathlib import Path

# Run as a file, ``src`` (``liger_kernel``) is not importable yet.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import torch

from torch.utils._python_dispatch import TorchDispatchMode

EPS = 1e-6
WORLD_SIZE = 2
# Collective ops of torch.distributed (schema names without their namespace) -> (the argument holding the tensor a
# rank contributes, bytes a rank sends per byte of that tensor on a ring of w ranks).
_COLLECTIVES = {
    "allreduce_": (0, lambda w: 2 * (w - 1) / w),
    "all_reduce": (0, lambda w: 2 * (w - 1) / w),
    "allgather_": (1, lambda w: w - 1),
    "_allgather_base_": (1, lambda w: w - 1),
    "all_gather_into_tensor": (0, lambda w: w - 1),
    "reduce_scatter_tensor": (0, lambda w: (w - 1) / w),
    "_reduce_scatter_base_": (1, lambda w: (w - 1) / w),
    "broadcast_": (0, lambda w: 1),
}


class CollectiveBytes(TorchDispatchMode):
    """Counts the collectives run under it and the bytes of the tensors each sends (DTensor ops are let through
    first, so the collectives they turn into are seen)."""

    def __init__(self, world_size: int):
        super().__init__()
        self.world_size = world_size
        self.calls: Counter = Counter()
        self.payload = 0
        self.sent = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch.distributed.tensor import DTensor

        if any(issubclass(t, DTensor) for t in types):
            return NotImplemented
        namespace, _, name = func._schema.name.partition("::")
        if namespace in ("c10d", "_c10d_functional") and name in _COLLECTIVES:
            position, factor = _COLLECTIVES[name]
            sent = args[position]
            size = sum(t.numel() * t.element_size() for t in (sent if isinstance(sent, (list, tuple)) else [sent]))
            self.calls[name] += 1
            self.payload += size
            self.sent += size * factor(self.world_size)
        return func(*args, **(kwargs or {}))


def _paths(x_full, weight, grad_full, mesh):
    """name -> a function running one forward + backward, returning (y, grad_x, grad_weight) as whole tensors."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor import distribute_tensor

    from liger_kernel.ops import LigerRMSNormFunction
    from liger_kernel.ops import LigerRmsNormGenFunction

    x = distribute_tensor(x_full, mesh, [Shard(1)])
    w = distribute_tensor(weight, mesh, [Replicate()])
    grad = distribute_tensor(grad_full, mesh, [Shard(1)])

    def generated():
        xs, ws = x.detach().requires_grad_(True), w.detach().requires_grad_(True)
        y = LigerRmsNormGenFunction.apply(xs, ws, EPS)
        y.backward(grad)
        return y, xs.grad, ws.grad

    def gathered():
        xs, ws = x.detach().requires_grad_(True), weight.detach().requires_grad_(True)
        # Upstream's RMSNorm with a DTensor input: the whole rows on every rank, then the kernel (llama casting).
        y = LigerRMSNormFunction.apply(xs.full_tensor(), ws, EPS, 0.0, "llama", False)
        y.backward(grad_full)
        return y, xs.grad, ws.grad

    return {"generated (split rows)": generated, "gather (upstream)": gathered}


def _whole(t):
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def _median_ms(run, device, iters: int, warmup: int) -> float:
    import torch.distributed as dist

    for _ in range(warmup):
        run()
    samples = []
    for _ in range(iters):
        dist.barrier()
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            run()
            samples.append((time.perf_counter() - began) * 1e3)
    slowest = torch.tensor([statistics.median(samples)], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.item()


def _rank(rank, args, port, backend):
    import torch.distributed as dist

    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)  # forked ranks must not wait for the parent's OpenMP threads
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE)
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
        mesh = init_device_mesh(device.type, (WORLD_SIZE,))
        dtype = getattr(torch, args.dtype)
        torch.manual_seed(0)  # the same whole tensors on every rank
        x = torch.randn(args.bt, args.hidden, device=device, dtype=dtype)
        weight = (torch.rand(args.hidden, device=device) + 0.5).to(dtype)
        grad = torch.randn(args.bt, args.hidden, device=device, dtype=dtype)
        paths = _paths(x, weight, grad, mesh)
        results = {name: [_whole(t) for t in run()] for name, run in paths.items()}
        tolerance = 1e-4 if dtype == torch.float32 else 5e-2
        (first, reference), (second, other) = results.items()
        # The weight's gradient sums over the rows: its rounding grows with their number.
        for what, a, b, summed in zip(("y", "grad x", "grad weight"), reference, other, (1, 1, args.bt)):
            if not torch.allclose(a.float(), b.float(), atol=tolerance * summed**0.5, rtol=tolerance):
                raise SystemExit(f"benchmark_dtensor_rms_norm: {first} and {second} disagree on {what}")
        rows = []
        for name, run in paths.items():
            counter = CollectiveBytes(WORLD_SIZE)
            with counter:
                run()
            ms = _median_ms(run, device, args.iters, args.warmup)
            calls = ", ".join(f"{op} x{n}" for op, n in sorted(counter.calls.items()))
            rows.append((name, ms, counter.payload, counter.sent, calls))
        if rank == 0:
            print(
                f"rms_norm, hidden dim sharded on {WORLD_SIZE} ranks ({backend}): BT={args.bt}, H={args.hidden}, {args.dtype}"
            )
            print("| path | fwd+bwd ms | collective tensors (bytes/rank) | sent (bytes/rank, ring) | collectives |")
            print("| --- | --- | --- | --- | --- |")
            for name, ms, payload, sent, calls in rows:
                print(f"| {name} | {ms:.3f} | {payload} | {sent:.0f} | {calls} |")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny fp32 shapes on the CPU (gloo, Triton interpreter)")
    parser.add_argument("--bt", type=int, default=16384)
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)
    if args.smoke:
        # 13 columns: 7 + 6 on the two ranks, an uneven split.
        args.bt, args.hidden, args.dtype, args.iters, args.warmup = 6, 13, "float32", 2, 1
        os.environ.setdefault("TRITON_INTERPRET", "1")
        backend = "gloo"
    elif torch.cuda.device_count() >= WORLD_SIZE and torch.distributed.is_nccl_available():
        backend = "nccl"
    else:
        print(f"benchmark_dtensor_rms_norm: needs {WORLD_SIZE} CUDA GPUs with NCCL, or --smoke", file=sys.stderr)
        sys.exit(2)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # gloo: forked ranks (torch already imported); NCCL needs spawned ones (CUDA cannot run in a forked child).
    start_method = "fork" if backend == "gloo" and sys.platform == "linux" else "spawn"
    torch.multiprocessing.start_processes(
        _rank, args=(args, port, backend), nprocs=WORLD_SIZE, start_method=start_method
    )


if __name__ == "__main__":
    main()
