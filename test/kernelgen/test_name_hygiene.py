"""A user's names never clash with the generated code's own (render/hygiene.py): references of each tier whose
arguments are named after every name the ops file's templates use where the arguments appear (``row_start``, ``mask``,
``cols``, ``n_rows``, ``BLOCK_ROWS``, ``tl``, ``torch``, ``ctx``, the helpers...) generate, pass new's smoke run and
pass their generated tests, while the functional wrapper keeps the names the user chose."""

import ast

import pytest

from test.kernelgen.conftest import REPO_ROOT
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import run_pytest
from tools.kernelgen.analyze import analyze
from tools.kernelgen.analyze.trace import FORMULA_SYMBOLS
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.render import render_kernel
from tools.kernelgen.render.hygiene import kernel_side_names
from tools.kernelgen.render.hygiene import meeting_names
from tools.kernelgen.render.hygiene import renamed_profile
from tools.kernelgen.render.hygiene import user_names
from tools.kernelgen.synth import parse_formula
from tools.kernelgen.synth.derive import derive_elementwise
from tools.kernelgen.synth.derive import print_elementwise
from tools.kernelgen.synth.derive import renamed_derivation

# Arguments per reference: a loss's gradient formulas grow with its inputs, an element-wise kernel's barely.
NAMES_PER_REFERENCE = {"tier1": 20, "tier2": 20, "tier3": 8}
# A reference of each tier over argument names a, b, ...: its ops file's own names where those arguments appear are
# what the references below are given as argument names.
SEEDS = {
    "tier1": lambda names: " + ".join(f"th.sigmoid({a}) * {b}" for a, b in _pairs(names)),
    "tier2": lambda names: "_total - _total.mean(-1, keepdim=True)",
    # A last chunk of one name weighs its own log-probabilities (there is no other argument to weigh them by).
    "tier3": lambda names: (
        f"-(({' + '.join(names[1:]) or names[0]}) * th.log_softmax({names[0]}, dim=-1)).sum(-1).mean()"
    ),
}
PREAMBLE = {"tier2": lambda names: "    _total = " + " + ".join(f"{a} * {b}" for a, b in _pairs(names)) + "\n"}


MASKED_LOSS = """\
import torch


def masked_loss(logits, target, mask):
    return -(target * mask * torch.log_softmax(logits, dim=-1)).sum(-1).mean()
"""


def _pairs(names):
    padded = names if len(names) % 2 == 0 else [*names, names[0]]
    return list(zip(padded[0::2], padded[1::2]))


def _reference(kernel: str, tier: str, names: list[str]) -> str:
    body = PREAMBLE.get(tier, lambda names: "")(names)
    return f"import torch as th\n\n\ndef {kernel}({', '.join(names)}):\n{body}    return {SEEDS[tier](names)}\n"


def _render_ops(profile) -> str:
    return render_kernel(profile).files[kernel_paths(profile.operation_name)["ops"]]


def _template_names(tier: str, folder) -> list[str]:
    """The names the templates give the ops file where the seed reference's arguments appear, but the kernel's own
    (which carry its name) and ``th``, the references' torch."""
    path = folder / f"seed_{tier}.py"
    path.write_text(_reference(f"seed_{tier}", tier, ["a", "b", "c", "d"]))
    profile = analyze(str(path))
    # The seed's statistics (log_softmax_max, sum_1, ...) and the names made from them are its math's, not the
    # templates': other references name theirs after their own math.
    statistics = [statistic.name for statistic in profile.math.statistics]
    names = meeting_names(profile, _render_ops)
    return sorted(
        name
        for name in names
        if "seed" not in name.lower() and name != "th" and not any(statistic in name for statistic in statistics)
    )


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Every reference generated with new (smoke run included) into one checkout: ``{kernel: argument names}``. Each
    name is given once, in the cheapest tier whose ops file has it (tier 1 first)."""
    folder = tmp_path_factory.mktemp("hygiene")
    root = copy_checkout(folder / "liger")
    kernels, given = {}, set()
    for tier in SEEDS:
        names = [name for name in _template_names(tier, folder) if name not in given]
        given.update(names)
        size = NAMES_PER_REFERENCE[tier]
        for index in range(0, len(names), size):
            chunk = names[index : index + size]
            kernel = f"names_{tier}_{index // size}"
            path = folder / f"{kernel}.py"
            path.write_text(_reference(kernel, tier, chunk))
            # The references of a tier compute the same math under other names: each is a variant of the first.
            result = run_kernelgen("new", kernel, "--reference", str(path), "--repo", str(root), "--force-new")
            assert result.returncode == 0, f"{kernel}({', '.join(chunk)}): {result.stderr}"
            kernels[kernel] = chunk
    assert {"mask", "cols", "row_start", "n_cols", "BLOCK_SIZE", "BLOCK_ROWS", "row", "tl", "torch"} <= given
    # A masked loss: its mask is the loss kernel's own mask too (once refused: "rename it").
    path = folder / "masked_loss.py"
    path.write_text(MASKED_LOSS)
    result = run_kernelgen("new", "masked_loss", "--reference", str(path), "--repo", str(root))
    assert result.returncode == 0, result.stderr
    kernels["masked_loss"] = ["logits", "target", "mask"]
    return root, kernels


def test_references_named_after_every_template_name_pass_their_generated_tests(generated):
    root, kernels = generated
    tests = [kernel_paths(kernel)["test"] for kernel in kernels]
    result = run_pytest(root, *tests, "-k", "float32 and not dtensor and not shape1 and not shape2")
    assert result.returncode == 0, result.stdout[-3000:]
    passed = int(result.stdout.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    assert passed >= 2 * len(kernels), result.stdout[-500:]  # outputs and gradients, functional vs apply


def test_the_functional_wrapper_keeps_the_names_the_user_chose(generated):
    root, kernels = generated
    functional = ast.parse((root / FUNCTIONAL).read_text())
    signatures = {node.name: [arg.arg for arg in node.args.args] for node in functional.body if hasattr(node, "args")}
    for kernel, names in kernels.items():
        # n_cols and col name symbols of the profile's formulas: the profile (and so the wrapper) calls them n_cols_in.
        expected = [f"{name}_in" if name in FORMULA_SYMBOLS else name for name in names]
        assert signatures[f"liger_{kernel}"] == expected


def test_clashing_names_get_kernel_side_names_and_others_keep_theirs(tmp_path):
    path = tmp_path / "clash.py"
    path.write_text(
        "import torch\n\n\ndef clash(mask, cols, row, scale):\n    return torch.sigmoid(mask) * cols + row * scale\n"
    )
    profile = analyze(str(path))
    assert kernel_side_names(profile, _render_ops) == {"mask": "mask_in", "cols": "cols_in", "row": "row_in"}
    ops = _render_ops(profile)
    assert "row = program // n_blocks" in ops and "row_in_ptr" in ops and "scale_ptr" in ops


def test_kernel_side_names_follow_every_use_but_keywords_attributes_and_strings():
    from tools.kernelgen.profile import load_profile
    from tools.kernelgen.render.hygiene import renamed_profile

    example = load_profile(REPO_ROOT / ".claude/skills/liger-kernel-gen/examples/rms_norm.yaml")
    fragments = renamed_profile(example, {"x": "x_in", "y": "y_out"}).math.triton
    assert fragments.forward == ["y_out = x_in * rstd * (offset + weight)"]
    assert "grad_x_in = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))" in fragments.backward
    geglu = analyze("geglu")
    renamed = renamed_profile(geglu, {"a": "tanh", "y": "approximate"})
    assert renamed.math.outputs == {"approximate": "gelu(tanh, approximate='tanh') * b"}


def _derived(profile):
    """The tier-1 derivation of ``profile``, derived here (no cache of a command's derivations involved)."""
    inputs = [t.name for t in profile.inputs if t.requires_grad]
    parameters = {p.name: p.shape for p in profile.parameters}
    hyperparameters = [t.name for t in profile.inputs if not t.requires_grad] + profile.formula_hyperparameters
    names = [*inputs, *parameters, *hyperparameters]
    outputs = {name: parse_formula(text, names) for name, text in profile.math.outputs.items()}
    return derive_elementwise(outputs, inputs, parameters, hyperparameters)


def _identifiers(statements: list[str]) -> set[str]:
    return {
        node.id for statement in statements for node in ast.walk(ast.parse(statement)) if isinstance(node, ast.Name)
    }


@pytest.mark.parametrize("reference", ["softplus_gate", "snake", "dyt"])
def test_the_probes_math_is_the_derivation_renamed_with_the_names_deriving_over_the_probes_gives(reference):
    """kernel_side_names takes the probed ops file's math from the user's derivation, renamed: its statements
    assign and read the names a derivation over the probes would (the operands may be in another order)."""
    profile = analyze(reference)
    probes = {name: f"kgprobe{index}q" for index, name in enumerate(user_names(profile))}
    renamed = print_elementwise(renamed_derivation(_derived(profile), probes))
    direct = print_elementwise(_derived(renamed_profile(profile, probes)))
    for part in ("forward", "backward", "backward_constants"):
        assert _identifiers(getattr(renamed, part)) == _identifiers(getattr(direct, part)), part
    assert (renamed.forward_uses, renamed.backward_uses) == (direct.forward_uses, direct.backward_uses)
    assert renamed.gradient_formulas.keys() == direct.gradient_formulas.keys()


def test_the_ops_file_s_messages_name_a_renamed_input_as_the_user_does(tmp_path):
    """``mask`` is ``mask_in`` inside the ops file (the templates' own ``mask``), but what it raises says ``mask``:
    the functional and the module take it by that name. The f-string's expressions keep the ops file's names."""
    path = tmp_path / "masked_softmax.py"
    path.write_text(
        "import torch\n\n\ndef masked_softmax(scores, mask):\n    scores = scores + mask\n"
        "    return torch.softmax(scores.float(), dim=-1).to(scores.dtype)\n"
    )
    ops = render_kernel(analyze(f"{path}:masked_softmax")).files[kernel_paths("masked_softmax")["ops"]]
    assert "def masked_softmax_forward(scores, mask_in):" in ops
    assert 'f"masked_softmax: mask has shape {tuple(mask_in.shape)}, expected {tuple(shape)} like scores"' in ops
    assert "mask_in has shape" not in ops
