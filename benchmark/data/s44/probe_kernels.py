"""Candidate d(weight) accumulators for the chunked fused linear loss: C[V, H] += G[R, V]^T @ X[R, H], bf16 in and
out, fp32 accumulation, C read once and written once per call."""

import torch
import triton
import triton.language as tl


@triton.jit
def _tile_of(tile, num_n, GROUP_N: tl.constexpr):
    # Consecutive tiles share an m-block (a column block of G, the operand that does not fit L2).
    pid_m = tile // num_n
    pid_n = tile % num_n
    return pid_m, pid_n


@triton.jit
def dw_tma_persistent(
    g_ptr,
    x_ptr,
    c_ptr,
    R,
    V,
    H,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    NUM_SMS: tl.constexpr,
    WS: tl.constexpr,
    PREFETCH_C: tl.constexpr,
    EPI_SPLIT: tl.constexpr,
    ACCUMULATE: tl.constexpr,
):
    g_desc = tl.make_tensor_descriptor(g_ptr, shape=[R, V], strides=[V, 1], block_shape=[BK, BM])
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[R, H], strides=[H, 1], block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[V, H], strides=[H, 1], block_shape=[BM, BN // EPI_SPLIT])
    num_m = tl.cdiv(V, BM)
    num_n = tl.cdiv(H, BN)
    k_tiles = tl.cdiv(R, BK)
    num_tiles = num_m * num_n
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True, warp_specialize=WS):
        pid_m = tile // num_n
        pid_n = tile % num_n
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        if PREFETCH_C and ACCUMULATE:
            c_early = c_desc.load([off_m, off_n])
        for ki in range(k_tiles):
            a = g_desc.load([ki * BK, off_m])
            b = x_desc.load([ki * BK, off_n])
            acc = tl.dot(a.T, b, acc)
        if not ACCUMULATE and EPI_SPLIT == 1:
            c_desc.store([off_m, off_n], acc.to(c_ptr.dtype.element_ty))
        elif not ACCUMULATE:
            acc = tl.reshape(acc, (BM, 2, BN // 2))
            acc = tl.permute(acc, (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            c_desc.store([off_m, off_n], acc0.to(c_ptr.dtype.element_ty))
            c_desc.store([off_m, off_n + BN // 2], acc1.to(c_ptr.dtype.element_ty))
        elif PREFETCH_C:
            c_desc.store([off_m, off_n], (acc + c_early.to(tl.float32)).to(c_ptr.dtype.element_ty))
        elif EPI_SPLIT == 1:
            c = c_desc.load([off_m, off_n]).to(tl.float32)
            c_desc.store([off_m, off_n], (acc + c).to(c_ptr.dtype.element_ty))
        else:
            acc = tl.reshape(acc, (BM, 2, BN // 2))
            acc = tl.permute(acc, (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            c0 = c_desc.load([off_m, off_n]).to(tl.float32)
            c_desc.store([off_m, off_n], (acc0 + c0).to(c_ptr.dtype.element_ty))
            c1 = c_desc.load([off_m, off_n + BN // 2]).to(tl.float32)
            c_desc.store([off_m, off_n + BN // 2], (acc1 + c1).to(c_ptr.dtype.element_ty))


@triton.jit
def dw_pointer(
    g_ptr, x_ptr, c_ptr, R, V, H, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREFETCH_C: tl.constexpr
):
    pid = tl.program_id(0).to(tl.int64)
    num_n = tl.cdiv(H, BN)
    pid_m = pid // num_n
    pid_n = pid % num_n
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    c_ptrs = c_ptr + offs_m[:, None] * H + offs_n[None, :]
    c_mask = (offs_m[:, None] < V) & (offs_n[None, :] < H)
    if PREFETCH_C:
        c = tl.load(c_ptrs, mask=c_mask, other=0.0)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    k0 = 0
    while k0 < R:
        k = k0 + offs_k
        a = tl.load(g_ptr + k[:, None] * V + offs_m[None, :], mask=(k[:, None] < R) & (offs_m[None, :] < V), other=0.0)
        b = tl.load(x_ptr + k[:, None] * H + offs_n[None, :], mask=(k[:, None] < R) & (offs_n[None, :] < H), other=0.0)
        acc = tl.dot(tl.trans(a), b, acc)
        k0 += BK
    if not PREFETCH_C:
        c = tl.load(c_ptrs, mask=c_mask, other=0.0)
    tl.store(c_ptrs, (acc + c.to(tl.float32)).to(c_ptr.dtype.element_ty), mask=c_mask)


def _alloc(size, alignment, stream):
    return torch.empty(size, device="cuda" if torch.cuda.is_available() else "cpu", dtype=torch.int8)


def _persistent_grid(tiles, num_sms=None):
    """One program a SM (or num_sms of them), never more than tiles; the TMA descriptors' scratch from torch."""
    triton.set_allocator(_alloc)
    if num_sms is None:
        num_sms = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1
    return (min(num_sms, tiles),)


def run_tma(
    g,
    x,
    c,
    BM=128,
    BN=256,
    BK=64,
    stages=3,
    warps=8,
    ws=False,
    prefetch=False,
    epi_split=1,
    num_sms=None,
    accumulate=True,
):
    R, V = g.shape
    H = x.shape[1]
    grid = _persistent_grid(triton.cdiv(V, BM) * triton.cdiv(H, BN), num_sms)
    dw_tma_persistent[grid](
        g,
        x,
        c,
        R,
        V,
        H,
        BM=BM,
        BN=BN,
        BK=BK,
        NUM_SMS=grid[0],
        WS=ws,
        PREFETCH_C=prefetch,
        EPI_SPLIT=epi_split,
        ACCUMULATE=accumulate,
        num_stages=stages,
        num_warps=warps,
    )


def run_pointer(g, x, c, BM=128, BN=128, BK=64, stages=3, warps=8, prefetch=True):
    R, V = g.shape
    H = x.shape[1]
    grid = (triton.cdiv(V, BM) * triton.cdiv(H, BN),)
    dw_pointer[grid](g, x, c, R, V, H, BM=BM, BN=BN, BK=BK, PREFETCH_C=prefetch, num_stages=stages, num_warps=warps)


@triton.jit
def logits_stats(
    x_ptr,
    w_ptr,
    z_ptr,
    part_ptr,
    R,
    V,
    H,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    NUM_SMS: tl.constexpr,
    WS: tl.constexpr,
):
    # Z[R, V] = X[R, H] @ W[V, H]^T in bf16, and per (row, column tile) the max and sum of exp(z - max) of the
    # rounded logits: the softmax statistics without a sweep over Z.
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[R, H], strides=[H, 1], block_shape=[BM, BK])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[V, H], strides=[H, 1], block_shape=[BN, BK])
    z_desc = tl.make_tensor_descriptor(z_ptr, shape=[R, V], strides=[V, 1], block_shape=[BM, BN])
    num_m = tl.cdiv(R, BM)
    num_n = tl.cdiv(V, BN)
    k_tiles = tl.cdiv(H, BK)
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_SMS, flatten=True, warp_specialize=WS):
        pid_n = tile // num_m
        pid_m = tile % num_m
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = x_desc.load([off_m, ki * BK])
            b = w_desc.load([off_n, ki * BK])
            acc = tl.dot(a, b.T, acc)
        z = acc.to(z_ptr.dtype.element_ty)
        z_desc.store([off_m, off_n], z)
        cols = off_n + tl.arange(0, BN)
        zf = tl.where(cols[None, :] < V, z.to(tl.float32), float("-inf"))
        m = tl.max(zf, 1)
        s = tl.sum(tl.exp(zf - m[:, None]), 1)
        rows = (off_m + tl.arange(0, BM)).to(tl.int64)
        tl.store(part_ptr + rows * (2 * num_n) + pid_n * 2, m, mask=rows < R)
        tl.store(part_ptr + rows * (2 * num_n) + pid_n * 2 + 1, s, mask=rows < R)


def run_logits_stats(x, w, z, part, BM=128, BN=256, BK=64, stages=3, warps=8, ws=False, num_sms=None):
    R, H = x.shape
    V = w.shape[0]
    grid = _persistent_grid(triton.cdiv(R, BM) * triton.cdiv(V, BN), num_sms)
    logits_stats[grid](
        x, w, z, part, R, V, H, BM=BM, BN=BN, BK=BK, NUM_SMS=grid[0], WS=ws, num_stages=stages, num_warps=warps
    )
    return triton.cdiv(V, BN)


@triton.jit
def ce_one_sweep(z_ptr, part_ptr, target_ptr, loss_ptr, V, num_n, inv_n, BLOCK: tl.constexpr, PBLOCK: tl.constexpr):
    # Cross entropy (mean over the given count) from the logits and their per-tile statistics: one read and one
    # write of the row, the gradient written over the logits.
    row = tl.program_id(0).to(tl.int64)
    j = tl.arange(0, PBLOCK)
    m_run = float("-inf")
    s_run = 0.0
    for start in range(0, num_n, PBLOCK):
        jj = start + j
        mask = jj < num_n
        m = tl.load(part_ptr + row * 2 * num_n + jj * 2, mask=mask, other=float("-inf"))
        s = tl.load(part_ptr + row * 2 * num_n + jj * 2 + 1, mask=mask, other=0.0)
        new = tl.maximum(m_run, tl.max(m, 0))
        s_run = s_run * tl.exp(m_run - new) + tl.sum(tl.where(mask, s * tl.exp(m - new), 0.0), 0)
        m_run = new
    lse = m_run + tl.log(s_run)
    t = tl.load(target_ptr + row)
    zt = tl.load(z_ptr + row * V + t).to(tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < V
        z = tl.load(z_ptr + row * V + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.exp(z - lse) * inv_n
        g = tl.where(cols == t, g - inv_n, g)
        tl.store(z_ptr + row * V + cols, g.to(z_ptr.dtype.element_ty), mask=mask)
    tl.store(loss_ptr + row, (lse - zt) * inv_n)


def run_ce_one_sweep(z, part, num_n, target, loss, inv_n, block=8192, warps=16):
    R, V = z.shape
    ce_one_sweep[(R,)](
        z,
        part,
        target,
        loss,
        V,
        num_n,
        inv_n,
        BLOCK=block,
        PBLOCK=triton.next_power_of_2(min(num_n, 1024)),
        num_warps=warps,
    )
