"""Issue 43, item 1: can a Triton GEMM beat cuBLAS on the fused linear loss's d(weight) update?

d(weight)[V, H] += d(logits)[c, V]^T @ hidden[c, H] for a chunk of c rows: K = c is short, so the bf16 running sum's
read and write (2 x V x H x 2 bytes) weigh against 2 c V H FLOP. cuBLAS puts the read of C in the epilogue; the
Triton kernel below can issue it before its K loop (PREFETCH_C), so that the read overlaps the products.
Prints median ms (do_bench) and TFLOP/s of each variant, plus the chunk's other two products, at each chunk size.
"""

import sys

import torch
import triton
import triton.language as tl


@triton.jit
def dw_update_kernel(
    g_ptr,
    x_ptr,
    c_ptr,
    K,
    M,
    N,
    stride_g,
    stride_x,
    stride_c,
    BETA: tl.constexpr,
    PREFETCH_C: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    STAGES: tl.constexpr,
    K_TILES: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    # Grouped order: GROUP_M row blocks walked across every column block, so the d(logits) block stays in L2.
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    first_m = group * GROUP_M
    size_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    offs_m = (pid_m * BM + tl.arange(0, BM)).to(tl.int64)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mask_mn = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    c_ptrs = c_ptr + offs_m[:, None] * stride_c + offs_n[None, :]
    if BETA:
        if PREFETCH_C:
            old = tl.load(c_ptrs, mask=mask_mn, other=0.0)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for i in tl.range(0, K_TILES, num_stages=STAGES):
        offs_k = i * BK + tl.arange(0, BK)
        a = tl.load(
            g_ptr + offs_k[None, :].to(tl.int64) * stride_g + offs_m[:, None],
            mask=(offs_k[None, :] < K) & (offs_m[:, None] < M),
            other=0.0,
        )
        b = tl.load(
            x_ptr + offs_k[:, None] * stride_x + offs_n[None, :],
            mask=(offs_k[:, None] < K) & (offs_n[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    if BETA:
        if not PREFETCH_C:
            old = tl.load(c_ptrs, mask=mask_mn, other=0.0)
        acc += old.to(tl.float32)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_mn)


def dw_update(g, x, c, beta, prefetch, BM, BN, BK, warps, stages, group_m=8):
    K, M = g.shape
    N = x.shape[1]
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    dw_update_kernel[grid](
        g,
        x,
        c,
        K,
        M,
        N,
        g.stride(0),
        x.stride(0),
        c.stride(0),
        BETA=beta,
        PREFETCH_C=prefetch,
        BM=BM,
        BN=BN,
        BK=BK,
        GROUP_M=group_m,
        STAGES=stages,
        K_TILES=triton.cdiv(K, BK),
        num_warps=warps,
        num_stages=stages,
    )


def check(device):
    g = torch.randn(96, 300, device=device, dtype=torch.float32) / 4
    x = torch.randn(96, 80, device=device, dtype=torch.float32) / 4
    c = torch.randn(300, 80, device=device, dtype=torch.float32)
    want = c + g.t() @ x
    for prefetch in (False, True):
        got = c.clone()
        dw_update(g, x, got, True, prefetch, 32, 32, 32, 4, 2)
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
    print("check ok")


def main():
    if not torch.cuda.is_available():
        check("cpu")
        return
    check("cuda")
    from triton.testing import do_bench

    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    V, H = 128256, 4096
    dev, dt = "cuda", torch.bfloat16
    w = torch.randn(V, H, device=dev, dtype=dt) / 64
    dw = torch.zeros(V, H, device=dev, dtype=dt)
    full = 2 * 8192 * V * H
    x_all = torch.randn(8192, H, device=dev, dtype=dt)
    t = do_bench(lambda: x_all @ w.t(), warmup=50, rep=300)
    print(f"whole logits product [8192,{H}]x[{H},{V}]: {t:.3f} ms {full / t / 1e9:.0f} TFLOP/s")
    for c in [int(a) for a in sys.argv[1:]] or [640, 704, 768, 1024]:
        x = torch.randn(c, H, device=dev, dtype=dt)
        g = torch.randn(c, V, device=dev, dtype=dt) / 64
        flop = 2 * c * V * H
        chunks = 8192 / c

        def report(name, fn):
            ms = do_bench(fn, warmup=25, rep=200)
            print(
                f"c={c:5d} {name:44s} {ms:7.3f} ms {flop / ms / 1e9:6.0f} TFLOP/s  x{chunks:.1f} = {ms * chunks:6.2f} ms",
                flush=True,
            )
            return ms

        report("logits  x_c @ W^T", lambda: x @ w.t())
        report("d(hidden)  g @ W", lambda: g @ w)
        report("cuBLAS d(weight) += g^T x", lambda: dw.addmm_(g.t(), x))
        report("cuBLAS d(weight) = g^T x (beta 0)", lambda: dw.addmm_(g.t(), x, beta=0.0))
        transposed = torch.zeros(H, V, device=dev, dtype=dt)
        report("cuBLAS d(weight)^T += x^T g ([H, V] layout)", lambda: transposed.addmm_(x.t(), g))
        transposed = None  # freed before the Triton runs
        best = None
        for BM, BN, BK, warps, stages in [
            (128, 256, 64, 8, 3),
            (128, 128, 64, 4, 4),
            (256, 128, 64, 8, 3),
            (128, 128, 64, 8, 4),
        ]:
            for prefetch in (True, False):
                name = f"triton += {BM}x{BN}x{BK} w{warps} s{stages} pre={int(prefetch)}"
                try:
                    ms = report(name, lambda: dw_update(g, x, dw, True, prefetch, BM, BN, BK, warps, stages))
                except Exception as error:  # out of shared memory, registers
                    print(f"c={c:5d} {name:44s} failed: {str(error).splitlines()[0][:100]}")
                    continue
                if best is None or ms < best[0]:
                    best = (ms, name)
        if best:
            print(f"c={c:5d} best triton: {best[1]} {best[0]:.3f} ms")
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
