"""Names in the ops file that cannot clash: the user's names (inputs, outputs, hyper-parameters, parameters) against
the names the templates introduce there (locals such as ``program``, ``mask``, ``cols``, kernel arguments such as
``n_cols`` and ``BLOCK_ROWS``, helpers, modules).

The templates' own names are found by rendering the ops file once with every user name replaced by a probe no
template writes: every identifier of that text without a probe is the templates'. A user name that is one of them,
or whose derived names are (``grad_{name}``, ``{name}_ptr``, ...: the probe's identifiers with the name put back),
gets a kernel-side name for the ops file alone (``mask`` -> ``mask_in``). The ops file is called by position from
the module, the functional wrapper and the tests, so the public names the user chose stay as they are everywhere
else.
"""

from __future__ import annotations

import ast
import copy
import keyword
import re

from collections.abc import Callable

from tools.kernelgen.derivation import derived_by_renaming
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import from_dict
from tools.kernelgen.profile import to_dict
from tools.kernelgen.synth.naming import renamed_name

_PROBE = "kgprobe{}q"
# Fields of the math whose values are words of the profile's language, not formulas.
_WORDS = frozenset({"reduce", "rounding", "choices", "reduction"})
_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?!\w)")


def user_names(profile: KernelProfile) -> list[str]:
    groups = (profile.inputs, profile.outputs, profile.hyperparameters, profile.parameters)
    return [item.name for group in groups for item in group]


def kernel_side_names(profile: KernelProfile, render_ops: Callable[[KernelProfile], str]) -> dict[str, str]:
    """``{user name: kernel-side name}`` for the user names that clash with the ops file's own names in a function
    where they meet (see the module docstring); ``render_ops`` renders the ops file of a profile."""
    names, probes, scopes = _probed(profile, render_ops)
    mapping: dict[str, str] = {}
    produced: set[str] = set()  # the identifiers the names chosen so far make (``x``, ``grad_x``, ``GRAD_X``, ...)
    for name in names:
        probe = probes[name]
        # (the templates' names of a function, the names made from this probe there), where the probe occurs
        meetings = [
            ({n for n in scope if "kgprobe" not in n.lower()}, [n for n in scope if probe in n.lower()])
            for scope in scopes
            if any(probe in n.lower() for n in scope)
        ]

        def spellings(candidate: str, meetings=meetings, probe=probe) -> set[str]:
            return {candidate} | {_spelled(n, probe, candidate) for _, made in meetings for n in made}

        def clashes(candidate: str, meetings=meetings, probe=probe) -> bool:
            in_templates = any(_spelled(n, probe, candidate) in own for own, made in meetings for n in made)
            return in_templates or bool(spellings(candidate) & produced)

        chosen = name
        if clashes(name):
            stem = f"{name}_out" if any(output.name == name for output in profile.outputs) else f"{name}_in"
            chosen, number = stem, 1
            while chosen in names or clashes(chosen) or keyword.iskeyword(chosen):
                number += 1
                chosen = f"{stem}{number}"
            mapping[name] = chosen
        produced |= spellings(chosen)
    return mapping


def meeting_names(profile: KernelProfile, render_ops: Callable[[KernelProfile], str]) -> set[str]:
    """The ops file's own names in the functions where the user's names appear (what they must not clash with)."""
    _, _, scopes = _probed(profile, render_ops)
    met = [scope for scope in scopes if any("kgprobe" in name.lower() for name in scope)]
    return {name for scope in met for name in scope if "kgprobe" not in name.lower()}


def _probed(profile: KernelProfile, render_ops) -> tuple[list[str], dict[str, str], list[set[str]]]:
    """The user's names, the probe standing for each, and the name sets of the ops file rendered with the probes."""
    names = user_names(profile)
    probes = {name: _PROBE.format(index) for index, name in enumerate(names)}
    probed = renamed_profile(profile, probes)
    with derived_by_renaming(profile, probed, probes):  # the math's names, without deriving it over probes again
        return names, probes, _scopes(render_ops(probed))


def _spelled(identifier: str, probe: str, name: str) -> str:
    """A probe's identifier with the name in its place (in capitals where the template wrote the probe so: a
    ``GRAD_{NAME}`` flag)."""
    return identifier.replace(probe, name).replace(probe.upper(), name.upper())


def _scopes(source: str) -> list[set[str]]:
    """The names each function of ``source`` reads, binds or takes, each with the module's own names (which a local
    of the same name would hide): variables and arguments, not attributes or keywords of calls."""
    tree = ast.parse(source)
    module_names = set()
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module_names.add(statement.name)
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            module_names.update((alias.asname or alias.name).split(".")[0] for alias in statement.names)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            module_names.update(
                node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)
            )
    scopes = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found = {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}
            found |= {child.arg for child in ast.walk(node) if isinstance(child, ast.arg)}
            scopes.append(found | module_names)
    return scopes


def renamed_profile(profile: KernelProfile, mapping: dict[str, str]) -> KernelProfile:
    """A copy of ``profile`` whose tensors and hyper-parameters are named by ``mapping`` in every section the ops
    file is rendered from, their formulas included (``grad_{name}`` follows its name); the reference's source,
    descriptions and the benchmark keep the user's names."""
    if not mapping:
        return profile
    # Every user name maps (most to themselves), so that an input named grad_x is not taken for x's gradient.
    mapping = {name: mapping.get(name, name) for name in user_names(profile)}
    data = copy.deepcopy(to_dict(profile))
    for section in ("inputs", "outputs", "hyperparameters", "parameters"):
        for item in data.get(section) or []:
            item["name"] = renamed_name(item["name"], mapping)
            for key in ("unsqueeze", "shift"):
                if item.get(key) and not item[key].lstrip("-").isdigit():  # a hyper-parameter's name
                    item[key] = renamed_name(item[key], mapping)
    for item in (data.get("module") or {}).get("init_params") or []:
        item["name"] = renamed_name(item["name"], mapping)
    data["forward_computation"] = _renamed(data.get("forward_computation"), mapping)
    data["math"] = _renamed(data.get("math"), mapping)
    loss = (data["math"] or {}).get("loss") or {}
    hypers = {hp.name for hp in profile.hyperparameters}
    if loss.get("reduction") in hypers:  # the hyper-parameter that chooses the reduction, else a literal one
        loss["reduction"] = renamed_name(loss["reduction"], mapping)
    lanes = (data["math"] or {}).get("lanes") or {}
    if lanes.get("groups"):  # the first row group's tensors, renamed as keys too
        lanes["groups"] = [{renamed_name(key, mapping): value for key, value in g.items()} for g in lanes["groups"]]
    if isinstance((data["math"] or {}).get("outputs"), dict):
        data["math"]["outputs"] = {renamed_name(key, mapping): value for key, value in data["math"]["outputs"].items()}
    tiling = data.get("tiling") or {}
    for key in ("forward_math", "backward_math"):
        tiling[key] = _renamed(tiling.get(key), mapping)
    notes = data.get("notes") or {}
    if notes.get("gradient_formulas"):
        formulas = notes["gradient_formulas"]
        notes["gradient_formulas"] = {
            renamed_name(key, mapping): _renamed(value, mapping) for key, value in formulas.items()
        }
    return from_dict(data, source=f"<{profile.operation_name} with kernel-side names>", validate=False)


def renamed_text(text: str, mapping: dict[str, str]) -> str:
    """Every variable of a formula or statement renamed by ``mapping`` (keywords of calls and words inside strings
    stay)."""
    return _IDENTIFIER.sub(lambda match: _renamed_match(match, mapping), text)


def _renamed(value, mapping: dict[str, str]):
    """Every identifier in the strings of ``value`` (values only, not the keys of its dicts) renamed."""
    if isinstance(value, str):
        return renamed_text(value, mapping)
    if isinstance(value, list):
        return [_renamed(item, mapping) for item in value]
    if isinstance(value, dict):
        return {key: item if key in _WORDS else _renamed(item, mapping) for key, item in value.items()}
    return value


def _renamed_match(match: re.Match, mapping: dict[str, str]) -> str:
    """A name of a formula or statement renamed, unless it is no variable: an attribute (``.dtype``, left out by the
    pattern), a keyword of a call (``hardtanh(x, min_val=lo)``) or a word inside a string (``approximate='tanh'``)."""
    before, after = match.string[: match.start()], match.string[match.end() :]
    depth = sum(before.count(opening) - before.count(closing) for opening, closing in ("()", "[]"))
    keyword_argument = depth > 0 and re.match(r"\s*=(?!=)", after) is not None
    in_string = before.count("'") % 2 == 1 or before.count('"') % 2 == 1
    return match.group(0) if keyword_argument or in_string else renamed_name(match.group(0), mapping)


__all__ = ["kernel_side_names", "meeting_names", "renamed_profile", "renamed_text", "user_names"]
