"""An int default written without an annotation (``scale=1``, or a module's ``alpha=2`` stored as ``self.alpha``)
that the reference reads only as a number in tensor arithmetic is a runtime float hyper-parameter, as
``scale: float = 1`` is; an int that picks a dim, a size, a count or an exponent stays an int the kernel is generated
for (analyze/int_scalars.py)."""

import textwrap

import pytest

from tools.kernelgen.analyze import analyze
from tools.kernelgen.analyze.int_scalars import constructor_numbers
from tools.kernelgen.analyze.int_scalars import read_as_numbers


def _namespace(source: str) -> dict:
    """The globals a reference module of ``source`` has once loaded."""
    namespace = {}
    exec(compile(source, "<reference>", "exec"), namespace)  # noqa: S102 - the tests' own snippets
    return namespace


def _numbers(source: str, names: list[str], tensors=("x",), entry="f", kind="function") -> set[str]:
    source = textwrap.dedent(source)
    return read_as_numbers(source, entry, kind, names, list(tensors), _namespace(source))


@pytest.mark.parametrize(
    "body, expected",
    [
        ("return torch.sigmoid(x) * n", {"n"}),
        ("return x / n - n", {"n"}),
        ("return -n * F.silu(x)", {"n"}),  # a sign, then a product with a call's tensor
        ("h = F.silu(x)\n    y = h * n + 1\n    return y", {"n"}),  # a local assigned from a tensor
        ("h = x.float()\n    h *= n\n    return h", {"n"}),  # augmented assignment of a tensor
        ("a, b = x.chunk(2, dim=-1)\n    return a * n + b", {"n"}),  # unpacked tensors
        ("return torch.tanh(x) ** n", set()),  # an exponent
        ("return F.softmax(x, dim=n)", set()),  # a keyword's value
        ("return x.view(-1, n) * 2", set()),  # a size
        ("return torch.sigmoid(x) * (n * 2)", {"n"}),  # inside arithmetic that reaches the tensor
        ("k = n * 2\n    return torch.sigmoid(x) * k", set()),  # met only with numbers first: may be a size
        ("return x[..., :n] * n", set()),  # a slice bound, then a factor: not only a number
        ("return x * n + x.size(-1) * n", {"n"}),  # the same product beside a number
        ("return x.shape[-1] * n", set()),  # numbers only
        ("return x.view(-1, n * math.prod(x.shape[1:]))", set()),  # math's functions give numbers
        ("n = n + 1\n    return x * n", set()),  # assigned: its default is not what the kernel reads
        ("return F.leaky_relu(x, negative_slope=n)", {"n"}),  # annotated float in torch's Python signature
        ("return F.elu(x, n)", {"n"}),  # the same, by position
        ("return softplus(x, n)", {"n"}),  # imported by name: looked up in the reference's module
        ("return _gate(x, n)", {"n"}),  # a helper of the reference's file annotated float
        ("return F.softplus(x, beta=n, threshold=20)", {"n"}),  # a builtin: a number in its aten schema
        ("return torch.sigmoid(x).clamp(min=n)", {"n"}),  # a tensor method's number
        ("return x.pow(n)", set()),  # a method's exponent
        ("return torch.sigmoid(x).mul(n)", {"n"}),  # mul.Scalar's number (not mul.int's Python ints)
        ("return torch.mul(torch.sigmoid(x), n)", {"n"}),  # the same as a function
        ("return x.narrow(-1, 0, n) * 2", set()),  # a length
        ("return torch.pow(x, n)", set()),  # a function's exponent
        ("return x.chunk(n, dim=-1)[0]", set()),  # a count in the method's schema
        ("return F.normalize(x, dim=n)", set()),  # annotated int
    ],
)
def test_reads_that_make_an_int_default_a_number(body, expected):
    source = (
        "import math\n\nimport torch\nimport torch.nn.functional as F\n\nfrom torch.nn.functional import softplus\n\n\n"
        "def _gate(x, slope: float):\n    return x * slope\n\n\n"
        f"def f(x, n=1):\n    {body}\n"
    )
    assert _numbers(source, ["n"]) == expected


def test_a_module_s_forward_argument_and_a_tensor_argument_of_another_name():
    source = """
    import torch
    import torch.nn as nn


    class Scaled(nn.Module):
        def forward(self, logits, temperature=2):
            return torch.softmax(logits / temperature, dim=-1)
    """
    assert _numbers(source, ["temperature"], tensors=("logits",), entry="Scaled", kind="module") == {"temperature"}
    assert _numbers(source, ["temperature"], tensors=(), entry="Scaled", kind="module") == set()


def test_analyzed_profiles_take_such_ints_as_runtime_floats_and_keep_the_others(tmp_path):
    path = tmp_path / "affine.py"
    path.write_text(
        "import torch\nimport torch.nn.functional as F\n\n\n"
        "def affine(x, scale=1, shift=0, n=2):\n    return F.silu(x) ** n * scale + shift\n"
    )
    profile = analyze(str(path))
    assert [(h.name, h.type, h.default, h.constexpr, h.choices) for h in profile.hyperparameters] == [
        ("scale", "float", 1.0, False, None),
        ("shift", "float", 0.0, False, None),
        ("n", "int", 2, False, [2]),
    ]


MODULE = """
import torch
import torch.nn as nn


class Scaled(nn.Module):
    def __init__(self, alpha=2, groups=4, width=8):
        super().__init__()
        self.alpha = alpha
        self.groups = groups
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return self.alpha * torch.tanh(x).view(-1, self.groups)
"""


def test_a_constructor_int_stored_as_is_and_read_as_a_factor_is_a_number():
    # groups: a size of view; width: read by __init__ itself (a layer's size), never stored as is.
    source = textwrap.dedent(MODULE)
    assert constructor_numbers(source, "Scaled", ["alpha", "groups", "width"], _namespace(source)) == {"alpha"}


def test_an_analyzed_module_takes_its_constructor_s_int_factor_at_run_time(tmp_path):
    path = tmp_path / "scaled_tanh.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass ScaledTanh(nn.Module):\n"
        "    def __init__(self, alpha=2):\n        super().__init__()\n        self.alpha = alpha\n\n"
        "    def forward(self, x):\n        return self.alpha * torch.tanh(x)\n"
    )
    profile = analyze(str(path))
    assert [(h.name, h.type, h.default) for h in profile.hyperparameters] == [("alpha", "float", 2.0)]
    assert profile.math.outputs == {"y": "alpha * tanh(x)"}


def test_a_constructor_int_added_to_the_module_s_parameter_is_a_number():
    source = """
    import torch
    import torch.nn as nn


    class OffsetNorm(nn.Module):
        def __init__(self, dim, offset=1):
            super().__init__()
            self.offset = offset
            self.weight = nn.Parameter(torch.zeros(dim))

        def forward(self, x):
            return x * (self.offset + self.weight)
    """
    source = textwrap.dedent(source)
    assert constructor_numbers(source, "OffsetNorm", ["offset"], _namespace(source)) == {"offset"}
