"""Parameter vectors a module reference holds and reads by element (PolyNorm's ``self.weight[0]``, ``[1]``, ``[2]``).

The profile keeps one scalar parameter per element read (``weight_0``, ...), which is what the derived math and
the kernels take. Where the kernel is a derived row kernel, its interface takes the vector whole, as the reference
holds it and as upstream Liger's ``LigerPolyNormFunction.apply(x, weight, bias, eps)`` takes it: the Function,
the functional, the module, the tests and the validation harness see one ``weight`` of ``[n]`` and its gradient
of ``[n]``; the host wrappers hand the kernels its elements (views, no copy) and sum the elements' per-program
partial gradients from one ``[n, n_programs]`` buffer."""

from __future__ import annotations

import dataclasses
import re

from dataclasses import dataclass

from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import LearnableParameter

VECTOR = "vector"  # the shape of a held vector in the interface's parameters (never in a profile file)


@dataclass
class HeldVector(LearnableParameter):
    """A parameter vector taken whole by the interface; ``elements``: the profile's scalar parameters it holds, in
    index order."""

    elements: tuple[str, ...] = ()


def held_vectors(parameters: list[LearnableParameter]) -> dict[str, list[LearnableParameter]]:
    """Scalar parameters that are the elements of one vector a module reference holds itself (``self.weight`` read
    as ``self.weight[0]``, ``self.weight[1]``, ... every element of it), by the vector's attribute: the generated
    module holds that vector whole, so that its state dict is the reference's."""
    found: dict[str, dict[int, LearnableParameter]] = {}
    for prm in parameters:
        match = re.fullmatch(r"([A-Za-z_]\w*)\[(\d+)\]", prm.attribute)
        if match and prm.shape == "scalar" and not prm.enabled_by and not prm.init_arg and prm.rank in (None, 0):
            found.setdefault(match.group(1), {})[int(match.group(2))] = prm
    return {
        held: [elements[index] for index in range(len(elements))]
        for held, elements in found.items()
        if sorted(elements) == list(range(len(elements)))
    }


def vectors_taken_whole(profile: KernelProfile) -> dict[str, list[str]]:
    """The vectors the interface takes whole (vector -> its element parameters' names): a module reference's held
    vectors where the kernel is a derived row kernel. Other templates take the elements one by one."""
    if profile.reference.kind != "module" or profile.template != "rows":
        return {}
    return {vector: [prm.name for prm in elements] for vector, elements in held_vectors(profile.parameters).items()}


def hold_vectors_whole(profile: KernelProfile) -> KernelProfile:
    """``profile`` as the interface sees it: each vector taken whole in place of its elements (at the first one's
    place), a ``HeldVector`` parameter named as the vector. Profiles without one are returned as they are."""
    vectors = vectors_taken_whole(profile)
    if not vectors:
        return profile
    first = {elements[0]: vector for vector, elements in vectors.items()}
    inside = {name for elements in vectors.values() for name in elements}
    parameters = []
    for prm in profile.parameters:
        if prm.name in first:
            vector = first[prm.name]
            parameters.append(
                HeldVector(
                    name=vector, shape=VECTOR, init="constant", attribute=vector, elements=tuple(vectors[vector])
                )
            )
        elif prm.name not in inside:
            parameters.append(prm)
    return dataclasses.replace(profile, parameters=parameters)


def parameter_shape(prm: LearnableParameter, channel: int, group: int = 0) -> tuple[int, ...]:
    """The shape a parameter of the interface is drawn in: ``[1, ..., channel]`` as the reference holds a per-channel
    one, ``[group]`` for one value per channel of a grouped kernel, ``[n]`` for a vector of n elements, ``()`` for
    a scalar."""
    if prm.shape == "channel":
        return (1,) * (prm.held_rank - 1) + (channel,)
    if prm.shape == "group":
        return (group,)
    if isinstance(prm, HeldVector):
        return (len(prm.elements),)
    return ()
