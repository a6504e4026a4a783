"""bf16 matmul rate of the fused linear loss's logits product, [BT, H] x [H, V], in TFLOP/s (do_bench median)."""

import sys

import torch
import triton

bt, hidden, vocab = (int(v) for v in sys.argv[1:4]) if len(sys.argv) > 3 else (8192, 4096, 128256)
a = torch.randn(bt, hidden, device="cuda", dtype=torch.bfloat16)
b = torch.randn(hidden, vocab, device="cuda", dtype=torch.bfloat16)
ms = triton.testing.do_bench(lambda: a @ b, warmup=50, rep=500)
print(f"matmul [{bt},{hidden}]x[{hidden},{vocab}] bf16: {ms:.3f} ms = {2 * bt * hidden * vocab / ms / 1e9:.0f} TFLOP/s")
