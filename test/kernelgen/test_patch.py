"""``patch MODEL_TYPE``: a transformers model's blocks mapped to the checkout's kernels, the apply function, its
model-type table entry and its tests written; an existing apply function checked; bad input refused in one line.

One scratch checkout is patched once per module (Arcee: its norm and loss are this library's kernels, its ReLU^2 MLP
activation is a kernel to generate); the other tests read files or parse source only.
"""

import ast
import contextlib
import importlib.util
import sys
import textwrap
import types

import pytest

from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import snapshot
from tools.kernelgen.patch.edit import add_plain_import
from tools.kernelgen.patch.edit import add_table_entry
from tools.kernelgen.patch.edit import insert_statements
from tools.kernelgen.patch.edit import remove_definitions
from tools.kernelgen.patch.errors import PatchError
from tools.kernelgen.patch.mapping import Row
from tools.kernelgen.patch.mapping import _refusal_place
from tools.kernelgen.patch.mapping import torch_norm_rows
from tools.kernelgen.patch.model import Block
from tools.kernelgen.patch.model import ModelSource
from tools.kernelgen.patch.model import capture_calls
from tools.kernelgen.patch.model import locate
from tools.kernelgen.patch.model import mlp_shape
from tools.kernelgen.scratch import library_imports_from

MONKEY_PATCH = "src/liger_kernel/transformers/monkey_patch.py"


@pytest.fixture(scope="module")
def patched(tmp_path_factory):
    """A checkout after ``patch arcee --dry-run`` and ``patch arcee``: (checkout, unchanged by the dry run, dry run,
    run)."""
    checkout = copy_checkout(tmp_path_factory.mktemp("patch") / "liger")
    before = snapshot(checkout)
    dry = run_kernelgen("patch", "arcee", "--repo", str(checkout), "--dry-run")
    unchanged = snapshot(checkout) == before
    run = run_kernelgen("patch", "arcee", "--repo", str(checkout))
    return checkout, unchanged, dry, run


def _row(table: str, block: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(block))


def test_the_table_maps_each_block_to_a_kernel_with_its_options_or_says_why_not(patched):
    _, _, dry, _ = patched
    assert dry.returncode == 0, dry.stderr
    norm = _row(dry.stdout, "ArceeRMSNorm (norm)")
    assert "rms_norm: liger_rms_norm(X, W, eps)" in norm and 'casting_mode="llama"' in norm
    mlp = _row(dry.stdout, "ArceeMLP (MLP)")
    assert "GENERATE: python -m tools.kernelgen new relu_squared --reference" in mlp
    # HF's rotary function generates (issue 42's index maps with broadcast cos/sin): from its own entry, not a helper
    rope = _row(dry.stdout, "apply_rotary_pos_emb")
    assert "GENERATE: python -m tools.kernelgen new arcee_rope --reference" in rope
    assert rope.split("--reference ", 1)[1].split()[0].endswith("arcee_rope.py:apply_rotary_pos_emb")
    assert "cross_entropy: liger_cross_entropy" in _row(dry.stdout, "ArceeForCausalLM (loss)")
    assert "no kernel: the target has no fused linear" in _row(dry.stdout, "ArceeForCausalLM.forward")


def test_dry_run_shows_the_diff_and_writes_nothing(patched):
    _, unchanged, dry, _ = patched
    assert unchanged
    assert f"+++ b/{MONKEY_PATCH}" in dry.stdout and "+def apply_liger_kernel_to_arcee(" in dry.stdout
    assert "dry run, nothing written" in dry.stderr


def test_the_apply_function_table_machinery_and_export_are_written(patched):
    checkout, _, _, run = patched
    assert run.returncode == 0, run.stdout + run.stderr
    source = (checkout / MONKEY_PATCH).read_text()
    tree = ast.parse(source)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    apply = functions["apply_liger_kernel_to_arcee"]
    assert [arg.arg for arg in apply.args.args] == ["rms_norm", "cross_entropy", "model"]
    assert {"_apply_liger_kernel", "_apply_liger_kernel_to_instance", "_convert_to_liger"} <= set(functions)
    table = next(node for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id.startswith("MODEL"))
    assert {key.value: value.id for key, value in zip(table.value.keys, table.value.values)} == {
        "llama": "apply_liger_kernel_to_llama",
        "arcee": "apply_liger_kernel_to_arcee",
    }
    init = (checkout / "src/liger_kernel/transformers/__init__.py").read_text()
    assert '"apply_liger_kernel_to_arcee": "liger_kernel.transformers.monkey_patch"' in init
    # The reference the GENERATE row names, ready for new.
    reference = (checkout / ".kernelgen-work/patch/arcee/relu_squared.py").read_text()
    assert "def relu2(x):" in reference and "torch.square(F.relu(x))" in reference


@contextlib.contextmanager
def generated_test_module(checkout, relative):
    """The checkout's generated test module, imported in this process: ``liger_kernel`` from the checkout's ``src``,
    ``test.convergence`` from its ``test/convergence`` (this repository has none); both as before afterwards."""
    folder = checkout / "test" / "convergence"
    saved = {name: sys.modules.get(name) for name in ("test.convergence", "test.convergence.restore_transformers")}
    package = types.ModuleType("test.convergence")
    package.__path__ = [str(folder)]
    sys.modules["test.convergence"] = package
    try:
        with library_imports_from(checkout / "src"):
            spec = importlib.util.spec_from_file_location("generated_convergence_test", checkout / relative)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            yield module
    finally:
        for name, value in saved.items():
            if value is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = value


def test_the_generated_tests_pass_in_the_checkout(patched):
    import torch

    checkout, _, _, _ = patched
    with generated_test_module(checkout, "test/convergence/test_mini_arcee.py") as generated:
        assert generated.SWAPPED == {"ArceeRMSNorm": generated.LigerArceeRMSNorm}
        generated.test_instance_patching_converts_each_module()
        generated.test_mini_arcee_converges_as_unpatched(torch.float32, {})


def test_an_existing_apply_function_is_checked_on_the_mini_model_and_nothing_is_written(patched):
    checkout, _, _, _ = patched
    before = snapshot(checkout)
    result = run_kernelgen("patch", "arcee", "--repo", str(checkout))
    assert result.returncode == 0, result.stderr
    assert "[served by apply_liger_kernel_to_arcee]" in _row(result.stdout, "ArceeRMSNorm (norm)")
    assert "apply_liger_kernel_to_arcee exists and serves every block" in result.stdout
    assert snapshot(checkout) == before


def test_force_replaces_only_what_patch_wrote(patched):
    checkout, _, _, _ = patched
    before = snapshot(checkout)
    error = one_line_error(run_kernelgen("patch", "llama", "--repo", str(checkout), "--force"))
    assert "apply_liger_kernel_to_llama is hand-written" in error and "nothing written" in error
    assert snapshot(checkout) == before


@pytest.mark.parametrize(
    "model, message",
    [
        ("no_such_model", "unknown model type 'no_such_model'"),
        ("missing/modeling_llama.py", "no such modeling file"),
        ("test/kernelgen/test_patch.py", "not a transformers modeling file"),
        ("vit", "has no causal LM class"),
        ("gemma3", "is multimodal (its config holds a text_config); patch its text model type 'gemma3_text'"),
    ],
)
def test_bad_model_types_and_files_are_refused_in_one_line(checkout, model, message):
    before = snapshot(checkout)
    error = one_line_error(run_kernelgen("patch", model, "--repo", str(checkout)))
    assert message in error and "nothing written" in error
    assert snapshot(checkout) == before


def test_gptj_keeps_its_rotary_fraction_and_maps_its_half_width_tables(checkout):
    """GPT-J's rotary width is a count of columns (64 of a 256-column head): the mini head of 16 keeps the fraction
    (4), where the default count broke the mini model's forward; its rotary function, which repeats sin and cos of
    half that width inside, is then a kernel to generate."""
    assert locate("gptj").mini_overrides()["rotary_dim"] == 4
    before = snapshot(checkout)
    run = run_kernelgen("patch", "gptj", "--repo", str(checkout), "--dry-run")
    assert run.returncode == 0, run.stderr
    assert "GENERATE: python -m tools.kernelgen new gptj_rope" in _row(run.stdout, "apply_rotary_pos_emb")
    assert snapshot(checkout) == before


def test_a_partial_rotary_reference_declares_the_tables_the_mini_model_passed(checkout):
    """GPT-NeoX rotates a quarter of each head with cos and sin of that width; its reference runs with tables of
    any width, so the written reference declares the mini call's, a quarter of the head's."""
    run = run_kernelgen("patch", "gpt_neox", "--repo", str(checkout), "--dry-run")
    assert run.returncode == 0, run.stderr
    hint = '+KERNELGEN = {"shapes": {"q": "d0 d1 d2 d3", "cos": "d1 d2 d3/4", "sin": "d1 d2 d3/4"}}'
    assert hint in run.stdout.splitlines()
    assert "GENERATE: python -m tools.kernelgen new gpt_neox_rope" in _row(run.stdout, "apply_rotary_pos_emb")


@pytest.mark.parametrize(
    "model, expected, absent",
    [
        # Falcon's head_dim is a read-only property: derived, not passed
        ("falcon", {"hidden_size": 32, "num_attention_heads": 2}, ["head_dim"]),
        # DeepSeek's latent attention: its head dims and ranks small, one key head per query head as in the default
        (
            "deepseek_v3",
            {"qk_rope_head_dim": 16, "kv_lora_rank": 32, "n_routed_experts": 4, "n_group": 1, "num_key_value_heads": 2},
            [],
        ),
        # GPT-Neo's attention kinds cover the two layers
        ("gpt_neo", {"attention_types": [[["global", "local"], 1]]}, []),
        ("qwen3", {"num_key_value_heads": 1}, ["kv_lora_rank"]),  # the mini config's grouped keys elsewhere
    ],
)
def test_the_mini_config_fits_each_architecture(model, expected, absent):
    overrides = locate(model).mini_overrides()
    assert {name: overrides.get(name) for name in expected} == expected
    assert not set(absent) & set(overrides)
    locate(model).build()


def test_an_mlp_built_with_more_than_the_config_is_served_by_a_subclass(checkout):
    """DeepSeek V3 builds its shared experts as DeepseekV3MLP(config, intermediate_size=...): LigerSwiGLUMLP takes the
    config only, so the MLP's forward is served by a subclass that keeps the model's constructor."""
    run = run_kernelgen("patch", "deepseek_v3", "--repo", str(checkout), "--dry-run")
    assert run.returncode == 0, run.stderr
    assert "in LigerDeepseekV3MLP.forward (a subclass of DeepseekV3MLP)" in _row(run.stdout, "DeepseekV3MLP (MLP)")


def test_a_norm_taking_an_argument_it_never_reads_is_generated_and_served(checkout, tmp_path):
    """CohereLayerNorm takes bias=False and never reads it: a module generated from such a reference takes it too
    without holding it (an attribute bias=False broke HF's weight initialization), and patch serves the model's norm
    with that kernel through a subclass taking the model's own arguments."""
    reference = tmp_path / "cohere_like.py"
    reference.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass CohereLikeNorm(nn.Module):\n"
        "    def __init__(self, hidden_size=None, eps=1e-5, bias=False):\n        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.ones(hidden_size))\n        self.variance_epsilon = eps\n\n"
        "    def forward(self, x):\n        mean = x.mean(-1, keepdim=True)\n"
        "        variance = (x - mean).pow(2).mean(-1, keepdim=True)\n"
        "        return self.weight * (x - mean) * torch.rsqrt(variance + self.variance_epsilon)\n"
    )
    run = run_kernelgen("new", "cohere_like", "--reference", f"{reference}:CohereLikeNorm", "--repo", str(checkout))
    assert run.returncode == 0, run.stderr
    module = (checkout / "src/liger_kernel/transformers/cohere_like.py").read_text()
    assert "bias=False" in module and "self.bias" not in module
    dry = run_kernelgen("patch", "cohere", "--repo", str(checkout), "--dry-run")
    row = _row(dry.stdout, "CohereLayerNorm (norm)")
    assert "cohere_like: liger_cohere_like(x, weight, eps=eps) as LigerCohereLayerNorm = LigerCohereLike(...)" in row
    assert "def __init__(self, hidden_size, eps=1e-05, bias=False):" in dry.stdout


def test_a_mini_model_whose_forward_fails_is_one_line():
    import torch

    class Broken(torch.nn.Module):
        def forward(self, input_ids):
            raise RuntimeError("The size of tensor a (16) must match the size of tensor b (64)\nat dim 3")

    with pytest.raises(PatchError) as raised:
        capture_calls(Broken(), set(), torch.zeros(1, 4, dtype=torch.long))
    assert str(raised.value) == (
        "Broken of the mini config fails its forward: RuntimeError: The size of tensor a (16) must match the size of "
        "tensor b (64); nothing written"
    )


def _class(text: str) -> ast.ClassDef:
    return ast.parse(textwrap.dedent(text)).body[0]


def test_torch_s_own_norm_classes_get_a_row_saying_why_they_are_not_patched():
    """StableLM, Phi and Starcoder2 build their norms from nn.LayerNorm: the table says so in a row of its own (torch's
    class is never swapped), naming the modules and whether the target has the kernel; a model's own subclass of it
    is the modeling file's class, not torch's, and gets none."""
    import torch.nn as nn

    class OwnLayerNorm(nn.LayerNorm):
        pass

    class Checkout:
        def __init__(self, paths):
            self.paths = paths

        def exists(self, path):
            return path in self.paths

    model = nn.ModuleDict({"first": nn.LayerNorm(4), "mlp": nn.Linear(4, 4), "last": nn.LayerNorm(4)})
    (row,) = torch_norm_rows(Checkout(set()), model)
    assert (row.label, row.status) == ("nn.LayerNorm (norm)", "none")
    assert "torch's own class (2 modules, e.g. first)" in row.why and row.why.endswith("no layer_norm kernel")
    (row,) = torch_norm_rows(Checkout({"src/liger_kernel/ops/layer_norm.py"}), model)
    assert row.why.endswith("its layer_norm kernel would replace each instance's forward")
    assert torch_norm_rows(Checkout(set()), nn.ModuleDict({"norm": OwnLayerNorm(4)})) == []


def test_mlp_shapes_are_read_whatever_the_projections_are_called():
    gated = _class(
        """
        class ExpertMLP(nn.Module):
            def forward(self, hidden):
                gated = self.activation(self.w1(hidden)) * self.w3(hidden)
                return self.w2(gated)
        """
    )
    assert mlp_shape(gated, "activation") == {
        "pattern": "gated",
        "gate": "w1",
        "up": "w3",
        "down": "w2",
        "argument": "hidden",
    }
    plain = _class(
        """
        class Feedforward(nn.Module):
            def forward(self, x):
                \"\"\"A docstring is not a statement of the forward.\"\"\"
                out = self.fc_out(self.act(self.fc_in(x)))
                return out
        """
    )
    assert mlp_shape(plain, "act") == {"pattern": "plain", "up": "fc_in", "down": "fc_out", "argument": "x"}
    # One name assigned again at each step, as transformers' PhiMLP writes it.
    reassigned = _class(
        """
        class PhiMLP(nn.Module):
            def forward(self, hidden_states):
                hidden_states = self.fc1(hidden_states)
                hidden_states = self.activation_fn(hidden_states)
                hidden_states = self.fc2(hidden_states)
                return hidden_states
        """
    )
    assert mlp_shape(reassigned, "activation_fn") == {
        "pattern": "plain",
        "up": "fc1",
        "down": "fc2",
        "argument": "hidden_states",
    }
    # A dropout after the down projection (Starcoder2MLP's functional one, or a module's nn.Dropout): the shape is
    # read through it, and marked, so that only the activation is swapped and the dropout stays.
    functional_dropout = _class(
        """
        class Starcoder2MLP(nn.Module):
            def forward(self, hidden_states):
                hidden_states = self.c_fc(hidden_states)
                hidden_states = self.act(hidden_states)
                hidden_states = self.c_proj(hidden_states)
                hidden_states = nn.functional.dropout(hidden_states, p=self.residual_dropout, training=self.training)
                return hidden_states
        """
    )
    dropped = {"pattern": "plain", "up": "c_fc", "down": "c_proj", "argument": "hidden_states", "dropout": True}
    assert mlp_shape(functional_dropout, "act") == dropped
    module_dropout = _class(
        """
        class GatedWithDropout(nn.Module):
            def __init__(self, config):
                self.drop = nn.Dropout(config.dropout)

            def forward(self, x):
                return self.drop(self.down(self.act(self.gate(x)) * self.up(x)))
        """
    )
    assert mlp_shape(module_dropout, "act") == {
        "pattern": "gated",
        "gate": "gate",
        "up": "up",
        "down": "down",
        "argument": "x",
        "dropout": True,
    }
    # A call of another module attribute around the MLP is not a dropout.
    other = _class(
        """
        class Wrapped(nn.Module):
            def forward(self, x):
                return self.norm(self.down(self.act(self.up(x))))
        """
    )
    assert mlp_shape(other, "act") is None
    # A residual inside the MLP is not one of the shapes an activation kernel replaces the middle of.
    residual = _class(
        """
        class Residual(nn.Module):
            def forward(self, x):
                return self.down(self.act(self.up(x))) + x
        """
    )
    assert mlp_shape(residual, "act") is None


def test_a_refusal_names_the_modeling_files_line_not_the_unwritten_references(tmp_path):
    # As GLM writes its rotary embedding; the reference is that function as ast.unparse spaces and quotes it.
    modeling = """import torch


def helper(x):
    return x


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    cos = cos[..., : cos.shape[-1] // 2].repeat_interleave(2, dim=-1)
    return q * cos, k * cos
"""
    path = tmp_path / "modeling_toy.py"
    path.write_text(modeling)
    tree = ast.parse(modeling)
    node = tree.body[2]
    reference = "import torch\n\n" + ast.unparse(node)
    line = next(n for n, text in enumerate(reference.splitlines(), 1) if "repeat_interleave" in text)
    source = ModelSource("toy", path, "transformers.models.toy.modeling_toy", tree, "ToyForCausalLM")
    row = Row(Block("rope", "apply_rotary_pos_emb", node), "none")
    refusal = f"<stdin>:{line}: `.repeat_interleave()` is not an op kernelgen knows"
    assert _refusal_place(source, row, reference, refusal) == (
        "modeling_toy.py:10: `.repeat_interleave()` is not an op kernelgen knows"
    )
    # A line the reference does not have keeps the block's name.
    assert _refusal_place(source, row, reference, "<stdin>:99: no") == "apply_rotary_pos_emb:99: no"


TABLE_SOURCE = """import logging

import transformers

logger = logging.getLogger(__name__)


def apply_a():
    pass


# The models.
TABLE = {
    "a": apply_a,  # first
}
"""


def test_edits_keep_the_file_layout():
    with_function = insert_statements(TABLE_SOURCE, "def apply_b():\n    pass\n", before_assignment_of="TABLE")
    edited = add_table_entry(with_function, "TABLE", "b", "apply_b")
    edited = add_plain_import(add_plain_import(edited, "torch"), "inspect")
    assert edited == TABLE_SOURCE.replace("import logging\n", "import inspect\nimport logging\n").replace(
        "import transformers\n", "import torch\nimport transformers\n"
    ).replace("\n\n# The models.", "\n\ndef apply_b():\n    pass\n\n\n# The models.").replace(
        '    "a": apply_a,  # first\n', '    "a": apply_a,  # first\n    "b": apply_b,\n'
    )
    assert add_table_entry(edited, "TABLE", "b", "apply_b") == edited
    assert "apply_b" not in remove_definitions(with_function, {"apply_b"})
