import torch.nn as nn
import torch.nn.functional as F


class DistillKL(nn.Module):
    """Hinton distillation loss (RepDistiller style)."""

    def __init__(self, T: float = 4.0):
        super().__init__()
        self.T = T

    def forward(self, y_s, y_t):
        p_s = F.log_softmax(y_s / self.T, dim=1)
        p_t = F.softmax(y_t / self.T, dim=1)
        loss = F.kl_div(p_s, p_t, reduction="batchmean") * (self.T**2)
        return loss
