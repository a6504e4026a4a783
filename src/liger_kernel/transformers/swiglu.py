"""Drop-in replacements for gated (SwiGLU) MLPs with the SiLU gate fused into one Triton kernel.

Every module keeps the parameter names of the Hugging Face module it replaces, so their state dicts load
unchanged: ``LigerSwiGLUMLP`` (Llama and most decoder MLPs), ``LigerPhi3SwiGLUMLP`` (one fused gate/up
projection), ``LigerBlockSparseTop2MLP`` (one Mixtral expert before transformers v5), ``LigerExperts`` (all of a
Mixtral-style MoE layer's experts as 3-D weights, transformers v5) and ``LigerFalconH1SwiGLUMLP`` (gate and
output multipliers).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

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


class LigerPhi3SwiGLUMLP(nn.Module):
    """HF ``Phi3MLP``: one ``gate_up_proj`` whose output holds the gate, then the up projection, side by side."""

    def __init__(self, config):
        super().__init__()
        check_swiglu_config(config)
        self.config = config
        self.hidden_size = config.hidden_size
        self.intermediate_size = config.intermediate_size
        self.gate_up_proj = nn.Linear(self.hidden_size, 2 * self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)

    def forward(self, x):
        # The halves are strided views; the Function copies each into its own contiguous buffer, which its
        # backward then reuses for the gradient.
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(LigerSiLUMulFunction.apply(gate, up))

    def extra_repr(self) -> str:
        return f"hidden_size={self.hidden_size}, intermediate_size={self.intermediate_size}, act=silu"


class LigerBlockSparseTop2MLP(nn.Module):
    """One expert of HF ``MixtralBlockSparseTop2MLP`` (transformers < 5): ``w2(silu(w1(x)) * w3(x))``."""

    def __init__(self, config):
        super().__init__()
        check_swiglu_config(config)
        self.ffn_dim = config.intermediate_size
        self.hidden_dim = config.hidden_size
        self.w1 = nn.Linear(self.hidden_dim, self.ffn_dim, bias=False)
        self.w2 = nn.Linear(self.ffn_dim, self.hidden_dim, bias=False)
        self.w3 = nn.Linear(self.hidden_dim, self.ffn_dim, bias=False)

    def forward(self, x):
        return self.w2(LigerSiLUMulFunction.apply(self.w1(x), self.w3(x)))

    def extra_repr(self) -> str:
        return f"hidden_dim={self.hidden_dim}, ffn_dim={self.ffn_dim}, act=silu"


class LigerExperts(nn.Module):
    """The experts of a Mixtral-style MoE layer as in transformers v5 (``MixtralExperts``).

    ``gate_up_proj`` is ``[E, 2 * I, H]`` (gate rows first) and ``down_proj`` ``[E, H, I]``. ``forward(hidden_states,
    top_k_index, top_k_weights)`` routes each token to its ``K`` experts and sums their outputs weighted by
    ``top_k_weights``; each expert's activation runs through the fused SiLU-mul kernel. Configs naming the expert
    count ``num_experts`` and the expert width ``moe_intermediate_size`` (Qwen3-MoE) are read as well.
    """

    def __init__(self, config):
        super().__init__()
        if config.hidden_act not in _SILU_ACTIVATIONS:
            raise ValueError(f"LigerExperts needs hidden_act in {_SILU_ACTIVATIONS}, got {config.hidden_act!r}")
        self.num_experts = getattr(config, "num_experts", None) or config.num_local_experts
        self.intermediate_dim = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
        self.hidden_dim = config.hidden_size
        self.gate_up_proj = nn.Parameter(torch.empty(self.num_experts, 2 * self.intermediate_dim, self.hidden_dim))
        self.down_proj = nn.Parameter(torch.empty(self.num_experts, self.hidden_dim, self.intermediate_dim))

    def forward(self, hidden_states, top_k_index, top_k_weights):
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, self.hidden_dim)
        top_k_index = top_k_index.reshape(x.shape[0], -1)
        top_k_weights = top_k_weights.reshape(x.shape[0], -1)
        out = torch.zeros_like(x)
        # One batched matmul per expert over the tokens routed to it; experts nobody chose are skipped.
        for expert in torch.unique(top_k_index).tolist():
            if not 0 <= expert < self.num_experts:
                continue  # an out-of-range id marks a dropped routing slot
            token, slot = torch.where(top_k_index == expert)
            gate, up = F.linear(x[token], self.gate_up_proj[expert]).chunk(2, dim=-1)
            expert_out = F.linear(LigerSiLUMulFunction.apply(gate, up), self.down_proj[expert])
            expert_out = expert_out * top_k_weights[token, slot, None]
            out.index_add_(0, token, expert_out.to(out.dtype))
        return out.view(shape)

    def extra_repr(self) -> str:
        return f"num_experts={self.num_experts}, hidden_dim={self.hidden_dim}, intermediate_dim={self.intermediate_dim}"


class LigerFalconH1SwiGLUMLP(nn.Module):
    """HF ``FalconH1MLP``: ``down_proj(silu(gate_proj(x) * m_gate) * up_proj(x)) * m_down``.

    ``(m_gate, m_down) = config.mlp_multipliers``. Without biases ``down_proj`` is linear, so ``m_down`` is applied
    to the activation inside the fused kernel instead of as a separate pass over the output.
    """

    def __init__(self, config):
        super().__init__()
        check_swiglu_config(config)
        self.config = config
        self.hidden_size = config.hidden_size
        self.intermediate_size = config.intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        gate_multiplier, down_multiplier = config.mlp_multipliers
        self.gate_multiplier = float(gate_multiplier)
        self.down_multiplier = float(down_multiplier)

    def forward(self, x):
        activation = LigerSiLUMulFunction.apply(
            self.gate_proj(x), self.up_proj(x), self.gate_multiplier, self.down_multiplier
        )
        return self.down_proj(activation)

    def extra_repr(self) -> str:
        return (
            f"hidden_size={self.hidden_size}, intermediate_size={self.intermediate_size}, act=silu, "
            f"gate_multiplier={self.gate_multiplier}, down_multiplier={self.down_multiplier}"
        )
