"""One training step of a model patched by its ``apply_liger_kernel_to_<model>`` against the unpatched model, on a
GPU: median time and peak memory of forward + backward + optimizer step, each model from the same seed.

``--size mini``: the mini config ``patch`` tests with; ``--size full``: the model type's default (full-size) config
with one decoder layer, so a step is one decoder layer plus the embedding and LM head. The library is the target
checkout's (``--repo``), imported from its ``src``.

usage: python -m tools.kernelgen patch-step MODEL_TYPE [--repo PATH] [--size mini|full] [--dtype bf16|fp32]
       [--batch B] [--length T] [--device cuda|cpu]
"""

from __future__ import annotations

import time

from pathlib import Path

WARMUP, STEPS = 3, 10


def _model(source, size: str, dtype, device: str):

    from tools.kernelgen.patch.model import quiet_transformers

    if size == "mini":
        config = source.mini_config()
    else:
        with quiet_transformers():
            config = source.config_class()(num_hidden_layers=1)
        config._attn_implementation = "sdpa"
    return source.build(config).to(device=device, dtype=dtype), config


def measure(source, apply, size: str, dtype, batch: int, length: int, patched: bool, device: str = "cuda"):
    """(median milliseconds per step, peak GiB) of the model, patched by ``apply`` when ``patched``; on the CPU
    (``--device cpu``, to try the plumbing) no peak is measured."""
    import torch

    cuda = device == "cuda"

    from tools.kernelgen.patch.restore_transformers import transformers_restored

    module = source.module()
    with transformers_restored(module, getattr(module, source.causal_lm)):
        if patched:
            apply()
        model, config = _model(source, size, dtype, device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(3, config.vocab_size, (batch, length), generator=generator).to(device)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        times = []
        for step in range(WARMUP + STEPS):
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            if cuda:
                torch.cuda.synchronize()
            if step >= WARMUP:
                times.append((time.perf_counter() - start) * 1e3)
        peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0
        del model, optimizer
        if cuda:
            torch.cuda.empty_cache()
    return sorted(times)[len(times) // 2], peak


def compare(model: str, repo: str, *, size: str, dtype: str, batch: int, length: int, device: str) -> list[str]:
    """The lines of the comparison (one SKIP line without a GPU where one is asked for)."""
    import importlib
    import os

    import torch

    from tools.kernelgen.patch.model import locate
    from tools.kernelgen.scratch import library_imports_from
    from tools.kernelgen.variants.probe import checkout_kernels

    if device == "cuda" and not torch.cuda.is_available():
        return ["patch-step: SKIP: no GPU (this compares GPU time and memory; --device cpu tries the plumbing)"]
    source = locate(model)
    torch_dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    root = Path(repo).resolve()
    # On the CPU the kernels run interpreted as the compiler would run them (upstream's need it); on the GPU, compiled.
    with checkout_kernels(root) if device == "cpu" else library_imports_from(root / "src"):
        if device == "cuda":
            os.environ.pop("TRITON_INTERPRET", None)
        monkey_patch = importlib.import_module("liger_kernel.transformers.monkey_patch")
        apply = getattr(monkey_patch, f"apply_liger_kernel_to_{source.model_type}")
        results = {
            name: measure(source, apply, size, torch_dtype, batch, length, patched, device)
            for name, patched in (("unpatched", False), ("patched", True))
        }
    where = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    lines = [f"{model} ({size}, {dtype}, batch {batch} x {length}), {where}:"]
    for name, (milliseconds, peak) in results.items():
        lines.append(f"  {name:<10} {milliseconds:8.2f} ms/step  peak {peak:6.2f} GiB")
    (base_ms, base_peak), (ms, peak) = results["unpatched"], results["patched"]
    ratio = f", peak memory x{peak / base_peak:.2f}" if base_peak else ""
    lines.append(f"  patched/unpatched: time x{ms / base_ms:.2f}{ratio}")
    return lines
