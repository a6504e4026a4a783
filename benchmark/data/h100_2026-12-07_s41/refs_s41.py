"""Session 41's sample references: row kernels whose programs use the accurate forms (expm1, erfc, log1p) that 2eda4d2
brought to row and loss programs; their generated tests run on the GPU in call1.sh."""

import torch
import torch.nn as nn


def centered_expm1(x):
    return torch.expm1(x - x.amax(dim=-1, keepdim=True))


class ErfcRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return torch.special.erfc(normed) * self.weight


def log1p_share(x):
    total = x.abs().sum(dim=-1, keepdim=True) + 1e-6
    return torch.log1p(x.abs() / total)


def vocab_softmax(logits):
    return torch.softmax(logits.float(), dim=-1).to(logits.dtype)


class ScaledLogSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(self, x):
        return torch.log_softmax(x * self.scale, dim=-1)


def kd_masked(student_logits, teacher_logits, labels, temperature: float = 2.0, ignore_index: int = -100):
    t_p = torch.softmax(teacher_logits / temperature, dim=-1)
    per = -(t_p * torch.log_softmax(student_logits / temperature, dim=-1)).sum(dim=-1)
    valid = labels.ne(ignore_index)
    return per.masked_fill(~valid, 0.0).sum() / valid.sum()


def xlogy_gate(x, y):
    return torch.special.xlogy(x, torch.sigmoid(y))


def masked_inf_softmax(scores, keep):
    return scores.masked_fill(keep == 0, float("-inf")).softmax(dim=-1)


class LogitAdjustedCE(nn.Module):
    def __init__(self, num_classes: int = 37, tau: float = 1.0):
        super().__init__()
        prior = torch.arange(1, num_classes + 1, dtype=torch.float32)
        prior = prior / prior.sum()
        self.register_buffer("log_prior", prior.log())
        self.tau = tau

    def forward(self, logits, target):
        return torch.nn.functional.cross_entropy(logits + self.tau * self.log_prior, target)


def flattened_ce(logits, labels, ignore_index: int = -100, reduction: str = "mean"):
    return torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=ignore_index, reduction=reduction
    )


def fake_quant(x, scale: float = 0.25):
    q = torch.clamp(torch.round(x / scale), -8, 7) * scale
    return x + (q - x).detach()


def new_ops(x, y):
    return torch.asinh(x) * torch.special.sinc(y) + torch.copysign(x, y) + torch.addcdiv(x, x, y.abs() + 1.0, value=0.3)


class HeldActivations(nn.Module):
    def __init__(self, beta=2.0, alpha=0.5, slope=0.3):
        super().__init__()
        self.sp = nn.Softplus(beta=beta, threshold=10.0)
        self.elu = nn.ELU(alpha=alpha)
        self.lrelu = nn.LeakyReLU(negative_slope=slope)

    def forward(self, x, y):
        return self.sp(x) * self.elu(y) + self.lrelu(x - y)
