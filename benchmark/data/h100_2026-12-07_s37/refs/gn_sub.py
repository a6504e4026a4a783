import torch.nn as nn


class GroupNormWrapper(nn.Module):
    """An nn.GroupNorm submodule with torch's own constructor signature (num_groups, num_channels)."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups, num_channels, eps=eps)

    def forward(self, x):
        return self.gn(x)
