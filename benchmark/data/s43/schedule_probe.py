"""Issue 43 item 1, schedules measured before one is built: the fused linear cross entropy (bf16, 8192 x 4096 x
128256, forward + backward) on this card. GPU-only ms (a GPU-side wait queued before each start event, as
compare_with_upstream.gpu_step_ms does), median of 20, and peak MiB above the inputs.

Part 1: each product alone, summed over the chunks, at several chunk sizes and whole (which product the chunking
slows). Part 2: the three products per schedule. Part 3: whole steps with the generated loss kernel: today's
function, even chunks, d(hidden) and d(weight) on two streams, and the loss kernel of one half chunk overlapped with
the other half's logits product. Part 4: the kernel breakdown of today's step. Run from .gpu-run with
PYTHONPATH=src:."""

import torch

from benchmark.scripts.compare_with_upstream import QUEUE_AHEAD_CYCLES
from liger_kernel.ops.cross_entropy_gen import cross_entropy_gen_forward
from liger_kernel.ops.fused_linear_cross_entropy_gen import LigerFusedLinearCrossEntropyGenFunction

N, H, V = 8192, 4096, 128256
FLOP = 3 * 2 * N * H * V


def gpu_ms(step, reps=20):
    for _ in range(3):
        step()
    events = []
    for _ in range(reps):
        torch.cuda._sleep(QUEUE_AHEAD_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in events)
    return times[len(times) // 2]


def peak_mib(step):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def chunks(chunk):
    return [slice(s, min(s + chunk, N)) for s in range(0, N, chunk)]


def main():
    torch.manual_seed(0)
    x = (torch.randn(N, H, device="cuda") * 0.5).to(torch.bfloat16)
    w = (torch.randn(V, H, device="cuda") * 0.02).to(torch.bfloat16)
    target = torch.randint(0, V, (N,), device="cuda")
    gx = torch.empty_like(x)
    gw = torch.empty_like(w)
    side = torch.cuda.Stream()
    print(torch.cuda.get_device_name(), flush=True)

    print("## part 1: each product alone, summed over the chunks (ms)", flush=True)
    for chunk in (512, 640, 683, 768, 1024, 2048, N):
        buf = torch.randn(chunk, V, device="cuda").to(torch.bfloat16)
        parts = chunks(chunk)

        def logits_only():
            for r in parts:
                torch.mm(x[r], w.t(), out=buf[: r.stop - r.start])

        def dx_only():
            for r in parts:
                torch.mm(buf[: r.stop - r.start], w, out=gx[r])

        def dw_only():
            for i, r in enumerate(parts):
                gw.addmm_(buf[: r.stop - r.start].t(), x[r], beta=0.0 if i == 0 else 1.0)

        t = [gpu_ms(f) for f in (logits_only, dx_only, dw_only)]
        print(
            f"chunk {chunk}: logits {t[0]:.2f}  d(hidden) {t[1]:.2f}  d(weight) {t[2]:.2f}  sum {sum(t):.2f}",
            flush=True,
        )

    print("## part 2: the three products per schedule (ms, TFLOP/s)", flush=True)

    def products(chunk, streams=False):
        buf = torch.empty(chunk, V, device="cuda", dtype=torch.bfloat16)
        parts = chunks(chunk)

        def step():
            for i, r in enumerate(parts):
                part = buf[: r.stop - r.start]
                torch.mm(x[r], w.t(), out=part)
                if streams:
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        gw.addmm_(part.t(), x[r], beta=0.0 if i == 0 else 1.0)
                    torch.mm(part, w, out=gx[r])
                    torch.cuda.current_stream().wait_stream(side)
                else:
                    torch.mm(part, w, out=gx[r])
                    gw.addmm_(part.t(), x[r], beta=0.0 if i == 0 else 1.0)

        return step

    for label, step in (
        ("640 rows", products(640)),
        ("683 rows (12 even chunks)", products(683)),
        ("683 rows, d(hidden) || d(weight)", products(683, True)),
        ("640 rows, d(hidden) || d(weight)", products(640, True)),
    ):
        ms = gpu_ms(step)
        print(f"{label}: {ms:.2f} ms  {FLOP / ms / 1e9:.0f} TFLOP/s", flush=True)
    for lib in ("cublaslt", "cublas"):
        torch.backends.cuda.preferred_blas_library(lib)
        ms = gpu_ms(products(683))
        print(f"683 rows, preferred_blas_library {lib}: {ms:.2f} ms", flush=True)

    print("## part 3: whole steps with the generated loss kernel (ms, peak MiB)", flush=True)
    hidden = x.clone().requires_grad_()
    weight = w.clone().requires_grad_()

    def generated(chunk):
        def step():
            hidden.grad = weight.grad = None
            LigerFusedLinearCrossEntropyGenFunction.apply(
                hidden, weight, target, None, -100, 0.0, 0.0, "mean", chunk
            ).backward()

        return step

    def handmade(chunk, streams=False, halves=False):
        """Today's loop on one persistent [chunk, V] buffer, optionally with d(weight) on a side stream beside
        d(hidden), or with the loss of the first half chunk overlapped with the second half's logits."""

        def step():
            gxh = torch.empty_like(x)
            gwh = torch.empty_like(w)
            buf = torch.empty(chunk, V, device="cuda", dtype=torch.bfloat16)
            denominator = (target != -100).sum()
            loss = torch.zeros((), dtype=torch.float32, device="cuda")
            main = torch.cuda.current_stream()
            for i, r in enumerate(chunks(chunk)):
                n = r.stop - r.start
                part = buf[:n]
                if halves:
                    h = n // 2
                    torch.mm(x[r][:h], w.t(), out=part[:h])
                    side.wait_stream(main)
                    with torch.cuda.stream(side):
                        first, _ = cross_entropy_gen_forward(
                            part[:h], target[r][:h], denominator=denominator, output_dtype=torch.float32
                        )
                    torch.mm(x[r][h:], w.t(), out=part[h:])
                    second, _ = cross_entropy_gen_forward(
                        part[h:], target[r][h:], denominator=denominator, output_dtype=torch.float32
                    )
                    main.wait_stream(side)
                    first.record_stream(main)
                    loss += first + second
                else:
                    torch.mm(x[r], w.t(), out=part)
                    chunk_loss, _ = cross_entropy_gen_forward(
                        part, target[r], denominator=denominator, output_dtype=torch.float32
                    )
                    loss += chunk_loss
                if streams:
                    side.wait_stream(main)
                    with torch.cuda.stream(side):
                        gwh.addmm_(part.t(), x[r], beta=0.0 if i == 0 else 1.0)
                    torch.mm(part, w, out=gxh[r])
                    main.wait_stream(side)
                else:
                    torch.mm(part, w, out=gxh[r])
                    gwh.addmm_(part.t(), x[r], beta=0.0 if i == 0 else 1.0)
            return loss, gxh, gwh

        return step

    def double_buffered(chunk):
        """Two [chunk, V] buffers: chunk i's d(weight) on the side stream while chunk i + 1's logits, loss and
        d(hidden) run on the main stream; a buffer is written again only after its d(weight) has read it."""

        def step():
            gxh = torch.empty_like(x)
            gwh = torch.empty_like(w)
            bufs = [torch.empty(chunk, V, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
            read = [None, None]
            denominator = (target != -100).sum()
            loss = torch.zeros((), dtype=torch.float32, device="cuda")
            main = torch.cuda.current_stream()
            for i, r in enumerate(chunks(chunk)):
                part = bufs[i % 2][: r.stop - r.start]
                if read[i % 2] is not None:
                    main.wait_event(read[i % 2])
                torch.mm(x[r], w.t(), out=part)
                chunk_loss, _ = cross_entropy_gen_forward(
                    part, target[r], denominator=denominator, output_dtype=torch.float32
                )
                loss += chunk_loss
                torch.mm(part, w, out=gxh[r])
                side.wait_stream(main)
                with torch.cuda.stream(side):
                    gwh.addmm_(part.t(), x[r], beta=0.0 if i == 0 else 1.0)
                    read[i % 2] = torch.cuda.Event()
                    read[i % 2].record(side)
            main.wait_stream(side)
            return loss, gxh, gwh

        return step

    # the handmade loop writes the gradient over its buffer only if the loss kernel does so in place
    probe = torch.randn(4, 64, device="cuda").to(torch.bfloat16)
    _, g = cross_entropy_gen_forward(probe, torch.zeros(4, dtype=torch.long, device="cuda"))
    print(f"loss kernel writes the gradient over its input: {g.data_ptr() == probe.data_ptr()}", flush=True)
    ref = handmade(640)()
    for label, step in (
        ("generated, rule chunk", generated(None)),
        ("generated, 683 rows", generated(683)),
        ("generated, 720 rows", generated(720)),
        ("handmade 640", handmade(640)),
        ("handmade 683", handmade(683)),
        ("handmade 683, d(hidden) || d(weight)", handmade(683, streams=True)),
        ("handmade 683, halves", handmade(683, halves=True)),
        ("handmade 683, halves + two streams", handmade(683, streams=True, halves=True)),
        ("double-buffered 2 x 342", double_buffered(342)),
        ("double-buffered 2 x 384", double_buffered(384)),
    ):
        ms = gpu_ms(step)
        mib = peak_mib(step)
        print(f"{label}: {ms:.2f} ms  {FLOP / ms / 1e9:.0f} TFLOP/s  peak {mib:.0f} MiB", flush=True)
        if not label.startswith("generated"):
            out = step()
            err = max((a.float() - b.float()).abs().max().item() for a, b in zip(out, ref))
            print(f"  max difference from handmade 640: {err:.3g}", flush=True)

    print("## part 4: kernels of one generated step (GPU ms in all, calls)", flush=True)
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile

    step = generated(None)
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    rows = [(e.key, e.self_device_time_total / 1e3, e.count) for e in prof.key_averages() if e.self_device_time_total]
    for name, ms, count in sorted(rows, key=lambda row: -row[1])[:12]:
        print(f"{ms:8.2f} ms {count:4d}x  {name[:110]}", flush=True)


if __name__ == "__main__":
    main()
