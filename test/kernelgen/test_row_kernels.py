"""Tier-2 synthesis end to end: every row-reduction built-in, and references written in other styles, become
kernels whose generated tests pass.

Each generated test compares the kernel's forward and every gradient (inputs and learnable parameters) with
torch.autograd of the embedded reference: fp32 against float64 with tolerances that grow with the row length,
bf16 against fp32 where the device supports it, plus rows of one column and rows of large or offset values. On
the CPU the kernels run under the Triton interpreter with small shapes; on a GPU the same tests use model-sized
shapes.
"""

import pytest

from test.kernelgen.conftest import WITHOUT_DTENSOR
from test.kernelgen.conftest import assert_generated_tests_pass
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.test_analyze import TIER2_BUILTINS
from test.kernelgen.test_rows import STYLE_ENTRIES
from test.kernelgen.test_rows import STYLES
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

# Styles beyond the built-ins that the generated kernels are run for (the derivation covers all of them).
STYLE_KERNELS = ["WrappedLayerNorm", "NormWithRstd", "ScaledRMSNorm", "max_shift", "standardize"]


@pytest.fixture(scope="module")
def generated_checkout(tmp_path_factory):
    """One checkout holding a generated kernel per reference (generation is checked as it goes)."""
    root = copy_checkout(tmp_path_factory.mktemp("rows") / "liger")
    styles = root / "styles.py"
    styles.write_text(STYLES)
    names = []
    for reference, name in [(r, f"{r}_gen") for r in TIER2_BUILTINS] + [
        (f"{styles}:{entry}", f"style_{entry.lower()}") for entry in STYLE_KERNELS
    ]:
        profile = analyze(reference, name=name)
        assert profile.tier == 2, f"{reference}: {profile.notes.tier_reason}"
        assert profile.math.statistics and profile.math.triton is None  # derived, not hand-written
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
        names.append(name)
    return root, names


def test_generated_row_kernels_run_under_the_interpreter(generated_checkout):
    root, names = generated_checkout
    for name in names:
        ops_source = (root / kernel_paths(name)["ops"]).read_text()
        assert "libdevice." not in ops_source  # must also run under the Triton interpreter
        assert "keep_dims=True" in ops_source  # reduces rows in its tiles


def test_generated_row_kernels_match_torch_autograd(generated_checkout):
    root, names = generated_checkout
    assert set(STYLE_KERNELS) <= set(STYLE_ENTRIES)
    assert_generated_tests_pass(root, names, at_least_per_kernel=6, extra=WITHOUT_DTENSOR)
