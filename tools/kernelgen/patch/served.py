"""What a target's existing ``apply_liger_kernel_to_<model>`` already does, found by running it on the mini model.

The function is looked up in the target's model-type table (else by its name), imported from the target checkout
and run twice: before a mini model is built (the class swaps) and on an already built one (``model=``). A block is
served when its modules come out of Liger classes, with a rebound forward or with a Liger activation inside;
the rotary function and the causal LM's forward when the modeling module's or the class's are replaced. Everything
the function changed in ``transformers`` and ``torch`` is put back afterwards.
"""

from __future__ import annotations

import ast
import importlib
import inspect

from tools.kernelgen.layout import MONKEY_PATCH
from tools.kernelgen.patch.model import ModelSource
from tools.kernelgen.patch.model import quiet_transformers
from tools.kernelgen.patch.restore_transformers import transformers_restored
from tools.kernelgen.repo import LigerRepo

TABLE = "MODEL_TYPE_TO_APPLY_LIGER_FN"


def existing_apply_function(repo: LigerRepo, model_type: str) -> str | None:
    """The name of the target's apply function for ``model_type``: its table entry, else the conventional name."""
    if not repo.exists(MONKEY_PATCH):
        return None
    tree = ast.parse(repo.read(MONKEY_PATCH))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == TABLE for t in node.targets):
            if isinstance(node.value, ast.Dict):
                for key, value in zip(node.value.keys, node.value.values):
                    if isinstance(key, ast.Constant) and key.value == model_type and isinstance(value, ast.Name):
                        return value.id
    name = f"apply_liger_kernel_to_{model_type}"
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    return name if name in defined else None


def _served(module, class_name: str) -> bool:
    if type(module).__name__ != class_name or "forward" in vars(module):
        return True
    return any(type(child).__name__.startswith("Liger") for child in module.children())


def _computes(model, reference, capture) -> str | None:
    """None when the patched ``model``'s module at the captured place, given the unpatched module's weights,
    computes the unpatched module's output on the captured call; else what it does instead."""
    import torch

    qualified, args, kwargs, output = capture
    patched = model.get_submodule(qualified)
    try:
        patched.load_state_dict(reference.get_submodule(qualified).state_dict())
        with torch.no_grad():
            ours = patched(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - a module that cannot run here is not judged here
        return None if "driver" in str(error) else f"{qualified} fails: {type(error).__name__}: {error}"
    ours = ours[0] if isinstance(ours, tuple) else ours
    output = output[0] if isinstance(output, tuple) else output
    if torch.allclose(ours.float(), output.float(), atol=1e-5, rtol=1e-5):
        return None
    difference = (ours.float() - output.float()).abs().max().item()
    return f"{qualified} computes another output than the model's own (max difference {difference:.2e})"


def coverage(repo: LigerRepo, source: ModelSource, function_name: str, rows) -> dict[str, list[str]]:
    """Block -> what the existing function leaves undone or does otherwise ([] when it serves the block in both
    ways and its modules compute what the model's did, on the mini model)."""
    blocks = [row.block.name for row in rows]
    captures = {row.block.name: row.capture for row in rows if row.capture is not None}
    reference = source.build()
    from tools.kernelgen.variants.probe import checkout_kernels

    misses: dict[str, list[str]] = {name: [] for name in blocks}
    with checkout_kernels(repo.root):
        apply = getattr(importlib.import_module("liger_kernel.transformers.monkey_patch"), function_name)
        accepted = set(inspect.signature(apply).parameters)
        for way in ("class swaps", "model="):
            module = source.module()
            causal = getattr(module, source.causal_lm)
            with transformers_restored(module, causal), quiet_transformers():
                rope_before, forward_before = getattr(module, "apply_rotary_pos_emb", None), causal.forward
                if way == "class swaps":
                    apply()
                    model = source.build()
                else:
                    model = source.build()
                    apply(model=model)
                for name in blocks:
                    if name == "apply_rotary_pos_emb":
                        if getattr(module, name, None) is rope_before:
                            misses[name].append(f"{way}: the modeling module's {name} is left as it is")
                    elif name == f"{source.causal_lm}.forward":
                        replaced = causal.forward is not forward_before or "forward" in vars(model)
                        if not replaced:
                            misses[name].append(f"{way}: {name} is left as it is")
                    elif name == source.causal_lm:
                        if "cross_entropy" not in accepted:
                            misses[name].append("no cross_entropy option")
                    else:
                        left = [
                            q for q, m in model.named_modules() if type(m).__name__ == name and not _served(m, name)
                        ]
                        if left:
                            shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
                            misses[name].append(f"{way}: {len(left)} {name} left ({shown})")
                        elif name in captures:
                            problem = _computes(model, reference, captures[name])
                            if problem:
                                misses[name].append(f"{way}: {problem}")
    return misses
