"""Golden files: what kernelgen generates for one kernel of each tier (and ones with parameters), byte for byte.

A change to a template, a view or the synthesis that alters generated code fails here with the diff, so every
such change is seen and committed on purpose: rerun with ``KERNELGEN_UPDATE_GOLDEN=1`` to rewrite the files under
``test/kernelgen/golden/`` and commit them with the change that explains them.
"""

import difflib
import os

from pathlib import Path

import pytest

from test.kernelgen.conftest import copy_checkout
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.repo import LigerRepo

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("KERNELGEN_UPDATE_GOLDEN") == "1"
# Tier 1 without and with parameters (dyt: a scalar and per-channel ones, constructor arguments), tier 2 with two
# per-channel parameters, tier 3 over a vocabulary; dyt again in TileLang (dyt_tl).
KERNELS = ["geglu", "dyt", "layer_norm", "kl_div", "dyt_tl"]


def _profile(name: str):
    if name.endswith("_tl"):
        profile = analyze(name.removesuffix("_tl")).renamed(name)
        profile.backend = "tilelang"
        return profile
    return analyze(name)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> LigerRepo:
    return LigerRepo.open(copy_checkout(tmp_path_factory.mktemp("golden") / "liger"))


@pytest.mark.parametrize("name", KERNELS)
def test_generated_files_match_the_golden_files(repo, name):
    changes = plan_new(repo, _profile(name)).changes
    mismatched = []
    for role, path in kernel_paths(name).items():
        golden = GOLDEN / name / f"{role}.py.golden"
        if UPDATE:
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(changes[path], encoding="utf-8")
            continue
        assert golden.exists(), f"no golden file {golden}; create it with KERNELGEN_UPDATE_GOLDEN=1"
        expected = golden.read_text(encoding="utf-8")
        if changes[path] != expected:
            diff = difflib.unified_diff(
                expected.splitlines(keepends=True), changes[path].splitlines(keepends=True), str(golden), path
            )
            mismatched.append("".join(list(diff)[:80]))
    assert not mismatched, (
        f"{name}: generated files differ from test/kernelgen/golden/{name}/ (if intended, rerun with "
        f"KERNELGEN_UPDATE_GOLDEN=1 and commit the golden files):\n" + "\n".join(mismatched)
    )
