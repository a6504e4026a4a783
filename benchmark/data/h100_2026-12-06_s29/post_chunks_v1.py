"""Session 29 (scratch): a post-training loss of two stages (issue 44's generated kernels) at its template's chunk
and at larger chunks of whole groups, beside upstream 0.8.5 and torch.compile, in one process (full mode,
compare_post_training.py's harness). Run from the generated checkout with PYTHONPATH=src:.

    python post_chunks.py NAME UPSTREAM_KEY ROWS,ROWS UPSTREAM_DIR HELPER_DIR"""

import importlib
import sys

sys.path.insert(0, "benchmark/scripts")
import compare_post_training as cpt  # noqa: E402

name, upstream, rows = sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3].split(",")]
print(f"## {name}: the template's chunk", flush=True)
cpt.main(
    ["--upstream", sys.argv[4], "--helper-dir", sys.argv[5], "--kernel", f"{name}={upstream}", "--csv", "/tmp/p.csv"]
)
module = importlib.import_module(f"liger_kernel.ops.fused_linear_{name}")
for n in rows:
    module._chunk_rows = lambda *shape, n=n: n
    print(f"## {name}: {n}-row chunks", flush=True)
    cpt.main(["--kernel", f"{name}={upstream}", "--providers", "liger", "--csv", "/tmp/p.csv"])
