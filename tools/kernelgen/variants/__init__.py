"""Variants become options, not duplicates: before ``new`` generates a kernel, look for an existing kernel of the
target checkout (generated or hand-written) that computes the same reference at some values of its options.

``find_variant(repo, profile)`` answers the one line ``new`` refuses with, or None. Which kernels can take the
reference's arguments and which option values are worth trying is read from the kernels' files
(``variants.options``); whether one computes the reference is decided by running it (``variants.probe``).
"""

from __future__ import annotations

from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.repo import LigerRepo


class VariantError(ValueError):
    """The reference is an existing kernel at some option values; the message names the call."""


def find_variant(repo: LigerRepo, profile: KernelProfile) -> str | None:
    """``KERNEL computes it: CALL`` when an existing kernel of ``repo`` computes ``profile``'s reference, else None.

    A profile without its reference's source (hand-written math) is never a variant: there is nothing to run."""
    if not profile.reference.source or not profile.reference.entry:
        return None
    from tools.kernelgen.variants.options import call_plans
    from tools.kernelgen.variants.options import call_text

    plans = call_plans(repo, profile)
    if not plans:
        return None
    from tools.kernelgen.variants.probe import matching_options

    found = matching_options(repo.root, profile, plans)
    if found is None:
        return None
    plan, values = found
    return f"the existing kernel '{plan.name}' computes it: {call_text(plan, values, {hp.name: hp.default for hp in profile.hyperparameters})}"


def check_not_variant(repo: LigerRepo, profile: KernelProfile) -> None:
    """Raise ``VariantError`` when ``new`` would duplicate an existing kernel (``--force-new`` skips this)."""
    found = find_variant(repo, profile)
    if found:
        raise VariantError(
            f"'{profile.operation_name}' is a variant: {found}; use it, or pass --force-new to generate a new "
            f"kernel anyway; nothing written"
        )


__all__ = ["VariantError", "check_not_variant", "find_variant"]
