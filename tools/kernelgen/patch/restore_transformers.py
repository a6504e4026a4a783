"""Undo what a Liger apply function changed in ``transformers`` (class swaps, forwards, the loss), so that a test
can compare a patched model with an unpatched one in one process."""

import contextlib

import torch.nn.functional

from transformers.loss import loss_utils


@contextlib.contextmanager
def transformers_restored(modeling_module, *classes):
    """Inside: patch the modeling module, the ``forward`` of ``classes`` and the loss as you like; after: as before."""
    saved_module, saved_loss = dict(vars(modeling_module)), dict(vars(loss_utils))
    saved_forwards = [(cls, cls.__dict__.get("forward")) for cls in classes]
    saved_cross_entropy = torch.nn.functional.cross_entropy
    try:
        yield
    finally:
        vars(modeling_module).clear()
        vars(modeling_module).update(saved_module)
        vars(loss_utils).clear()
        vars(loss_utils).update(saved_loss)
        for cls, forward in saved_forwards:
            cls.forward = forward
        torch.nn.functional.cross_entropy = saved_cross_entropy
