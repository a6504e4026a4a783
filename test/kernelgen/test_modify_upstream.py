"""``modify`` adds an option to hand-written kernels of an upstream-layout checkout, in the kernels' own style: the
new parameter with its default (the old behaviour) on the kernels, the host wrappers, the autograd Function, the
functional and the module, annotated where the function annotates its parameters, passed by position where the
launch passes its runtime arguments so; a module whose forward the monkey patch binds to a model's own modules reads
the option with its default; registrations stay as the target has them. The kernels' own tests and the appended
cases pass under the interpreter, libdevice math included."""

import re
import textwrap

from pathlib import Path

import pytest

from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.upstream_style import install
from tools.kernelgen import interpreter
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import OPS_INIT
from tools.kernelgen.layout import TRANSFORMERS_INIT
from tools.kernelgen.pyrun import run_python

SHIM = Path(interpreter.__file__)
TANH_GLU_SCALED = """\
import torch


def tanh_glu(a, b, scale: float = 1.0):
    return torch.tanh(a) * b * scale
"""
# The temperature written another way than a product of the input: the kernel's input map is the same.
ROW_SOFTMAX_SCALED = """\
import torch


def row_softmax(x, scale: float = 1.0):
    return torch.softmax(x / (1.0 / scale), dim=-1)
"""


@pytest.fixture
def checkout(tmp_path) -> Path:
    """This library with upstream's functional.py import style (every Function from ``liger_kernel.ops``) and the
    two upstream-style kernels."""
    root = copy_checkout(tmp_path / "liger")
    functional = (root / FUNCTIONAL).read_text()
    (root / FUNCTIONAL).write_text(
        re.sub(r"^from liger_kernel\.ops\.\w+ import", "from liger_kernel.ops import", functional, flags=re.M)
    )
    install(root)
    return root


def _modify(checkout: Path, tmp_path: Path, name: str, reference: str):
    path = tmp_path / f"{name}_scaled.py"
    path.write_text(reference)
    return run_kernelgen("modify", name, "--reference", str(path), "--repo", str(checkout))


def _interpreted_pytest(checkout: Path, test: str):
    """The checkout's test file run as upstream's tests run on the CPU: interpreted, libdevice math included."""
    return run_python([str(SHIM), "-q", "-p", "no:cacheprovider", test], cwd=checkout)


def _passed(output: str) -> int:
    summary = output.strip().splitlines()[-1]
    return int(summary.split(" passed")[0].split()[-1]) if " passed" in summary else 0


def test_an_upstream_style_activation_gains_a_scale_bound_forward_included(checkout, tmp_path):
    registrations = {path: (checkout / path).read_text() for path in (OPS_INIT, TRANSFORMERS_INIT)}
    test_path = checkout / "test/transformers/test_tanh_glu.py"
    hand_written_test = test_path.read_text()
    result = _modify(checkout, tmp_path, "tanh_glu", TANH_GLU_SCALED)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "note: math added to the hand-written kernels: y -> scale*y" in result.stdout
    assert "binds LigerTanhGLUMLP.forward to a model's own modules" in result.stdout

    ops = (checkout / "src/liger_kernel/ops/tanh_glu.py").read_text()
    assert (
        "def _tanh_glu_forward_kernel(a, b, c, stride, scale, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):" in ops
    )
    # The launches pass runtime arguments by position and constexprs by keyword: the scale joins the positions.
    assert "        c.stride(-2),\n        scale,\n        n_cols=n_cols,\n" in ops
    assert "        dc.stride(-2),\n        scale,\n        n_cols=n_cols,\n" in ops
    assert "def tanh_glu_forward(a, b, scale=1.0):" in ops  # the wrappers annotate nothing: neither does it
    assert "        ctx.scale = scale\n" in ops and "        return a, b, None\n" in ops
    functional = (checkout / "src/liger_kernel/transformers/functional.py").read_text()
    assert "def liger_tanh_glu(a, b, scale=1.0):\n    return LigerTanhGLUFunction.apply(a, b, scale)\n" in functional
    module = (checkout / "src/liger_kernel/transformers/tanh_glu.py").read_text()
    assert "def __init__(self, config, scale=1.0):" in module and "        self.scale = scale\n" in module
    assert 'LigerTanhGLUFunction.apply(self.gate_proj(x), self.up_proj(x), getattr(self, "scale", 1.0))' in module
    assert "    scale = 1.0\n" not in module  # a class default would not reach a bound forward
    assert {path: (checkout / path).read_text() for path in registrations} == registrations
    test_text = test_path.read_text()
    body = hand_written_test[hand_written_test.index("device = infer_device()") :]
    assert body.rstrip("\n") + "\n\n\n# --- kernelgen --modify" in test_text  # the hand-written tests as they were
    assert test_text.count("import infer_device") == 1  # upstream's own import of it is kept, not shadowed

    tests = _interpreted_pytest(checkout, "test/transformers/test_tanh_glu.py")
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert _passed(tests.stdout) >= 2 + 6, tests.stdout[-500:]  # hand-written float32 cases + appended ones

    # Instance patching as the checkout does it: the forward runs on a model's own MLP, which has no scale.
    script = textwrap.dedent(
        f"""
        import importlib.util, os, sys
        os.environ["TRITON_INTERPRET"] = "1"
        sys.path[:0] = ["src", "."]
        spec = importlib.util.spec_from_file_location("shim", {str(SHIM)!r})
        shim = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(shim)
        import torch
        from torch import nn
        from liger_kernel.transformers.monkey_patch import _patch_tanh_glu_module

        class ModelMLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate_proj = nn.Linear(8, 16, bias=False)
                self.up_proj = nn.Linear(8, 16, bias=False)
                self.down_proj = nn.Linear(16, 8, bias=False)

        mlp = ModelMLP()
        x = torch.randn(3, 8)
        expected = mlp.down_proj(torch.tanh(mlp.gate_proj(x)) * mlp.up_proj(x))
        _patch_tanh_glu_module(mlp)
        with shim.compiled_scalars():
            torch.testing.assert_close(mlp(x), expected)
        print("patched forward ok")
        """
    )
    patched = run_python(["-c", script], cwd=checkout)
    assert "patched forward ok" in patched.stdout, patched.stdout + patched.stderr


def test_an_upstream_style_row_kernel_gains_a_scale_in_its_annotated_style(checkout, tmp_path):
    result = _modify(checkout, tmp_path, "row_softmax", ROW_SOFTMAX_SCALED)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "note: math added to the hand-written kernels: x -> scale*x" in result.stdout

    ops = (checkout / "src/liger_kernel/ops/row_softmax.py").read_text()
    assert "def row_softmax_forward(x: torch.Tensor, scale: float = 1.0) -> Tuple[torch.Tensor, int, int]:" in ops
    # A formatted file stays formatted: the longer signature wraps as ruff wraps it.
    assert (
        "def row_softmax_backward(\n    dy: torch.Tensor, y: torch.Tensor, BLOCK_SIZE: int, num_warps: int, "
        "scale: float = 1.0\n) -> torch.Tensor:"
    ) in ops
    assert "        n_cols,\n        scale,\n        BLOCK_SIZE=BLOCK_SIZE,\n" in ops
    assert "    def forward(ctx, x: torch.Tensor, scale: float = 1.0):\n" in ops
    assert "    x = (scale * x).to(x.dtype)\n" in ops  # the input map right after the load
    assert "    dx_scale = dx * scale\n" in ops  # and its chain rule on the stored gradient
    # The backward of a one-input Function returned its gradient bare: now one value per forward argument.
    assert "        return dx, None\n" in ops
    module = (checkout / "src/liger_kernel/transformers/row_softmax.py").read_text()
    assert "def __init__(self, scale=1.0):" in module and "LigerRowSoftmaxFunction.apply(x, self.scale)" in module
    assert "    scale = 1.0\n" not in module  # nothing converts it in place

    tests = _interpreted_pytest(checkout, "test/transformers/test_row_softmax.py")
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert _passed(tests.stdout) >= 3 + 6, tests.stdout[-500:]


def test_another_backends_copy_of_the_kernel_is_named_loudly(checkout, tmp_path):
    """Upstream's Ascend backend keeps its own ``ops/backends/_ascend/ops/NAME.py`` (and its cuTile kernels
    ``ops/cutile/ops/NAME.py``), selected at run time: modify threads the option through the CUDA kernel and its
    callers only, so it says which other files implement the kernel and still take the old arguments."""
    for folder in ("src/liger_kernel/ops/backends/_ascend/ops", "src/liger_kernel/ops/cutile/ops"):
        (checkout / folder).mkdir(parents=True)
        (checkout / folder / "tanh_glu.py").write_text("# another hardware's kernel\n")
    result = _modify(checkout, tmp_path, "tanh_glu", TANH_GLU_SCALED)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "kernelgen: WARNING: src/liger_kernel/ops/backends/_ascend/ops/tanh_glu.py, "
        "src/liger_kernel/ops/cutile/ops/tanh_glu.py implement 'tanh_glu' for other hardware (selected at run time): "
        "only src/liger_kernel/ops/tanh_glu.py takes scale;"
    ) in result.stderr, result.stderr
    assert (checkout / "src/liger_kernel/ops/cutile/ops/tanh_glu.py").read_text() == "# another hardware's kernel\n"
    row = _modify(checkout, tmp_path, "row_softmax", ROW_SOFTMAX_SCALED)
    assert row.returncode == 0 and "WARNING" not in row.stderr, row.stderr
