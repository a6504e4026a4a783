"""Template variables for tier 3: the softmax-loss family (cross entropy with its feature switches)."""

from __future__ import annotations

from tools.kernelgen.profile import KernelProfile

# The tier-3 template implements these switches; a profile names each as a hyper-parameter.
REQUIRED_HYPERPARAMETERS = (
    "ignore_index",
    "lse_square_scale",
    "label_smoothing",
    "reduction",
    "softcap",
    "return_z_loss",
)
REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


class Tier3ProfileError(ValueError):
    pass


def tier3_context(profile: KernelProfile) -> dict:
    if len(profile.inputs) != 2:
        raise Tier3ProfileError(
            f"tier 3 profile '{profile.operation_name}': inputs must be [logits, target], got "
            f"{[t.name for t in profile.inputs]}"
        )
    names = [hp.name for hp in profile.hyperparameters]
    missing = [name for name in REQUIRED_HYPERPARAMETERS if name not in names]
    if missing:
        raise Tier3ProfileError(
            f"tier 3 profile '{profile.operation_name}': the softmax-loss template needs hyperparameters "
            f"{', '.join(missing)} (see examples/cross_entropy.yaml)"
        )
    x, target = profile.inputs[0].name, profile.inputs[1].name
    hypers = profile.hyperparameters
    signature = ", ".join([x, target] + [f"{hp.name}={hp.default!r}" for hp in hypers])
    return {
        "x": x,
        "target": target,
        "reductions": REDUCTIONS,
        "fwd_signature": signature,
        "apply_signature": signature,
        "fwd_call_args": [x, target] + names,
        "apply_returns": [f"{x}_grad", "None"] + ["None"] * len(hypers),
        "defaults": {hp.name: hp.default for hp in hypers},
    }
