"""When kernelgen adds the shared layout module (liger_kernel/ops/layout_utils.py) to a target: only with a
generated file that imports it, only where the target lacks it, and never over a copy the target has."""

from pathlib import Path

from test.kernelgen.conftest import REPO_ROOT
from tools.kernelgen.layout import LAYOUT_UTILS
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.shared_module import layout_utils_to_add

IMPORTING = {"src/liger_kernel/ops/k.py": "from liger_kernel.ops.layout_utils import tile_settings\n"}
NOT_IMPORTING = {
    "src/liger_kernel/ops/k.py": "from liger_kernel.ops.utils import ceil_div\n",
    "benchmark/scripts/benchmark_k.py": "import torch\n",
}


def test_a_target_without_it_gets_this_repository_s_copy(tmp_path: Path):
    repo = LigerRepo(tmp_path)
    assert layout_utils_to_add(repo, IMPORTING) == (REPO_ROOT / LAYOUT_UTILS).read_text()
    assert layout_utils_to_add(repo, NOT_IMPORTING) is None


def test_a_target_s_own_copy_is_kept(tmp_path: Path):
    module = tmp_path / LAYOUT_UTILS
    module.parent.mkdir(parents=True)
    module.write_text("# edited by hand\n")
    assert layout_utils_to_add(LigerRepo(tmp_path), IMPORTING) is None
