"""Template variables for tier 2 (row reduction) and tier 3 (the softmax-loss family over long rows).

The profile is validated before rendering, so the fields each tier needs are there (see ``validate_profile``).
"""

from __future__ import annotations

from tools.kernelgen.profile import KernelProfile

# Reduction names the tier-3 kernel receives as a constexpr.
REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _signature(names, hypers) -> str:
    """``x, weight, eps=1e-06``: every hyper-parameter keeps its default (None included: a feature that is off)."""
    return ", ".join(list(names) + [f"{hp.name}={hp.default!r}" for hp in hypers])


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
        "fwd_signature": _signature([x] + param_names, hypers),
        "fwd_call_args": [x] + param_names + hyper_names,
        "bwd_signature": ", ".join([f"grad_{y}", x] + param_names + stats + ["BLOCK_SIZE", "num_warps"] + hyper_names),
        "bwd_call_args": [f"grad_{y}", x]
        + param_names
        + stats
        + ["ctx.BLOCK_SIZE", "ctx.num_warps"]
        + [f"ctx.{name}" for name in hyper_names],
        "apply_signature": _signature([x] + param_names, hypers),
        "saved": saved,
        "apply_returns": [f"grad_{x}"] + [f"grad_{name}" for name in param_names] + ["None"] * len(hypers),
    }


def tier3_context(profile: KernelProfile) -> dict:
    x, target = profile.inputs[0].name, profile.inputs[1].name
    hypers = profile.hyperparameters
    signature = _signature([x, target], hypers)
    return {
        "x": x,
        "target": target,
        "reductions": REDUCTIONS,
        "fwd_signature": signature,
        "apply_signature": signature,
        "fwd_call_args": [x, target] + [hp.name for hp in hypers],
        "apply_returns": [f"{x}_grad", "None"] + ["None"] * len(hypers),
        "defaults": {hp.name: hp.default for hp in hypers},
    }


def context_for(profile: KernelProfile) -> dict:
    contexts = {2: tier2_context, 3: tier3_context}
    if profile.tier not in contexts:
        raise ValueError(f"tier {profile.tier} has no templates")
    return contexts[profile.tier](profile)
