"""Fixtures for the generator's tests: throw-away Liger checkouts to generate into."""

import contextlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys

from pathlib import Path

import pytest

from tools.kernelgen.checkout_lock import LOCK_NAME
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import OPS_INIT
from tools.kernelgen.layout import TRANSFORMERS_INIT
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.record import recorded_kernels
from tools.kernelgen.repo import STATE_FALLBACK

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / ".claude" / "skills" / "liger-kernel-gen" / "examples"

# What a Liger checkout needs for kernelgen to write into it and for the generated tests to run there.
CHECKOUT_PARTS = (
    "src",
    "test/__init__.py",
    "test/utils.py",
    "test/kernelgen/__init__.py",
    "test/kernelgen/fork_ranks.py",
    "conftest.py",
    "pyproject.toml",
    "benchmark",
)


def copy_checkout(destination: Path) -> Path:
    destination.mkdir(parents=True, exist_ok=True)
    for part in CHECKOUT_PARTS:
        source = REPO_ROOT / part
        target = destination / part
        if source.is_dir():
            shutil.copytree(
                source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "data", "visualizations")
            )
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    (destination / "test" / "transformers").mkdir(parents=True, exist_ok=True)
    (destination / "benchmark" / "scripts").mkdir(parents=True, exist_ok=True)
    _drop_kernels_generated_here(destination)
    return destination


def _drop_kernels_generated_here(destination: Path) -> None:
    """Kernels generated into this checkout (e.g. by the README's ``new geglu``) are not part of the library the
    tests start from: remove their files and take the registration files as committed."""
    generated = recorded_kernels(REPO_ROOT)
    if not generated:
        return
    for name in generated:
        for relative in kernel_paths(name).values():
            (destination / relative).unlink(missing_ok=True)
    for relative in (OPS_INIT, TRANSFORMERS_INIT, FUNCTIONAL):
        committed = subprocess.run(
            ["git", "show", f"HEAD:{relative}"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        )
        if committed.returncode == 0:
            (destination / relative).write_text(committed.stdout)


def generated_geglu(folder: Path) -> Path:
    """A checkout in ``folder`` with geglu generated as the README's command makes it."""
    root = copy_checkout(folder / "liger")
    result = run_kernelgen("new", "geglu", "--repo", str(root))
    assert result.returncode == 0, result.stderr
    return root


def fresh_copy(checkout: Path, destination: Path) -> Path:
    """A copy of ``checkout`` to break or change, without its workspace and bytecode."""
    shutil.copytree(checkout, destination, ignore=shutil.ignore_patterns(".kernelgen-work", "__pycache__"))
    return destination


@pytest.fixture(scope="module")
def geglu_checkout(tmp_path_factory) -> Path:
    """A checkout with geglu generated once per test module; tests that break the kernel work on copies of it."""
    return generated_geglu(tmp_path_factory.mktemp("geglu"))


@pytest.fixture
def geglu_copy(geglu_checkout, tmp_path) -> Path:
    return fresh_copy(geglu_checkout, tmp_path / "liger")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes, to prove a failed command changed nothing (kernelgen's lock in its
    private state folder is no file of the checkout)."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
        and "__pycache__" not in path.parts
        and ".pytest_cache" not in path.parts
        and path.relative_to(root).as_posix() not in (f"{STATE_FALLBACK}/{LOCK_NAME}", f".git/kernelgen/{LOCK_NAME}")
    }


def run_kernelgen(
    *args: str, cwd: Path = REPO_ROOT, stdin: str | None = None, in_process: bool = True
) -> subprocess.CompletedProcess:
    """``python -m tools.kernelgen ARGS`` run from ``cwd``, its exit status and output as ``subprocess.run`` gives
    them. In this process by default: torch and the generator are imported here already, so a call saves the ~2 s
    of a new interpreter (the commands' own workers, ruff and pytest still run as processes of their own);
    ``in_process=False`` runs ``python -m`` (forked from the suite's server where no ``stdin`` is given), for the
    tests of that entry point itself."""
    if not in_process and stdin is None:
        return run_python(["-m", "tools.kernelgen", *args], cwd=cwd)
    if not in_process:
        return subprocess.run(
            [sys.executable, "-m", "tools.kernelgen", *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
    from tools.kernelgen.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    previous_cwd, previous_stdin = Path.cwd(), sys.stdin
    os.chdir(cwd)
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                returncode = main(list(args))
            except SystemExit as exit_:  # argparse's usage errors, as the interpreter would report them
                returncode = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    finally:
        os.chdir(previous_cwd)
        sys.stdin = previous_stdin
    return subprocess.CompletedProcess(list(args), returncode, stdout.getvalue(), stderr.getvalue())


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The CLI run ``result`` exited 2 with exactly one ``kernelgen: error:`` line on stderr, returned."""
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelgen: error: "), result.stderr
    return lines[0]


# The generated DTensor tests start two processes each (seconds apiece on two cores): test_dtensor.py runs them for
# representative kernels, and tests about something else leave them out with these arguments.
WITHOUT_DTENSOR = ("-k", "not dtensor")


def import_generated_ops(checkout: Path, name: str):
    """Kernel ``name``'s generated ops module in ``checkout``, imported from its file in this process (what it imports
    from ``liger_kernel`` comes from this library)."""
    spec = importlib.util.spec_from_file_location(f"generated_{name}", checkout / kernel_paths(name)["ops"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated_functions(checkout: Path, name: str, *functions: str, **names) -> list:
    """Top-level ``functions`` of kernel ``name``'s generated ops module, run without the module's imports (they would
    import the loss of that checkout, not this library's): torch, triton and triton.language are theirs, and
    ``names`` (what else they read, such as helpers of ``liger_kernel.ops.utils``)."""
    import ast

    import torch
    import triton
    import triton.language as tl

    path = checkout / kernel_paths(name)["ops"]
    body = [node for node in ast.parse(path.read_text()).body if getattr(node, "name", "") in functions]
    namespace = {"torch": torch, "triton": triton, "tl": tl, **names}
    exec(compile(ast.Module(body, type_ignores=[]), str(path), "exec"), namespace)
    return [namespace[function] for function in functions]


def run_pytest(checkout: Path, *paths: str) -> subprocess.CompletedProcess:
    plugin = (
        ["-p", "test.kernelgen.fork_ranks"] if (checkout / "test" / "kernelgen" / "fork_ranks.py").is_file() else []
    )
    return run_python(["-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, *paths], cwd=checkout)


def assert_generated_tests_pass(
    checkout: Path, names: list[str], at_least_per_kernel: int, extra: tuple[str, ...] = ()
) -> None:
    """The generated tests of kernels ``names`` pass in ``checkout``, at least ``at_least_per_kernel`` of each on
    average (a test file that collects next to nothing fails too); ``extra``: more pytest arguments (such as
    ``WITHOUT_DTENSOR``)."""
    result = run_pytest(checkout, *[kernel_paths(name)["test"] for name in names], *extra)
    assert result.returncode == 0, failures_by_kernel(result.stdout, names) + result.stdout[-3000:]
    summary = result.stdout.strip().splitlines()[-1]
    passed = int(summary.split(" passed")[0].split()[-1])
    assert passed >= at_least_per_kernel * len(names), summary


def failures_by_kernel(output: str, names: list[str]) -> str:
    """The failed tests of a pytest run (its ``-ra`` summary) grouped under each kernel, one line per kernel, so
    that one kernel's failure does not hide another's in the tail of a long run."""
    failed: dict[str, list[str]] = {}
    for line in output.splitlines():
        if not line.startswith(("FAILED ", "ERROR ")):
            continue
        node = line.split(" ", 1)[1].split(" - ", 1)[0]
        path, _, test = node.partition("::")
        kernel = next((name for name in names if path == kernel_paths(name)["test"]), path)
        failed.setdefault(kernel, []).append(test or "(collection)")
    lines = [f"{kernel}: {len(tests)} failed: {', '.join(tests[:5])}" for kernel, tests in failed.items()]
    return "\n".join(lines) + "\n" if lines else ""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A fresh copy of this repository's Liger library, tests helpers and benchmark harness."""
    return copy_checkout(tmp_path / "liger")
