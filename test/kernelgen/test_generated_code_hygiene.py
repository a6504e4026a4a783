"""What kernelgen writes into a target reads as a maintainer would write it: generated ops files carry no dead code
(unused arguments, functions nothing calls, negated negations) and no comment that belongs in the generator's docs
(timings, GPU models, files the target lacks); the helpers it adds to a target's shared files carry no brand; no
hardware constant is baked in. Checked on built-ins of every tier and kernel language."""

import ast
import re
import subprocess
import sys
import textwrap

from pathlib import Path

import pytest

from test.kernelgen.conftest import EXAMPLES
from tools.kernelgen.analyze import analyze
from tools.kernelgen.formatting import ruff_available
from tools.kernelgen.generate import render_formatted
from tools.kernelgen.harness import HELPER_SOURCES
from tools.kernelgen.kernel_helpers import CORE_SOURCES
from tools.kernelgen.kernel_helpers import GET_NUM_SMS_SOURCE
from tools.kernelgen.kernel_helpers import HOST_SOURCES
from tools.kernelgen.kernel_helpers import INTERPRETED_SOURCES
from tools.kernelgen.kernel_helpers import IS_TRITON_INTERPRETER_SOURCE
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import load_profile
from tools.kernelgen.repo import LigerRepo

# (built-in, kernel language): per-channel and scalar parameters, a residual the backward does not read, sin in the
# backward, row reductions with and without parameters (with the split path), a gated loss with its fused linear form.
BUILTINS = [
    ("dyt", "triton"),
    ("dyt", "tilelang"),
    ("gated_sin", "triton"),
    ("snake", "triton"),
    ("rms_norm", "triton"),
    ("softmax", "triton"),
    ("cross_entropy", "triton"),
    ("kl_div", "triton"),
]

FIXTURES = Path(__file__).parent / "fixtures"
# References whose kernels take no DTensors: an input that broadcasts against the first (tier 1 and tier 2), rows
# that are groups of channels with per-channel inputs (tier 2).
REFUSING_DTENSORS = [
    FIXTURES / "broadcast" / "gated_modulate.py",
    FIXTURES / "broadcast" / "row_scaled_norm.py",
    FIXTURES / "groups" / "group_norm.py",
]

# Kernels whose arguments a template could pass without its body reading them: an index map with broadcast inputs
# (read at unit column stride) and a hyper-parameter only the host reads (the unsqueeze dim), hand-written row math
# (eps read by the forward only), a loss with a non-differentiable second output (z-loss), and
# references whose hyper-parameter only the forward reads (an added shift: element-wise, and after a row reduction),
# and flags no kernel reads (the math is derived at their default, which the Function alone checks).
SHIFTED = {
    "shifted_sigmoid": """
        import torch


        def shifted_sigmoid(x: torch.Tensor, shift: float = 1.0) -> torch.Tensor:
            return torch.sigmoid(x) + shift
    """,
    "squared_relu": """
        import torch
        import torch.nn.functional as F


        def squared_relu(x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
            return F.relu(x, inplace=inplace) ** 2
    """,
    "shifted_rms": """
        import torch


        def shifted_rms(x: torch.Tensor, eps: float = 1e-6, shift: float = 0.5, inplace: bool = False) -> torch.Tensor:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) + shift
    """,
}
READ_ARGUMENT_CASES = [
    "hf_rope_map",
    "rms_norm.yaml",
    "cross_entropy.yaml",
    *SHIFTED,
]

ANECDOTE = re.compile(
    r"\b[HAB]\d00\b|\b\d+(\.\d+)? ?(us|ms|µs)\b|\d+(\.\d+)? ?[GT]B/s|benchmark/data/|\bkernelgen\b",
    re.IGNORECASE,
)
# A module constant named for a property of the device (shared memory, SM or register counts): those are read from
# the device at run time.
HARDWARE_NAME = re.compile(r"SHARED|(^|_)SMS?(_|$)|REGISTER|L2_|WARP_SIZE")
# A kernel's own files may say where they come from; shared code may not (the helper tests below).
OWN_ORIGIN = re.compile(r"(generated|derived) by kernelgen", re.IGNORECASE)
DOUBLE_NEGATION = re.compile(r"\bnot \([^()]*!=[^()]*\)")


def _generated_ops(name: str, backend: str, kernel: str = "") -> dict[str, str]:
    profile = analyze(name, name=kernel or (f"{name}_hyg" if backend == "triton" else f"{name}_hyg_tl"))
    profile.backend = backend
    repo = LigerRepo.open(None)
    files, _ = render_formatted(repo, profile)
    if profile.tier == 3:
        profile.fused_linear.enabled = True
        fused, _ = render_formatted(repo, profile, fused_linear=True)
        files.update(fused)
    names = [profile.operation_name] + ([profile.fused_linear_name] if profile.tier == 3 else [])
    return {kernel_paths(kernel)["ops"]: files[kernel_paths(kernel)["ops"]] for kernel in names}


@pytest.fixture(scope="module", params=BUILTINS, ids=lambda case: "-".join(case))
def ops_files(request) -> dict[str, str]:
    return _generated_ops(*request.param)


@pytest.fixture(scope="module", params=REFUSING_DTENSORS, ids=lambda path: path.stem)
def refusing_ops(request) -> tuple[str, str]:
    name = f"{request.param.stem}_hyg"
    (text,) = _generated_ops(str(request.param), "triton", name).values()
    return name, text


@pytest.fixture(scope="module", params=READ_ARGUMENT_CASES)
def read_argument_ops(request, tmp_path_factory) -> dict[str, str]:
    case = request.param
    if case.endswith(".yaml"):
        profile = load_profile(EXAMPLES / case)
        files, _ = render_formatted(LigerRepo.open(None), profile)
        path = kernel_paths(profile.operation_name)["ops"]
        return {path: files[path]}
    if case == "hf_rope_map":
        return _generated_ops(str(FIXTURES / "index_maps" / "hf_rope.py:apply_rotary_pos_emb"), "triton", case)
    reference = tmp_path_factory.mktemp("references") / f"{case}.py"
    reference.write_text(textwrap.dedent(SHIFTED[case]))
    return _generated_ops(f"{reference}:{case}", "triton", f"{case}_hyg")


def _ruff_findings(files: dict[str, str], root: Path) -> str:
    """Upstream's rules (E, F, I) plus unused arguments (ARG), on the files as generated: what ruff reports."""
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select", "F,ARG", "--output-format",
         "concise", str(root)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return "" if result.returncode == 0 else result.stdout


def _comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    found = [(n, line.split("#", 1)[1]) for n, line in enumerate(source.splitlines(), 1) if "#" in line]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module)) and ast.get_docstring(node):
            found.append((getattr(node, "lineno", 1), ast.get_docstring(node)))
    return found


def _unused_private_names(source: str) -> list[str]:
    """Module-level ``_name`` functions and constants nothing in the file reads."""
    tree = ast.parse(source)
    defined = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.append(node.name)
        elif isinstance(node, ast.Assign):
            defined += [target.id for target in node.targets if isinstance(target, ast.Name)]
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    read |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    return [name for name in defined if name.startswith("_") and not name.startswith("__") and name not in read]


def test_no_unused_argument_or_name(ops_files, tmp_path):
    if not ruff_available():
        pytest.skip("ruff is not installed")
    for path, text in ops_files.items():
        assert _unused_private_names(text) == [], path
        assert not DOUBLE_NEGATION.search(text), path
    assert _ruff_findings(ops_files, tmp_path) == ""


def test_kernels_take_only_what_their_bodies_read(read_argument_ops, tmp_path):
    """No kernel, host wrapper or autograd method takes an argument it does not read (a launch passes what its
    kernel reads); a hyper-parameter the backward does not read is not kept on ctx either."""
    if not ruff_available():
        pytest.skip("ruff is not installed")
    assert _ruff_findings(read_argument_ops, tmp_path) == ""
    for path, text in read_argument_ops.items():
        tree = ast.parse(text)
        kept = {target.attr for node in ast.walk(tree) if isinstance(node, ast.Assign) for target in node.targets
                if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "ctx"}  # fmt: skip
        read = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load) and ast.unparse(node.value) == "ctx"}  # fmt: skip
        assert kept <= read, f"{path}: ctx keeps {sorted(kept - read)} that no backward reads"


def _unread_kernel_parameters(source: str) -> list[str]:
    """``kernel.parameter`` for each parameter of a ``@triton.jit`` function its body never reads."""
    unread = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and any("triton.jit" in ast.unparse(d) for d in node.decorator_list):
            read = {n.id for statement in node.body for n in ast.walk(statement) if isinstance(n, ast.Name)}
            unread += [f"{node.name}.{a.arg}" for a in node.args.args if a.arg not in read]
    return unread


def test_a_loss_kernel_takes_only_the_numbers_it_reads(tmp_path):
    """A loss's kernel takes the hyper-parameters its statements read: not an int the math was traced at (the
    softmax's dim), which the host wrapper keeps."""
    reference = tmp_path / "scaled_nll.py"
    reference.write_text(
        "import torch.nn.functional as F\n\n\n"
        "def scaled_nll(logits, target, dim: int = -1, scale: float = 2.0):\n"
        "    return F.nll_loss(F.log_softmax(logits * scale, dim=dim), target)\n"
    )
    for path, text in _generated_ops(f"{reference}:scaled_nll", "triton", "scaled_nll_hyg").items():
        assert _unread_kernel_parameters(text) == [], path
    sample = "@triton.jit\ndef _k(a_ptr, b, N: tl.constexpr):\n    tl.store(a_ptr, N)\n"
    assert _unread_kernel_parameters(sample) == ["_k.b"]


def test_kernels_refusing_dtensors_take_only_what_their_bodies_read(refusing_ops, tmp_path):
    """Broadcast inputs (tier 1 and tier 2) and groups of channels: as ``test_kernels_take_only_what_their_bodies_read``."""
    if not ruff_available():
        pytest.skip("ruff is not installed")
    name, text = refusing_ops
    assert _ruff_findings({f"{name}.py": text}, tmp_path) == ""


def test_comments_say_why_without_measurements(ops_files):
    for path, text in ops_files.items():
        for line, comment in _comments_and_docstrings(text):
            kept = OWN_ORIGIN.sub("", comment)
            assert not ANECDOTE.search(kept), f"{path}:{line}: {comment.strip()}"


def test_no_hardware_constant(ops_files):
    for path, text in ops_files.items():
        for node in ast.parse(text).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = [target.id for target in node.targets if isinstance(target, ast.Name)]
                assert not any(HARDWARE_NAME.search(name) for name in names), f"{path}: {ast.unparse(node)}"


def test_a_kernel_without_dtensor_support_refuses_them_first_and_carries_no_layout_code(refusing_ops):
    """Its Function checks the arguments' types and refuses a DTensor in one line saying why; no DTensor layout is
    chosen, unwrapped or wrapped after, and no split forward for rows sharded over ranks (code that could never
    run)."""
    name, text = refusing_ops
    assert "ctx.layout" not in text and "dtensor_layout" not in text and "split_rows" not in text
    assert f"def {name}_split_forward(" not in text
    forward = next(
        node
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef) and node.name == "forward" and node.args.args[0].arg == "ctx"
    )
    check = forward.body[0]
    assert isinstance(check, ast.If) and ast.unparse(check.test).endswith("<= PLAIN_TYPES"), ast.unparse(check)
    (refusal,) = check.body
    assert isinstance(refusal, ast.Raise) and ast.unparse(refusal.exc.func) == "TypeError", ast.unparse(refusal)
    assert refusal.exc.args[0].value.startswith(f"{name}: DTensor inputs are not supported: "), ast.unparse(refusal)


@pytest.mark.parametrize(
    "source",
    [
        *HOST_SOURCES.values(),
        *CORE_SOURCES.values(),
        *INTERPRETED_SOURCES.values(),
        GET_NUM_SMS_SOURCE,
        IS_TRITON_INTERPRETER_SOURCE,
        *HELPER_SOURCES.values(),
    ],
)
def test_helpers_added_to_shared_files_carry_no_brand_or_timing(source):
    for line, comment in _comments_and_docstrings(source):
        assert not ANECDOTE.search(comment), f"{line}: {comment.strip()}"


def test_the_checks_catch_what_they_look_for():
    """Each check flags a sample of what it forbids."""
    dead = "def _helper():\n    return 1\n\n\ndef used():\n    return 2\n\n\n_CONSTANT = 3\n"
    assert _unused_private_names(dead) == ["_helper", "_CONSTANT"]
    assert DOUBLE_NEGATION.search("    if not (ignore_index != target):\n")
    for anecdote in (
        "on an H200 this ran 570 -> 547 us",
        "see benchmark/data/sweep.log",
        "3.3 TB/s",
        "added by kernelgen",
    ):
        assert ANECDOTE.search(anecdote), anecdote
    assert not ANECDOTE.search("one program per row; fp32 accumulators keep the small terms")
    assert HARDWARE_NAME.search("_SHARED_BYTES") and HARDWARE_NAME.search("NUM_SMS")
    assert not HARDWARE_NAME.search("MAX_COLUMNS")


def test_a_sweep_backward_keeps_no_temporary_only_its_row_sums_read(tmp_path):
    """LayerNorm with held parameters, then tanh-GELU: a common factor of the backward's row sums (half a GELU term)
    is read by no gradient line once the sums move to the sweep's own pass; the sweep kernel drops it (ruff F841)."""
    reference = tmp_path / "ln_gelu.py"
    reference.write_text(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass LayerNormGelu(nn.Module):\n"
        "    def __init__(self, hidden_size, eps=1e-5):\n        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.ones(hidden_size))\n"
        "        self.bias = nn.Parameter(torch.zeros(hidden_size))\n        self.eps = eps\n\n"
        "    def forward(self, x):\n"
        "        y = F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)\n"
        "        return F.gelu(y, approximate='tanh')\n"
    )
    profile = analyze(f"{reference}:LayerNormGelu", name="ln_gelu_hyg")
    files, _ = render_formatted(LigerRepo.open(None), profile)
    ops = files[kernel_paths("ln_gelu_hyg")["ops"]]
    sweep = ops[ops.index("def _ln_gelu_hyg_sweep_backward_kernel") :].split("\ndef ")[0]
    assert "tanh_inner" in sweep and "half_bias_term_term" not in sweep
