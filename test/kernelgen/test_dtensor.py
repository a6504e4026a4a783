"""Generated kernels under torch.distributed (issue 21): DTensor inputs compute on their local shards.

Tier 1: geglu (two inputs, no parameter), dyt (a scalar and two per-channel parameters, one optional) and a
two-output reference. Tier 2: rms_norm (a per-channel weight) and a log-softmax that also returns its per-row
logsumexp. Each is generated into a scratch checkout; its generated DTensor test runs the kernel on two processes
(gloo, Triton's interpreter on the CPU) with the inputs sharded along each dim (unevenly: 3 rows and 7 columns on 2
ranks; a row reduction's last dim is refused in one line) or replicated, and compares outputs, input gradients and
parameter gradients with the reference on the whole tensors.
"""

import pytest
import torch

from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import run_pytest
from tools.kernelgen.layout import kernel_paths

# Two outputs: when only one is used, autograd hands the kernel plain zeros for the other's gradient.
TWO_OUTPUTS = "import torch\n\n\ndef two_out(a, b):\n    return torch.sigmoid(a) * b, torch.tanh(a) + b\n"
# A row reduction with a per-row output (keepdim): wrapped as a DTensor of the rows' shape.
LSE_NORM = "import torch\n\n\ndef lse_norm(x):\n    m = torch.logsumexp(x, dim=-1, keepdim=True)\n    return x - m, m\n"
# kernel name -> the reference (a built-in name or a snippet on stdin)
KERNELS = {"geglu": "geglu", "dyt": "dyt", "two_out": TWO_OUTPUTS, "rms_norm_gen": "rms_norm", "lse_norm": LSE_NORM}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = copy_checkout(tmp_path_factory.mktemp("dtensor") / "liger")
    for name, reference in KERNELS.items():
        if "\n" in reference:
            result = run_kernelgen("new", name, "--reference", "-", "--repo", str(root), stdin=reference)
        else:
            result = run_kernelgen("new", name, "--reference", reference, "--repo", str(root))
        assert result.returncode == 0, result.stderr
    return root


@pytest.mark.skipif(
    not torch.distributed.is_available() or not torch.distributed.is_gloo_available(), reason="needs gloo"
)
def test_generated_dtensor_tests_pass_on_two_gloo_processes(generated):
    result = run_pytest(generated, *[kernel_paths(name)["test"] for name in KERNELS], "-k", "dtensor")
    assert result.returncode == 0, result.stdout[-5000:]
    assert result.stdout.strip().splitlines()[-1].startswith(f"{len(KERNELS)} passed"), result.stdout[-2000:]


def test_plain_tensors_never_touch_torch_distributed(generated):
    """The DTensor code only runs when an argument is a DTensor: the generated ops files import nothing of
    torch.distributed at module level, and their Functions unwrap and wrap nothing for plain tensors."""
    for name in KERNELS:
        source = (generated / kernel_paths(name)["ops"]).read_text()
        module_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
        assert not [line for line in module_level if "distributed" in line], name
        assert source.count("if ctx.layout is not None:") == 4, name
