import pytest
import torch

from transformers.loss import loss_utils
from transformers.models.llama import modeling_llama
from transformers.models.llama.configuration_llama import LlamaConfig

from liger_kernel.transformers.monkey_patch import _liger_fixed_cross_entropy
from liger_kernel.transformers.monkey_patch import apply_liger_kernel_to_llama
from liger_kernel.transformers.rms_norm import LigerRMSNorm
from liger_kernel.transformers.swiglu import LigerSwiGLUMLP
from test.utils import assert_verbose_allclose
from test.utils import infer_device
from test.utils import set_seed

device = infer_device()

HF_RMS_NORM = modeling_llama.LlamaRMSNorm
HF_MLP = modeling_llama.LlamaMLP


@pytest.fixture(autouse=True)
def restore_hf_llama(monkeypatch):
    # Registering the current values with monkeypatch makes pytest put them back after each test, whatever
    # apply_liger_kernel_to_llama replaced.
    monkeypatch.setattr(modeling_llama, "LlamaRMSNorm", HF_RMS_NORM)
    monkeypatch.setattr(modeling_llama, "LlamaMLP", HF_MLP)
    monkeypatch.setattr(loss_utils, "fixed_cross_entropy", loss_utils.fixed_cross_entropy)


def _tiny_config(**overrides):
    settings = dict(
        hidden_size=48,
        intermediate_size=77,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=101,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
        attn_implementation="eager",
    )
    settings.update(overrides)
    return LlamaConfig(**settings)


def _inputs(config, bsz=2, seq_len=9):
    input_ids = torch.randint(0, config.vocab_size, (bsz, seq_len), device=device)
    labels = input_ids.clone()
    labels[0, :3] = -100
    return input_ids, labels


def _randomise_norm_weights(model):
    # HF initialises norm weights to ones; random weights make a wrong weight path visible.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(torch.rand_like(param) + 0.5)


def test_patching_replaces_llama_classes_and_new_models_match_hf():
    set_seed(0)
    config = _tiny_config()
    hf_model = modeling_llama.LlamaForCausalLM(config).to(device)
    _randomise_norm_weights(hf_model)
    input_ids, labels = _inputs(config)
    hf_out = hf_model(input_ids=input_ids, labels=labels)
    hf_out.loss.backward()

    apply_liger_kernel_to_llama(rms_norm=True, swiglu=True)
    assert modeling_llama.LlamaRMSNorm is LigerRMSNorm
    assert modeling_llama.LlamaMLP is LigerSwiGLUMLP

    liger_model = modeling_llama.LlamaForCausalLM(config).to(device)
    liger_model.load_state_dict(hf_model.state_dict())
    assert isinstance(liger_model.model.norm, LigerRMSNorm)
    assert all(isinstance(layer.mlp, LigerSwiGLUMLP) for layer in liger_model.model.layers)
    assert all(isinstance(layer.input_layernorm, LigerRMSNorm) for layer in liger_model.model.layers)

    liger_out = liger_model(input_ids=input_ids, labels=labels)
    liger_out.loss.backward()
    assert_verbose_allclose(liger_out.logits, hf_out.logits, atol=1e-5, rtol=1e-4, extra_info="[logits]")
    assert_verbose_allclose(liger_out.loss, hf_out.loss, atol=1e-5, rtol=1e-5, extra_info="[loss]")
    hf_params = dict(hf_model.named_parameters())
    for name, param in liger_model.named_parameters():
        assert_verbose_allclose(param.grad, hf_params[name].grad, atol=1e-5, rtol=1e-4, extra_info=f"[{name}.grad]")


def test_patching_an_existing_model_converts_its_modules_in_place_keeping_weights():
    set_seed(1)
    config = _tiny_config()
    model = modeling_llama.LlamaModel(config).to(device)
    _randomise_norm_weights(model)
    input_ids, _ = _inputs(config)
    with torch.no_grad():
        expected = model(input_ids=input_ids).last_hidden_state
    params_before = {name: param for name, param in model.named_parameters()}
    state_before = {name: value.clone() for name, value in model.state_dict().items()}

    apply_liger_kernel_to_llama(model=model)

    assert type(model.norm) is LigerRMSNorm
    for layer in model.layers:
        assert type(layer.mlp) is LigerSwiGLUMLP
        assert type(layer.input_layernorm) is LigerRMSNorm
        assert type(layer.post_attention_layernorm) is LigerRMSNorm
    # Same parameter objects, same values: nothing was re-created or re-initialised.
    assert {name: param for name, param in model.named_parameters()} == params_before
    assert model.state_dict().keys() == state_before.keys()
    for name, value in model.state_dict().items():
        assert torch.equal(value, state_before[name]), name

    with torch.no_grad():
        actual = model(input_ids=input_ids).last_hidden_state
    assert_verbose_allclose(actual, expected, atol=1e-5, rtol=1e-4)


def test_disabled_flags_leave_llama_classes_untouched():
    set_seed(2)
    config = _tiny_config()
    model = modeling_llama.LlamaModel(config).to(device)
    apply_liger_kernel_to_llama(rms_norm=False, swiglu=False, model=model)
    assert modeling_llama.LlamaRMSNorm is HF_RMS_NORM
    assert modeling_llama.LlamaMLP is HF_MLP
    assert type(model.norm) is HF_RMS_NORM
    assert type(model.layers[0].mlp) is HF_MLP

    apply_liger_kernel_to_llama(rms_norm=True, swiglu=False, model=model)
    assert type(model.norm) is LigerRMSNorm
    assert type(model.layers[0].mlp) is HF_MLP


def test_cross_entropy_patch_gives_same_causal_lm_loss_and_gradients():
    set_seed(3)
    config = _tiny_config()
    model = modeling_llama.LlamaForCausalLM(config).to(device)
    input_ids, labels = _inputs(config)
    expected = model(input_ids=input_ids, labels=labels).loss
    expected.backward()
    expected_grad = model.lm_head.weight.grad.clone()
    model.zero_grad()

    apply_liger_kernel_to_llama(rms_norm=False, swiglu=False, cross_entropy=True)
    assert loss_utils.fixed_cross_entropy is _liger_fixed_cross_entropy
    actual = model(input_ids=input_ids, labels=labels).loss
    actual.backward()
    assert_verbose_allclose(actual, expected, atol=1e-5, rtol=1e-5, extra_info="[loss]")
    assert_verbose_allclose(model.lm_head.weight.grad, expected_grad, atol=1e-5, rtol=1e-4, extra_info="[grad]")

    # With num_items_in_batch (gradient accumulation) the summed loss is divided by the given count.
    logits = torch.randn(6, config.vocab_size, device=device)
    target = torch.tensor([1, 2, -100, 4, 5, 6], device=device)
    scaled = loss_utils.fixed_cross_entropy(logits.clone(), target, num_items_in_batch=torch.tensor(10))
    reference = torch.nn.functional.cross_entropy(logits, target, ignore_index=-100, reduction="sum") / 10
    assert_verbose_allclose(scaled, reference, atol=1e-5, rtol=1e-5)


def test_converting_a_model_with_biased_mlp_is_refused_without_changing_it():
    config = _tiny_config(mlp_bias=True)
    model = modeling_llama.LlamaModel(config).to(device)
    with pytest.raises(ValueError, match="mlp_bias"):
        apply_liger_kernel_to_llama(rms_norm=True, swiglu=True, model=model)
    # Refused as a whole: neither the classes nor the model's norms were replaced.
    assert modeling_llama.LlamaRMSNorm is HF_RMS_NORM
    assert type(model.norm) is HF_RMS_NORM
    assert type(model.layers[0].mlp) is HF_MLP
