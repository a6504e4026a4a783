"""One training step of a model patched by its ``apply_liger_kernel_to_<model>`` against the unpatched model, on a
GPU: time and peak memory of forward + backward + optimizer step, each model from the same seed.

Both models are built once and timed in alternating rounds (a drift of the machine's clocks or of the host falls on
both). Two times per step, medians over every round: the step as the caller waits for it (host and GPU, synchronized
after each step), and the GPU's own time (the step queued behind a GPU-side sleep, so the host's launches are not
waited for): a mini model's step is bound by the host, where the second says what the kernels do.

``--size mini``: the mini config ``patch`` tests with; ``--size full``: the model type's default (full-size) config
with one decoder layer, so a step is one decoder layer plus the embedding and LM head. The library is the target
checkout's (``--repo``), imported from its ``src``.

usage: python -m tools.kernelgen patch-step MODEL_TYPE [--repo PATH] [--size mini|full] [--dtype bf16|fp32]
       [--batch B] [--length T] [--device cuda|cpu]
"""

from __future__ import annotations

import contextlib
import time

from pathlib import Path

WARMUP, STEPS, ROUNDS = 3, 4, 5
# GPU clock cycles slept before a timed step (~50 ms at 2 GHz): longer than the host takes to queue one step.
QUEUE_AHEAD_CYCLES = 100_000_000


def _model(source, size: str, dtype, device: str):

    from tools.kernelgen.patch.model import quiet_transformers

    if size == "mini":
        config = source.mini_config()
    else:
        with quiet_transformers():
            config = source.config_class()(num_hidden_layers=1)
        # SDPA where the model takes it (some refuse it at build time), the same for both models.
        causal_lm = getattr(source.module(), source.causal_lm)
        config._attn_implementation = "sdpa" if getattr(causal_lm, "_supports_sdpa", False) else "eager"
    return source.build(config).to(device=device, dtype=dtype), config


class _Run:
    """One model (patched or not), its optimizer and its batch; ``context()`` patches transformers for its steps."""

    def __init__(self, source, apply, patched: bool, size: str, dtype, batch: int, length: int, device: str):
        import torch

        self.source, self.apply, self.patched, self.device = source, apply, patched, device
        with self.context():
            self.model, config = _model(source, size, dtype, device)
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-5)
            generator = torch.Generator().manual_seed(0)
            self.ids = torch.randint(3, config.vocab_size, (batch, length), generator=generator).to(device)
            for _ in range(WARMUP):
                self.step()
        self.peak, self.wall_ms, self.gpu_ms = 0.0, [], []

    def measure_peak(self, others):
        """The step's peak GiB as if this model were alone: measured once every model is built and warmed (the first
        step of a process allocates workspaces the second model would not pay for), with every model's gradients
        freed; the step's growth plus this model's parameters and optimizer state."""
        import torch

        for run in others:
            run.optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        with self.context():
            self.step()
        torch.cuda.synchronize()
        state = [t for values in self.optimizer.state.values() for t in values.values() if isinstance(t, torch.Tensor)]
        resident = sum(t.numel() * t.element_size() for t in [*self.model.parameters(), *state])
        self.peak = (torch.cuda.max_memory_allocated() - before + resident) / 2**30

    @contextlib.contextmanager
    def context(self):
        if not self.patched:
            yield
            return
        from tools.kernelgen.patch.restore_transformers import transformers_restored

        module = self.source.module()
        with transformers_restored(module, getattr(module, self.source.causal_lm)):
            self.apply()
            yield

    def step(self):
        self.optimizer.zero_grad(set_to_none=True)
        self.model(input_ids=self.ids, labels=self.ids).loss.backward()
        self.optimizer.step()

    def time_round(self):
        import torch

        cuda = self.device == "cuda"
        with self.context():
            for _ in range(STEPS):
                start = time.perf_counter()
                self.step()
                if cuda:
                    torch.cuda.synchronize()
                self.wall_ms.append((time.perf_counter() - start) * 1e3)
            for _ in range(STEPS if cuda else 0):
                torch.cuda._sleep(QUEUE_AHEAD_CYCLES)
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                self.step()
                end.record()
                torch.cuda.synchronize()
                self.gpu_ms.append(begin.elapsed_time(end))


def _median(values):
    return sorted(values)[len(values) // 2] if values else float("nan")


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
        runs = {
            name: _Run(source, apply, patched, size, torch_dtype, batch, length, device)
            for name, patched in (("unpatched", False), ("patched", True))
        }
        for run in runs.values() if device == "cuda" else ():
            run.measure_peak(runs.values())
        for _ in range(ROUNDS):
            for run in runs.values():
                run.time_round()
    where = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    lines = [
        f"{model} ({size}, {dtype}, batch {batch} x {length}), {where}: median of {ROUNDS} alternating rounds"
        f" x {STEPS} steps"
    ]
    for name, run in runs.items():
        gpu = f"  GPU {_median(run.gpu_ms):8.2f} ms" if run.gpu_ms else ""
        lines.append(f"  {name:<10} step {_median(run.wall_ms):8.2f} ms{gpu}  peak {run.peak:6.2f} GiB")
    base, patched = runs["unpatched"], runs["patched"]
    ratios = [f"step x{_median(patched.wall_ms) / _median(base.wall_ms):.2f}"]
    if base.gpu_ms:
        ratios.append(f"GPU x{_median(patched.gpu_ms) / _median(base.gpu_ms):.2f}")
    if base.peak:
        ratios.append(f"peak memory x{patched.peak / base.peak:.2f}")
    lines.append(f"  patched/unpatched: {', '.join(ratios)}")
    return lines
