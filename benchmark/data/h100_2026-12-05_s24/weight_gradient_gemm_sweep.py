"""Scratch (issue 43 item 1): d(weight) += d(logits)^T @ hidden per chunk, cuBLAS addmm_ against Triton kernels
whose read-modify-write of d(weight) overlaps the next tile's main loop (persistent, TMA, flattened loop) or whose
old d(weight) tile is loaded before the main loop. V 128256, H 4096, K = chunk rows, bf16. Then the whole fused
linear + CE step with each d(weight) against upstream and torch.compile, one process. Run from .gpu-run with
PYTHONPATH=src:. and UPSTREAM_DIR."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from upstream_liger import load_upstream  # noqa: E402

up = load_upstream(os.environ.get("UPSTREAM_DIR", "/tmp/up"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from liger_kernel.ops.cross_entropy_gen import cross_entropy_gen_forward  # noqa: E402
from liger_kernel.ops.fused_linear_cross_entropy_gen import LigerFusedLinearCrossEntropyGenFunction  # noqa: E402

BT, H, V = 8192, 4096, 128256
NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count


def _alloc(size, alignment, stream):
    return torch.empty(size, device="cuda", dtype=torch.int8)


triton.set_allocator(_alloc)


@triton.jit
def _tile_of(tile, tiles_m, tiles_n, GROUP: tl.constexpr):
    per_group = GROUP * tiles_n
    first_m = (tile // per_group) * GROUP
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP)
    return first_m + (tile % per_group) % rows_in_group, (tile % per_group) // rows_in_group


@triton.jit
def dw_persistent(
    g_desc,
    h_desc,
    w_desc,
    M,
    N,
    K,
    ACCUMULATE: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP: tl.constexpr,
    SMS: tl.constexpr,
    FLATTEN: tl.constexpr,
):
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    k_steps = tl.cdiv(K, BK)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, SMS, flatten=FLATTEN):
        pid_m, pid_n = _tile_of(tile, tiles_m, tiles_n, GROUP)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(k_steps):
            a = g_desc.load([k * BK, off_m])
            b = h_desc.load([k * BK, off_n])
            acc = tl.dot(a.T, b, acc)
        if ACCUMULATE:
            acc += w_desc.load([off_m, off_n]).to(tl.float32)
        w_desc.store([off_m, off_n], acc.to(w_desc.dtype))


@triton.jit
def dw_prefetch(
    g_ptr,
    h_ptr,
    w_ptr,
    M,
    N,
    K,
    ACCUMULATE: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP: tl.constexpr,
):
    pid_m, pid_n = _tile_of(tl.program_id(0).to(tl.int64), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    w_ptrs = w_ptr + rm[:, None] * N + rn[None, :]
    w_mask = (rm[:, None] < M) & (rn[None, :] < N)
    if ACCUMULATE:
        acc = tl.load(w_ptrs, mask=w_mask, other=0.0).to(tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    rk = tl.arange(0, BK)
    for k in tl.range(0, K, BK):
        kk = k + rk
        a = tl.load(g_ptr + kk[:, None] * M + rm[None, :], mask=(kk[:, None] < K) & (rm[None, :] < M), other=0.0)
        b = tl.load(h_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(tl.trans(a), b, acc)
    tl.store(w_ptrs, acc.to(w_ptr.dtype.element_ty), mask=w_mask)


def run_persistent(cfg):
    bm, bn, bk, group, stages, warps, flatten = cfg

    def f(dw, g, h, accumulate):
        k, m = g.shape
        n = h.shape[1]
        grid = (min(NUM_SMS, triton.cdiv(m, bm) * triton.cdiv(n, bn)),)
        dw_persistent[grid](
            TensorDescriptor.from_tensor(g, [bk, bm]),
            TensorDescriptor.from_tensor(h, [bk, bn]),
            TensorDescriptor.from_tensor(dw, [bm, bn]),
            m,
            n,
            k,
            accumulate,
            bm,
            bn,
            bk,
            group,
            NUM_SMS,
            flatten,
            num_stages=stages,
            num_warps=warps,
        )

    return f


def run_prefetch(cfg):
    bm, bn, bk, group, stages, warps = cfg

    def f(dw, g, h, accumulate):
        k, m = g.shape
        n = h.shape[1]
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        dw_prefetch[grid](g, h, dw, m, n, k, accumulate, bm, bn, bk, group, num_stages=stages, num_warps=warps)

    return f


def cublas(dw, g, h, accumulate):
    dw.addmm_(g.t(), h, beta=1.0 if accumulate else 0.0)


def sweep(rows):
    torch.manual_seed(0)
    g = (torch.randn(rows, V, device="cuda") * 1e-3).to(torch.bfloat16)
    h = torch.randn(rows, H, device="cuda", dtype=torch.bfloat16)
    base = (torch.randn(V, H, device="cuda") * 1e-2).to(torch.bfloat16)
    ref = torch.addmm(base.float(), g.float().t(), h.float())
    tflop = 2 * rows * H * V / 1e9
    results = []
    candidates = [("cublas", cublas)]
    for bm in (128, 256):
        for bn in (128, 256):
            if bm == 256 and bn == 256:
                continue
            for stages in (3, 4):
                for warps in (4, 8):
                    if bm * bn >= 128 * 256 and warps == 4:
                        continue
                    for flatten in (True, False):
                        cfg = (bm, bn, 64, 8, stages, warps, flatten)
                        candidates.append((f"persistent{cfg}", run_persistent(cfg)))
                    cfg = (bm, bn, 64, 8, stages, warps)
                    candidates.append((f"prefetch{cfg}", run_prefetch(cfg)))
    for name, fn in candidates:
        try:
            dw = base.clone()
            fn(dw, g, h, True)
            err = ((dw.float() - ref).norm() / ref.norm()).item()
            ms_acc = triton.testing.do_bench(lambda: fn(dw, g, h, True), warmup=25, rep=150, return_mode="median")
            ms_set = triton.testing.do_bench(lambda: fn(dw, g, h, False), warmup=25, rep=150, return_mode="median")
        except Exception as e:  # a config that does not compile or fit
            print(f"K={rows} {name:48s} failed: {type(e).__name__}: {str(e)[:120]}", flush=True)
            continue
        results.append((ms_acc, name, fn))
        print(
            f"K={rows} {name:48s} +=: {ms_acc:.3f} ms {tflop / ms_acc:4.0f} TF/s | =: {ms_set:.3f} ms "
            f"{tflop / ms_set:4.0f} TF/s | rel err {err:.1e}",
            flush=True,
        )
    results.sort(key=lambda r: r[0])
    print(f"K={rows} best: " + " | ".join(f"{n} {t:.3f}" for t, n, _ in results[:5]), flush=True)
    return results


hidden = target = weight = None


def fused_step(h, w, t, rows, dw_fn):
    n = h.shape[0]
    dh = torch.empty_like(h)
    dw = torch.empty_like(w)
    denom = (t != -100).sum()
    loss = torch.zeros((), dtype=torch.float32, device=h.device)
    for start in range(0, n, rows):
        r = slice(start, min(start + rows, n))
        logits = h[r] @ w.t()
        chunk_loss, g = cross_entropy_gen_forward(
            logits, t[r], -100, 0.0, 0.0, "mean", gradients=(True,), denominator=denom, output_dtype=torch.float32
        )
        loss += chunk_loss
        torch.mm(g, w, out=dh[r])
        dw_fn(dw, g, h[r], start > 0)
        del logits, g
    return loss, dh, dw


class Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, w, t, rows, dw_fn):
        loss, dh, dw = fused_step(h, w, t, rows, dw_fn)
        ctx.save_for_backward(dh, dw)
        return loss

    @staticmethod
    def backward(ctx, grad):
        dh, dw = ctx.saved_tensors
        return dh, dw, None, None, None


def gpu_ms(step, reps=9):
    times = []
    for i in range(reps + 2):
        hidden.grad = weight.grad = None
        torch.cuda._sleep(40_000_000)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step().backward()
        b.record()
        if i >= 2:
            times.append((a, b))
    torch.cuda.synchronize()
    values = sorted(a.elapsed_time(b) for a, b in times)
    return values[len(values) // 2]


def measure(name, step, check):
    step().backward()
    torch.cuda.synchronize()
    hidden.grad = weight.grad = None
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loss = step()
    loss.backward()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    ref_loss, ref_dh, ref_dw = check
    err = "loss %.2e dh %.2e dw %.2e" % (
        (loss.float() - ref_loss).abs().item(),
        ((hidden.grad.float() - ref_dh).norm() / ref_dh.norm()).item(),
        ((weight.grad.float() - ref_dw).norm() / ref_dw.norm()).item(),
    )
    ms = gpu_ms(step)
    print(
        f"{name:44s} GPU {ms:8.3f} ms {3 * 2 * BT * H * V / ms / 1e9:4.0f} TF/s | peak {peak:7.1f} MiB | {err}",
        flush=True,
    )


def reference_gradients(hidden, weight, target):
    """The loss and the gradients of hidden and weight in fp32, 1024 rows at a time: what each schedule is checked by."""
    with torch.no_grad():
        hf, wf = hidden.float(), weight.float()
        ref_dh = torch.zeros_like(hf)
        ref_dw = torch.zeros_like(wf)
        ref_loss = 0.0
        for s in range(0, BT, 1024):
            lg = hf[s : s + 1024] @ wf.t()
            p = torch.softmax(lg, -1)
            ref_loss += torch.nn.functional.cross_entropy(lg, target[s : s + 1024], reduction="sum").item()
            p[torch.arange(p.shape[0]), target[s : s + 1024]] -= 1
            p /= BT
            ref_dh[s : s + 1024] = p @ wf
            ref_dw += p.t() @ hf[s : s + 1024]
            del lg, p
        return ref_loss / BT, ref_dh, ref_dw


def main():
    global hidden, target, weight
    print(torch.cuda.get_device_name(), "SMs", NUM_SMS, flush=True)
    src = torch.empty(2**28, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), rep=200, return_mode="median")
    print(f"copy rate {2 * src.numel() / ms / 1e9:.2f} TB/s")
    best = {}
    for rows in (640, 1024):
        best[rows] = sweep(rows)
    torch.manual_seed(0)
    hidden = torch.randn(BT, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    weight = (torch.randn(V, H, device="cuda") / H**0.5).to(torch.bfloat16).requires_grad_(True)
    target = torch.randint(0, V, (BT,), device="cuda")
    a = hidden.detach()
    ms = triton.testing.do_bench(lambda: a @ weight.t(), rep=300, return_mode="median")
    print(f"matmul [8192,4096]x[4096,128256]: {ms:.3f} ms = {2 * BT * H * V / ms / 1e9:.0f} TFLOP/s", flush=True)
    check = reference_gradients(hidden, weight, target)
    measure(
        "generated (template today)",
        lambda: LigerFusedLinearCrossEntropyGenFunction.apply(hidden, weight, target),
        check,
    )
    for rows in (640, 1024):
        measure(f"cublas addmm_ R={rows}", lambda rows=rows: Step.apply(hidden, weight, target, rows, cublas), check)
        for _, name, fn in best[rows][:3]:
            if name != "cublas":
                measure(
                    f"{name} R={rows}", lambda rows=rows, fn=fn: Step.apply(hidden, weight, target, rows, fn), check
                )
    measure(
        "upstream 0.8.5", lambda: up.ops.LigerFusedLinearCrossEntropyFunction.apply(hidden, weight, target)[0], check
    )

    def f(h, w, t):
        return torch.nn.functional.cross_entropy((h @ w.t()).float(), t)

    compiled = torch.compile(f)
    measure("torch.compile", lambda: compiled(hidden, weight, target), check)


if __name__ == "__main__":
    main()
