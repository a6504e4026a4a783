import torch
import torch.nn.functional as F


def clamp_tensor_bounds(x, lo, hi):
    return torch.clamp(x, min=lo, max=hi) * 2.0


def iadd_input(x, y):
    x += y
    return torch.tanh(x) * 0.9


def dict_out(x):
    return {"y": F.silu(x) * 3.0, "z": x * 2.0}


def clamp_hyper_bounds(x, lo: float = -0.5, hi: float = 2.0):
    return torch.clamp(x, min=lo, max=hi) * 2.0
