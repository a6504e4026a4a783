"""Session 40's references for the GPU check of its template changes (gen_refs.sh generates them)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def focal_upcast(logits, target, gamma: float = 2.0):
    """A loss computed after an upcast: the kernel returns it in fp32, as the reference does."""
    logp = F.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return (-((1 - picked.exp()) ** gamma) * picked).mean()


def smoothed_weighted_ce(logits, target, weight, label_smoothing: float = 0.1):
    """Class weights with label smoothing: weight=None weighs every class 1."""
    return F.cross_entropy(logits, target, weight=weight, label_smoothing=label_smoothing)


class NormSiLU(nn.Module):
    """A held nn.LayerNorm: the module keeps norm.weight and norm.bias where the reference does."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=eps)
        self.scale = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        return F.silu(self.norm(x)) * self.scale


class HeldGroupNorm(nn.Module):
    """A held nn.GroupNorm: its groups and eps follow the constructor."""

    def __init__(self, num_channels, num_groups=4, eps=1e-5):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, num_channels, eps=eps)

    def forward(self, x):
        return self.norm(x)


def expm1_gate(x, y):
    """torch.expm1: printed as the utils' expm1 (libdevice's compiled)."""
    return torch.expm1(x) * y


def elu_gate(x, y, alpha: float = 1.0):
    """ELU's negative side is alpha * expm1(x)."""
    return F.elu(x, alpha=alpha) * y


def erfc_gate(x, y):
    """torch.special.erfc: the utils' erfc, not 1 - erf."""
    return torch.special.expit(x) * y + torch.special.erfc(y)


def log1p_gate(x, y):
    """A log1p of an argument not known to lie in [0, 1]: the utils' log1p."""
    return torch.log1p(x.abs()) * y


class LayerNormGelu(nn.Module):
    """Held-parameter LayerNorm, then tanh-GELU: its sweep backward keeps no temporary only the row sums read."""

    def __init__(self, hidden_size, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))
        self.eps = eps

    def forward(self, x):
        return F.gelu(F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps), approximate="tanh")


def jsd_beta(student_logits, teacher_logits, beta: float = 0.5):
    """A JSD whose generated cases include beta = 1, where the loss and its gradients are 0."""
    p = F.softmax(student_logits, -1)
    q = F.softmax(teacher_logits, -1)
    log_m = torch.log(beta * p + (1 - beta) * q)
    student = (p * (F.log_softmax(student_logits, -1) - log_m)).sum(-1)
    teacher = (q * (F.log_softmax(teacher_logits, -1) - log_m)).sum(-1)
    return (beta * student + (1 - beta) * teacher).mean()


def softmax_dim2(x):
    """The row named by position: 3-d inputs only."""
    return F.softmax(x, dim=2)


def masked_softmax(scores, mask):
    """An input named like the templates' own mask: mask_in inside the ops file, mask in its messages."""
    scores = scores + mask
    return torch.softmax(scores.float(), dim=-1).to(scores.dtype)
