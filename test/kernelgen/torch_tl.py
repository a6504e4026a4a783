"""Just enough of ``triton.language`` (and of ``tilelang.language``) to run printed Triton (TileLang) statements on
float64 torch tensors (the tile's ``mask`` all true): the derivation is checked against torch.autograd without Triton
or TileLang."""

import torch


def _tensor(value):
    return value if torch.is_tensor(value) else torch.tensor(float(value), dtype=torch.float64)


def _on_tensors(function):
    """``function`` also of a Python number, as the kernel languages' math functions take scalars (``1.0 * n_cols``)."""
    return staticmethod(lambda x: function(_tensor(x)))


class _TorchMath:
    """The functions both kernel languages spell alike (``tl.exp``, ``T.exp``)."""

    exp = _on_tensors(torch.exp)
    log = _on_tensors(torch.log)
    sqrt = _on_tensors(torch.sqrt)
    rsqrt = _on_tensors(torch.rsqrt)
    sin = _on_tensors(torch.sin)
    cos = _on_tensors(torch.cos)
    erf = _on_tensors(torch.erf)
    abs = _on_tensors(torch.abs)
    sigmoid = _on_tensors(torch.sigmoid)
    exp2 = _on_tensors(torch.exp2)
    log2 = _on_tensors(torch.log2)
    floor = _on_tensors(torch.floor)


class TorchTL(_TorchMath):
    """Just enough of ``triton.language`` to run synthesized statements on float64 torch tensors."""

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

    @staticmethod
    def cast(x, dtype):
        return _tensor(x)  # a value of the row length made a tensor (printer._divisor); float64 like the rest

    float32 = torch.float64


class TorchT(_TorchMath):
    """Just enough of ``tilelang.language`` (``T``) to run the statements of a ``T.Parallel`` body elementwise."""

    tanh = staticmethod(torch.tanh)

    @staticmethod
    def pow(x, y):
        return torch.pow(_tensor(x), _tensor(y))

    @staticmethod
    def if_then_else(condition, x, y):
        return torch.where(_tensor(condition).bool(), _tensor(x), _tensor(y))

    @staticmethod
    def max(x, y):
        return torch.maximum(_tensor(x), _tensor(y))

    @staticmethod
    def min(x, y):
        return torch.minimum(_tensor(x), _tensor(y))

    @staticmethod
    def And(x, y):  # TileLang spells its condition nodes capitalized
        return _tensor(x).bool() & _tensor(y).bool()

    @staticmethod
    def Or(x, y):
        return _tensor(x).bool() | _tensor(y).bool()

    @staticmethod
    def Not(x):
        return ~_tensor(x).bool()

    @staticmethod
    def cast(x, dtype):
        return x  # rounding keeps float64, as for Triton: the references run in float64 too


def run_statements(statements, names):
    # Rounding to the inputs' dtype (cast_to_input) keeps float64: the references run in float64 too.
    scope = {
        "tl": TorchTL,
        "T": TorchT,
        "tanh_from_exp": torch.tanh,
        "tanh": torch.tanh,  # the utils helper light forwards call (libdevice's when compiled)
        "log1p": torch.log1p,  # libdevice's compiled, Goldberg's form interpreted
        "expm1": torch.expm1,
        "erfc": torch.special.erfc,
        "log1p_unit": torch.log1p,  # the core-op polynomial of [0, 1] (softplus's log(1 + exp(-|u|)))
        "pow": torch.pow,
        "input_dtype": torch.float64,
        **names,
    }
    for statement in statements:
        exec(statement, scope)
    return scope
