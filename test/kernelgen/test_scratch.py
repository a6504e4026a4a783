"""Scratch copies of a checkout hold every file of its own (``tools/kernelgen/scratch.py``): what git tracks and
what it would track, or, without git, everything but hidden folders, caches and build outputs."""

import shutil
import subprocess

import pytest

from tools.kernelgen import scratch
from tools.kernelgen.scratch import checkout_files
from tools.kernelgen.scratch import stage_checkout


def _tree(root, files):
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_git_checkout_stages_tracked_and_untracked_files_but_not_ignored_ones(tmp_path):
    _tree(
        tmp_path,
        {
            ".gitignore": "scratch-output/\n*.log\n",
            "test/conftest.py": "from test.helper import VALUE\n",
            "test/helper.py": "VALUE = 1\n",
            "src/pkg/__init__.py": "",
            "scratch-output/big.bin": "x",
            "run.log": "x",
        },
    )
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", ".gitignore", "test/conftest.py", "src"], cwd=tmp_path, check=True)
    # test/helper.py is untracked (not yet committed): the conftest needs it all the same.
    assert checkout_files(tmp_path) == [".gitignore", "src/pkg/__init__.py", "test/conftest.py", "test/helper.py"]


def test_a_checkout_without_git_stages_everything_but_caches_and_hidden_folders(tmp_path):
    root = tmp_path / "checkout"
    _tree(
        root,
        {
            "test/conftest.py": "",
            "test/forkserver.py": "",
            "test/__pycache__/conftest.cpython-311.pyc": "",
            ".kernelgen-state/journal": "",
            "src/pkg.egg-info/PKG-INFO": "",
            "pyproject.toml": "",
        },
    )
    assert checkout_files(root) == ["pyproject.toml", "test/conftest.py", "test/forkserver.py"]
    folder = tmp_path / "staged"
    stage_checkout(root, folder, {"test/forkserver.py": "CHANGED = True\n", "src/new.py": "NEW = 1\n"})
    assert (folder / "test" / "forkserver.py").read_text() == "CHANGED = True\n"
    assert (folder / "src" / "new.py").read_text() == "NEW = 1\n"
    assert not (folder / ".kernelgen-state").exists() and (folder / "test" / "conftest.py").exists()


def test_a_signal_while_a_scratch_folder_is_removed_still_removes_it(monkeypatch):
    """Ctrl-C (or SIGTERM, a KeyboardInterrupt in the CLI) during the removal: it finishes, then the signal goes on."""
    calls = []
    remove = shutil.rmtree

    def interrupted_once(path, ignore_errors=False):
        calls.append(path)
        if len(calls) == 1:
            raise KeyboardInterrupt
        remove(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(scratch.shutil, "rmtree", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        with scratch.scratch_folder("kernelgen-test-") as folder:
            (folder / "staged.py").write_text("x = 1\n")
    assert not folder.exists() and len(calls) == 2
