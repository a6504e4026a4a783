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
