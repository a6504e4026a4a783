import torch
import torch.nn.functional as F


def relu_squared_glu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Squared-ReLU GLU (Primer-style gate): relu(gate)^2 * up."""
    return F.relu(gate).square() * up
