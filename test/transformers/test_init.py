import os
import subprocess
import textwrap

from pathlib import Path

import pytest

import liger_kernel.transformers as liger_transformers

from tools.kernelgen.pyrun import run_python

REPO_ROOT = Path(__file__).resolve().parents[2]


# A process that has never imported transformers: the suite's Python runs fork from a server that imported it
# (test/forkserver.py), so a run forgets it first; a new interpreter has nothing to forget.
FORGET_TRANSFORMERS = """
import sys
for name in [name for name in sys.modules if name == "transformers" or name.startswith("transformers.")]:
    del sys.modules[name]
"""


def _run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return run_python(["-c", FORGET_TRANSFORMERS + textwrap.dedent(code)], cwd=REPO_ROOT, env=env, timeout=120)


def test_always_safe_names_import_without_transformers_installed():
    # A None entry in sys.modules makes every "import transformers" raise ImportError, as if it were absent.
    result = _run_python(
        """
        import sys
        sys.modules["transformers"] = None
        from liger_kernel.transformers import LigerCrossEntropyLoss, LigerRMSNorm, LigerSwiGLUMLP
        from liger_kernel.transformers import liger_cross_entropy, liger_rms_norm, liger_swiglu
        import liger_kernel.transformers as lt
        assert not lt.is_transformers_available()
        assert "apply_liger_kernel_to_llama" not in lt.__all__, lt.__all__
        try:
            from liger_kernel.transformers import apply_liger_kernel_to_llama
        except ImportError as error:
            print("IMPORT_ERROR:", error)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "IMPORT_ERROR:" in result.stdout
    assert "requires the 'transformers' package: pip install transformers" in result.stdout


def test_importing_the_package_does_not_import_transformers():
    result = _run_python(
        """
        import sys
        import liger_kernel.transformers
        print("LOADED:", "transformers" in sys.modules)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "LOADED: False" in result.stdout


def test_dependent_symbol_loads_lazily_from_its_module():
    from liger_kernel.transformers import apply_liger_kernel_to_llama
    from liger_kernel.transformers.monkey_patch import apply_liger_kernel_to_llama as defined

    assert apply_liger_kernel_to_llama is defined
    assert liger_transformers.is_transformers_available()
    assert "apply_liger_kernel_to_llama" in liger_transformers.__all__


def test_every_dependent_symbol_is_defined_by_its_listed_module():
    import importlib

    for name, module_name in liger_transformers._TRANSFORMERS_DEPENDENT_SYMBOLS.items():
        assert getattr(importlib.import_module(module_name), name) is getattr(liger_transformers, name)


def test_every_name_in_all_resolves_and_all_is_sorted_by_group():
    for name in liger_transformers.__all__:
        assert getattr(liger_transformers, name) is not None, name
    safe_names = [n for n in liger_transformers.__all__ if n not in liger_transformers._TRANSFORMERS_DEPENDENT_SYMBOLS]
    assert safe_names == sorted(safe_names, key=_isort_order)


def _isort_order(name):
    """isort's order of names (ruff's, as kernelgen inserts them): CONSTANTS, then Classes, then the rest, each
    case-insensitively (``LigerGatedSin`` before ``LigerGEGLUMLP``, as upstream orders ``LigerTiledSwiGLUMLP``
    before ``LigerTVDLoss``)."""
    if name.isupper():
        kind = 0
    elif name[:1].isupper():
        kind = 1
    else:
        kind = 2
    return kind, name.lower(), name


def test_unknown_attribute_raises_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'apply_liger_kernel_to_nothing'"):
        liger_transformers.apply_liger_kernel_to_nothing
    assert not hasattr(liger_transformers, "definitely_not_a_symbol")
