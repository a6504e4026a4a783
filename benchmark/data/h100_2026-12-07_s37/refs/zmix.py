import torch
import torch.nn as nn
import torch.nn.functional as F


class CEPlusZ(nn.Module):
    def __init__(self, z_weight: float = 1e-4, ignore_index: int = -100):
        super().__init__()
        self.z_weight = z_weight
        self.ignore_index = ignore_index

    def forward(self, logits, labels):
        ce = F.cross_entropy(logits, labels, ignore_index=self.ignore_index)
        z = torch.logsumexp(logits, dim=-1).pow(2).mean()  # over every row, padded ones too
        return ce + self.z_weight * z
