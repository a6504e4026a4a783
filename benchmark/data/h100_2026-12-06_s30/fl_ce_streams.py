import torch
import triton

from liger_kernel.ops.cross_entropy_gen import cross_entropy_gen_backward
from liger_kernel.ops.cross_entropy_gen import cross_entropy_gen_forward

_REDUCTIONS = ("mean", "sum")


def _chunk_rows(n_rows: int, hidden_size: int, n_classes: int) -> int:
    # Upstream Liger's chunk (logits about the size of the hidden states: ceil(rows / ceil(classes / hidden)) rows,
    # a power of two) widened by whole 128-row tiles up to a tenth of the weight (hidden / 10 rows). Every chunk
    # reads and writes the whole d(weight) ([classes, hidden]), so wider chunks save that traffic; the widening
    # costs at most a tenth of d(weight), which upstream's peak holds too.
    by_hidden_states = triton.next_power_of_2(triton.cdiv(n_rows, triton.cdiv(n_classes, hidden_size)))
    return by_hidden_states + hidden_size // 10 // 128 * 128


_SIDE = {}


def _side_stream():
    device = torch.cuda.current_device()
    if device not in _SIDE:
        _SIDE[device] = torch.cuda.Stream()
    return _SIDE[device]


def fused_linear_cross_entropy_gen_forward(
    hidden,
    weight,
    target,
    bias=None,
    ignore_index=-100,
    label_smoothing=0.0,
    lse_square_scale=0.0,
    reduction="mean",
    chunk_size=None,
):
    """The loss and grad_hidden, grad_weight, grad_bias (None where no gradient is needed)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(
            f"fused_linear_cross_entropy_gen: reduction must be one of {_REDUCTIONS} (a fused linear loss is reduced), got {reduction!r}"
        )
    shape = hidden.shape
    hidden = hidden.reshape(-1, hidden.shape[-1])
    n_rows = hidden.shape[0]
    n_cols = weight.shape[0]
    target = target.reshape(-1)
    # The mean's denominator over every row, known before the first chunk's gradient is written.
    denominator = None
    if reduction == "mean":
        denominator = (ignore_index != target).sum()
    chunk = chunk_size or _chunk_rows(n_rows, hidden.shape[1], n_cols)
    # The gradient of hidden per chunk; the weight's summed over chunks in its own dtype (each chunk's
    # product accumulated in fp32 by cuBLAS; the first chunk's written, not added: no zero fill, one read of it
    # fewer), the bias's in fp32 (one value per class: rounding it to bf16 after every chunk would lose the small
    # terms).
    grad_hidden = torch.empty_like(hidden) if hidden.requires_grad else None
    grad_weight = None
    if weight.requires_grad:
        grad_weight = torch.empty_like(weight) if n_rows else torch.zeros_like(weight)
    grad_bias = None
    if bias is not None and bias.requires_grad:
        grad_bias = torch.zeros_like(bias, dtype=torch.float32)
    needs_logits = any(grad is not None for grad in (grad_hidden, grad_weight, grad_bias))
    loss = torch.zeros((), dtype=torch.float32, device=hidden.device)
    main = torch.cuda.current_stream()
    side = _side_stream()
    for start in range(0, n_rows, chunk):
        rows = slice(start, min(start + chunk, n_rows))
        logits = hidden[rows] @ weight.t() if bias is None else torch.addmm(bias, hidden[rows], weight.t())
        chunk_loss, grad_logits = cross_entropy_gen_forward(
            logits,
            target[rows],
            ignore_index,
            label_smoothing,
            lse_square_scale,
            reduction,
            gradients=(needs_logits,),
            denominator=denominator,
            output_dtype=torch.float32,
        )
        loss += chunk_loss
        if grad_weight is not None:
            side.wait_stream(main)
            with torch.cuda.stream(side):
                grad_weight.addmm_(grad_logits.t(), hidden[rows], beta=0.0 if start == 0 else 1.0)
        if grad_hidden is not None:
            torch.mm(grad_logits, weight, out=grad_hidden[rows])
        main.wait_stream(side)
        if grad_bias is not None:
            grad_bias += grad_logits.sum(dim=0, dtype=torch.float32)
        # Freed before the next chunk's matmul allocates: one chunk of logits alive at a time.
        del logits, chunk_loss, grad_logits
    if grad_hidden is not None:
        grad_hidden = grad_hidden.view(shape)
    if grad_bias is not None:
        grad_bias = grad_bias.to(bias.dtype)
    dtype = hidden.dtype
    return loss.to(dtype), grad_hidden, grad_weight, grad_bias


def fused_linear_cross_entropy_gen_backward(grad_output, grad_hidden, grad_weight, grad_bias):
    """Each stored gradient times ``grad_output`` in place, on the device (nothing to do when it is exactly 1)."""
    for grad in (
        grad_hidden,
        grad_weight,
        grad_bias,
    ):
        if grad is not None:
            cross_entropy_gen_backward(grad_output, grad.view(-1, grad.shape[-1]))
    return grad_hidden, grad_weight, grad_bias


class LigerFusedLinearCrossEntropyGenFunction(torch.autograd.Function):
    """The loss of hidden @ weight.T + bias over chunks of rows, without the whole logits: ne = target != -100;
    loss = sum(cross_entropy(logits, target, ignore_index=-100, reduction='none',
    label_smoothing=label_smoothing) + where(ne, lse_square_scale * logsumexp(logits, dim=-1) ** 2, 0.0),
    dim=None) / sum(ne, dim=None)

    Generated by kernelgen from builtin:cross_entropy; each chunk's loss and logits gradient come from
    ``cross_entropy_gen``.
    """

    @staticmethod
    def forward(
        ctx,
        hidden,
        weight,
        target,
        bias=None,
        ignore_index=-100,
        label_smoothing=0.0,
        lse_square_scale=0.0,
        reduction="mean",
        chunk_size=None,
    ):
        loss, grad_hidden, grad_weight, grad_bias = fused_linear_cross_entropy_gen_forward(
            hidden, weight, target, bias, ignore_index, label_smoothing, lse_square_scale, reduction, chunk_size
        )
        ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        grad_hidden, grad_weight, grad_bias = fused_linear_cross_entropy_gen_backward(grad_loss, *ctx.saved_tensors)
        return grad_hidden, grad_weight, None, grad_bias, None, None, None, None, None
