"""sweep_launch_settings.Patched: the launch settings reach the helpers generated ops modules call, in the module and
in a variant's host code, and are undone on exit."""

import importlib.util
import textwrap

from benchmark.scripts.sweep_launch_settings import Patched

# The host side of a tier-1 ops file with parameter gradients: the shared tile helper and a persistent grid.
OPS = """
from liger_kernel.ops.layout_utils import tile_settings
from liger_kernel.ops.utils import get_num_sms


def launch(n_rows, n_cols):
    block_rows, block_cols, num_warps = tile_settings(n_rows, n_cols, block_elements={elements}, max_block_cols=2048)
    return block_rows, block_cols, num_warps, 2 * get_num_sms()
"""


def _module(path, elements):
    path.write_text(textwrap.dedent(OPS.format(elements=elements)))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tile_warps_and_programs_reach_the_shared_helpers(tmp_path):
    module = _module(tmp_path / "fake_ops.py", 4096)
    sms = module.get_num_sms()
    template = module.launch(64, 4096)
    assert template == (2, 2048, 8, 2 * sms)
    with Patched(module, warps=16, tile=(8192, 4096), programs=4):
        assert module.launch(64, 4096) == (2, 4096, 16, 4 * sms)
    assert module.launch(64, 4096) == template


def test_a_variants_host_code_runs_under_the_other_settings(tmp_path):
    module = _module(tmp_path / "fake_ops.py", 4096)
    variant = tmp_path / "fake_ops_small_tile.py"
    variant.write_text(textwrap.dedent(OPS.format(elements=2048)))
    sms = module.get_num_sms()
    with Patched(module, variant=str(variant), programs=4, warps=16):
        assert module.launch(64, 4096) == (1, 2048, 16, 4 * sms)
    assert module.launch(64, 4096) == (2, 2048, 8, 2 * sms)
