"""Session 30 (scratch): the two-stage post-training losses' chunk of whole groups against upstream's peak at short
and long sequences. For each T and loss: upstream 0.8.5, the generated kernel at the template's chunk and at G
groups a chunk, and torch.compile; GPU-only ms (each step queued behind a GPU-side wait), median of rounds in which
the providers take turns, and peak MB above the inputs. Run from the generated checkout, PYTHONPATH=src:.

    python post_rule.py UPSTREAM_DIR T[,T..] NAME=KEY[,NAME=KEY..] G[,G..] [compile]"""

import importlib
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, "benchmark/scripts")
import compare_post_training as cpt  # noqa: E402
import compare_with_upstream as cwu  # noqa: E402
import torch  # noqa: E402

from utils import run_memory_benchmark  # noqa: E402

sys.path.insert(0, os.path.dirname(here))
from upstream_liger import load_upstream  # noqa: E402

up = load_upstream(sys.argv[1], modules=("chunked_loss",))
cpt.keep_upstream_chunked_loss(up)
tokens = [int(t) for t in sys.argv[2].split(",")]
losses = [pair.split("=") for pair in sys.argv[3].split(",")]
groups = [int(g) for g in sys.argv[4].split(",")]
with_compile = "compile" in sys.argv[5:]
ROUNDS = int(os.environ.get("ROUNDS", "5"))
B, H, V = 8, 4096, 128256
print(torch.cuda.get_device_name(), f"copy rate {cwu.copy_rate_tb_s():.2f} TB/s", flush=True)


class Run:
    def __init__(self, provider):
        self.kernel_provider = provider


for T in tokens:
    for name, key in losses:
        module = importlib.import_module(f"liger_kernel.ops.fused_linear_{name}")
        chunks = getattr(module, f"_fused_linear_{name}_chunks")
        pair = len(next(iter(chunks(4, 1, 2)))) == 2
        group_rows = 2 * T if pair else T
        template_rule = module._chunk_rows
        template_groups = next(iter(chunks(B, T, template_rule(B * T, H, V))))[0]
        template_groups = template_groups[1] - template_groups[0]
        steps = {}
        if key not in os.environ.get("NO_UPSTREAM", "").split(","):
            inputs, forward = cpt.setup(name, key, up, Run("liger_upstream"), B, T, H, V)
            steps["upstream"] = (forward, inputs)

        def ours(g):
            inputs, forward = cpt.setup(name, key, up, Run("liger"), B, T, H, V)
            rule = template_rule if g == 0 else (lambda *shape: g * group_rows)

            def step():
                module._chunk_rows = rule
                try:
                    return forward()
                finally:
                    module._chunk_rows = template_rule

            return step, inputs

        steps[f"template ({template_groups} a chunk)"] = ours(0)
        for g in groups:
            if g != template_groups and g * group_rows <= B * T:
                steps[f"{g} groups a chunk"] = ours(g)
        if with_compile:
            inputs, forward = cpt.setup(name, key, up, Run("torch_compile"), B, T, H, V)
            steps["compile"] = (forward, inputs)
        for forward, inputs in steps.values():
            cwu._first(forward()).backward()
        times = {label: [] for label in steps}
        for _ in range(ROUNDS):
            for label, (forward, inputs) in steps.items():
                times[label].append(cwu.gpu_step_ms(forward, inputs, reps=10))
        print(f"## {name} (upstream {key}), B {B} x T {T}, {'pairs' if pair else 'sequences'} of {group_rows} rows")
        print("| provider | GPU ms | min-max | peak MB |")
        print("|---|---|---|---|")
        for label, (forward, inputs) in steps.items():
            peak = run_memory_benchmark(forward, "full", inputs, reps=3).y_50
            ms = statistics.median(times[label])
            print(f"| {label} | {ms:.2f} | {min(times[label]):.2f}-{max(times[label]):.2f} | {peak:.0f} |", flush=True)
        steps = None
        torch.cuda.empty_cache()
