"""Total variation distance between rows of probabilities: half the L1 distance, summed over classes."""

import torch


def tvd(p: torch.Tensor, q: torch.Tensor, reduction: str = "batchmean") -> torch.Tensor:
    distance = 0.5 * (p - q).abs()
    if reduction == "batchmean":
        return distance.sum() / p.shape[0]
    if reduction == "sum":
        return distance.sum()
    if reduction == "mean":
        return distance.sum() / p.numel()
    return distance.sum(-1)


KERNELGEN = {
    "entry": "tvd",
    "module_class_name": "LigerTVDLoss",
    "module_kind": "loss",
    "domains": {"p": "probabilities", "q": "probabilities"},
    "description": "0.5 * sum(|p - q|) per row",
    "benchmark": {"fixed_config": {"BT": 8192, "vocab_size": 128256}},
}
