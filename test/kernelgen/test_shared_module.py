"""When kernelgen adds a shared module (liger_kernel/ops/layout_utils.py here, the others alike) to a target: only
with a generated file that imports it, only where the target lacks it, and never over a copy the target has (an older copy
that lacks what the kernel imports is refused in one line)."""

from pathlib import Path

import pytest

from test.kernelgen.conftest import REPO_ROOT
from tools.kernelgen.layout import DTENSOR_UTILS
from tools.kernelgen.layout import LAYOUT_UTILS
from tools.kernelgen.layout import ROW_UTILS
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.shared_module import SHARED_MODULES
from tools.kernelgen.shared_module import SharedModuleError
from tools.kernelgen.shared_module import module_to_add
from tools.kernelgen.shared_module import shared_module_files

LAYOUT = SHARED_MODULES[0]  # layout_utils
IMPORTING = {"src/liger_kernel/ops/k.py": "from liger_kernel.ops.layout_utils import tile_settings\n"}
NOT_IMPORTING = {
    "src/liger_kernel/ops/k.py": "from liger_kernel.ops.utils import ceil_div\n",
    "benchmark/scripts/benchmark_k.py": "import torch\n",
}


def test_a_target_without_it_gets_this_repository_s_copy(tmp_path: Path):
    repo = LigerRepo(tmp_path)
    assert module_to_add(repo, IMPORTING, LAYOUT) == (REPO_ROOT / LAYOUT_UTILS).read_text()
    assert module_to_add(repo, NOT_IMPORTING, LAYOUT) is None


def test_the_module_comes_with_its_own_tests_unless_the_target_has_a_file_of_their_name(tmp_path: Path):
    repo = LigerRepo(tmp_path)
    added = shared_module_files(repo, IMPORTING)
    assert added == {
        LAYOUT_UTILS: (REPO_ROOT / LAYOUT_UTILS).read_text(),
        LAYOUT.tests: (REPO_ROOT / LAYOUT.tests).read_text(),
    }
    assert shared_module_files(repo, NOT_IMPORTING) == {}
    tests = tmp_path / LAYOUT.tests
    tests.parent.mkdir(parents=True)
    tests.write_text("def test_theirs():\n    pass\n")
    assert set(shared_module_files(repo, IMPORTING)) == {LAYOUT_UTILS}


def test_a_target_s_own_copy_is_kept(tmp_path: Path):
    module = tmp_path / LAYOUT_UTILS
    module.parent.mkdir(parents=True)
    module.write_text("# edited by hand\n\n\ndef tile_settings(n_rows, n_cols):\n    return 1, n_cols, 4\n")
    assert module_to_add(LigerRepo(tmp_path), IMPORTING, LAYOUT) is None


def test_an_older_copy_without_what_the_kernel_imports_is_one_clear_line(tmp_path: Path):
    module = tmp_path / LAYOUT_UTILS
    module.parent.mkdir(parents=True)
    module.write_text("def as_rows(tensor, n_cols):\n    return tensor\n")
    importing = {
        "src/liger_kernel/ops/k.py": "from liger_kernel.ops.layout_utils import as_rows\n"
        + IMPORTING["src/liger_kernel/ops/k.py"]
    }
    with pytest.raises(SharedModuleError, match=r"layout_utils\.py lacks tile_settings, which the generated kernel"):
        module_to_add(LigerRepo(tmp_path), importing, LAYOUT)


def test_each_shared_module_comes_only_with_a_kernel_that_imports_it(tmp_path: Path):
    """A kernel that imports only the DTensor helpers brings dtensor_utils and its tests, not layout_utils."""
    repo = LigerRepo(tmp_path)
    importing = {"src/liger_kernel/ops/k.py": "from liger_kernel.ops.dtensor_utils import dtensor_layout\n"}
    assert shared_module_files(repo, importing) == {
        DTENSOR_UTILS: (REPO_ROOT / DTENSOR_UTILS).read_text(),
        "test/transformers/test_dtensor_utils.py": (REPO_ROOT / "test/transformers/test_dtensor_utils.py").read_text(),
    }
    both = {
        "src/liger_kernel/ops/k.py": importing["src/liger_kernel/ops/k.py"] + IMPORTING["src/liger_kernel/ops/k.py"]
    }
    assert set(shared_module_files(repo, both)) == {
        LAYOUT_UTILS,
        LAYOUT.tests,
        DTENSOR_UTILS,
        "test/transformers/test_dtensor_utils.py",
    }


def test_a_row_kernel_brings_the_row_helpers_alone(tmp_path: Path):
    """A norm imports its launch settings and gradient buffers from row_utils: that module and its tests come, not the
    element-wise layout module."""
    importing = {
        "src/liger_kernel/ops/k.py": "from liger_kernel.ops.row_utils import reusable_gradient\n"
        "from liger_kernel.ops.row_utils import row_tile_settings\n"
    }
    assert shared_module_files(LigerRepo(tmp_path), importing) == {
        ROW_UTILS: (REPO_ROOT / ROW_UTILS).read_text(),
        "test/transformers/test_row_utils.py": (REPO_ROOT / "test/transformers/test_row_utils.py").read_text(),
    }
