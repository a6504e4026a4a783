"""Drop-in replacement for Llama-style gated MLPs with the SiLU gate fused into one Triton kernel."""

import torch.nn as nn

from liger_kernel.ops import LigerSiLUMulFunction

_SILU_ACTIVATIONS = ("silu", "swish")


def check_swiglu_config(config) -> None:
    """Raise ValueError unless a Llama-style MLP ``config`` is one LigerSwiGLUMLP computes exactly."""
    if config.hidden_act not in _SILU_ACTIVATIONS:
        raise ValueError(f"LigerSwiGLUMLP needs hidden_act in {_SILU_ACTIVATIONS}, got {config.hidden_act!r}")
    # Dropping the biases of a biased MLP would silently change the model, so refuse it instead.
    if getattr(config, "mlp_bias", False):
        raise ValueError("LigerSwiGLUMLP has no biases; config.mlp_bias=True is not supported")


class LigerSwiGLUMLP(nn.Module):
    """``down_proj(silu(gate_proj(x)) * up_proj(x))``; parameter names match HF ``LlamaMLP`` so weights load."""

    def __init__(self, config):
        super().__init__()
        check_swiglu_config(config)
        self.config = config
        self.hidden_size = config.hidden_size
        self.intermediate_size = config.intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(LigerSiLUMulFunction.apply(self.gate_proj(x), self.up_proj(x)))

    def extra_repr(self) -> str:
        return f"hidden_size={self.hidden_size}, intermediate_size={self.intermediate_size}, act=silu"
