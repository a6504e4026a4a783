"""``new --force`` overwrites only what kernelgen generated and nobody edited; hand-written kernels, shared files and
edited files are refused in one line, exit 2, nothing written; no advice recommends --force for a hand-written
kernel."""

import shutil

from pathlib import Path

import pytest

from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import snapshot
from test.kernelgen.handwritten import install as install_mulsig
from tools.kernelgen.generate import ChangeSet
from tools.kernelgen.generate import GenerateError
from tools.kernelgen.generate import overwrite_refusals
from tools.kernelgen.generate import plan_new
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.profile import load_profile
from tools.kernelgen.record import record_file
from tools.kernelgen.record import recorded_hashes
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

ACT = "import torch\n\n\ndef act(a, b):\n    return torch.sigmoid(a) * b\n"
ACT_OPS = "src/liger_kernel/ops/act.py"


@pytest.fixture(scope="module")
def generated_act(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("clobber")
    checkout = copy_checkout(root / "liger")
    (root / "act.py").write_text(ACT)
    result = run_kernelgen("new", "act", "--reference", str(root / "act.py"), "--repo", str(checkout))
    assert result.returncode == 0, result.stderr
    return checkout


def test_force_never_touches_a_hand_written_kernel(checkout):
    before = snapshot(checkout)
    line = one_line_error(run_kernelgen("new", "swiglu", "--force", "--repo", str(checkout)))
    assert "refusing to overwrite 3 file(s) with no generation record (src/liger_kernel/ops/swiglu.py," in line
    assert "hand-written; nothing written" in line and "modify swiglu --reference REF" in line
    assert snapshot(checkout) == before


@pytest.mark.parametrize(
    "name, shared",
    [
        ("utils", "src/liger_kernel/ops/utils.py"),
        ("functional", FUNCTIONAL),
        ("layout_utils", "src/liger_kernel/ops/layout_utils.py"),
        ("dtensor_utils", "src/liger_kernel/ops/dtensor_utils.py"),
        ("row_utils", "src/liger_kernel/ops/row_utils.py"),
        ("monkey_patch", "src/liger_kernel/transformers/monkey_patch.py"),
    ],
)
def test_a_kernel_name_of_a_shared_file_is_refused(checkout, tmp_path, name, shared):
    reference = tmp_path / "act.py"
    reference.write_text(ACT)
    before = snapshot(checkout)
    line = one_line_error(run_kernelgen("new", name, "--reference", str(reference), "--force", "--repo", str(checkout)))
    assert f"kernel name '{name}' is taken: {shared} is a file every kernel shares" in line
    assert snapshot(checkout) == before


def test_the_record_keeps_the_digest_of_every_generated_file(generated_act):
    hashes = recorded_hashes(record_file(generated_act, "act").read_text())
    assert sorted(hashes) == sorted(
        [
            ACT_OPS,
            "src/liger_kernel/transformers/act.py",
            "test/transformers/test_act.py",
            "benchmark/scripts/benchmark_act.py",
        ]
    )


def test_force_regenerates_untouched_files_and_refuses_an_edited_one(generated_act, tmp_path):
    checkout = tmp_path / "liger"
    shutil.copytree(generated_act, checkout)
    repo = LigerRepo.open(checkout)
    profile = load_profile(record_file(checkout, "act"))
    again = plan_new(repo, profile, force=True)
    assert again.changes  # nothing edited: regenerating is allowed
    assert ACT_OPS in again.unchanged and ACT_OPS not in again.modified  # and reported as the text it already is
    ops = checkout / ACT_OPS
    ops.write_text(ops.read_text() + "\n# tuned by hand\n")
    before = snapshot(checkout)
    result = run_kernelgen(
        "new", "act", "--force", "--profile", str(record_file(checkout, "act")), "--repo", str(checkout)
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"kernelgen: error: refusing to overwrite 1 file(s): {ACT_OPS} (edited since kernelgen generated it); "
        f"nothing written. Hand edits are merged by: modify act --profile FILE"
    )
    assert snapshot(checkout) == before


def test_a_record_without_digests_is_compared_by_rendering_it_again(generated_act, tmp_path):
    checkout = tmp_path / "liger"
    shutil.copytree(generated_act, checkout)
    record = record_file(checkout, "act")
    record.write_text("".join(line for line in record.read_text().splitlines(True) if not line.startswith("# sha256")))
    repo = LigerRepo.open(checkout)
    profile = load_profile(record)
    assert plan_new(repo, profile, force=True).changes
    (checkout / ACT_OPS).write_text(
        (checkout / ACT_OPS).read_text().replace("import torch\n", "import torch  # mine\n")
    )
    with pytest.raises(GenerateError, match="edited since kernelgen generated it"):
        plan_new(repo, profile, force=True)


def test_a_shared_file_only_ever_gets_lines_added(generated_act):
    repo = LigerRepo.open(generated_act)
    original = repo.read(FUNCTIONAL)
    added = ChangeSet({FUNCTIONAL: original + "\n\ndef extra():\n    pass\n"}, {FUNCTIONAL: original})
    assert overwrite_refusals(repo, "act", added) == []
    replaced = ChangeSet(
        {FUNCTIONAL: original.replace("def liger_act(", "def liger_act_renamed(")}, {FUNCTIONAL: original}
    )
    assert overwrite_refusals(repo, "act", replaced) == [
        f"{FUNCTIONAL} (not one of the kernel's own files: only additions are allowed)"
    ]


def test_no_advice_recommends_force_for_a_hand_written_kernel(checkout):
    install_mulsig(checkout)
    exists = one_line_error(run_kernelgen("new", "mulsig", "--repo", str(checkout)))
    assert "hand-written" in exists and "modify mulsig --reference REF" in exists and "--force" not in exists
    no_reference = one_line_error(run_kernelgen("validate", "mulsig", "--repo", str(checkout)))
    assert "pass --reference REF" in no_reference and "--force" not in no_reference


def test_write_all_writes_nothing_when_one_target_cannot_be_written(tmp_path):
    (tmp_path / "a.txt").write_text("old")
    (tmp_path / "dir").write_text("a file where a folder is needed")
    with pytest.raises(OSError):
        write_all(tmp_path, {"a.txt": "new", "dir/b.txt": "x"})
    assert (tmp_path / "a.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "dir"]


ACT_WITH_NEW_HYPERPARAMETERS = (
    "import torch\n\n\ndef act(a, b, beta: float = 0.5, gamma: float = 2.0):\n"
    "    return torch.sigmoid(beta * a) * b * gamma\n"
)


def test_force_with_a_changed_reference_regenerates_the_functional_wrapper_too(generated_act, tmp_path):
    """The wrapper in functional.py is the kernel's own: left at the old signature, the regenerated test of the
    functional would call it with the new hyper-parameters and fail."""
    checkout = tmp_path / "liger"
    shutil.copytree(generated_act, checkout)
    reference = tmp_path / "act.py"
    reference.write_text(ACT_WITH_NEW_HYPERPARAMETERS)
    result = run_kernelgen("new", "act", "--reference", str(reference), "--force", "--repo", str(checkout))
    assert result.returncode == 0, result.stderr
    functional = (checkout / FUNCTIONAL).read_text()
    assert "def liger_act(a, b, beta=0.5, gamma=2.0):" in functional and functional.count("def liger_act(") == 1


def test_force_refuses_a_functional_wrapper_edited_by_hand(generated_act, tmp_path):
    checkout = tmp_path / "liger"
    shutil.copytree(generated_act, checkout)
    functional = checkout / FUNCTIONAL
    edited = functional.read_text().replace(
        "    return LigerActFunction.apply(", "    # mine\n    return LigerActFunction.apply("
    )
    assert "# mine" in edited
    functional.write_text(edited)
    reference = tmp_path / "act.py"
    reference.write_text(ACT_WITH_NEW_HYPERPARAMETERS)
    before = snapshot(checkout)
    line = one_line_error(
        run_kernelgen("new", "act", "--reference", str(reference), "--force", "--repo", str(checkout))
    )
    assert f"refusing to overwrite {FUNCTIONAL}: liger_act was edited since kernelgen generated it" in line
    assert snapshot(checkout) == before
