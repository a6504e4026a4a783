"""The tests ``patch`` writes beside the apply function: a mini-model convergence test and an instance-patching test
(``test/convergence/test_mini_<model type>.py``), and once per target the helper that undoes the class swaps."""

from __future__ import annotations

from pathlib import Path

from tools.kernelgen.patch.mapping import Row
from tools.kernelgen.patch.model import ModelSource
from tools.kernelgen.patch.render import _liger_name
from tools.kernelgen.patch.render import display_name
from tools.kernelgen.patch.render import flags
from tools.kernelgen.patch.render import function_name

RESTORE_HELPER = "test/convergence/restore_transformers.py"
MONKEY_PATCH_MODULE = "liger_kernel.transformers.monkey_patch"


def test_path(source: ModelSource) -> str:
    return f"test/convergence/test_mini_{source.model_type}.py"


# The helper is this package's own module, copied as it is into the target's tests.
RESTORE_TEXT = (Path(__file__).parent / "restore_transformers.py").read_text(encoding="utf-8")


def _swapped(rows: list[Row]) -> list[tuple[str, str, str]]:
    """(model class, Liger class, its module) of every module the apply function converts."""
    found = []
    for row in rows:
        if row.status != "kernel" or row.strategy not in ("class", "act_fn", "forward"):
            continue
        written = row.block.kind == "norm" or row.strategy in ("act_fn", "forward")
        found.append((row.block.name, _liger_name(row), MONKEY_PATCH_MODULE if written else row.liger_module))
    return found


def convergence_test(rows: list[Row], source: ModelSource) -> str:
    model, apply = display_name(source), function_name(source)
    config_class = source.config_class().__name__
    config_module = source.config_class().__module__
    overrides = source.mini_overrides()
    config_lines = "".join(f"    {name}={value!r},\n" for name, value in overrides.items())
    swapped = _swapped(rows)
    switches = flags(rows)
    imports = sorted({(module, liger) for _, liger, module in swapped} | {(MONKEY_PATCH_MODULE, apply)})
    import_lines = "".join(f"from {module} import {name}\n" for module, name in imports)
    swapped_lines = "".join(f'    "{hf}": {liger},\n' for hf, liger, _ in swapped)
    cases = ["{}"]
    if "cross_entropy" in switches:
        loss_off = ', "fused_linear_cross_entropy": False' if "fused_linear_cross_entropy" in switches else ""
        cases.append(f'{{"cross_entropy": True{loss_off}}}')
    cases_text = ", ".join(cases)
    unchecked = [row for row in rows if row.status == "kernel" and row.unchecked]
    # A Liger module that does not run on the CPU (a GPU-only autotuned kernel) leaves the CPU only the types to check.
    cpu_runs = "False" if unchecked else "True"
    cpu_reason = f"{unchecked[0].liger_class} runs on a GPU only" if unchecked else ""
    return f'''"""Mini {model}: ``{apply}`` against the unpatched model (written by ``kernelgen patch``).

A 2-layer {model} trains a few AdamW steps from one seed with and without the patch; the losses, the evaluation
log-probabilities and the final weights agree at the per-dtype tolerances of upstream's mini-model tests (float32 on
the CPU under the Triton interpreter, bfloat16 on a GPU). Patching a built model (``model=``) gives each converted
module its Liger class and leaves what the model computes as it was.
"""

import pytest
import torch

from {source.package} import {source.short_module}
from {config_module} import {config_class}

{import_lines}from test.convergence.restore_transformers import transformers_restored

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MINI_CONFIG = dict(
{config_lines})
STEPS = 3
# Learning rates of upstream's mini-model tests per dtype.
LEARNING_RATES = {{torch.float32: 1e-4, torch.bfloat16: 1e-5}}
# (atol, rtol) of the losses, the evaluation log-probabilities and the final weights.
TOLERANCES = {{
    torch.float32: {{"loss": (1e-8, 1e-5), "logprobs": (5e-3, 1e-5), "params": (5e-3, 1e-5)}},
    torch.bfloat16: {{"loss": (1e-2, 5e-2), "logprobs": (1e-1, 1e-2), "params": (1e-2, 1e-2)}},
}}
CPU_RUNS = {cpu_runs}
DTYPES = [
    pytest.param(
        torch.float32,
        id="fp32",
        marks=pytest.mark.skipif(DEVICE == "cpu" and not CPU_RUNS, reason="{cpu_reason}"),
    ),
    pytest.param(
        torch.bfloat16,
        id="bf16",
        marks=pytest.mark.skipif(DEVICE == "cpu", reason="bfloat16 runs on a GPU (the CPU run is the float32 one)"),
    ),
]
# The model's classes apply converts in a built model -> the Liger class each becomes.
SWAPPED = {{
{swapped_lines}}}


def build_model(dtype):
    torch.manual_seed(42)
    config = {config_class}(**MINI_CONFIG, attn_implementation="eager")
    return {source.short_module}.{source.causal_lm}(config).to(device=DEVICE, dtype=dtype)


def batches(config_vocab, count):
    generator = torch.Generator().manual_seed(7)
    return [torch.randint(3, config_vocab, (2, 8), generator=generator).to(DEVICE) for _ in range(count)]


def train(dtype, patch_kwargs=None):
    """Losses of STEPS training steps, top log-probabilities of an evaluation batch and the final weights."""
    with transformers_restored({source.short_module}, {source.short_module}.{source.causal_lm}):
        if patch_kwargs is not None:
            {apply}(**patch_kwargs)
        model = build_model(dtype)
        optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATES[dtype])
        *train_batches, eval_batch = batches(MINI_CONFIG["vocab_size"], STEPS + 1)
        losses = []
        for input_ids in train_batches:
            optimizer.zero_grad()
            loss = model(input_ids=input_ids, labels=input_ids).loss
            loss.backward()
            optimizer.step()
            losses.append(loss.detach().float())
        model.eval()
        with torch.no_grad():
            logits = model(input_ids=eval_batch).logits.float()
        logprobs = torch.log_softmax(logits, dim=-1).topk(10, dim=-1).values
        weights = {{name: param.detach().float() for name, param in model.named_parameters()}}
        return torch.stack(losses), logprobs, weights


_UNPATCHED = {{}}


@pytest.mark.parametrize("patch_kwargs", [{cases_text}], ids=["defaults", "cross_entropy"][: {len(cases)}])
@pytest.mark.parametrize("dtype", DTYPES)
def test_mini_{source.model_type}_converges_as_unpatched(dtype, patch_kwargs):
    if dtype not in _UNPATCHED:
        _UNPATCHED[dtype] = train(dtype)
    expected_losses, expected_logprobs, expected_weights = _UNPATCHED[dtype]
    losses, logprobs, weights = train(dtype, patch_kwargs)
    tolerance = TOLERANCES[dtype]
    torch.testing.assert_close(losses, expected_losses, atol=tolerance["loss"][0], rtol=tolerance["loss"][1])
    torch.testing.assert_close(
        logprobs, expected_logprobs, atol=tolerance["logprobs"][0], rtol=tolerance["logprobs"][1]
    )
    for name, weight in weights.items():
        atol, rtol = tolerance["params"]
        torch.testing.assert_close(weight, expected_weights[name], atol=atol, rtol=rtol, msg=name)


def test_instance_patching_converts_each_module():
    with transformers_restored({source.short_module}, {source.short_module}.{source.causal_lm}):
        expected = build_model(torch.float32)
        model = build_model(torch.float32)
        counts = {{name: sum(type(m).__name__ == name for m in model.modules()) for name in SWAPPED}}
        {apply}(model=model)
        for name, liger_class in SWAPPED.items():
            assert counts[name] > 0, f"the mini model has no {{name}}"
            converted = [m for m in model.modules() if type(m) is liger_class]
            assert len(converted) == counts[name], f"{{len(converted)}} of {{counts[name]}} {{name}} became {{liger_class.__name__}}"
        if DEVICE == "cpu" and not CPU_RUNS:
            return
        input_ids = batches(MINI_CONFIG["vocab_size"], 1)[0]
        with torch.no_grad():
            torch.testing.assert_close(model(input_ids=input_ids).logits, expected(input_ids=input_ids).logits, atol=1e-4, rtol=1e-4)
'''
