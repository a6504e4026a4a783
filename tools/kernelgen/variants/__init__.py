"""Variants become options, not duplicates: before ``new`` generates a kernel, look for an existing kernel of the
target checkout (generated or hand-written) that computes the same reference at some values of its options.

``find_variant(repo, profile)`` answers the one line ``new`` refuses with, or None. Which kernels can take the
reference's arguments and which option values are worth trying is read from the kernels' files
(``variants.options``); whether one computes the reference is decided by running it (``variants.probe``).
"""

from __future__ import annotations

import dataclasses

from tools.kernelgen.analyze.halves import split_of
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.repo import LigerRepo


class VariantError(ValueError):
    """The reference is an existing kernel at some option values; the message names the call."""


def find_variant(repo: LigerRepo, profile: KernelProfile) -> str | None:
    """``KERNEL computes it: CALL`` when an existing kernel of ``repo`` computes ``profile``'s reference, else None.

    A profile without its reference's source (hand-written math) is never a variant: there is nothing to run."""
    found = _variant(repo, profile)
    return found[1] if found else None


def _variant(repo: LigerRepo, profile: KernelProfile, fused_linear: bool = False) -> tuple[str, str] | None:
    """(the existing kernel's name, ``KERNEL computes it: CALL``) for ``find_variant``; with ``fused_linear``, a
    kernel that has its fused linear form first."""
    if not profile.reference.source or not profile.reference.entry:
        return None
    from tools.kernelgen.variants.options import call_plans

    plans = call_plans(repo, profile)
    if not plans:
        return None
    from tools.kernelgen.variants.probe import matching_options

    fused = [plan for plan in plans if repo.exists(kernel_paths(f"fused_linear_{plan.name}")["ops"])]
    found = matching_options(repo.root, profile, fused) if fused_linear and fused else None
    found = found or matching_options(repo.root, profile, plans)
    if found is None:
        return None
    call = found.call(profile)
    # A soft target the kernel takes as data (a teacher's distribution): the one difference, said in the line.
    named = {name: param if param == name else f"{param} ({name})" for name, param in found.plan.tensors.items()}
    data = "".join(f", with no gradient for {named[name]}" for name in sorted(found.without_gradient))
    data += " (forward compared; its backward does not run on this machine)" if found.backward_unchecked else ""
    # Inputs that are halves of the reference's one argument: the call names the halves, so say where they come from.
    split = split_of(profile.notes.remarks)
    data += f", where {split}" if split else ""
    if found.rows_only:  # the reference flattens [B, T, V] logits itself; this kernel takes [rows, classes]
        data += (
            f", on [rows, classes]: flatten 3-d inputs first, as the reference does: {found.flattened_call(profile)}"
        )
    return found.plan.name, f"the existing kernel '{found.plan.name}' computes it: {call}{data}"


def existing_option(repo: LigerRepo, name: str, profile: KernelProfile) -> str | None:
    """``CALL`` when kernel ``name`` already computes ``profile``'s reference, its hyper-parameters moved off their
    defaults included, through options it has (its functional's, else those of ``Function.apply``): what ``modify``
    would add is there under another name. None otherwise, and for a reference without source."""
    if not profile.reference.source or not profile.reference.entry:
        return None
    from tools.kernelgen.variants.options import Bound
    from tools.kernelgen.variants.options import call_plans_of
    from tools.kernelgen.variants.options import reference_literals
    from tools.kernelgen.variants.probe import matching_options
    from tools.kernelgen.variants.probe import moved_values

    # Searched off the defaults: at them the kernel as it is computes the reference already (modify's premise), and
    # an option bound to a hyper-parameter would bring its output no closer there.
    hypers = [dataclasses.replace(hp, default=(moved_values(hp) or [hp.default])[0]) for hp in profile.hyperparameters]
    moved = dataclasses.replace(profile, hyperparameters=hypers)
    literals = reference_literals(profile.reference.source, profile.reference.entry)
    for through_function in (False, True):
        plans = call_plans_of(repo, name, moved, literals, through_function=through_function)
        found = matching_options(repo.root, moved, plans) if plans else None
        # A match that binds none of the reference's hyper-parameters to an option is the kernel as it is: the
        # hyper-parameters change nothing it computes, which modify says on its own.
        if found is not None and any(isinstance(value, Bound) for value in found.values.values()):
            return found.call(profile)
    return None


def check_not_variant(repo: LigerRepo, profile: KernelProfile, fused_linear: bool = False) -> None:
    """Raise ``VariantError`` when ``new`` would duplicate an existing kernel (``--force-new`` skips this). With
    ``fused_linear`` (the loss asked for with its fused linear form), the line also says whether that kernel has one
    (``fused_linear_KERNEL``): only a kernel generated with it does."""
    found = _variant(repo, profile, fused_linear)
    if not found:
        return
    name, line = found
    fused = f"fused_linear_{name}"
    if fused_linear and not repo.exists(kernel_paths(fused)["ops"]):
        raise VariantError(
            f"'{profile.operation_name}' is a variant: {line}, but '{name}' has no fused linear form; pass "
            f"--force-new to generate the loss (a copy of '{name}') and its fused linear form anyway; nothing written"
        )
    if fused_linear:
        line += f"; its fused linear form is '{fused}'"
    raise VariantError(
        f"'{profile.operation_name}' is a variant: {line}; use it, or pass --force-new to generate a new kernel "
        f"anyway; nothing written"
    )


__all__ = ["VariantError", "check_not_variant", "existing_option", "find_variant"]
