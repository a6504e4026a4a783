"""Template variables of each tier: 1 element-wise, 2 row reduction, 3 the softmax-loss family over long rows.

The profile is validated before rendering, so the fields each tier needs are there (see ``validate_profile``).
"""

from __future__ import annotations

import ast
import textwrap

from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.synth.printer import TANH_HELPER

# Reduction names the tier-3 kernel receives as a constexpr.
REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def signature(items, required: frozenset[str] = frozenset()) -> str:
    """``a, b, eps=1e-06``: plain names for tensors and required sizes, ``name=default`` for hyper-parameters
    (a default of None stays None: an optional feature that is off)."""
    plain, defaulted = [], []
    for item in items:
        if isinstance(item, str):
            plain.append(item)
        elif item.name in required:
            plain.append(item.name)
        else:
            defaulted.append(f"{item.name}={item.default!r}")
    return ", ".join(plain + defaulted)


def names_read(statements: list[str]) -> set[str]:
    """Names a list of statements reads before (or without) assigning them."""
    assigned: set[str] = set()
    read: set[str] = set()
    for statement in statements:
        tree = ast.parse(statement)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in assigned:
                read.add(node.id)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                assigned.add(node.id)
    return read


def tier1_context(profile: KernelProfile) -> dict:
    inputs = [t.name for t in profile.inputs]
    outputs = [t.name for t in profile.outputs]
    grad_inputs = [t.name for t in profile.inputs if t.requires_grad]
    params = profile.parameters
    param_names = [prm.name for prm in params]
    hypers = profile.hyperparameters
    hyper_names = [hp.name for hp in hypers]
    fwd_reads = names_read(profile.math.forward)
    bwd_reads = names_read(profile.math.backward)
    grad_outputs = [f"grad_{name}" for name in outputs]
    backward_returns = [f"grad_{name}" for name in grad_inputs] + [f"grad_{name}" for name in param_names]
    return {
        "fwd_inputs": [name for name in inputs if name in fwd_reads],
        "fwd_params": [prm for prm in params if prm.name in fwd_reads],
        "bwd_inputs": [name for name in inputs if name in bwd_reads],
        "bwd_params": [prm for prm in params if prm.name in bwd_reads],
        "bwd_grad_outputs": [name for name in grad_outputs if name in bwd_reads],
        "forward": profile.math.forward,
        "backward": profile.math.backward,
        "uses_tanh": any(f"{TANH_HELPER}(" in line for line in profile.math.forward + profile.math.backward),
        "in_place": _in_place_gradients(profile),
        "bwd_signature": ", ".join(inputs + param_names + grad_outputs + hyper_names),
        "bwd_call_args": inputs + param_names + grad_outputs + [f"ctx.{name}" for name in hyper_names],
        "outputs_viewed": [f"{name}.view(*shape)" for name in outputs],
        "grad_input_names": [f"grad_{name}" for name in grad_inputs],
        "partial_names": [f"grad_{name}_partial" for name in param_names],
        "backward_returns": backward_returns,
        "backward_return_exprs": [f"grad_{name}.view(*shape)" for name in grad_inputs]
        + [f"grad_{name}" for name in param_names],
        "apply_returns": [f"grad_{name}" if name in grad_inputs else "None" for name in inputs]
        + [f"grad_{name}" for name in param_names]
        + ["None"] * len(hypers),
        "grad_outputs": grad_outputs,
        "precision_note": _precision_note(profile),
    }


def _in_place_gradients(profile: KernelProfile) -> bool:
    """Gradients overwrite the saved inputs only where the inputs are dead: by default when the module itself
    made them (the gate/up projections of an MLP), as Liger's swiglu does; never for user-owned tensors."""
    if profile.backward.in_place_gradients is None:
        return profile.module.kind == "mlp"
    return profile.backward.in_place_gradients


def _precision_note(profile: KernelProfile) -> list[str]:
    ops = ", ".join(profile.precision_sensitive_ops)
    text = "Loads are upcast to fp32"
    if ops:
        text += f" (precision-sensitive in bf16/fp16: {ops})"
    text += ": the math runs in fp32 and rounds once, on store."
    return textwrap.wrap(text, width=100)


def tier2_context(profile: KernelProfile) -> dict:
    x = profile.inputs[0].name
    y = profile.outputs[0].name
    params = profile.parameters
    param_names = [prm.name for prm in params]
    hypers = profile.hyperparameters
    hyper_names = [hp.name for hp in hypers]
    stats = list(profile.backward.saved_row_statistics)
    in_place = bool(profile.backward.in_place_gradients)
    saved = [x] + param_names + stats
    return {
        "x": x,
        "y": y,
        "stats": stats,
        "row_statistics": profile.math.row_statistics,
        "forward": profile.math.forward,
        "backward": profile.math.backward,
        "in_place": in_place,
        "bwd_signature": ", ".join([f"grad_{y}", x] + param_names + stats + ["BLOCK_SIZE", "num_warps"] + hyper_names),
        "bwd_call_args": [f"grad_{y}", x]
        + param_names
        + stats
        + ["ctx.BLOCK_SIZE", "ctx.num_warps"]
        + [f"ctx.{name}" for name in hyper_names],
        "saved": saved,
        "apply_returns": [f"grad_{x}"] + [f"grad_{name}" for name in param_names] + ["None"] * len(hypers),
    }


def tier3_context(profile: KernelProfile) -> dict:
    x, target = profile.inputs[0].name, profile.inputs[1].name
    hypers = profile.hyperparameters
    return {
        "x": x,
        "target": target,
        "reductions": REDUCTIONS,
        "apply_returns": [f"{x}_grad", "None"] + ["None"] * len(hypers),
        "defaults": {hp.name: hp.default for hp in hypers},
    }


def context_for(profile: KernelProfile) -> dict:
    contexts = {1: tier1_context, 2: tier2_context, 3: tier3_context}
    if profile.tier not in contexts:
        raise ValueError(f"tier {profile.tier} has no templates")
    return contexts[profile.tier](profile)
