"""``validate`` on every kernel of the checkout, hand-written ones included: the reference comes from --reference,
the record or the built-in of the kernel's name, and is matched to the kernel's functional by argument name."""

import shutil
import subprocess

import pytest

from test.kernelgen.conftest import REPO_ROOT
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.handwritten import OPS as MULSIG_OPS
from test.kernelgen.handwritten import install as install_mulsig
from tools.kernelgen.validate.workspace import default_workspace

STAGES = ("smoke", "shape_sweep", "numerical_stability", "determinism", "edge_cases")
# mulsig's forward with sigmoid written through libdevice's tanh, imported as upstream's geglu, dyt and cross_entropy
# import it: the interpreter has no libdevice (that ``tanh`` is None there).
LIBDEVICE_MULSIG = MULSIG_OPS.replace(
    "import triton.language as tl\n",
    "import triton.language as tl\n\nfrom triton.language.extra.libdevice import tanh\n",
).replace("x * tl.sigmoid(g), mask=m)", "x * (0.5 * tanh(0.5 * g) + 0.5), mask=m)")


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    checkout = copy_checkout(tmp_path_factory.mktemp("validate_any") / "liger")
    for name in ("swiglu", "rms_norm", "cross_entropy"):  # checkstyle reads each kernel's test file too
        shutil.copy2(REPO_ROOT / f"test/transformers/test_{name}.py", checkout / f"test/transformers/test_{name}.py")
    return checkout


@pytest.mark.parametrize(
    "name, purity",
    [
        ("swiglu", "purity: PASS"),
        ("rms_norm", "purity: PASS"),
        # Host-side target checks and accuracy counts are reported, not a gate, in a hand-written kernel.
        ("cross_entropy", "purity: WARN (17 finding(s) in hand-written code, not a gate;"),
    ],
)
def test_a_hand_written_host_kernel_validates_against_its_built_in_reference(host, name, purity):
    result = run_kernelgen("validate", name, "--repo", str(host), "--skip-tests")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    out = result.stdout
    assert f"reference: the built-in reference {name}" in out
    assert "checkstyle: PASS" in out and purity in out
    for stage in STAGES:
        assert f"stage: {stage:<19} verdict: PASSED" in out
    assert "correctness: PASS" in out and f"validate {name}: PASS" in out
    # The summary names what the stages called: the kernel's own functional, not a generated Function's name.
    summary = (default_workspace(host, name) / "summary.md").read_text()
    assert f"- kernel: `liger_kernel.transformers.functional.liger_{name}` (tier " in summary


def test_a_mismatched_reference_fails_correctness_with_the_first_differing_output(host, tmp_path):
    reference = tmp_path / "tanh_mul.py"
    reference.write_text("import torch\n\n\ndef swiglu(a, b):\n    return torch.tanh(a) * b\n")
    result = run_kernelgen("validate", "swiglu", "--repo", str(host), "--skip-tests", "--reference", str(reference))
    assert result.returncode == 1
    out = result.stdout
    assert f"reference: the reference {reference}" in out
    assert f"stage: {'smoke':<19} verdict: FAILED details: 4x33 no hyper-parameters: [forward y]: " in out
    assert "correctness: FAIL (" in out and "worst at " in out


def test_a_reference_with_other_argument_names_is_one_line_listing_both_signatures(host, tmp_path):
    reference = tmp_path / "gate.py"
    reference.write_text("import torch\n\n\ndef gate(x, y, beta=1.0):\n    return torch.sigmoid(beta * x) * y\n")
    result = run_kernelgen("validate", "swiglu", "--repo", str(host), "--reference", str(reference))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "kernelgen: error: the reference gate(x, y, beta=1.0) does not match the kernel's liger_swiglu(a, b, "
        "gate_multiplier=1.0, down_multiplier=1.0) (no parameter named x, y, beta; a, b required but not given by "
        "the reference)"
    )


def test_archive_is_for_generated_kernels(host):
    result = run_kernelgen("validate", "swiglu", "--repo", str(host), "--archive")
    assert result.returncode == 2
    assert "--archive keeps generated kernels; 'swiglu' has no generation record (hand-written)" in result.stderr


def test_a_hand_written_kernel_calling_libdevice_is_tested_as_compiled_triton_runs_it(tmp_path):
    # upstream's geglu failed both stages on the CPU: "TypeError: unsupported operand type(s) for +: 'int' and
    # 'NoneType'", the interpreter's libdevice.tanh being None, where modify's check ran the same tests as compiled.
    assert "(0.5 * tanh(0.5 * g) + 0.5)" in LIBDEVICE_MULSIG
    checkout = copy_checkout(tmp_path / "liger")
    install_mulsig(checkout, LIBDEVICE_MULSIG)
    # Checkstyle's gate: the ops file as ruff formats it, and a benchmark file.
    subprocess.run(["ruff", "format", "-q", str(checkout / "src/liger_kernel/ops/mulsig.py")], check=True)
    (checkout / "benchmark/scripts/benchmark_mulsig.py").write_text('"""mul_sigmoid: not benchmarked."""\n')
    reference = tmp_path / "mul_sigmoid.py"
    reference.write_text("import torch\n\n\ndef mul_sigmoid(x, gate):\n    return x * torch.sigmoid(gate)\n")
    result = run_kernelgen("validate", "mulsig", "--repo", str(checkout), "--reference", str(reference))
    out = result.stdout
    assert "kernelgen/interpreter.py -q -rs -p no:cacheprovider test/transformers/test_mulsig.py" in out, out[-3000:]
    assert "unit tests: PASS (test/transformers/test_mulsig.py: 4 passed)" in out, out[-3000:]
    for stage in STAGES:
        assert f"stage: {stage:<19} verdict: PASSED" in out, out[-3000:]
