"""Tier-1 synthesis end to end: every element-wise built-in reference becomes a kernel whose generated tests pass.

Each generated test compares the kernel's forward and every gradient (inputs and learnable parameters) with
torch.autograd of the embedded reference: fp32 at rtol/atol 1e-5 against a float64 reference, bf16 against an
fp32 one where the device supports it. On the CPU the kernels run under the Triton interpreter with small
shapes; on a GPU the same tests use model-sized shapes.
"""

import pytest

from test.kernelgen.conftest import WITHOUT_DTENSOR
from test.kernelgen.conftest import assert_generated_tests_pass
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.test_analyze import TIER1_BUILTINS
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.layout import kernel_paths
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


@pytest.fixture(scope="module")
def generated_checkout(tmp_path_factory):
    """One checkout holding a generated kernel for every reference (generation is checked as it goes)."""
    root = copy_checkout(tmp_path_factory.mktemp("elementwise") / "liger")
    for reference in ELEMENTWISE_REFERENCES:
        name = f"{reference}_gen"
        profile = analyze(reference, name=name)
        assert profile.tier == 1, f"{reference}: {profile.notes.tier_reason}"
        assert profile.math.outputs and profile.math.triton is None  # derived, not hand-written
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    return root


def test_every_elementwise_reference_gets_a_synthesized_kernel(generated_checkout):
    for reference in ELEMENTWISE_REFERENCES:
        ops_source = (generated_checkout / kernel_paths(f"{reference}_gen")["ops"]).read_text()
        assert "@triton.jit" in ops_source
        assert "libdevice." not in ops_source  # must also run under the Triton interpreter


def test_generated_kernels_match_torch_autograd(generated_checkout):
    names = [f"{reference}_gen" for reference in ELEMENTWISE_REFERENCES]
    assert_generated_tests_pass(generated_checkout, names, at_least_per_kernel=4, extra=WITHOUT_DTENSOR)
