"""Tier-3 synthesis end to end: every loss built-in, the cross-entropy example profile and losses written in other
styles become kernels whose generated tests pass, and a cross entropy generated from ``F.cross_entropy`` (with class
weights, ``weight=``, or without) computes what the host's hand-written cross entropy does.

Each generated test compares the loss (and any extra output) and the gradient of every differentiable input with
torch.autograd of the embedded reference, fp32 against float64, for each reduction and hyper-parameter case, on a
vocabulary longer than one chunk of the kernel, plus ignored rows, a grad_output of exactly 1, inputs without
gradients and a mean split over two calls. On the CPU the kernels run under the Triton interpreter.
"""

import os
import subprocess
import sys
import textwrap

from pathlib import Path

import pytest
import torch

from liger_kernel.ops.utils import scale_by_grad_output
from test.kernelgen.conftest import EXAMPLES
from test.kernelgen.conftest import assert_generated_tests_pass
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import generated_functions
from test.kernelgen.conftest import import_generated_ops
from test.kernelgen.conftest import run_pytest
from test.kernelgen.test_class_weights import WEIGHTED_STYLES
from test.kernelgen.test_losses import STYLES
from test.kernelgen.test_losses import TIER3_BUILTINS
from test.kernelgen.test_losses import UNPACKED_SHAPE_STYLES
from test.kernelgen.test_per_row_inputs import GENERATED as PER_ROW_KERNELS
from test.kernelgen.test_per_row_inputs import REFERENCES as PER_ROW_REFERENCES
from test.kernelgen.test_sequence_stages import FUSED_ON_CPU as STAGED_FUSED_ON_CPU
from test.kernelgen.test_sequence_stages import GENERATED as STAGED_KERNELS
from test.kernelgen.test_sequence_stages import ON_CPU
from test.kernelgen.test_sequence_stages import REFERENCES as STAGED_REFERENCES
from tools.kernelgen import smoke
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import load_profile
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

# Styles beyond the built-ins whose generated kernels run (the derivation covers all of them); the squared error
# of a softmax has no hyper-parameter at all, the focal loss a run-time exponent.
# TemperedSmoothedNLL's test sets its smoothing on the built module and passes forward's own temperature.
STYLE_KERNELS = [
    "gathered_nll",
    "softcapped_cross_entropy",
    "DistillationLoss",
    "cross_entropy_and_z_loss",
    "TemperedSmoothedNLL",
]
STYLE_KERNELS += ["squared_error_of_softmax", "focal_loss", "jsd_from_logits", "jsd_logaddexp"]
# The softmax at the target, summed online beside the softmax's own sum and rescaled as the maximum grows: its
# tests' 20000-class rows take two chunks, so the rescaling runs.
STYLE_KERNELS += ["poly1_cross_entropy"]
# Checked here end to end only (not in test_losses' STYLE_ENTRIES too): its analysis alone takes seconds; the
# masked ones take boolean masks of rows, which test_losses' derivation check does not draw.
STYLE_KERNELS += ["generalized_jsd_distillation", "masked_where_cross_entropy", "padded_cross_entropy"]
# A KL of softened distributions kept one sum a row: split into a cross entropy less an entropy (each about log(V)),
# fp32 loses their small difference at T 8.
STYLE_KERNELS += ["HintonDistillation"]
# Written for [B, T, V] logits whose shape they unpack: T reads as a size, labels.view(B * T, 1) as no index of the
# logits; B * T divides by every row, B by size(0) (both were refused; the ones flattening alone failed the smoke run).
STYLE_KERNELS += UNPACKED_SHAPE_STYLES

HOST_COMPARISON = textwrap.dedent(
    """
    import pytest
    import torch

    from test.utils import infer_device

    from liger_kernel.ops import LigerCrossEntropyFunction
    from liger_kernel.ops import LigerCrossEntropyGenFunction
    from liger_kernel.ops import LigerWeightedCrossEntropyFunction

    device = infer_device()
    CASES = [(reduction, 0.0, 0.0, False) for reduction in ("mean", "sum", "none")]
    CASES += [(reduction, 0.1, 1e-3, False) for reduction in ("mean", "sum", "none")]
    # Class weights (the host's weight=): F.cross_entropy(weight=) generated, with label smoothing or without.
    CASES += [("mean", 0.1, 0.0, True), ("sum", 0.0, 0.0, True), ("none", 0.1, 0.0, True)]


    @pytest.mark.parametrize("reduction, label_smoothing, lse_square_scale, weighted", CASES)
    def test_generated_cross_entropy_matches_the_host_kernel(reduction, label_smoothing, lse_square_scale, weighted):
        torch.manual_seed(0)
        logits = torch.randn(7, 20000, device=device) * 3
        target = torch.randint(0, 20000, (7,), device=device)
        target[::3] = -100
        weight = torch.rand(20000, device=device) + 0.1 if weighted else None
        host_logits = logits.clone().requires_grad_(True)
        generated_logits = logits.clone().requires_grad_(True)
        host = LigerCrossEntropyFunction.apply(
            host_logits, target, weight, -100, lse_square_scale, label_smoothing, reduction
        )[0]
        if weighted:
            generated = LigerWeightedCrossEntropyFunction.apply(
                generated_logits, target, weight, -100, label_smoothing, reduction
            )
        else:
            generated = LigerCrossEntropyGenFunction.apply(
                generated_logits, target, -100, label_smoothing, lse_square_scale, reduction
            )
        torch.testing.assert_close(generated, host, rtol=1e-5, atol=1e-6)
        grad = torch.rand_like(host) + 0.5
        host.backward(grad)
        generated.backward(grad)
        torch.testing.assert_close(generated_logits.grad, host_logits.grad, rtol=1e-5, atol=1e-8)
    """
)


@pytest.fixture(scope="module")
def generated_checkout(tmp_path_factory):
    """One checkout holding a generated kernel per reference (generation is checked as it goes)."""
    root = copy_checkout(tmp_path_factory.mktemp("losses") / "liger")
    styles = root / "loss_styles.py"
    styles.write_text(STYLES)
    profiles = [analyze(name, name=f"{name}_gen") for name in TIER3_BUILTINS]
    profiles += [analyze(f"{styles}:{entry}", name=f"style_{entry.lower()}") for entry in STYLE_KERNELS]
    profiles.append(load_profile(EXAMPLES / "cross_entropy.yaml").renamed("cross_entropy_ex"))
    # Class weights: F.cross_entropy(weight=) with label smoothing and every reduction (test_class_weights.py
    # checks the other styles).
    (root / "weighted.py").write_text(WEIGHTED_STYLES)
    profiles.append(analyze(f"{root / 'weighted.py'}:weighted_cross_entropy"))
    # Per-row inputs (GRPO's old log-probabilities and advantages, a reference model's log-probabilities, a mask).
    (root / "per_row.py").write_text(PER_ROW_REFERENCES)
    profiles += [analyze(f"{root / 'per_row.py'}:{entry}", name=name) for entry, name in PER_ROW_KERNELS]
    # Losses in two stages (DPO, GRPO with its KL penalty): per-token statistics, then PyTorch over sequences.
    (root / "staged.py").write_text(STAGED_REFERENCES)
    profiles += [
        analyze(f"{root / 'staged.py'}:{entry}", name=name) for entry, name in STAGED_KERNELS if name in ON_CPU
    ]
    for profile in profiles[-len(ON_CPU) :]:
        # and fused_linear_NAME beside them: hidden states and the lm_head weight in, logits one chunk at a time
        profile.fused_linear.enabled = profile.operation_name in STAGED_FUSED_ON_CPU
    for profile in profiles:
        assert profile.tier == 3 and profile.math.statistics, profile.operation_name
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    (root / "test" / "transformers" / "test_generated_cross_entropy_vs_host.py").write_text(HOST_COMPARISON)
    return root, [profile.operation_name for profile in profiles]


def test_generated_losses_run_under_the_interpreter(generated_checkout):
    root, names = generated_checkout
    for name in names:
        source = (root / kernel_paths(name)["ops"]).read_text()
        assert "libdevice." not in source  # must also run under the Triton interpreter
        assert "for start in range(0, n_cols, BLOCK_SIZE)" in source  # streams the row in chunks


def test_generated_losses_match_torch_autograd(generated_checkout):
    root, names = generated_checkout
    fused = [f"fused_linear_{name}" for name in STAGED_FUSED_ON_CPU]  # losses in two stages with their lm_head
    assert_generated_tests_pass(root, names + fused, at_least_per_kernel=8)


def test_a_chunk_of_whole_groups_holds_up_to_d_weight_s_size_of_logits(generated_checkout):
    """Llama-3-8B's head (hidden 4096, 128256 classes), 8 sequences: a DPO's chunk takes whole pairs up to hidden
    rows of logits, d(weight)'s bytes (upstream's chunked losses keep each chunk's own d(weight) beside the sum), so
    two pairs at 1024 tokens, the whole batch at 128, and still one pair where a pair alone is longer. A loss whose
    chunks are rows (a ranking over the batch, its logits recomputed in the backward) keeps the plain rule."""
    root, _ = generated_checkout
    rule, chunks = generated_functions(
        root, "fused_linear_tempered_dpo", "_chunk_rows", "_fused_linear_tempered_dpo_chunks"
    )
    assert rule(8 * 1024, 4096, 128256) == 4096
    assert list(chunks(8, 1024, rule(8 * 1024, 4096, 128256))) == [[(0, 2), (4, 6)], [(2, 4), (6, 8)]]
    assert list(chunks(8, 128, rule(8 * 128, 4096, 128256))) == [[(0, 4), (4, 8)]]
    assert len(list(chunks(8, 4096, rule(8 * 4096, 4096, 128256)))) == 4
    # Chunks of whole pairs are evened in pairs: 5 pairs of 2000 rows, 2 pairs a chunk, 3 chunks (rows evened
    # instead would give 3334-row chunks of one pair each).
    assert rule(10 * 1000, 4096, 128256, 2 * 1000) == 4000
    assert len(list(chunks(10, 1000, rule(10 * 1000, 4096, 128256, 2 * 1000)))) == 3
    # A small vocabulary: upstream's rule gives the wider chunk (widened by a tenth of upstream's peak), and it stands.
    assert rule(65536, 4096, 32000) == 9363
    (ranking_rule,) = generated_functions(root, "fused_linear_listwise_ranking", "_chunk_rows")
    assert ranking_rule(8 * 1024, 4096, 128256) == 683


def test_a_fused_two_stage_loss_scales_its_gradients_only_when_grad_output_is_not_1(generated_checkout):
    """The fused kernel forms its gradients in the forward for a grad_output of 1: loss.backward() hands them over
    as they are (its scale kernel returns at once, no PyTorch pass and no host sync), any other grad_output scales
    them in place."""
    root, _ = generated_checkout
    (backward,) = generated_functions(
        root,
        "fused_linear_tempered_dpo",
        "fused_linear_tempered_dpo_backward",
        scale_by_grad_output=scale_by_grad_output,
    )
    grads = [torch.full((2, 3), 0.5), None, torch.full((3,), -2.0)]
    kept = [grads[0].clone(), None, grads[2].clone()]

    class Calls(torch.overrides.TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.names.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    with Calls() as calls:
        handed = backward(torch.ones(()), grads)
    assert handed[0] is grads[0] and handed[1] is None and handed[2] is grads[2]
    assert not [name for name in calls.names if name.startswith("mul")], calls.names
    torch.testing.assert_close(handed[0], kept[0], rtol=0, atol=0)
    assert "equal" not in calls.names and "item" not in calls.names  # decided on the device
    scaled = backward(torch.tensor(3.0), grads)
    assert scaled[0] is grads[0] and scaled[2] is grads[2]
    torch.testing.assert_close(scaled[0], kept[0] * 3, rtol=0, atol=0)
    torch.testing.assert_close(scaled[2], kept[2] * 3, rtol=0, atol=0)


def test_a_per_row_input_is_read_once_per_row(generated_checkout):
    root, _ = generated_checkout
    source = (root / kernel_paths("grpo_token")["ops"]).read_text()
    loop = source.index("for start in range(0, n_cols, BLOCK_SIZE)")
    assert 0 < source.index("old_logp = tl.load(old_logp_ptr + row).to(tl.float32)") < loop


def test_per_row_inputs_follow_the_leading_dims_of_the_logits(generated_checkout):
    """[B, T, V] logits take [B, T] old log-probabilities and advantages (flattened with the rows); a [B * T] one,
    which the reference cannot broadcast either, is refused, and so is one that asks for a gradient."""
    root, _ = generated_checkout
    function = import_generated_ops(root, "grpo_token").LigerGrpoTokenFunction
    namespace = {}
    exec(compile(PER_ROW_REFERENCES, "<per_row>", "exec"), namespace)
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 40, dtype=torch.float64)
    target = torch.randint(0, 40, (2, 3))
    logp = logits.log_softmax(-1).gather(-1, target[..., None])[..., 0]
    old_logp = logp + torch.linspace(-0.5, 0.5, 6, dtype=torch.float64).view(2, 3)  # below, inside, above the clip
    advantages = torch.randn(2, 3, dtype=torch.float64)
    expected_logits = logits.clone().requires_grad_()
    expected = namespace["grpo_token_loss"](expected_logits, target, old_logp, advantages)
    expected.backward()
    ours_logits = logits.float().requires_grad_()
    ours = function.apply(ours_logits, target, old_logp.float(), advantages.float(), 0.2)
    ours.backward()
    torch.testing.assert_close(ours.double(), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours_logits.grad.double(), expected_logits.grad, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match=r"old_logp has shape \(6,\), expected \(2, 3\)"):
        function.apply(logits.float(), target, old_logp.float().reshape(-1), advantages.float(), 0.2)
    with pytest.raises(ValueError, match="derives no gradient for 'advantages'"):
        function.apply(logits.float(), target, old_logp.float(), advantages.float().requires_grad_(), 0.2)


def test_generated_loss_kernels_compile_for_the_h200_in_seconds(generated_checkout):
    """Each forward kernel, compiled for sm_90 as a GPU launch would (16-byte-aligned pointers, the largest chunk):
    a schedule LLVM cannot compile in reasonable time shows here, not only on the GPU."""
    root, names = generated_checkout
    # The checkout has a test package of its own: the helper travels as source.
    code = (Path(__file__).parent / "sm90.py").read_text() + "\nimport sys, importlib\n"
    code += "for name in sys.argv[1:]:\n"
    code += "    module = importlib.import_module(f'liger_kernel.ops.{name}')\n"
    code += "    kernel = getattr(module, f'_{name}_forward_kernel')\n"
    code += "    print(name, round(compile_for_sm90(kernel, {'n_cols': 128256, 'BLOCK_SIZE': 16384}, 16), 1))\n"
    # A loss in two stages writes d logits in a kernel of its own (the adjoints come after the forward).
    code += "    if hasattr(module, f'_{name}_backward_kernel'):\n"
    code += "        kernel = getattr(module, f'_{name}_backward_kernel')\n"
    code += "        print(f'{name}:backward', round(compile_for_sm90(kernel, {'n_cols': 128256, 'BLOCK_SIZE': 16384}, 16), 1))\n"
    result = subprocess.run(
        [sys.executable, "-c", code, *names],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root / "src"), "TRITON_INTERPRET": "0"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seconds = dict(line.split() for line in result.stdout.splitlines())
    staged = {f"{name}:backward" for name in ON_CPU}
    assert set(seconds) == set(names) | staged
    slow = {name: s for name, s in seconds.items() if float(s) > 30}
    assert not slow, f"compiling for sm_90 took over 30 s: {slow}"


def test_a_generated_cross_entropy_matches_the_host_kernel(generated_checkout):
    root, _ = generated_checkout
    result = run_pytest(root, "test/transformers/test_generated_cross_entropy_vs_host.py")
    assert result.returncode == 0, result.stdout[-5000:]
    assert "9 passed" in result.stdout


def _checkout_generated_from(tmp_path, source: str) -> Path:
    """A copy of the checkout with the kernel of the reference ``source`` (one function) generated in it."""
    root = copy_checkout(tmp_path / "liger")
    reference = tmp_path / "reference.py"
    reference.write_text(source)
    write_all(root, plan_new(LigerRepo.open(root), analyze(str(reference))).changes)
    return root


def test_an_input_without_a_derived_gradient_that_requires_one_is_refused(tmp_path):
    """Autograd would give the soft target's gradient None without a word: the Function says it derives none."""
    root = _checkout_generated_from(
        tmp_path,
        "import torch\n\n\ndef soft_ce(a, b):\n"
        "    return -(a.log_softmax(-1) * (b - b.amax(-1, keepdim=True)).exp()).sum(-1).mean()\n",
    )
    function = import_generated_ops(root, "soft_ce").LigerSoftCeFunction
    a, b = torch.randn(2, 16, requires_grad=True), torch.randn(2, 16)
    function.apply(a, b).backward()
    assert a.grad is not None
    with pytest.raises(ValueError, match="derives no gradient for 'b', which requires grad: pass it detached"):
        function.apply(a, b.requires_grad_())


def test_the_refusal_of_an_input_without_a_gradient_names_it_as_the_functional_does(tmp_path):
    """``mask`` clashes with a name of the ops file, which renames it ``mask_in`` there: the refusal says ``mask``."""
    root = _checkout_generated_from(
        tmp_path,
        "import torch\n\n\ndef masked_nll(logits, target, mask):\n"
        "    picked = torch.gather(logits.log_softmax(-1), -1, target.view(-1, 1)).view(-1)\n"
        "    return -(picked * mask).sum() / mask.sum()\n",
    )
    source = (root / kernel_paths("masked_nll")["ops"]).read_text()
    assert "mask_in" in source  # renamed in the file (hygiene)
    assert "derives no gradient for 'mask', which requires grad" in source


NLL_OVER_DIM = """
import torch.nn.functional as F


def nll_over_dim(scores, labels, dim: int = -1):
    log_probs = F.log_softmax(scores, dim=dim)
    return -log_probs.gather(dim, labels.unsqueeze(dim)).squeeze(dim).mean()
"""

REFUSED_DIM = """
import torch
from liger_kernel.transformers.functional import liger_nll_over_dim

scores, labels = torch.randn(4, 40), torch.randint(0, 40, (4,))
print(float(liger_nll_over_dim(scores, labels)) > 0)
try:
    liger_nll_over_dim(scores.t().contiguous(), torch.randint(0, 4, (40,)), dim=0)
except ValueError as error:
    print(error)
"""


def test_an_int_argument_the_loss_was_traced_with_is_refused_at_other_values(tmp_path):
    """``dim`` is traced at its default (the classes on the last dim): the Function refuses dim=0 in one line instead
    of reducing over the last dim anyway."""
    root = copy_checkout(tmp_path / "liger")
    (tmp_path / "nll.py").write_text(NLL_OVER_DIM)
    profile = analyze(f"{tmp_path / 'nll.py'}:nll_over_dim", name="nll_over_dim")
    write_all(root, plan_new(LigerRepo.open(root), profile).changes)
    result = run_python(["-c", REFUSED_DIM], cwd=root, env={**os.environ, "PYTHONPATH": "src"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["True", "nll_over_dim: generated for dim in [-1], got 0"]


@pytest.mark.parametrize("name", ["kl_div", "jsd", "tvd"])
def test_a_mean_per_batch_divides_by_size_0_of_inputs_with_more_dims(generated_checkout, name):
    """F.kl_div's batchmean and a sum / x.shape[0] divide by size(0) of the inputs as passed: [batch, tokens,
    classes] inputs are B*T rows, and the loss is their sum over B (before: over B*T, 1/T of torch's)."""
    root, _ = generated_checkout
    ops = import_generated_ops(root, f"{name}_gen")
    function = next(getattr(ops, attr) for attr in dir(ops) if attr.endswith("GenFunction"))
    reference = analyze(name)
    namespace = {}
    exec(compile(reference.reference.source, "<reference>", "exec"), namespace)
    entry = namespace[reference.reference.entry]
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 40, dtype=torch.float64)
    first = logits.log_softmax(-1) if name != "tvd" else logits.softmax(-1)
    second = torch.randn_like(logits)
    second = {"kl_div": second.softmax(-1), "jsd": second.log_softmax(-1), "tvd": second.softmax(-1)}[name]
    expected_input = first.clone().requires_grad_()
    expected = entry(expected_input, second)
    expected.backward()
    ours_input = first.float().clone().requires_grad_()
    ours = function.apply(ours_input, second.float())
    ours.backward()
    torch.testing.assert_close(ours.double(), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours_input.grad.double(), expected_input.grad, rtol=1e-4, atol=1e-6)


def test_the_smoke_run_of_new_draws_a_staged_loss_inputs_in_their_own_shapes(generated_checkout):
    """`new` runs a generated kernel once on a tiny input before writing it: a loss in two stages gets [B, T, V]
    logits and its per-sequence inputs (DPO's reference log-probabilities per pair, KTO's boolean labels) in the
    shapes the analysis found, and matches its reference there."""
    root, _ = generated_checkout
    profile = analyze(f"{root / 'staged.py'}:tempered_dpo", name="tempered_dpo")
    inputs, _ = smoke._inputs(profile, torch.Generator().manual_seed(0))
    assert [tuple(x.shape) for x in inputs] == [(4, 3, smoke.LOSS_COLS), (4, 3), (2,), (2,)]
    smoke._compare(profile, import_generated_ops(root, "tempered_dpo").LigerTemperedDpoFunction)
    kto = analyze(f"{root / 'staged.py'}:kto_sigmoid")
    assert smoke._inputs(kto, torch.Generator().manual_seed(0))[0][-1].dtype == torch.bool  # desirable


LOGITS_BUFFER_SCRIPT = """
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, "src")
import torch

from liger_kernel.ops.cross_entropy_gen import cross_entropy_gen_forward

logits, target = torch.randn(4, 37), torch.randint(0, 37, (4,))
kept = logits.clone()
_, eager = cross_entropy_gen_forward(logits.clone(), target)
_, grad = cross_entropy_gen_forward(logits, target)
print("eager", grad.data_ptr() == logits.data_ptr())
torch.compiler.is_compiling = lambda: True
logits = kept.clone()
_, compiled = cross_entropy_gen_forward(logits, target)
print("compiling", compiled.data_ptr() == logits.data_ptr(), torch.equal(logits, kept), torch.equal(compiled, eager))
"""


def test_the_logits_buffer_takes_their_gradient_outside_torch_compile_only(generated_checkout, tmp_path):
    """Eager, the dead logits hold their gradient (one [rows, V] tensor less, as Liger's cross entropy); under
    torch.compile the gradient has a buffer of its own: a graph that writes its inputs is no CUDA graph
    (``mode="reduce-overhead"`` skipped it)."""
    root, _ = generated_checkout
    script = tmp_path / "logits_buffer.py"
    script.write_text(LOGITS_BUFFER_SCRIPT)
    result = run_python([str(script)], cwd=root)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["eager True", "compiling False True True"]


OVERWRITES = """
from liger_kernel.transformers.functional import liger_cross_entropy_gen
from liger_kernel.transformers.functional import liger_kl_div_gen

print("writes the gradient over ``logits``" in " ".join(liger_cross_entropy_gen.__doc__.split()))
print("writes the gradient over" not in liger_kl_div_gen.__doc__)
"""


def test_a_loss_says_where_it_writes_its_gradient_over_the_logits(generated_checkout):
    """A loss over class indices writes its gradient over the logits (as Liger's cross entropy): its docstrings say
    so, and how to keep them; a loss without class indices writes over nothing and says nothing."""
    root, _ = generated_checkout
    result = run_python(["-c", OVERWRITES], cwd=root, env={**os.environ, "PYTHONPATH": "src"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["True", "True"]
