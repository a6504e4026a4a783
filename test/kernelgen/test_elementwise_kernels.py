"""Tier-1 synthesis end to end: every element-wise built-in reference becomes a kernel whose generated tests pass.

Each generated test compares the kernel's forward and every gradient (inputs and learnable parameters) with
torch.autograd of the embedded reference: fp32 at rtol/atol 1e-5 against a float64 reference, bf16 against an
fp32 one where the device supports it. On the CPU the kernels run under the Triton interpreter with small
shapes; on a GPU the same tests use model-sized shapes.
"""

import os

import pytest
import torch

from test.kernelgen.conftest import WITHOUT_DTENSOR
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import failures_by_kernel
from test.kernelgen.conftest import import_generated_ops
from test.kernelgen.conftest import run_pytest
from test.kernelgen.test_analyze import TIER1_BUILTINS
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.render.tier1 import row_block_settings
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

# Op families covered (see each reference in tools/kernelgen/analyze/references/):
#   geglu: gelu-tanh * b         reglu: relu * b             swiglu: silu * b
#   relu_squared: relu, pow      dyt: tanh, scalar + per-channel learnable parameters
#   leaky_relu_mul: leaky_relu with a scalar hyper-parameter
#   softplus_gate: softplus (beta, threshold)   mish: mish   logsigmoid: logsigmoid
#   hardtanh: hardtanh           clamp_mul: clamp with a hyper-parameter
#   gated_sin: sin, sigmoid, three inputs       snake: sin, div, per-channel parameter
#   gelu_erf_mul: erf-gelu * b   log_ratio: sqrt, rsqrt, log, exp, abs, div (positive inputs)
#   elu_select: where + comparison, maximum, minimum, neg, cos, elu
# Every tier-1 built-in (the analyzer's tests pin the list and each one's tier).
ELEMENTWISE_REFERENCES = TIER1_BUILTINS


# An ill-conditioned reference: fp32 loses digits to the rounding of 30 * x whatever computes it, so a kernel as
# accurate as eager PyTorch's fp32 is off from float64 by more than the fixed 1e-5 (the generated test allows a few
# times eager's own error); the same kernel made wrong by 0.1% must still fail.
ILL_CONDITIONED = "import torch\n\n\ndef sin_gate(x, y):\n    return torch.sin(30 * x) * torch.sigmoid(y)\n"
WRONG = "ill_conditioned_wrong"
# A module without parameters whose constructor still asks for the hidden size (written to sit in a model's layers):
# the generated tests and benchmark build it, and the Liger module, with it.
SIZED_MODULE = (
    "import torch\nimport torch.nn as nn\n\n\nclass SizedGate(nn.Module):\n"
    "    def __init__(self, hidden_size):\n        super().__init__()\n        self.act = nn.LogSigmoid()\n\n"
    "    def forward(self, a, b):\n        return self.act(a.float()).to(a.dtype) * b\n"
)
SIZED = "sized_module_gate"
# A module whose __init__ sets a float itself (no argument) and whose forward takes a hyper-parameter of its own: the
# generated test sets the one on the built reference and passes the other to its forward, per case.
HELD_MODULE = (
    "import torch\nfrom torch import nn\n\n\nclass ScaledSoftsign(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n        self.gain = 2.0\n\n"
    "    def forward(self, x, shift: float = 0.25):\n        return self.gain * x / (1 + (x - shift).abs())\n"
)
HELD = "held_attribute_softsign"
# A constant held as a one-value buffer: a hyper-parameter, its test sets each case's value as a tensor.
BUFFER_MODULE = (
    "import torch\nimport torch.nn as nn\n\n\nclass BufferScaledTanh(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n"
    '        self.register_buffer("scale", torch.tensor(1.5))\n\n'
    "    def forward(self, x):\n        return torch.tanh(x) * self.scale\n"
)
BUFFER = "buffer_scaled_tanh"
# Activations torch has as functions and modules of their own: hardswish, hardsigmoid, softsign, celu, selu, threshold,
# exp2, ndtr, lerp, addcmul, sign (torch's gradients at their kinks: hardswish 0 at -3, 1 at 3); Python's math
# functions of a hyper-parameter; a mask of an input's non-zero elements (.bool()).
MORE_ACTIVATIONS = (
    "import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
    "class MoreActivations(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n        self.hardswish = nn.Hardswish()\n"
    "        self.celu = nn.CELU(alpha=0.5)\n\n"
    "    def forward(self, x, y, z, log_t: float = 0.2):\n"
    "        a = self.hardswish(x) + F.hardsigmoid(y) * F.softsign(z) + self.celu(x) + F.selu(y)\n"
    "        b = F.threshold(z, 0.1, -2.0) + torch.exp2(0.3 * x) + torch.special.ndtr(y)\n"
    "        c = math.exp(log_t) * torch.tanh(x) + math.sqrt(1.0 + log_t * log_t) * z\n"
    "        c = c + x.masked_fill(~y.bool(), 0.5)\n"
    "        return a + b + c + torch.lerp(x, y, 0.25) + torch.addcmul(z, x, y, value=0.5) + torch.sign(x) * y\n"
)
MORE = "more_activations"
# Per-channel parameters held as (1, 1, H) and (1, H) (LayerScale's shape) and a 0-d scalar: the module keeps those
# shapes, and 2-d inputs broadcast to 3-d outputs, as the reference's do.
HELD_WIDE_MODULE = (
    "import torch\nimport torch.nn as nn\n\n\nclass WideHeldScale(nn.Module):\n"
    "    def __init__(self, hidden_size: int, init: float = 0.1):\n        super().__init__()\n"
    "        self.scale = nn.Parameter(init * torch.ones(1, 1, hidden_size))\n"
    "        self.shift = nn.Parameter(torch.zeros(1, hidden_size))\n"
    "        self.gain = nn.Parameter(torch.tensor(1.5))\n\n"
    "    def forward(self, x):\n        return torch.tanh(x * self.gain) * self.scale + self.shift\n"
)
HELD_WIDE = "held_wide_scale"
# A GLU that splits one argument in two along the last dim: the kernel takes the halves.
CHUNKED = (
    "import torch\nimport torch.nn.functional as F\n\n\n"
    "def chunked_swiglu(x):\n    up, gate = torch.chunk(x, 2, dim=-1)\n    return up * F.silu(gate)\n"
)
CHUNKED_NAME = "chunked_swiglu"
# torch's own GLU of the last dim (a * sigmoid(b) of the halves): the kernel takes the halves too.
GLU_CALL = "import torch.nn.functional as F\n\n\ndef glu_call(x, scale: float = 0.5):\n    return scale * F.glu(x)\n"
GLU_CALL_NAME = "glu_call_gate"
# Losses of each element (reduction="none"): a binary cross entropy of probabilities, whose target torch checks is
# in [0, 1] (the tests draw it as probabilities), and a squared error.
POINTWISE_LOSSES = (
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass PointwiseLosses(nn.Module):\n"
    '    def __init__(self):\n        super().__init__()\n        self.bce = nn.BCELoss(reduction="none")\n\n'
    "    def forward(self, logits, target, pred):\n"
    '        return self.bce(torch.sigmoid(logits), target) + F.mse_loss(pred, target, reduction="none")\n'
)
POINTWISE_LOSSES_NAME = "pointwise_losses"


# (kernel name, source, entry when the file holds several candidates)
# Learnable exponents of values that are 0 wherever x <= 0: torch's gradient of b ** p by p is 0 where b == 0 and
# p >= 0 (not 0 * log 0), by b 0 where p == 0; a clamp's branch makes a power of the number 0.
POWERS = (
    "import torch\nimport torch.nn as nn\n\n\nclass LearnedPowers(nn.Module):\n"
    "    def __init__(self, hidden_size):\n        super().__init__()\n"
    "        self.p = nn.Parameter(torch.tensor(2.0))\n        self.exponent = nn.Parameter(torch.ones(hidden_size))\n\n"
    "    def forward(self, x, y):\n"
    "        a = torch.relu(x) ** self.p + x.clamp(min=0.0).pow(self.exponent)\n"
    "        return a + torch.pow(torch.relu(y), torch.sigmoid(x) * 2.0)\n"
)
POWERS_NAME = "learned_powers"
# torch.logaddexp / logaddexp2 as functions and as tensor methods: the kernel computes max(a, b) + log(1 + exp(-|a -
# b|)), which neither overflows nor underflows where exp(a) + exp(b) would.
LOGADDEXP = (
    "import torch\n\n\ndef log_add_gate(a, b, c):\n"
    "    return torch.logaddexp(a, 2.0 * b) + a.logaddexp2(c) * torch.sigmoid(c) - torch.logaddexp2(b, c)\n"
)
LOGADDEXP_NAME = "log_add_gate"
# Helpers of the entry's own: a lambda and a public function it calls are not entries (the file names none); torch's
# shrink activations (tanhshrink, softshrink with a hyper-parameter, hardshrink); erfc, sinh, cosh, log2, log10.
HELPER_CALLS = (
    "import math\n\nimport torch\nimport torch.nn.functional as F\n\n"
    "squash = lambda t: t * torch.sigmoid(1.702 * t)\n\n\n"
    "def gelu_tanh(t):\n    return 0.5 * t * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * t**3)))\n\n\n"
    "def helper_gate(x, y, lambd: float = 0.4):\n"
    "    a = gelu_tanh(x) * squash(y) + F.tanhshrink(x) + F.softshrink(y, lambd) - F.hardshrink(x, 0.3)\n"
    "    b = torch.erfc(0.5 * y) + torch.sinh(0.1 * x) - torch.cosh(0.1 * y)\n"
    "    return a + b + torch.log2(x * x + 1) + torch.log10(y * y + 1)\n"
)
HELPER_CALLS_NAME = "helper_calls_gate"
# A second output made of comparisons alone: the reference computes it without a gradient (its backward must not
# reach it), the kernel's gradient of it is 0.
WITH_MASK = "import torch\n\n\ndef relu_with_mask(x, y):\n    return torch.relu(x) * y, torch.where(x > 0, 1.0, 0.0)\n"
WITH_MASK_NAME = "relu_with_mask"
WRITTEN_REFERENCES = [
    (SIZED, SIZED_MODULE, "SizedGate"),
    (HELD, HELD_MODULE, None),
    (BUFFER, BUFFER_MODULE, None),
    (MORE, MORE_ACTIVATIONS, None),
    (HELD_WIDE, HELD_WIDE_MODULE, None),
    (CHUNKED_NAME, CHUNKED, None),
    (GLU_CALL_NAME, GLU_CALL, None),
    (POINTWISE_LOSSES_NAME, POINTWISE_LOSSES, None),
    (POWERS_NAME, POWERS, None),
    (LOGADDEXP_NAME, LOGADDEXP, None),
    (HELPER_CALLS_NAME, HELPER_CALLS, None),
    (WITH_MASK_NAME, WITH_MASK, None),
]


@pytest.fixture(scope="module")
def generated_checkout(tmp_path_factory):
    """One checkout holding a generated kernel for every reference (generation is checked as it goes), the
    ill-conditioned one, and that one made wrong."""
    root = copy_checkout(tmp_path_factory.mktemp("elementwise") / "liger")
    source = tmp_path_factory.mktemp("references") / "sin_gate.py"
    source.write_text(ILL_CONDITIONED)
    profiles = [analyze(reference, name=f"{reference}_gen") for reference in ELEMENTWISE_REFERENCES]
    profiles += [analyze(str(source), name=name) for name in ("ill_conditioned", WRONG)]
    # Each written reference as a file of its own, analyzed under its kernel's name.
    for name, text, entry in WRITTEN_REFERENCES:
        path = tmp_path_factory.mktemp("references") / f"{name}.py"
        path.write_text(text)
        profiles.append(analyze(f"{path}:{entry}" if entry else str(path), name=name))
    for profile in profiles:
        assert profile.tier == 1, f"{profile.operation_name}: {profile.notes.tier_reason}"
        assert profile.math.outputs and profile.math.triton is None  # derived, not hand-written
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    ops = root / kernel_paths(WRONG)["ops"]
    text = ops.read_text()
    store = "    tl.store(y_out_ptr"  # the forward's store (the output is y_out: y names an input)
    assert store in text
    ops.write_text(text.replace(store, f"    y_out = y_out * 1.001\n{store}", 1))
    return root


def test_every_elementwise_reference_gets_a_synthesized_kernel(generated_checkout):
    for reference in ELEMENTWISE_REFERENCES:
        ops_source = (generated_checkout / kernel_paths(f"{reference}_gen")["ops"]).read_text()
        assert "@triton.jit" in ops_source
        assert "libdevice." not in ops_source  # must also run under the Triton interpreter


def test_generated_kernels_match_torch_autograd_and_a_wrong_kernel_fails(generated_checkout):
    """Every generated test passes, the ill-conditioned kernel's too, except the wrong kernel's forward checks."""
    names = [f"{reference}_gen" for reference in ELEMENTWISE_REFERENCES] + ["ill_conditioned"]
    names += [name for name, _, _ in WRITTEN_REFERENCES]
    result = run_pytest(generated_checkout, *[kernel_paths(name)["test"] for name in [*names, WRONG]], *WITHOUT_DTENSOR)
    failed = failures_by_kernel(result.stdout, [*names, WRONG])
    # Only the wrong kernel fails, in every fp32 comparison with the reference (bf16 tolerances allow 0.1%).
    assert failed.startswith(f"{WRONG}: ") and failed.count("\n") == 1, failed + result.stdout[-3000:]
    forward = f"test_{WRONG}_forward_and_gradients_match_reference"
    assert sum(f"{forward}[float32-" in line for line in result.stdout.splitlines() if line.startswith("FAILED")) == 3
    assert "[forward]" in result.stdout
    passed = int(result.stdout.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    assert passed >= 4 * len(names)


def test_parameters_held_with_other_ranks_keep_their_shape_in_the_module(generated_checkout):
    """The reference's state dict loads into the Liger module: (1, 1, H), (1, H) and () stay so."""
    module_source = (generated_checkout / kernel_paths(HELD_WIDE)["module"]).read_text()
    assert "nn.Parameter(torch.full((1, 1, hidden_size), float(init)))" in module_source
    assert "nn.Parameter(torch.zeros(1, hidden_size))" in module_source
    assert "nn.Parameter(torch.full((), 1.5))" in module_source


HELD_MODULE_CALLS = """
import torch
from liger_kernel.transformers import LigerHeldAttributeSoftsign

x = torch.randn(3, 37)
module = LigerHeldAttributeSoftsign()
print(sorted(vars(module)).count("shift"))
for shift in (0.25, -1.5):
    got = module(x, shift=shift) if shift != 0.25 else module(x)
    assert torch.allclose(got, 2.0 * x / (1 + (x - shift).abs()), atol=1e-6), shift
print("called as the reference")
"""


def test_a_module_reference_s_forward_argument_stays_one_of_the_generated_module_s_forward(generated_checkout):
    """``forward(self, x, shift: float = 0.25)``: the Liger module is called as the reference is, ``shift`` a forward
    argument with its default (it was a constructor argument, so ``module(x, shift=...)`` raised a TypeError)."""
    module_source = (generated_checkout / kernel_paths(HELD)["module"]).read_text()
    assert "def __init__(self, gain=2.0):" in module_source and "def forward(self, x, shift=0.25):" in module_source
    result = run_python(["-c", HELD_MODULE_CALLS], cwd=generated_checkout, env={**os.environ, "PYTHONPATH": "src"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["0", "called as the reference"]


def test_parameter_gradients_add_up_the_partials_of_every_program_in_the_parameters_dtype(generated_checkout):
    """The backward's programs each leave fp32 partial sums of the parameter gradients (several programs here: under
    the interpreter get_num_sms is 4, and 70 rows span many tiles), which the host adds up and casts once to each
    parameter's dtype and shape: a scalar, a per-channel vector, a [1, 1, H] one. Against float64 autograd."""
    ops = import_generated_ops(generated_checkout, "dyt_gen")
    torch.manual_seed(0)
    rows, cols = 70, 130
    x, grad_y = torch.randn(rows, cols), torch.randn(rows, cols)
    alpha, gamma = torch.tensor(0.7, dtype=torch.float16), torch.randn(cols)
    beta = torch.randn(1, 1, cols, dtype=torch.float16)
    grad_x, grad_alpha, grad_gamma, grad_beta = ops.dyt_gen_backward(x, alpha, gamma, beta, grad_y)
    leaves = [t.double().requires_grad_() for t in (x, alpha, gamma, beta)]
    y = leaves[2] * torch.tanh(leaves[1] * leaves[0]) + leaves[3].view(-1)
    expected = torch.autograd.grad(y, leaves, grad_y.double())
    for got, want, like in zip((grad_x, grad_alpha, grad_gamma, grad_beta), expected, (x, alpha, gamma, beta)):
        assert got.dtype == like.dtype and got.shape == like.shape
        torch.testing.assert_close(got.double(), want.to(like.dtype).double(), rtol=2e-3, atol=2e-3)


def test_kernels_without_parameters_are_launched_by_row_blocks_with_no_shared_layout_module(generated_checkout):
    """Upstream's shape (geglu, swiglu): a kernel whose inputs share one shape and which reads no parameter is
    launched by blocks of a row and imports nothing of layout_utils; per-channel parameters (dyt, snake) keep the
    2-D tiles whose partial sums layout_utils holds."""
    by_rows = set()
    for reference in ELEMENTWISE_REFERENCES:
        profile = analyze(reference)
        source = (generated_checkout / kernel_paths(f"{reference}_gen")["ops"]).read_text()
        rows = "n_blocks = tl.cdiv(n_cols, BLOCK_SIZE)" in source
        assert rows == (not profile.parameters), reference
        assert ("liger_kernel.ops.layout_utils" in source) == (not rows), reference
        if rows:
            by_rows.add(reference)
            assert "tile_of_program" not in source and "def _launch_shape(" in source
    assert {"geglu", "swiglu"} <= by_rows and not {"dyt", "snake"} & by_rows


def test_backwards_that_call_sin_or_cos_launch_with_their_own_tile(generated_checkout):
    """Measured on an H200: such backwards (snake, gated_sin) ran 12-46% faster at 16 warps, the others slower."""
    with_own_tile = set()
    for reference in ELEMENTWISE_REFERENCES:
        source = (generated_checkout / kernel_paths(f"{reference}_gen")["ops"]).read_text()
        backward = source.split("_backward_kernel(", 1)[1].split("\ndef ", 1)[0]
        calls_trig = "tl.sin(" in backward or "tl.cos(" in backward
        launch = source.split(f"def {reference}_gen_backward(", 1)[1]
        # 2-D tiles take trig_tile_settings' tile; blocks of a row (no parameters) 4096 columns at 16 warps.
        tiles = "tile_of_program(" in source
        own_tile = (
            "= trig_tile_settings(" in launch
            if tiles
            else "block_size = min(next_power_of_2(cols), 4096)\n    num_warps = 16\n" in launch
        )
        assert own_tile == calls_trig, reference
        assert ("import trig_tile_settings\n" in source) == (calls_trig and tiles), reference
        if own_tile:
            with_own_tile.add(reference)
    assert {"snake", "gated_sin"} <= with_own_tile


def test_the_profile_s_backward_num_warps_replaces_the_sin_cos_rule(generated_checkout):
    profile = analyze("snake", name="snake_warps")
    profile.tiling.backward_num_warps = 8
    source = plan_new(LigerRepo.open(generated_checkout), profile).changes[kernel_paths("snake_warps")["ops"]]
    launch = source.split("def snake_warps_backward(", 1)[1]
    assert "trig_tile_settings" not in source
    assert "max_block_cols=2048)\n    num_warps = 8  # the profile's tiling.backward_num_warps\n" in launch
    forward = source.split("def snake_warps_forward(", 1)[1].split("\ndef ", 1)[0]
    assert "num_warps = 8" not in forward  # the forward keeps the template's choice


SWITCHES = """from typing import Optional

import torch
import torch.nn as nn


def int_scale(x, y, scale: int = 2):
    return torch.sigmoid(x) * y * scale


class ReluPower(nn.Module):
    def __init__(self, power: int = 2):
        super().__init__()
        self.power = power

    def forward(self, x):
        return torch.relu(x) ** self.power


class ScaledSilu(nn.Module):
    def __init__(self, scale: Optional[float] = None):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.nn.functional.silu(x)
        if self.scale is not None:
            y = y * self.scale
        return y
"""

CALLS = """
import torch
from liger_kernel.transformers import LigerReluPower
from liger_kernel.transformers import LigerScaledSilu
from liger_kernel.transformers.functional import liger_int_scale

x = torch.randn(2, 8)
assert torch.allclose(liger_int_scale(x, x), torch.sigmoid(x) * x * 2)
assert torch.allclose(LigerReluPower()(x), torch.relu(x) ** 2)
assert torch.allclose(LigerScaledSilu()(x), torch.nn.functional.silu(x))
for call in (lambda: liger_int_scale(x, x, scale=5), lambda: LigerReluPower(power=3), lambda: LigerScaledSilu(2.0)):
    try:
        call()
    except ValueError as error:
        print(error)
"""


def test_values_the_math_was_not_traced_with_are_refused(tmp_path):
    """An int argument and a module's int attribute are traced at their defaults (the math is x * 2, relu(x) ** 2),
    a module's optional number at None (the math skips its branch): the Function and the module say so for other
    values instead of computing the defaults' math."""
    root = copy_checkout(tmp_path / "liger")
    reference = tmp_path / "switches.py"
    reference.write_text(SWITCHES)
    for entry, name in (("int_scale", "int_scale"), ("ReluPower", "relu_power"), ("ScaledSilu", "scaled_silu")):
        write_all(root, plan_new(LigerRepo.open(root), analyze(f"{reference}:{entry}", name=name)).changes)
    result = run_python(["-c", CALLS], cwd=root, env={**os.environ, "PYTHONPATH": "src"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "int_scale: generated for scale in [2], got 5",
        "LigerReluPower: generated for power=2, got 3",
        "LigerScaledSilu: generated for scale=None, got 2.0",
    ]


def test_row_block_warps_grow_with_the_block_only_where_blocks_reach_4096_columns():
    """Blocks capped at 2048 columns (the default) never take the wider warps: the launch names its warps plainly,
    with no branch that cannot be taken; a cap of 4096 or more keeps the choice."""
    forward, backward = row_block_settings(2048, None, None, False)
    assert forward[1:] == ["num_warps = 4"] and backward[-1] == "num_warps = 8"
    forward, backward = row_block_settings(4096, None, None, False)
    assert forward[1:] == ["num_warps = 8 if block_size >= 4096 else 4"]
    assert backward[-1] == "num_warps = 16 if block_size >= 4096 else 8"
