"""``new NAME --modify``: hand edits survive a re-generation, overlapping edits stop it, host kernels only grow."""

import shutil
import subprocess

from pathlib import Path

import pytest
import yaml

from test.kernelgen.conftest import EXAMPLES
from test.kernelgen.conftest import REPO_ROOT
from test.kernelgen.conftest import WITHOUT_DTENSOR
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import generated_geglu
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import run_pytest
from test.kernelgen.conftest import snapshot
from tools.kernelgen.merge import merge3
from tools.kernelgen.modify import ModifyError
from tools.kernelgen.modify import plan_modify
from tools.kernelgen.modify import profile_for_modify
from tools.kernelgen.profile import load_profile
from tools.kernelgen.record import content_hash
from tools.kernelgen.record import has_record
from tools.kernelgen.record import record_file
from tools.kernelgen.repo import LigerRepo

OPS = "src/liger_kernel/ops/act.py"
TEST = "test/transformers/test_act.py"
FUNCTIONAL = "src/liger_kernel/transformers/functional.py"

REFERENCE = "import torch\n\n\ndef act(a, b):\n    return torch.sigmoid(a) * b\n"
WITH_BETA = "import torch\n\n\ndef act(a, b, beta=1.0):\n    return torch.sigmoid(beta * a) * b\n"
WITH_TANH = "import torch\n\n\ndef act(a, b):\n    return torch.tanh(a) * b\n"

HAND_COMMENT = "# Hand edit: block sizes tuned by hand for the H200.\n"
HAND_HELPER = '\n\ndef act_flops(n_elements: int) -> int:\n    """Hand-written helper."""\n    return 4 * n_elements\n'
HAND_TEST = (
    "\n\ndef test_hand_written_extra_case():\n"
    "    from liger_kernel.ops.act import act_flops\n\n"
    "    assert act_flops(3) == 12\n"
)
HAND_FUNCTIONAL_COMMENT = "# Hand edit: the act wrapper is public API.\n"


# Merge unit tests -------------------------------------------------------------------------------------------
def test_merge_takes_each_sides_separate_changes():
    base = "a\nb\nc\nd\ne\n"
    ours = "a\nB (hand)\nc\nd\ne\n"
    theirs = "a\nb\nc\nd\nE (new)\n"
    result = merge3(base, ours, theirs)
    assert result.clean
    assert result.text == "a\nB (hand)\nc\nd\nE (new)\n"


def test_merge_marks_overlapping_changes_as_a_conflict():
    result = merge3("a\nb\nc\n", "a\nhand\nc\n", "a\nnew\nc\n")
    assert not result.clean and len(result.conflicts) == 1
    assert result.text == "a\n<<<<<<< current\nhand\n=======\nnew\n>>>>>>> kernelgen\nc\n"
    assert result.conflicts[0].line == 2
    assert result.conflicts[0].ours == ("hand\n",) and result.conflicts[0].theirs == ("new\n",)


def test_merge_accepts_the_same_change_on_both_sides():
    result = merge3("a\nb\nc\n", "a\nsame\nc\nhand\n", "a\nsame\nc\n")
    assert result.clean
    assert result.text == "a\nsame\nc\nhand\n"


def test_merge_of_two_insertions_at_the_same_place_is_a_conflict():
    result = merge3("a\nb\n", "a\nhand\nb\n", "a\nnew\nb\n")
    assert len(result.conflicts) == 1
    assert result.text == "a\n<<<<<<< current\nhand\n=======\nnew\n>>>>>>> kernelgen\nb\n"


def test_merge_keeps_lines_added_right_after_a_changed_line():
    # A hand-written helper appended after the function whose last line the new render changes.
    result = merge3(
        "def f():\n    return 1\n", "def f():\n    return 1\n\n\ndef g():\n    pass\n", "def f():\n    return 2\n"
    )
    assert result.clean
    assert result.text == "def f():\n    return 2\n\n\ndef g():\n    pass\n"


def test_merge_trims_the_common_lines_out_of_a_conflict_and_ends_markers_on_their_own_line():
    result = merge3("x\n", "same\nhand", "same\nnew")
    assert result.text == "same\n<<<<<<< current\nhand\n=======\nnew\n>>>>>>> kernelgen\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
@pytest.mark.parametrize(
    "base, ours, theirs",
    [
        ("a\nb\nc\nd\ne\nf\n", "a\nB\nc\nd\ne\nf\n", "a\nb\nc\nd\nE\nf\n"),
        ("a\nb\nc\n", "a\nhand\nc\n", "a\nnew\nc\n"),
        ("1\n2\n3\n4\n5\n6\n7\n", "0\n1\n2\n3\n4\n5\n6\n7\n", "1\n2\n3\n5\n6\n7\n8\n"),
        ("a\nb\n", "a\nx\nb\n", "a\nx\nb\n"),
    ],
)
def test_merge_agrees_with_git_merge_file(tmp_path, base, ours, theirs):
    for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
        (tmp_path / name).write_text(text)
    labels = ["-L", "current", "-L", "base", "-L", "kernelgen"]
    git = subprocess.run(
        ["git", "merge-file", "-p", *labels, "ours", "base", "theirs"], cwd=tmp_path, capture_output=True, text=True
    )
    result = merge3(base, ours, theirs)
    assert result.text == git.stdout
    assert (git.returncode == 0) == result.clean


# End to end on a generated kernel -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """A checkout with kernel 'act' generated from ``sigmoid(a) * b`` (made once, copied by each test)."""
    root = tmp_path_factory.mktemp("generated")
    checkout = copy_checkout(root / "liger")
    (root / "act.py").write_text(REFERENCE)
    result = run_kernelgen("new", "act", "--reference", str(root / "act.py"), "--repo", str(checkout))
    assert result.returncode == 0, result.stderr
    return checkout


@pytest.fixture
def edited(generated, tmp_path) -> Path:
    """A copy of the generated checkout with hand edits in the ops, test and functional files."""
    checkout = tmp_path / "liger"
    shutil.copytree(generated, checkout)
    ops = checkout / OPS
    text = ops.read_text()
    anchor = "import triton.language as tl\n"
    ops.write_text(text.replace(anchor, anchor + "\n" + HAND_COMMENT, 1) + HAND_HELPER)
    test = checkout / TEST
    test.write_text(test.read_text() + HAND_TEST)
    functional = checkout / FUNCTIONAL
    functional.write_text(
        functional.read_text().replace("def liger_act(", HAND_FUNCTIONAL_COMMENT + "def liger_act(", 1)
    )
    return checkout


def _write_reference(tmp_path: Path, source: str) -> str:
    path = tmp_path / "act_new.py"
    path.write_text(source)
    return str(path)


def test_modify_merges_new_math_keeps_hand_edits_and_the_kernel_tests_pass(edited, tmp_path):
    reference = _write_reference(tmp_path, WITH_BETA)
    result = run_kernelgen("new", "act", "--modify", "--reference", reference, "--repo", str(edited))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"merged     {OPS}" in result.stdout

    ops = (edited / OPS).read_text()
    assert HAND_COMMENT in ops and HAND_HELPER in ops
    assert "tl.sigmoid(a * beta)" in ops and "def act_forward(a, b, beta=1.0):" in ops
    test = (edited / TEST).read_text()
    assert HAND_TEST in test
    assert '"beta": 2.0' in test  # the new profile's hyper-parameter sweep
    functional = (edited / FUNCTIONAL).read_text()
    assert HAND_FUNCTIONAL_COMMENT + "def liger_act(a, b, beta=1.0):" in functional
    assert "def act(a, b, beta=1.0):" in record_file(edited, "act").read_text()

    tests = run_pytest(edited, TEST, *WITHOUT_DTENSOR)
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert "1 passed" in run_pytest(edited, TEST, "-k", "hand_written_extra_case").stdout


def test_overlapping_edit_is_a_reported_conflict_and_nothing_is_written(edited, tmp_path):
    ops = edited / OPS
    ops.write_text(ops.read_text().replace("y = b * tl.sigmoid(a)", "y = tl.sigmoid(a) * b  # hand-reordered", 1))
    before = snapshot(edited)
    reference = _write_reference(tmp_path, WITH_TANH)
    result = run_kernelgen("new", "act", "--modify", "--reference", reference, "--repo", str(edited))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"conflict   {OPS}" in result.stdout
    assert "<<<<<<< current\n    y = tl.sigmoid(a) * b  # hand-reordered\n=======\n" in result.stdout
    assert ">>>>>>> kernelgen" in result.stdout
    assert "nothing written" in result.stderr
    assert snapshot(edited) == before


def test_dry_run_prints_the_diff_and_writes_nothing(edited, tmp_path):
    before = snapshot(edited)
    reference = _write_reference(tmp_path, WITH_BETA)
    result = run_kernelgen("modify", "act", "--reference", reference, "--repo", str(edited), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert f"+++ b/{OPS}" in result.stdout
    assert "+    y = b * tl.sigmoid(a * beta)" in result.stdout
    assert reference not in result.stdout and "act_new.py" in result.stdout  # quoted as new quotes it
    assert "dry run, nothing written" in result.stderr
    assert snapshot(edited) == before


def test_modify_without_a_source_reuses_the_record_and_changes_nothing(edited):
    repo = LigerRepo.open(edited)
    plan = plan_modify(repo, "act", profile_for_modify(repo, "act"))
    assert plan.changes.changes == {}
    assert not plan.conflicted
    statuses = {report.path: report.status for report in plan.reports}
    assert statuses[OPS] == "unchanged" and statuses[FUNCTIONAL] == "unchanged"


def test_a_file_an_older_kernelgen_rendered_and_nobody_edited_takes_the_new_rendering(generated, tmp_path):
    """Templates change between versions: an ops file whose text is still what kernelgen wrote (the record's digest)
    holds no hand edit, so modify replaces it with today's rendering instead of keeping the old one whole."""
    checkout = tmp_path / "liger"
    shutil.copytree(generated, checkout)
    ops = checkout / OPS
    current = ops.read_text()
    older = current.replace(
        "import triton.language as tl\n", "import triton.language as tl\n\n# An older template.\n", 1
    )
    ops.write_text(older)
    record = record_file(checkout, "act")
    record.write_text(record.read_text().replace(content_hash(current), content_hash(older), 1))
    repo = LigerRepo.open(checkout)
    plan = plan_modify(repo, "act", profile_for_modify(repo, "act"))
    assert plan.changes.changes[OPS] == current and not plan.conflicted
    # The same text with a digest that does not match it is a hand edit, and kept.
    record.write_text(record.read_text().replace(content_hash(older), content_hash(current), 1))
    assert OPS not in plan_modify(repo, "act", profile_for_modify(repo, "act")).changes.changes


def test_renamed_wrapper_is_registered_and_the_old_name_reported_stale(generated):
    repo = LigerRepo.open(generated)
    profile = load_profile(record_file(generated, "act"))
    profile.functional_name = "liger_act_v2"
    plan = plan_modify(repo, "act", profile)
    functional = plan.changes.changes[FUNCTIONAL]
    assert "def liger_act_v2(a, b):" in functional and "def liger_act(a, b):" in functional
    assert any(note.startswith("stale: liger_act (from the old profile)") for note in plan.notes)


def test_modify_of_a_kernel_that_does_not_exist_is_a_user_error(generated):
    repo = LigerRepo.open(generated)
    with pytest.raises(ModifyError, match="no kernel 'nothing_here'"):
        plan_modify(repo, "nothing_here", profile_for_modify(repo, "act"))


# Hand-written host kernel (no record) ----------------------------------------------------------------------
def test_modify_on_host_rms_norm_appends_a_test_and_touches_no_existing_code(checkout, tmp_path):
    host_test = "test/transformers/test_rms_norm.py"
    shutil.copy2(REPO_ROOT / host_test, checkout / host_test)
    profile = yaml.safe_load((EXAMPLES / "rms_norm.yaml").read_text())
    profile["test"]["cpu_shapes"].append([5, 33])  # the new case
    profile_path = tmp_path / "rms_norm_more.yaml"
    profile_path.write_text(yaml.safe_dump(profile, sort_keys=False))
    host_files = [
        "src/liger_kernel/ops/rms_norm.py",
        "src/liger_kernel/transformers/rms_norm.py",
        "src/liger_kernel/ops/__init__.py",
        "src/liger_kernel/transformers/__init__.py",
        FUNCTIONAL,
        host_test,
    ]
    before = {path: (checkout / path).read_text() for path in host_files}
    ops_bytes = (checkout / host_files[0]).read_bytes()

    result = run_kernelgen("new", "rms_norm", "--modify", "--profile", str(profile_path), "--repo", str(checkout))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "left       src/liger_kernel/ops/rms_norm.py: as is: hand-written (no generation record)" in result.stdout
    assert not has_record(checkout, "rms_norm")
    assert (checkout / host_files[0]).read_bytes() == ops_bytes
    for path in host_files:
        updated = iter((checkout / path).read_text().splitlines())
        assert all(line in updated for line in before[path].splitlines()), f"{path} lost or reordered a line"
    test_text = (checkout / host_test).read_text()
    assert test_text.startswith(before[host_test])
    # [5, 33] among 3-d shapes: parametrized as (bsz, seq_len, hidden_size), lifted with a leading 1.
    assert "(1, 5, 33)" in test_text[len(before[host_test]) :]

    tests = run_pytest(checkout, host_test, "-k", "kernelgen_cases")
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert "12 passed" in tests.stdout  # 4 CPU shapes x 3 hyper-parameter sets in float32

    # Same profile again: the cases are already there.
    again = plan_modify(LigerRepo.open(checkout), "rms_norm", load_profile(profile_path, validate=False))
    assert again.changes.changes == {}


def test_a_clean_functional_merge_that_does_not_compile_is_a_conflict(monkeypatch):
    from tools.kernelgen import modify

    profile = load_profile(EXAMPLES / "swiglu.yaml")
    source = "import torch\n\n\ndef liger_swiglu(a, b):\n    return a * b\n"
    broken = "def liger_swiglu(a, b):\n    return (a * b\n"
    # A three-way merge can apply both sides cleanly and still leave code that does not parse.
    monkeypatch.setattr(modify, "merge_text", lambda path, *_: (modify.FileReport(path, "merged", "merged"), broken))
    report, text = modify._merge_functional(source, profile, profile, "old\n", "new\n")
    assert report.status == "conflict"
    assert report.detail.startswith("the merge does not compile (line ")
    assert text == source  # nothing of the broken merge is kept


# Conflicts a person can resolve -----------------------------------------------------------------------------
HAND_DOCSTRING = '    """y = sigmoid(a) * b: the gate of our model (hand-edited docstring)."""\n'


def test_merge_takes_one_side_of_each_conflict_when_asked():
    base, ours, theirs = "a\nb\nc\nd\n", "a\nhand\nc\nd\n", "a\nnew\nc\nD\n"
    for side, middle in (("ours", "hand"), ("theirs", "new")):
        result = merge3(base, ours, theirs, prefer=side)
        assert result.clean and len(result.resolved) == 1
        assert result.text == f"a\n{middle}\nc\nD\n"  # the other side's separate change still merges


def test_a_hand_edit_that_already_holds_the_new_text_is_not_a_conflict():
    base, theirs = 'def f():\n    """y = g(a)\n    """\n', 'def f():\n    """y = g(a * beta)\n    """\n'
    ours = 'def f():\n    """y = g(a * beta): our notes\n    """\n'
    result = merge3(base, ours, theirs)
    assert result.clean and result.reconciled == 1
    assert result.text == ours


@pytest.fixture
def docstring_edited(generated, tmp_path) -> Path:
    """The generated 'act' with its Function's docstring edited by hand (the new formula changes that line)."""
    checkout = tmp_path / "liger"
    shutil.copytree(generated, checkout)
    ops = checkout / OPS
    text = ops.read_text()
    line = next(line for line in text.splitlines(keepends=True) if line.startswith('    """y = sigmoid(a) * b'))
    ops.write_text(text.replace(line, HAND_DOCSTRING, 1))
    return checkout


def test_ours_keeps_the_edited_docstring_and_takes_the_new_formula(docstring_edited, tmp_path):
    checkout = docstring_edited
    reference = _write_reference(tmp_path, WITH_BETA)
    stopped = run_kernelgen("modify", "act", "--reference", reference, "--repo", str(checkout))
    assert stopped.returncode == 1 and "Settle them with --ours/--theirs [FILE]" in stopped.stderr

    result = run_kernelgen("modify", "act", "--reference", reference, "--repo", str(checkout), "--ours", OPS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"resolved   {OPS}: 1 conflict settled with the hand edit (--ours)" in result.stdout
    ops = (checkout / OPS).read_text()
    assert HAND_DOCSTRING in ops and "def forward(ctx, a, b, beta=1.0):" in ops
    assert "beta=1.0" in record_file(checkout, "act").read_text()
    # The record now holds the new profile: the hand docstring is a plain hand edit from here on.
    again = plan_modify(LigerRepo.open(checkout), "act", profile_for_modify(LigerRepo.open(checkout), "act"))
    assert not again.conflicted and again.changes.changes == {}


def test_theirs_takes_kernelgens_text_for_the_conflict(docstring_edited, tmp_path):
    repo = LigerRepo.open(docstring_edited)
    profile = profile_for_modify(repo, "act", reference=_write_reference(tmp_path, WITH_BETA))
    plan = plan_modify(repo, "act", profile, sides={"*": "theirs"})
    assert {r.path: r.status for r in plan.reports}[OPS] == "resolved"
    assert '    """y = sigmoid(beta * a) * b: forward and backward in Triton' in plan.changes.changes[OPS]
    assert HAND_DOCSTRING not in plan.changes.changes[OPS]


def test_markers_are_written_beside_the_file_and_the_checkout_still_imports(docstring_edited, tmp_path):
    checkout = docstring_edited
    record_before = record_file(checkout, "act").read_text()
    before = snapshot(checkout)
    reference = _write_reference(tmp_path, WITH_BETA)
    result = run_kernelgen("modify", "act", "--reference", reference, "--repo", str(checkout), "--conflicts=markers")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"conflict(s) marked <<<<<<< current / >>>>>>> kernelgen in {OPS}.conflicted (beside" in result.stderr
    assert "conflicts again: add --ours FILE for it" in result.stderr
    ops = (checkout / f"{OPS}.conflicted").read_text()
    assert f"<<<<<<< current\n{HAND_DOCSTRING}=======\n" in ops and ">>>>>>> kernelgen\n" in ops
    assert "def forward(ctx, a, b, beta=1.0):" in ops  # the rest of the merge is there
    assert record_file(checkout, "act").read_text() == record_before  # recorded only after a clean --modify
    # Nothing importable changed.
    assert {path: text for path, text in snapshot(checkout).items() if not path.endswith(".conflicted")} == before

    # Resolved by hand: the new docstring taken, the hand note kept beside it; a hand edit holding the new text is
    # not a conflict any more.
    start, end = ops.index("<<<<<<< current\n"), ops.index(">>>>>>> kernelgen\n") + len(">>>>>>> kernelgen\n")
    theirs = ops[ops.index("=======\n", start) + len("=======\n") : ops.index(">>>>>>> kernelgen\n")]
    assert "sigmoid(beta * a) * b" in theirs
    reconciled = theirs.rstrip("\n") + "  # the gate of our model\n"
    (checkout / OPS).write_text(ops[:start] + reconciled + ops[end:])
    (checkout / f"{OPS}.conflicted").unlink()
    again = run_kernelgen("modify", "act", "--reference", reference, "--repo", str(checkout))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "hand edit(s) already holding the new text kept" in again.stdout
    assert reconciled in (checkout / OPS).read_text() and "beta=1.0" in record_file(checkout, "act").read_text()


def test_markers_resolved_to_the_hand_edit_conflict_again_and_ours_settles_them(docstring_edited, tmp_path):
    checkout = docstring_edited
    reference = _write_reference(tmp_path, WITH_BETA)
    run_kernelgen("modify", "act", "--reference", reference, "--repo", str(checkout), "--conflicts=markers")
    ops = (checkout / f"{OPS}.conflicted").read_text()
    start, end = ops.index("<<<<<<< current\n"), ops.index(">>>>>>> kernelgen\n") + len(">>>>>>> kernelgen\n")
    (checkout / OPS).write_text(ops[:start] + HAND_DOCSTRING + ops[end:])  # the hand line kept, kernelgen's dropped
    (checkout / f"{OPS}.conflicted").unlink()
    again = run_kernelgen("modify", "act", "--reference", reference, "--repo", str(checkout))
    assert again.returncode == 1 and "Settle them with --ours/--theirs [FILE]" in again.stderr
    settled = run_kernelgen("modify", "act", "--reference", reference, "--repo", str(checkout), "--ours", OPS)
    assert settled.returncode == 0, settled.stdout + settled.stderr
    assert HAND_DOCSTRING in (checkout / OPS).read_text() and "beta=1.0" in record_file(checkout, "act").read_text()


def test_a_markers_file_left_beside_a_file_the_settled_merge_writes_is_named_stale(docstring_edited, tmp_path):
    checkout = docstring_edited
    reference = _write_reference(tmp_path, WITH_BETA)
    run_kernelgen("modify", "act", "--reference", reference, "--repo", str(checkout), "--conflicts=markers")
    assert (checkout / f"{OPS}.conflicted").exists()
    settled = run_kernelgen("modify", "act", "--reference", reference, "--repo", str(checkout), "--ours", OPS)
    assert settled.returncode == 0, settled.stdout + settled.stderr
    assert f"{OPS}.conflicted (an earlier --conflicts=markers merge) is stale now" in settled.stderr


def test_a_side_for_a_file_the_merge_does_not_touch_is_a_user_error(docstring_edited, tmp_path):
    repo = LigerRepo.open(docstring_edited)
    profile = profile_for_modify(repo, "act", reference=_write_reference(tmp_path, WITH_BETA))
    with pytest.raises(ModifyError, match="--ours/--theirs src/nope.py: not a file this --modify merges"):
        plan_modify(repo, "act", profile, sides={"src/nope.py": "ours"})


CLAMPED_GEGLU = """
import torch.nn.functional as F


def geglu(a, b, limit: float = 10.0):
    return F.gelu(a, approximate="tanh") * b.clamp(-limit, limit)
"""


def test_modify_of_the_readme_geglu_with_a_function_reference_keeps_its_names_and_mlp_module(tmp_path):
    """The new reference is a bare function: the names callers import (LigerGELUMulFunction, LigerGEGLUMLP,
    liger_geglu) and the MLP module built from a config stay as recorded; only the math and its option change."""
    root = generated_geglu(tmp_path)
    ops = root / "src/liger_kernel/ops/geglu.py"
    ops.write_text(ops.read_text().replace("\ndef geglu_forward(", "\n# Kept by hand.\ndef geglu_forward(", 1))
    reference = tmp_path / "clamped.py"
    reference.write_text(CLAMPED_GEGLU)
    result = run_kernelgen("modify", "geglu", "--reference", str(reference), "--repo", str(root))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# Kept by hand.\ndef geglu_forward(a, b, limit=10.0):" in ops.read_text()
    module = (root / "src/liger_kernel/transformers/geglu.py").read_text()
    assert "class LigerGEGLUMLP(nn.Module):" in module and 'getattr(config, "limit", 10.0)' in module
    functional = (root / FUNCTIONAL).read_text()
    assert (
        "def liger_geglu(a, b, limit=10.0):" in functional and "LigerGELUMulFunction.apply(a, b, limit)" in functional
    )
    tests = run_pytest(root, "test/transformers/test_geglu.py", *WITHOUT_DTENSOR)
    assert tests.returncode == 0, tests.stdout[-3000:]


def test_modify_with_a_reference_of_another_tier_is_refused_and_writes_nothing(geglu_checkout, tmp_path):
    reference = tmp_path / "rows.py"
    reference.write_text("import torch.nn.functional as F\n\n\ndef rows(x):\n    return F.normalize(x, dim=-1)\n")
    before = snapshot(geglu_checkout)
    result = run_kernelgen("modify", "geglu", "--reference", str(reference), "--repo", str(geglu_checkout))
    assert result.returncode != 0
    line = result.stderr.strip()
    assert "'geglu' is a tier-1 kernel and" in line and "is tier 2" in line and "new generates" in line, line
    assert snapshot(geglu_checkout) == before


def test_a_profile_of_another_name_keeps_the_kernel_s_classes_and_a_class_rename_is_one_line(generated, tmp_path):
    """A profile analysed under another name has the classes that name derives: the kernel keeps its own (before,
    the functional's import of the old Function was left unused and the update failed on a ruff finding). A
    profile that renames a class on purpose is refused in one line, nothing written."""
    checkout = tmp_path / "liger"
    shutil.copytree(generated, checkout)
    profile = tmp_path / "other.yaml"
    analysed = run_kernelgen("analyze", _write_reference(tmp_path, WITH_BETA), "--name", "act_beta", "-o", str(profile))
    assert analysed.returncode == 0, analysed.stderr
    assert "LigerActBetaFunction" in profile.read_text()
    result = run_kernelgen("modify", "act", "--profile", str(profile), "--repo", str(checkout))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "class LigerActFunction(" in (checkout / OPS).read_text() and "ActBeta" not in (checkout / OPS).read_text()
    renamed = tmp_path / "renamed.yaml"
    text = profile.read_text().replace("operation_name: act_beta", "operation_name: act")
    renamed.write_text(text.replace("function_class_name: LigerActBetaFunction", "function_class_name: LigerMyAct"))
    before = snapshot(checkout)
    refused = run_kernelgen("modify", "act", "--profile", str(renamed), "--repo", str(checkout))
    assert refused.returncode == 2 and "function_class_name is LigerMyAct" in refused.stderr, refused.stderr
    assert snapshot(checkout) == before
