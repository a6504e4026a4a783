"""A Hugging Face model type as ``patch`` sees it: its modeling file, the blocks of it Liger could serve, and a mini
model built from a small config, whose run shows which of those blocks the causal LM really uses and with what.

Blocks are read from the modeling file's syntax (norm classes, MLP and expert classes whose activation comes from
``ACT2FN``, the rotary embedding function, the causal LM's loss) and kept only when the mini causal LM holds them.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from tools.kernelgen.patch.errors import PatchError

# The mini config: small enough for a CPU run in well under a second, with every size a kernel's tiling accepts.
MINI_SIZES = {
    "num_hidden_layers": 2,
    "hidden_size": 32,
    "intermediate_size": 64,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "vocab_size": 96,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "max_position_embeddings": 128,
    "num_experts": 4,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "sliding_window": 16,
    # multi-head latent attention (DeepSeek V2/V3, MiniCPM3): its head dims and ranks at the mini head's size
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "n_routed_experts": 4,
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
ROTARY_FUNCTION = "apply_rotary_pos_emb"


@dataclass
class Block:
    """One part of the model a Liger kernel could compute."""

    kind: str  # "norm", "mlp", "experts", "rope" or "loss"
    name: str  # the modeling file's symbol (class or function)
    node: ast.AST | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModelSource:
    model_type: str
    path: Path
    module_name: str  # transformers.models.X.modeling_X
    tree: ast.Module
    causal_lm: str  # the causal LM class of the model type
    blocks: list[Block] = field(default_factory=list)

    @property
    def short_module(self) -> str:
        return self.module_name.rsplit(".", 1)[1]

    @property
    def package(self) -> str:
        return self.module_name.rsplit(".", 1)[0]

    def module(self):
        return importlib.import_module(self.module_name)

    def config_class(self):
        from transformers import CONFIG_MAPPING

        return CONFIG_MAPPING[self.model_type]

    def mini_overrides(self) -> dict[str, Any]:
        """The mini config's values this model type's config has (set at construction, so derived fields such as
        ``layer_types`` follow the layer count)."""
        with quiet_transformers():
            default = self.config_class()()
        text = getattr(default, "text_config", None)
        if text is not None and text is not default:
            raise PatchError(
                f"model type {self.model_type!r} is multimodal (its config holds a text_config); patch its text model "
                f"type {getattr(text, 'model_type', '?')!r}; nothing written"
            )
        # (a read-only property, such as Falcon's head_dim, is derived from the others and cannot be passed)
        overrides = {
            name: value
            for name, value in MINI_SIZES.items()
            if hasattr(default, name) and getattr(getattr(type(default), name, None), "fset", True) is not None
        }
        if "num_key_value_heads" in overrides and "kv_lora_rank" in overrides:
            # latent attention (DeepSeek, MiniCPM3) makes a key per query head: no grouped keys
            overrides["num_key_value_heads"] = overrides.get("num_attention_heads", default.num_attention_heads)
        if isinstance(getattr(default, "attention_types", None), list) and "num_hidden_layers" in overrides:
            # GPT-Neo's pattern of attention kinds must cover the layers: one global then one local layer
            overrides["attention_types"] = [[["global", "local"], overrides["num_hidden_layers"] // 2]]
        rotary = getattr(default, "rotary_dim", None)
        if isinstance(rotary, int) and rotary > 0 and "hidden_size" in overrides:
            # GPT-J's and CodeGen's rotary width is a count of columns, not a fraction of the head: the mini head
            # keeps the default's fraction of it (in whole pairs), as the default head would have run it.
            head = getattr(default, "head_dim", None) or default.hidden_size // default.num_attention_heads
            mini_head = overrides.get("head_dim") or overrides["hidden_size"] // overrides["num_attention_heads"]
            overrides["rotary_dim"] = max(2, mini_head * rotary // head // 2 * 2)
        return overrides

    def mini_config(self):
        overrides = self.mini_overrides()
        try:
            with quiet_transformers():
                config = self.config_class()(**overrides)
        except Exception as error:  # noqa: BLE001 - a config that refuses the mini sizes is reported in one line
            raise PatchError(f"the mini config of {self.model_type!r} is refused: {error}; nothing written") from None
        config._attn_implementation = "eager"
        return config

    def build(self, config=None, seed: int = 0):
        """The causal LM of ``config`` (default: the mini config; float32, CPU), its weights drawn from ``seed``."""
        import torch

        module = self.module()
        which = "the mini config" if config is None else "its config"
        config = config or self.mini_config()
        torch.manual_seed(seed)
        try:
            with quiet_transformers():
                return getattr(module, self.causal_lm)(config)
        except Exception as error:  # noqa: BLE001 - a model its own config cannot build is reported, not traced
            message = str(error).splitlines()[0] if str(error) else ""
            raise PatchError(
                f"{self.causal_lm} of {which} cannot be built: {type(error).__name__}: {message}; nothing written"
            ) from None


@contextlib.contextmanager
def quiet_transformers():
    """transformers' logging of a mini config's token ids beyond the mini vocabulary, silenced inside."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)


def locate(model: str) -> ModelSource:
    """The modeling file of model type ``model`` (``qwen3``, ``gemma3_text``) or of a modeling file path."""
    import transformers

    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    path = Path(model)
    if model.endswith(".py"):
        if not path.is_file():
            raise PatchError(f"{model}: no such modeling file; nothing written")
        model_type = path.stem.removeprefix("modeling_")
        if not path.stem.startswith("modeling_") or model_type not in CONFIG_MAPPING:
            raise PatchError(f"{model}: not a transformers modeling file (modeling_<model type>.py); nothing written")
    else:
        model_type = model
        if model_type not in CONFIG_MAPPING:
            raise PatchError(f"unknown model type {model!r}: transformers has no config for it; nothing written")
    causal_lm = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    if not causal_lm:
        raise PatchError(f"model type {model_type!r} has no causal LM class in transformers; nothing written")
    package = CONFIG_MAPPING[model_type].__module__.rsplit(".", 1)[0]
    module_name = f"{package}.modeling_{package.rsplit('.', 1)[1]}"
    expected = Path(transformers.__file__).parent.joinpath(*module_name.split(".")[1:]).with_suffix(".py")
    if model.endswith(".py") and path.resolve() != expected.resolve():
        raise PatchError(f"{model}: model type {model_type!r} is defined by {expected}, not this file; nothing written")
    try:
        text = expected.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError) as error:
        raise PatchError(f"{expected}: cannot read the modeling file ({error}); nothing written") from None
    if not any(isinstance(node, ast.ClassDef) and node.name == causal_lm for node in tree.body):
        raise PatchError(f"{expected}: no class {causal_lm} (the causal LM of {model_type!r}); nothing written")
    source = ModelSource(model_type, expected, module_name, tree, causal_lm)
    source.blocks = find_blocks(source)
    return source


# Blocks in the syntax -------------------------------------------------------------------------------------------
def _self_attribute(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _method(node: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == name), None)


def activation_attributes(node: ast.ClassDef) -> dict[str, str]:
    """``self.NAME = ACT2FN[config.ATTR]`` assignments of ``__init__``: NAME -> ATTR."""
    init = _method(node, "__init__")
    found = {}
    for statement in ast.walk(init) if init else []:
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            continue
        name, value = _self_attribute(statement.targets[0]), statement.value
        if (
            name
            and isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name)
            and value.value.id == "ACT2FN"
            and isinstance(value.slice, ast.Attribute)
        ):
            found[name] = value.slice.attr
    return found


def _projection(node: ast.AST, argument: str) -> str | None:
    """``self.P(argument)`` -> P."""
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        if isinstance(node.args[0], ast.Name) and node.args[0].id == argument:
            return _self_attribute(node.func)
    return None


def _inlined(node: ast.AST, names: dict[str, ast.AST]) -> ast.AST:
    """``node`` with each name of ``names`` it reads replaced by the expression assigned to it."""

    class Inline(ast.NodeTransformer):
        def visit_Name(self, name: ast.Name) -> ast.AST:
            return copy.deepcopy(names[name.id]) if name.id in names else name

    return Inline().visit(copy.deepcopy(node))


def mlp_shape(node: ast.ClassDef, act: str) -> dict[str, str] | None:
    """The MLP's forward as projections around its activation: ``down(act(gate(x)) * up(x))`` (gated) or
    ``down(act(up(x)))`` (plain), through intermediate names; None for any other forward."""
    forward = _method(node, "forward")
    if forward is None or len(forward.args.args) != 2:
        return None
    argument = forward.args.args[1].arg
    body = [statement for statement in forward.body if not isinstance(statement, ast.Expr)]
    names: dict[str, ast.AST] = {}
    for statement in body[:-1]:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
            return None
        if not isinstance(statement.targets[0], ast.Name):
            return None
        # In order, so that a name assigned again (``h = self.fc1(h); h = self.act(h)``) reads its earlier value.
        names[statement.targets[0].id] = _inlined(statement.value, names)
    if not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return None
    value = _inlined(body[-1].value, names)
    dropout = _dropout_input(value, _dropout_attributes(node))
    if dropout is not None:  # Starcoder2MLP's residual dropout after the down projection
        value = dropout
    if not isinstance(value, ast.Call) or len(value.args) != 1 or _self_attribute(value.func) is None:
        return None
    down, inner = _self_attribute(value.func), value.args[0]
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Mult):
        left = inner.left
        if isinstance(left, ast.Call) and _self_attribute(left.func) == act and len(left.args) == 1:
            gate, up = _projection(left.args[0], argument), _projection(inner.right, argument)
            if gate and up:
                shape = {"pattern": "gated", "gate": gate, "up": up, "down": down, "argument": argument}
                return {**shape, "dropout": True} if dropout is not None else shape
        return None
    if isinstance(inner, ast.Call) and _self_attribute(inner.func) == act and len(inner.args) == 1:
        up = _projection(inner.args[0], argument)
        if up:
            shape = {"pattern": "plain", "up": up, "down": down, "argument": argument}
            return {**shape, "dropout": True} if dropout is not None else shape
    return None


def _dropout_attributes(node: ast.ClassDef) -> set[str]:
    """``self.NAME = nn.Dropout(...)`` attributes of ``__init__``."""
    init = _method(node, "__init__")
    return {
        _self_attribute(statement.targets[0])
        for statement in (ast.walk(init) if init else [])
        if isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, (ast.Attribute, ast.Name))
        and getattr(statement.value.func, "attr", getattr(statement.value.func, "id", None)) == "Dropout"
    } - {None}


def _dropout_input(node: ast.AST, dropouts: set[str]) -> ast.AST | None:
    """X of a dropout of X as the outermost call (``nn.functional.dropout(X, ...)``, ``F.dropout``, a module's
    ``nn.Dropout`` attribute), else None."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    functional = isinstance(node.func, ast.Attribute) and node.func.attr == "dropout" and not _self_attribute(node.func)
    return node.args[0] if functional or _self_attribute(node.func) in dropouts else None


def _is_experts(node: ast.ClassDef) -> bool:
    """Experts stored as 3-D parameters and run in a loop (transformers v5's MoE layout)."""
    forward = _method(node, "forward")
    return forward is not None and any(isinstance(item, ast.For) for item in ast.walk(forward))


def _calls_name(tree: ast.AST, name: str) -> bool:
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
        for node in ast.walk(tree)
    )


def find_blocks(source: ModelSource) -> list[Block]:
    blocks = []
    classes = {node.name: node for node in source.tree.body if isinstance(node, ast.ClassDef)}
    for name, node in classes.items():
        if name.endswith(("RMSNorm", "LayerNorm")) and _method(node, "forward"):
            blocks.append(Block("norm", name, node))
            continue
        activations = activation_attributes(node)
        if len(activations) != 1:
            continue
        ((act, attribute),) = activations.items()
        detail = {"act": act, "config_attribute": attribute}
        if _is_experts(node):
            blocks.append(Block("experts", name, node, detail))
        else:
            shape = mlp_shape(node, act)
            blocks.append(Block("mlp", name, node, {**detail, **(shape or {})}))
    functions = {node.name: node for node in source.tree.body if isinstance(node, ast.FunctionDef)}
    if ROTARY_FUNCTION in functions and any(_calls_name(node, ROTARY_FUNCTION) for node in classes.values()):
        blocks.append(Block("rope", ROTARY_FUNCTION, functions[ROTARY_FUNCTION]))
    causal = classes[source.causal_lm]
    forward = _method(causal, "forward")
    if forward is not None and any(
        isinstance(node, ast.Attribute) and node.attr == "loss_function" for node in ast.walk(forward)
    ):
        blocks.append(Block("loss", source.causal_lm, forward))
    return blocks


def used_classes(model) -> dict[str, list[str]]:
    """Class name -> the qualified names of the model's modules of that class."""
    found: dict[str, list[str]] = {}
    for qualified, module in model.named_modules():
        found.setdefault(type(module).__name__, []).append(qualified)
    return found


def capture_calls(model, class_names: set[str], input_ids) -> dict[str, tuple]:
    """The first module of each class in ``class_names`` with the (args, kwargs, output) of its first call in a
    forward of ``model`` on ``input_ids``."""
    import torch

    calls: dict[str, tuple] = {}
    handles = []
    for module in model.modules():
        name = type(module).__name__
        if name not in class_names:
            continue

        def hook(module, args, kwargs, output, name=name):
            if name not in calls:
                calls[name] = (module, args, kwargs, output)

        handles.append(module.register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            model(input_ids=input_ids)
    except Exception as error:  # noqa: BLE001 - a mini model that does not run is reported in one line
        message = str(error).splitlines()[0] if str(error) else ""
        raise PatchError(
            f"{type(model).__name__} of the mini config fails its forward: {type(error).__name__}: {message}; "
            "nothing written"
        ) from None
    finally:
        for handle in handles:
            handle.remove()
    return calls
