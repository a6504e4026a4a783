import torch
import torch.nn as nn
import torch.nn.functional as F


class QKNorm(nn.Module):
    """Per-head RMSNorm on queries and keys (as in Qwen3 / OLMo-2 / Flux), applied on [b, heads, seq, head_dim]."""

    def __init__(self, head_dim: int, eps: float = 1e-6):
        super().__init__()
        self.q_scale = nn.Parameter(torch.ones(head_dim))
        self.k_scale = nn.Parameter(torch.ones(head_dim))
        self.eps = eps

    def forward(self, q: torch.Tensor, k: torch.Tensor):
        q = F.rms_norm(q.float(), (q.shape[-1],), self.q_scale.float(), self.eps).to(q.dtype)
        k = F.rms_norm(k.float(), (k.shape[-1],), self.k_scale.float(), self.eps).to(k.dtype)
        return q, k
