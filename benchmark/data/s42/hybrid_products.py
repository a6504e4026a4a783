"""Issue 43 item 1, a schedule measured before it is built: the fused linear cross entropy's three products (bf16,
8192 x 4096 x 128256) when part of the vocabulary's weight gradient is not summed over row chunks but computed
afterwards, one vocabulary block at a time over all rows, from logits computed again (a fourth product on that part).
During the row chunks that part of d(weight) is unwritten, so the chunk's logits may use its memory: chunks grow
from 719 rows (1.1x upstream's peak) to c rows for q = (c - 719) * V / H vocabulary rows recomputed.

Products only (no loss math): GPU ms per step, median of 10 after 3 warm-ups (CUDA events around the whole step).
Rows: today's schedule at 640 rows; the split at c in {1024, 1536, 2048}; the three whole products (torch.compile's
own matmul floor, at 2 GB of logits)."""

import torch

N, H, V = 8192, 4096, 128256
ALLOWED_ROWS = 719  # rows of [V] bf16 logits in 1.1x upstream's peak, beside d(weight) and d(hidden)


def timed(step, reps=10):
    for _ in range(3):
        step()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main():
    torch.manual_seed(0)
    x = (torch.randn(N, H, device="cuda") * 0.5).to(torch.bfloat16)
    w = (torch.randn(V, H, device="cuda") * 0.02).to(torch.bfloat16)
    gx = torch.empty_like(x)
    gw = torch.empty_like(w)
    print(torch.cuda.get_device_name(), flush=True)
    flop = 3 * 2 * N * H * V

    def rows_schedule(chunk, split):
        """Row chunks of ``chunk`` rows; d(weight) summed over them for vocabulary rows [0, split), the rest
        computed afterwards per vocabulary block from recomputed logits."""
        logits = torch.empty(chunk, V, device="cuda", dtype=torch.bfloat16)
        block = ALLOWED_ROWS * V // N  # a [N, block] logits block in the allowance
        recompute = torch.empty(N, block, device="cuda", dtype=torch.bfloat16)

        def step():
            for start in range(0, N, chunk):
                rows = slice(start, min(start + chunk, N))
                part = logits[: rows.stop - rows.start]
                torch.mm(x[rows], w.t(), out=part)
                torch.mm(part, w, out=gx[rows])
                gw[:split].addmm_(part[:, :split].t(), x[rows], beta=0.0 if start == 0 else 1.0)
            for first in range(split, V, block):
                cols = slice(first, min(first + block, V))
                part = recompute[:, : cols.stop - cols.start]
                torch.mm(x, w[cols].t(), out=part)
                torch.mm(part.t(), x, out=gw[cols])

        return step

    def whole():
        logits = x @ w.t()
        torch.mm(logits, w, out=gx)
        torch.mm(logits.t(), x, out=gw)

    rows = [("today: 640-row chunks, all summed", rows_schedule(640, V), 0)]
    for chunk in (1024, 1536, 2048):
        split = V - (chunk - ALLOWED_ROWS) * V // H
        rows.append((f"{chunk}-row chunks, {V - split} vocab rows recomputed", rows_schedule(chunk, split), V - split))
    rows.append(("whole products (2 GB of logits)", whole, 0))
    for label, step, recomputed in rows:
        ms = timed(step)
        total = flop + 2 * 2 * N * H * recomputed
        print(
            f"{label}: {ms:.2f} ms, {total / ms / 1e9:.0f} TFLOP/s of the work done, {flop / ms / 1e9:.0f} of "
            f"the three products",
            flush=True,
        )


if __name__ == "__main__":
    main()
