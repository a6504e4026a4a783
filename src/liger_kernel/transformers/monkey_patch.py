"""Swap Hugging Face Llama building blocks for their Liger counterparts.

This is the only module of the package that imports ``transformers``; ``liger_kernel.transformers`` loads it
lazily so that the kernels and modules stay usable without ``transformers`` installed.
"""

import logging

import torch
import transformers  # noqa: F401  (fail here, clearly, when the optional dependency is missing)

from torch import nn
from transformers.loss import loss_utils
from transformers.models.llama import modeling_llama

from liger_kernel.transformers.functional import liger_cross_entropy
from liger_kernel.transformers.rms_norm import LigerRMSNorm
from liger_kernel.transformers.swiglu import LigerSwiGLUMLP
from liger_kernel.transformers.swiglu import check_swiglu_config

logger = logging.getLogger(__name__)

# Captured before any patching: once the module attributes point at Liger classes, these still identify the
# modules of models that were built earlier and need their instances converted.
_HF_LLAMA_RMS_NORM = modeling_llama.LlamaRMSNorm
_HF_LLAMA_MLP = modeling_llama.LlamaMLP


def _liger_fixed_cross_entropy(source, target, num_items_in_batch=None, ignore_index=-100, **kwargs):
    """Stand-in for ``transformers.loss.loss_utils.fixed_cross_entropy`` backed by the Liger kernel.

    Like the original, it averages over the non-ignored tokens unless the trainer passes ``num_items_in_batch``
    (gradient accumulation), in which case the summed loss is divided by that count.
    """
    if num_items_in_batch is None:
        return liger_cross_entropy(source, target, ignore_index=ignore_index, reduction="mean")
    loss = liger_cross_entropy(source, target, ignore_index=ignore_index, reduction="sum")
    if torch.is_tensor(num_items_in_batch):
        num_items_in_batch = num_items_in_batch.to(loss.device)
    return loss / num_items_in_batch


def _convert_rms_norm(module: nn.Module) -> None:
    # Liger's llama casting mode reproduces LlamaRMSNorm; weight and variance_epsilon carry over unchanged.
    module.offset = 0.0
    module.casting_mode = "llama"
    module.in_place = True
    module.row_mode = None
    module.elementwise_affine = True
    module.hidden_size = module.weight.shape[0]
    module.__class__ = LigerRMSNorm


def _convert_mlp(module: nn.Module) -> None:
    # The fused kernel replaces act_fn; the projections (and so the weights) are kept as they are.
    del module.act_fn
    module.__class__ = LigerSwiGLUMLP


def apply_liger_kernel_to_llama(
    rms_norm: bool = True,
    swiglu: bool = True,
    cross_entropy: bool = False,
    model: nn.Module | None = None,
) -> None:
    """Use Liger kernels in Hugging Face Llama models.

    Models built afterwards get Liger modules; pass an already built ``model`` to convert its existing
    ``LlamaRMSNorm`` / ``LlamaMLP`` modules in place, keeping their weights. ``cross_entropy`` replaces the
    loss used by the causal-LM head (``transformers.loss.loss_utils.fixed_cross_entropy``), for every model.
    The Liger cross entropy writes the gradient into the logits it receives: with fp32 logits that is the
    model's own ``logits`` output, which is then no longer valid after a training forward.
    """
    norms = []
    mlps = []
    if model is not None:
        norms = [m for m in model.modules() if rms_norm and type(m) is _HF_LLAMA_RMS_NORM]
        mlps = [m for m in model.modules() if swiglu and type(m) is _HF_LLAMA_MLP]
        # Validate before changing anything, so that a refusal leaves transformers and the model as they were.
        for mlp in mlps:
            check_swiglu_config(mlp.config)

    if rms_norm:
        modeling_llama.LlamaRMSNorm = LigerRMSNorm
    if swiglu:
        modeling_llama.LlamaMLP = LigerSwiGLUMLP
    if cross_entropy:
        loss_utils.fixed_cross_entropy = _liger_fixed_cross_entropy

    if model is None:
        return
    for norm in norms:
        _convert_rms_norm(norm)
    for mlp in mlps:
        _convert_mlp(mlp)
    logger.info("Converted %d RMSNorm and %d MLP modules of %s", len(norms), len(mlps), type(model).__name__)
