"""Session 29 (scratch): a post-training loss of two stages (issue 44's generated kernels) at chunks of whole groups
taking turns (0: the template's chunk), then torch.compile, in one process (full mode, compare_post_training.py's
harness). Run from the generated checkout with PYTHONPATH=src:.

    python post_chunks.py NAME UPSTREAM_KEY ROWS,ROWS,..."""

import importlib
import sys

sys.path.insert(0, "benchmark/scripts")
import compare_post_training as cpt  # noqa: E402

name, upstream, rows = sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3].split(",")]
module = importlib.import_module(f"liger_kernel.ops.fused_linear_{name}")
template_rule = module._chunk_rows
for n in rows:
    module._chunk_rows = template_rule if n == 0 else (lambda *shape, n=n: n)
    print(f"## {name}: {n or 'template'}-row chunks", flush=True)
    cpt.main(["--kernel", f"{name}={upstream}", "--providers", "liger", "--csv", "/tmp/p.csv"])
module._chunk_rows = template_rule
cpt.main(["--kernel", f"{name}={upstream}", "--providers", "torch_compile", "--csv", "/tmp/p.csv"])
