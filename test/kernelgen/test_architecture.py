"""kernelgen's modules import one way, following the pipeline: cli -> analyze -> synth -> render -> insert -> write,
with validate and modify beside new. Function-local imports count: they hide a cycle, they do not remove it."""

import ast
import itertools

from pathlib import Path

import pytest

from test.kernelgen.conftest import REPO_ROOT

PACKAGE = "tools.kernelgen"
SOURCE = REPO_ROOT / "tools" / "kernelgen"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in SOURCE.rglob("*.py")}


def _imports(module: str) -> set[str]:
    """kernelgen modules ``module`` imports anywhere in its body (a submodule's own package excluded)."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in MODULES)
    # Importing a package's own submodule runs the package first; that is not an import of it by the package.
    return {name for name in found if name != module and not module.startswith(f"{name}.")}


GRAPH = {module: _imports(module) for module in MODULES}


def _component(module: str) -> str:
    """The pipeline stage a module belongs to: ``tools.kernelgen.analyze.trace`` -> ``analyze``."""
    rest = module[len(PACKAGE) + 1 :] if module != PACKAGE else ""
    return rest.split(".")[0] or "<package>"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_import_scan_sees_function_local_imports():
    # cli imports its commands inside the command functions (fast --help): the scan must still see them.
    assert f"{PACKAGE}.generate" in GRAPH[f"{PACKAGE}.cli"]


def test_no_module_import_cycle():
    assert _cycle(GRAPH) is None, " -> ".join(_cycle(GRAPH))


def test_no_cycle_between_pipeline_stages():
    stages: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        stages.setdefault(_component(module), set()).update(
            _component(target) for target in targets if _component(target) != _component(module)
        )
    assert _cycle(stages) is None, " -> ".join(_cycle(stages))


@pytest.mark.parametrize("stage, later", [("analyze", "validate"), ("analyze", "render"), ("analyze", "generate")])
def test_an_early_stage_imports_nothing_from_a_later_one(stage, later):
    offenders = sorted(
        (module, target)
        for module, targets in GRAPH.items()
        if _component(module) == stage
        for target in targets
        if _component(target) == later
    )
    assert offenders == []


def test_argparse_lives_in_cli_only():
    users = [module for module, path in MODULES.items() if "argparse" in path.read_text()]
    assert users == [f"{PACKAGE}.cli"]


def test_the_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    assert list(itertools.islice(sorted(GRAPH), 1))  # the package was found at all
