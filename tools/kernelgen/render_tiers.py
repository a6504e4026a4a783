"""Template variables for tier 2 (row reduction) and tier 3 (fused loss over long rows)."""

from __future__ import annotations

from tools.kernelgen.profile import KernelProfile


def _signature(names, hypers) -> str:
    parts = list(names) + [f"{hp.name}={hp.default!r}" if hp.default is not None else hp.name for hp in hypers]
    return ", ".join(parts)


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


def context_for(profile: KernelProfile) -> dict:
    if profile.tier == 2:
        return tier2_context(profile)
    if profile.tier == 3:
        from tools.kernelgen.render_tier3 import tier3_context

        return tier3_context(profile)
    raise ValueError(f"tier {profile.tier} has no templates")
