"""The generation record lives in the checkout's git directory: no commit carries it, a clone of a checkout with a
generated kernel treats that kernel as hand-written, and a record an older kernelgen committed (``.kernelgen/``)
is still read and moves out of the tree on the next write."""

import shutil
import subprocess

from pathlib import Path

import pytest

from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import snapshot
from tools.kernelgen.record import legacy_record_file
from tools.kernelgen.record import record_file
from tools.kernelgen.record import record_key

ACT = "import torch\n\n\ndef act(a, b):\n    return torch.sigmoid(a) * b\n"


def _git(root: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=kernelgen-test", "-c", "user.email=test@example.com", *args]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def committed_act(tmp_path_factory) -> tuple[Path, Path]:
    """A git checkout with ``act`` generated and committed, and the reference it was generated from."""
    folder = tmp_path_factory.mktemp("record")
    checkout = copy_checkout(folder / "liger")
    _git(checkout, "init", "-q")
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-q", "-m", "library")
    reference = folder / "act.py"
    reference.write_text(ACT)
    result = run_kernelgen("new", "act", "--reference", str(reference), "--repo", str(checkout))
    assert result.returncode == 0, result.stderr
    return checkout, reference


def test_the_record_is_in_the_git_directory_and_no_change_git_lists(committed_act):
    checkout, _ = committed_act
    record = record_file(checkout, "act")
    assert record == checkout / ".git" / "kernelgen" / "records" / "act.yaml" and record.is_file()
    assert "version control" not in record.read_text().split("\n", 1)[0]
    changed = {line[3:] for line in _git(checkout, "status", "--porcelain", "--untracked-files=all").splitlines()}
    assert "src/liger_kernel/ops/act.py" in changed
    assert not [path for path in changed if "kernelgen" in path or path.endswith(".yaml")], changed


def test_a_clone_treats_a_generated_kernel_as_hand_written(committed_act, tmp_path):
    checkout, reference = committed_act
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-q", "-m", "act")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(checkout), str(clone))
    before = snapshot(clone)
    refused = one_line_error(
        run_kernelgen("new", "act", "--force", "--reference", str(reference), "--repo", str(clone))
    )
    assert "with no generation record" in refused and "'act' is hand-written; nothing written" in refused
    merged = one_line_error(
        run_kernelgen("modify", "act", "--ours", "--reference", str(reference), "--repo", str(clone))
    )
    assert "'act' is hand-written (nothing is merged)" in merged
    assert snapshot(clone) == before
    # The checkout that generated it still has the record: the same --ours is a merge there, not a refusal.
    result = run_kernelgen("modify", "act", "--ours", "--reference", str(reference), "--repo", str(checkout))
    assert result.returncode == 0, result.stderr


def test_a_committed_record_of_an_older_kernelgen_is_read_and_moves_out(tmp_path):
    checkout = copy_checkout(tmp_path / "liger")
    reference = tmp_path / "act.py"
    reference.write_text(ACT)
    assert run_kernelgen("new", "act", "--reference", str(reference), "--repo", str(checkout)).returncode == 0
    legacy = legacy_record_file(checkout, "act")
    legacy.parent.mkdir()
    shutil.move(record_file(checkout, "act"), legacy)
    result = run_kernelgen("new", "act", "--force", "--reference", str(reference), "--repo", str(checkout))
    assert result.returncode == 0, result.stderr
    assert f"created   {record_key(checkout, 'act')}" in result.stdout
    assert record_file(checkout, "act").read_text().split("\n", 1)[1] == legacy.read_text().split("\n", 1)[1]
