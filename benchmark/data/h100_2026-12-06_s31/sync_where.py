"""Session 31 (scratch): where a generated DPO step syncs the host, if it does: ten steps under torch.cuda's sync
debug mode "error", the traceback of the first sync printed. Run from the generated checkout, PYTHONPATH=src:."""

import sys
import traceback

sys.path.insert(0, "benchmark/scripts")
import compare_post_training as cpt  # noqa: E402
import compare_with_upstream as cwu  # noqa: E402
import torch  # noqa: E402

B, T, H, V = 8, 1024, 4096, 128256


class Run:
    kernel_provider = "liger"


for name in sys.argv[1].split(","):
    inputs, forward = cpt.setup(name, "-", None, Run(), B, T, H, V)
    for _ in range(2):
        cwu._first(forward()).backward()
    torch.cuda.synchronize()
    found = 0
    for step in range(10):
        for t in inputs:
            t.grad = None
        torch.cuda.set_sync_debug_mode("error")
        try:
            cwu._first(forward()).backward()
        except RuntimeError:
            found += 1
            if found == 1:
                print(f"## {name}: step {step} synced")
                traceback.print_exc(limit=-12, file=sys.stdout)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        torch.cuda.synchronize()
    print(f"## {name}: {found} of 10 steps synced", flush=True)
