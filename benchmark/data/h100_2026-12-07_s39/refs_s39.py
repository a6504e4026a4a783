"""Session 39's references: numbers a module computes from its constructor arguments (analyze/argument_numbers.py)
and class weights a held torch loss keeps, generated into .gpu-run by gen_refs.sh and tested there on the GPU."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class SqrtSizeNorm(nn.Module):
    # lucidrains' RMSNorm: the size read as a number in forward
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.normalize(x, dim=-1) * math.sqrt(self.dim) * self.gamma


class KeyScaledSoftmax(nn.Module):
    # a size that is not the row's: a hyper-parameter
    def __init__(self, head_dim: int = 64):
        super().__init__()
        self.scale = head_dim**-0.5

    def forward(self, scores):
        return (scores * self.scale).softmax(dim=-1)


class LayerNormSiLU(nn.Module):
    # a held nn.LayerNorm's eps
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x):
        return F.silu(self.norm(x.float())).to(x.dtype)


class ScaledTanh(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.tanh(x * self.scale)


class ChildScaleBlock(nn.Module):
    # a float a custom submodule keeps
    def __init__(self, hidden_size, scale: float = 0.5):
        super().__init__()
        self.act = ScaledTanh(scale)
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        return self.act(x) * self.weight


class SharedWeightCE(nn.Module):
    # class weights handed to a held torch loss, which keeps them as its own buffer
    def __init__(self, num_classes: int = 37, smoothing: float = 0.1):
        super().__init__()
        self.register_buffer("class_weight", torch.linspace(0.5, 1.5, num_classes))
        self.crit = nn.CrossEntropyLoss(weight=self.class_weight, label_smoothing=smoothing)

    def forward(self, logits, target):
        return self.crit(logits, target)
