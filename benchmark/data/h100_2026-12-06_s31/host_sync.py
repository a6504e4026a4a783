"""Session 31 (scratch): why a two-stage loss's full-mode step (host included) trails its GPU-only one. For each
loss and provider: host ms to enqueue one forward + backward (no sync), GPU ms of the same step, syncs the host
made (torch.cuda sync debug mode) and cudaMalloc / cudaFree calls of the caching allocator per step. Run from the
generated checkout, PYTHONPATH=src:."""

import sys
import time
import warnings

sys.path.insert(0, "benchmark/scripts")
import compare_post_training as cpt  # noqa: E402
import compare_with_upstream as cwu  # noqa: E402
import torch  # noqa: E402

B, T, H, V = 8, 1024, 4096, 128256
print(torch.cuda.get_device_name(), flush=True)


class Run:
    def __init__(self, provider):
        self.kernel_provider = provider


print("| loss | provider | host ms to enqueue | GPU ms | host-side syncs | cudaMalloc / cudaFree a step |")
print("|---|---|---|---|---|---|")
for name in sys.argv[1].split(","):
    for provider in ("liger", "torch_compile"):
        inputs, forward = cpt.setup(name, "-", None, Run(provider), B, T, H, V)
        for _ in range(3):
            for t in inputs:
                t.grad = None
            cwu._first(forward()).backward()
        torch.cuda.synchronize()
        host, gpu, syncs = [], [], 0
        before = torch.cuda.memory_stats()
        for _ in range(5):
            for t in inputs:
                t.grad = None
            torch.cuda._sleep(2_000_000_000)  # ~1 s of GPU wait: the host enqueues the step well ahead
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                t0 = time.perf_counter()
                cwu._first(forward()).backward()
                host.append((time.perf_counter() - t0) * 1e3)
                torch.cuda.set_sync_debug_mode(0)
            syncs += sum("synchroniz" in str(w.message) for w in caught)
            end.record()
            torch.cuda.synchronize()
            gpu.append(start.elapsed_time(end))
        after = torch.cuda.memory_stats()
        mallocs = (after.get("num_device_alloc", 0) - before.get("num_device_alloc", 0)) / 5
        frees = (after.get("num_device_free", 0) - before.get("num_device_free", 0)) / 5
        host.sort()
        gpu.sort()
        print(
            f"| {name} | {provider} | {host[2]:.2f} | {gpu[2]:.2f} | {syncs / 5:.1f} | {mallocs:.1f} / {frees:.1f} |",
            flush=True,
        )
        inputs = forward = None
        torch.cuda.empty_cache()
