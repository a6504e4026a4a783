"""Session 47's references for the GPU: ints written without annotations that are numbers (each a runtime float
hyper-parameter now) and cosine similarities whose eps clamps small rows (torch's gradient there)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def affine_silu(x, scale=1, shift=0):
    y = F.silu(x)
    return y * scale + shift


def softplus_int(x, beta=1, threshold=20):
    return F.softplus(x, beta=beta, threshold=threshold)


class TempSoftmax(nn.Module):
    def forward(self, logits, temperature=2):
        return torch.softmax(logits / temperature, dim=-1)


class OffsetRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6, offset=1):
        super().__init__()
        self.eps = eps
        self.offset = offset
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * (self.offset + self.weight.float())).to(x.dtype)


def cosine_rows(a, b):
    return F.cosine_similarity(a, b, dim=-1)


def cosine_clamped(a, b):
    return F.cosine_similarity(a * 0.01, b, dim=-1, eps=0.5)
