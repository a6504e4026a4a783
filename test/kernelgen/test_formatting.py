"""Ruff's answers for a text are reused while the settings that govern the file stay as they were."""

import subprocess

import pytest

from tools.kernelgen import formatting
from tools.kernelgen.formatting import lint_findings

LONG_LINE = "VALUE = " + " + ".join(["1"] * 40) + "\n"  # 160 columns


@pytest.fixture
def ruff_runs(monkeypatch) -> list:
    runs = []
    run = subprocess.run

    def counted(command, *args, **kwargs):
        runs.append(command)
        return run(command, *args, **kwargs)

    monkeypatch.setattr(formatting.subprocess, "run", counted)
    return runs


def _settings(root, line_length: int, extra: str = "") -> None:
    (root / "pyproject.toml").write_text(
        f'[tool.ruff]\nline-length = {line_length}\n{extra}\n[tool.ruff.lint]\nselect = ["E501"]\n'
    )


def test_an_answer_is_reused_until_the_settings_change(tmp_path, ruff_runs):
    _settings(tmp_path, 200)
    assert lint_findings(LONG_LINE, tmp_path, "pkg/module.py") == []
    runs = len(ruff_runs)
    assert lint_findings(LONG_LINE, tmp_path, "pkg/module.py") == []
    assert len(ruff_runs) == runs
    _settings(tmp_path, 120)
    assert any("E501" in finding for finding in lint_findings(LONG_LINE, tmp_path, "pkg/module.py"))
    assert len(ruff_runs) > runs


def test_settings_that_extend_another_file_are_asked_each_time(tmp_path, ruff_runs):
    (tmp_path / "base.toml").write_text("line-length = 200\n")
    _settings(tmp_path, 200, extra='extend = "base.toml"')
    lint_findings(LONG_LINE, tmp_path, "module.py")
    runs = len(ruff_runs)
    lint_findings(LONG_LINE, tmp_path, "module.py")
    assert len(ruff_runs) == 2 * runs


def test_findings_in_the_embedded_reference_get_a_noqa_and_others_still_raise(tmp_path):
    """A generated test carries the user's reference verbatim: a local it computes and never reads (a metric of a
    trainer's loss) or a name like ``l`` where the target's rules flag it (upstream selects E741) gets a noqa on its
    line, the reference otherwise as written; the same finding outside the reference is still an error."""
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["E", "F"]\n')
    reference = (
        "import torch\n\n\n"
        "# --- PyTorch reference (focal.py) ---\n"
        "def focal(logits, target):\n"
        "    l = torch.log_softmax(logits, -1)\n"
        "    acc = (logits.argmax(-1) == target).float().mean()\n"
        "    return -l.mean()\n"
        "# ------------------------------------\n"
    )
    text = formatting.format_source(reference, tmp_path, "test/test_focal.py")
    assert "    l = torch.log_softmax(logits, -1)  # noqa: E741 - as the reference has it\n" in text
    assert "acc = (logits.argmax(-1) == target).float().mean()  # noqa: F841 - as the reference has it\n" in text
    assert lint_findings(text, tmp_path, "test/test_focal.py") == []
    outside = reference + "\n\ndef helper():\n    unused = 1\n    return 2\n"
    with pytest.raises(formatting.FormatError, match="F841"):
        formatting.format_source(outside, tmp_path, "test/test_focal.py")
