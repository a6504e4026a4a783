import torch.nn.functional as F


def focal_loss(logits, targets, gamma: float = 2.0):
    logp = F.log_softmax(logits, dim=-1)
    logpt = logp.gather(1, targets.view(-1, 1)).view(-1)
    pt = logpt.exp()
    loss = -((1 - pt) ** gamma) * logpt
    return loss.mean()
