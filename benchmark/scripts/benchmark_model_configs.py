"""Shapes of real LLMs for the benchmarks, and sweeps sized to the memory of the GPU at hand."""

import math

from dataclasses import dataclass

import torch

from benchmark.scripts.memory_stats import accelerator_module


@dataclass(frozen=True)
class ModelConfig:
    name: str
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    dtype: torch.dtype
    max_position_embeddings: int
    num_attention_heads: int
    num_key_value_heads: int


# Shapes from each model's published config.json; dtype is bf16 throughout, the usual dtype for training them.
MODEL_CONFIGS: dict[str, ModelConfig] = {
    config.name: config
    for config in (
        ModelConfig("llama_2_7b", 4096, 11008, 32000, torch.bfloat16, 4096, 32, 32),
        ModelConfig("llama_3_8b", 4096, 14336, 128256, torch.bfloat16, 8192, 32, 8),
        ModelConfig("llama_3_2_1b", 2048, 8192, 128256, torch.bfloat16, 131072, 32, 8),
        ModelConfig("qwen2_5_7b", 3584, 18944, 152064, torch.bfloat16, 32768, 28, 4),
        ModelConfig("qwen3_8b", 4096, 12288, 151936, torch.bfloat16, 40960, 32, 8),
        ModelConfig("mistral_7b", 4096, 14336, 32768, torch.bfloat16, 32768, 32, 8),
        ModelConfig("gemma_2_9b", 3584, 14336, 256000, torch.bfloat16, 8192, 16, 8),
    )
}

DEFAULT_MODEL_CONFIG = MODEL_CONFIGS["llama_3_8b"]

# Without a GPU the sweeps only prove the plumbing works, under Triton's (slow) interpreter.
CPU_SEQ_LEN_SWEEP = [4, 8]
CPU_HIDDEN_SIZE_SWEEP = [32, 64]


def get_benchmark_model_config(name: str | None = None) -> ModelConfig:
    """The registered model called ``name`` (``DEFAULT_MODEL_CONFIG`` for None)."""
    if name is None:
        return DEFAULT_MODEL_CONFIG
    try:
        return MODEL_CONFIGS[name]
    except KeyError:
        raise ValueError(f"unknown model config {name!r}; valid names: {', '.join(sorted(MODEL_CONFIGS))}") from None


def free_accelerator_bytes() -> int | None:
    """Free memory on the current accelerator, or None without one."""
    backend = accelerator_module()
    if backend is None:
        return None
    if hasattr(backend, "mem_get_info"):
        return backend.mem_get_info()[0]
    return backend.get_device_properties(backend.current_device()).total_memory - backend.memory_allocated()


def _powers_of_two(low: int, high: int) -> list[int]:
    """Every power of two in [low, high]; [low rounded up] alone when even that does not fit under ``high``."""
    first = 1 << max(0, math.ceil(math.log2(max(1, low))))
    values = []
    value = first
    while value <= high:
        values.append(value)
        value *= 2
    return values or [first]


def compute_seq_len_sweep_config(
    model_cfg: ModelConfig,
    kernel_bytes_per_token: float,
    memory_utilization: float = 0.4,
    max_seq_len: int | None = None,
    min_seq_len: int = 1024,
) -> list[int]:
    """Token counts (powers of two, ``min_seq_len`` up) whose working set fits the GPU's free memory.

    ``kernel_bytes_per_token`` is the peak memory of one token's row at ``model_cfg``'s shapes (inputs, outputs,
    gradients and temporaries of the op); only ``memory_utilization`` of the free memory is planned for, leaving
    room for the reference providers' temporaries and allocator fragmentation. ``max_seq_len`` defaults to the
    model's context length. Without a GPU this returns a tiny CPU sweep.
    """
    free = free_accelerator_bytes()
    if free is None:
        return list(CPU_SEQ_LEN_SWEEP)
    upper = max_seq_len if max_seq_len is not None else model_cfg.max_position_embeddings
    fitting = int(free * memory_utilization / max(kernel_bytes_per_token, 1.0))
    return _powers_of_two(min_seq_len, min(upper, fitting))


def compute_hidden_size_sweep_config(
    model_cfg: ModelConfig,
    kernel_bytes_per_element: float,
    num_tokens: int,
    memory_utilization: float = 0.4,
    min_hidden_size: int = 1024,
    max_hidden_size: int | None = None,
) -> list[int]:
    """Hidden sizes (powers of two) that fit the GPU's free memory at ``num_tokens`` tokens.

    ``kernel_bytes_per_element`` is the peak memory per (token x hidden unit) of the op. ``max_hidden_size``
    defaults to twice the larger of the model's hidden and intermediate sizes, so the sweep brackets the real
    shape. Without a GPU this returns a tiny CPU sweep.
    """
    free = free_accelerator_bytes()
    if free is None:
        return list(CPU_HIDDEN_SIZE_SWEEP)
    upper = (
        max_hidden_size if max_hidden_size is not None else 2 * max(model_cfg.hidden_size, model_cfg.intermediate_size)
    )
    fitting = int(free * memory_utilization / max(kernel_bytes_per_element * num_tokens, 1.0))
    return _powers_of_two(min_hidden_size, min(upper, fitting))
