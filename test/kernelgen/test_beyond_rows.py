"""References beyond one row's own elements (issue 42): what kernelgen does not synthesize yet is refused in one
line that names the construct, the reference's line and that line's text, never a category the reference is not
("a loss returns one value per row" for a GroupNorm); exit 2 and nothing written. Index maps within a row
(rotate_half, an interleaved GLU, HF's RoPE of q and k) generate: test_index_maps.py."""

import textwrap

from pathlib import Path

import pytest
import torch

from test.kernelgen.conftest import import_generated_ops
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import snapshot
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

# PolyNorm as a function of its weights: a function's tensor arguments are rows of inputs, so the weights' elements
# are refused with where a module holds them instead (``self.weight[0]``, which generates: test_row_kernels.py).
FUNCTIONAL_POLY_NORM = """
import torch


def poly_norm(x, weight, bias, eps: float = 1e-6):
    def norm(z):
        return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + eps)

    return weight[0] * norm(x**3) + weight[1] * norm(x**2) + weight[2] * norm(x) + bias
"""


@pytest.mark.parametrize(
    "source, entry, line, construct",
    [
        pytest.param(
            FUNCTIONAL_POLY_NORM,
            "poly_norm",
            9,
            "`weight[0]` (line 9) picks elements of the tensor argument `weight` by constant indices",
            id="functional_poly_norm",
        ),
    ],
)
def test_a_reference_beyond_rows_is_one_line_naming_its_construct_and_line(
    checkout, tmp_path, source, entry, line, construct
):
    reference = tmp_path / "reference.py"
    reference.write_text(textwrap.dedent(source))
    before = snapshot(checkout)
    error = one_line_error(
        run_kernelgen("new", "beyond", "--reference", f"{reference}:{entry}", "--repo", str(checkout))
    )
    assert error.startswith(f"kernelgen: error: {reference}:{line}: "), error
    assert construct in error, error
    assert "a loss returns" not in error and "element-wise-synthesizable" not in error, error
    assert snapshot(checkout) == before


def test_a_modulated_rms_norm_generates_and_its_kernel_names_the_shape_of_a_per_sequence_scale(checkout, tmp_path):
    """scale and shift of shape [batch, 1, hidden] broadcast over a sequence, but nothing in this reference says so:
    without its shapes declared it traces as a row kernel of same-shaped inputs, and the generated kernel refuses a
    lower-rank scale with its shape and the one it needs (declared, it takes them: test_broadcast_inputs.py)."""
    source = (Path(__file__).parent / "fixtures" / "broadcast" / "modulated_rms_norm.py").read_text()
    reference = tmp_path / "modulated.py"
    reference.write_text(source.split("KERNELGEN =")[0])
    profile = analyze(str(reference))
    assert profile.tier == 2, profile.notes.tier_reason
    assert not any(t.broadcast for t in profile.inputs)
    write_all(checkout, plan_new(LigerRepo.open(checkout), profile).changes)
    ops = import_generated_ops(checkout, profile.operation_name)
    function = next(getattr(ops, name) for name in dir(ops) if name.endswith("Function"))
    x = torch.randn(3, 5, 16)
    weight, scale, shift = torch.ones(16), torch.randn(3, 1, 16), torch.randn(3, 1, 16)
    with pytest.raises(ValueError, match=r"scale has shape \(3, 1, 16\), expected \(3, 5, 16\) like x"):
        function.apply(x, scale, shift, weight, 1e-6)
