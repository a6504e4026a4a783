"""Just enough of ``triton.language`` to run printed Triton statements on float64 torch tensors (the tile's
``mask`` all true): the derivation is checked against torch.autograd without Triton."""

import torch


def _tensor(value):
    return value if torch.is_tensor(value) else torch.tensor(float(value), dtype=torch.float64)


class TorchTL:
    """Just enough of ``triton.language`` to run synthesized statements on float64 torch tensors."""

    exp = staticmethod(torch.exp)
    log = staticmethod(torch.log)
    sqrt = staticmethod(torch.sqrt)
    rsqrt = staticmethod(torch.rsqrt)
    sin = staticmethod(torch.sin)
    cos = staticmethod(torch.cos)
    erf = staticmethod(torch.erf)
    abs = staticmethod(torch.abs)
    sigmoid = staticmethod(torch.sigmoid)
    exp2 = staticmethod(torch.exp2)
    log2 = staticmethod(torch.log2)
    zeros_like = staticmethod(torch.zeros_like)

    @staticmethod
    def where(condition, x, y):
        return torch.where(_tensor(condition).bool(), _tensor(x), _tensor(y))

    @staticmethod
    def maximum(x, y):
        return torch.maximum(_tensor(x), _tensor(y))

    @staticmethod
    def minimum(x, y):
        return torch.minimum(_tensor(x), _tensor(y))

    @staticmethod
    def sum(x, axis=None, keep_dims=False):
        return _tensor(x).sum() if axis is None else _tensor(x).sum(dim=axis, keepdim=keep_dims)

    @staticmethod
    def max(x, axis=None, keep_dims=False):
        return _tensor(x).amax(dim=axis, keepdim=keep_dims)

    @staticmethod
    def min(x, axis=None, keep_dims=False):
        return _tensor(x).amin(dim=axis, keepdim=keep_dims)

    @staticmethod
    def zeros(shape, dtype=None):
        return torch.zeros(shape, dtype=torch.float64)

    @staticmethod
    def full(shape, value, dtype=None):
        return torch.full(shape, float(value), dtype=torch.float64)

    float32 = torch.float64


def run_statements(statements, names):
    # Rounding to the inputs' dtype (cast_to_input) keeps float64: the references run in float64 too.
    scope = {"tl": TorchTL, "tanh": torch.tanh, "pow": torch.pow, "input_dtype": torch.float64, **names}
    for statement in statements:
        exec(statement, scope)
    return scope
