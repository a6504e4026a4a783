"""Where a module reference takes each of the kernel's hyper-parameters, so the generated tests and benchmark can
build and call it with a case's values.

A function reference takes every hyper-parameter as an argument. A module reference may take one in three places:
its constructor (``eps=1e-6``), its ``forward`` (``def forward(self, x, alpha: float = 0.5)``), or neither: its
``__init__`` sets a float attribute without an argument (``self.eps = 1e-6``), which the test sets on the built
module instead.
"""

from __future__ import annotations

import ast

from dataclasses import dataclass

from tools.kernelgen.profile import KernelProfile


@dataclass(frozen=True)
class ReferenceHypers:
    constructor: list[str]
    forward: list[str]
    held: list[str]  # attributes the constructor sets itself

    def forward_keywords(self, hyper: str = "hyper") -> str:
        """The tail of a call of the built module: ``, alpha=hyper['alpha']``."""
        return "".join(f", {name}={hyper}[{name!r}]" for name in self.forward)


def reference_hypers(profile: KernelProfile) -> ReferenceHypers:
    names = [hp.name for hp in profile.hyperparameters]
    if profile.reference.kind != "module":
        return ReferenceHypers(constructor=[], forward=names, held=[])
    constructor_names = {ip.name for ip in profile.module.init_params}
    forward_names = _forward_arguments(profile.reference.source, profile.reference.entry)
    constructor = [name for name in names if name in constructor_names]
    forward = [name for name in names if name in forward_names and name not in constructor_names]
    held = [name for name in names if name not in constructor and name not in forward]
    return ReferenceHypers(constructor=constructor, forward=forward, held=held)


def forward_hypers(profile: KernelProfile) -> list[str]:
    """The hyper-parameters the generated module's forward takes, as the reference module's forward does (an MLP's
    come from its config; a function reference's go to the generated constructor)."""
    if profile.reference.kind != "module" or profile.module.kind == "mlp":
        return []
    return reference_hypers(profile).forward


def module_call_keywords(profile: KernelProfile, hyper: str = "hyper") -> tuple[list[str], list[str]]:
    """The generated module's hyper-parameters as a test passes a case ``hyper`` to it: (constructor keywords,
    forward keywords), ``name=hyper['name']`` each."""
    in_forward = forward_hypers(profile)
    names = [hp.name for hp in profile.hyperparameters]
    constructor = [f"{name}={hyper}[{name!r}]" for name in names if name not in in_forward]
    return constructor, [f"{name}={hyper}[{name!r}]" for name in in_forward]


def _forward_arguments(source: str, entry: str) -> set[str]:
    """The argument names of ``entry.forward`` in ``source`` (none where the class or its forward is not there)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name == entry):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "forward":
                arguments = item.args
                return {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
    return set()


__all__ = ["ReferenceHypers", "forward_hypers", "module_call_keywords", "reference_hypers"]
