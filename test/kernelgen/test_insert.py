"""Tests for kernelgen's libcst inserter: each edit alone on small strings, the registration on fixture layouts,
and property-based checks of the invariants on generated layouts."""

import json
import keyword
import random
import shutil
import subprocess
import textwrap

from pathlib import Path

import libcst as cst
import pytest

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from tools.kernelgen.insert import FUNCTIONAL
from tools.kernelgen.insert import OPS_INIT
from tools.kernelgen.insert import TRANSFORMERS_INIT
from tools.kernelgen.insert import InsertError
from tools.kernelgen.insert import Registration
from tools.kernelgen.insert import add_function
from tools.kernelgen.insert import add_import
from tools.kernelgen.insert import add_lazy_symbol
from tools.kernelgen.insert import add_to_all
from tools.kernelgen.insert import check_invariants
from tools.kernelgen.insert import import_order_problems
from tools.kernelgen.insert import imports_are_sorted
from tools.kernelgen.insert import is_line_subsequence
from tools.kernelgen.insert import register_kernel
from tools.kernelgen.insert.ordering import NaturalText
from tools.kernelgen.insert.ordering import from_import_key
from tools.kernelgen.insert.ordering import natural_compare

FIXTURES = Path(__file__).parent / "fixtures" / "insert"
REPO_ROOT = Path(__file__).resolve().parents[2]
EDITED_PATHS = (OPS_INIT, TRANSFORMERS_INIT, FUNCTIONAL)
RUFF = shutil.which("ruff")
needs_ruff = pytest.mark.skipif(RUFF is None, reason="ruff is not installed")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def assert_invariants(original: str, result: str, rerun) -> None:
    """The invariants of the brief, checked here independently of ``check_invariants``."""
    cst.parse_module(result)
    assert is_line_subsequence(original, result)
    if "\r\n" in original:
        assert result.count("\n") == result.count("\r\n")
    else:
        assert "\r\n" not in result
    assert rerun(result) == result
    if imports_are_sorted(original):
        assert import_order_problems(result) == []


# --- ordering: our comparator against ruff ----------------------------------------------------------------------


def test_natural_compare_orders_digit_runs_by_value():
    assert natural_compare("qwen2", "qwen10") < 0
    assert natural_compare("qwen2_5_vl", "qwen2_vl") < 0
    assert natural_compare("a09", "a9") < 0  # leading zero: compared like a decimal fraction
    assert natural_compare("a1", "a1") == 0
    assert natural_compare("alpha.beta", "alpha1") < 0


@given(st.text(alphabet="aB_.9 01", max_size=6), st.text(alphabet="aB_.9 01", max_size=6))
def test_natural_text_orders_and_equals_as_natural_compare(a, b):
    """Texts without digits or blanks take Python's own comparison: the same answers as the natural walk."""
    assert (NaturalText(a) < NaturalText(b)) == (natural_compare(a, b) < 0)
    assert (NaturalText(a) == NaturalText(b)) == (natural_compare(a, b) == 0)


def test_member_types_order_constants_classes_then_rest():
    names = ["liger_x", "LigerX", "LIGER_X", "_private", "X"]
    ordered = sorted(names, key=lambda name: from_import_key("m", name))
    assert ordered == ["LIGER_X", "LigerX", "X", "_private", "liger_x"]


def _ruff_fix(tmp_path: Path, text: str) -> str:
    path = tmp_path / "block.py"
    path.write_text(text)
    config = REPO_ROOT / "pyproject.toml"
    subprocess.run([RUFF, "check", "--config", str(config), "--select", "I", "--fix", "-q", str(path)], check=False)
    return path.read_text()


def _random_identifier(rng: random.Random, alphabet: str = "aAbBzZ_0190") -> str:
    while True:
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))
        if not text[0].isdigit() and not keyword.iskeyword(text):
            return text


@needs_ruff
@pytest.mark.parametrize("seed", [0, 1])
def test_from_import_key_matches_ruff_order(tmp_path, seed):
    rng = random.Random(seed)
    pairs = sorted(
        {
            (
                f"liger_kernel.{'.'.join(_random_identifier(rng) for _ in range(rng.randint(1, 2)))}",
                _random_identifier(rng),
            )
            for _ in range(300)
        }
    )
    rng.shuffle(pairs)
    shuffled = "".join(f"from {module} import {name}\n" for module, name in pairs)
    ours = "".join(f"from {m} import {n}\n" for m, n in sorted(pairs, key=lambda pair: from_import_key(*pair)))
    assert _ruff_fix(tmp_path, shuffled) == ours


def _random_import_block(rng: random.Random) -> str:
    """A block with random order, groups, comments and blank lines, as a file might have it.

    Half the blocks start from ruff's own layout and get at most one random change, so that both verdicts occur
    and each kind of problem is seen alone.
    """
    candidates = [
        "import os",
        "import sys",
        "import torch",
        "import triton",
        "from torch import nn",
        "import liger_kernel",
        "from liger_kernel.ops.a import A",
        "from liger_kernel.ops.b import B  # noqa: F401",
        "from liger_kernel.ops.b import b",
        "from liger_kernel.ops.c2 import C",
        "from liger_kernel.ops.c10 import C",
    ]
    group_of = [0, 0, 1, 1, 2, 3, 4, 4, 4, 4, 4]  # stdlib, third-party straight / from, first-party straight / from
    chosen = sorted(rng.sample(range(len(candidates)), rng.randint(2, 6)))
    if rng.random() < 0.3:
        rng.shuffle(chosen)
    lines = []
    for position, index in enumerate(chosen):
        if position:
            same_group = group_of[index] == group_of[chosen[position - 1]]
            banner = rng.random() < 0.3
            blanks = 1 if banner or not same_group else 0
            if rng.random() < 0.3:
                blanks = rng.choice([0, 1, 2])
            lines.extend([""] * blanks)
            if banner:
                lines.append("# banner")
                if rng.random() < 0.1:
                    lines.append("")
        lines.append(candidates[index])
    return "\n".join(lines) + "\n"


@needs_ruff
def test_import_order_problems_agrees_with_ruff(tmp_path):
    """Blocks separated by a statement are sorted independently; compare ruff's I001 rows with our verdicts."""
    rng = random.Random(7)
    blocks = [_random_import_block(rng) for _ in range(300)]
    text, starts = "", []
    for block in blocks:
        starts.append(text.count("\n") + 1)
        text += block + "\nx = 1\n"  # one blank line after imports, as ruff wants
    path = tmp_path / "blocks.py"
    path.write_text(text)
    config = REPO_ROOT / "pyproject.toml"
    command = [RUFF, "check", "--config", str(config), "--select", "I", "--output-format", "json", str(path)]
    report = json.loads(subprocess.run(command, capture_output=True, text=True).stdout)
    flagged_rows = {item["location"]["row"] for item in report}
    ruff_verdicts = [start in flagged_rows for start in starts]
    our_verdicts = [bool(import_order_problems(block + "\nx = 1\n")) for block in blocks]
    assert our_verdicts == ruff_verdicts
    assert 30 < sum(ruff_verdicts) < 270  # the corpus exercises both verdicts


# --- add_import ---------------------------------------------------------------------------------------------------

SIMPLE_IMPORTS = dedent(
    '''
    """Ops."""

    import torch

    # Kernels
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    '''
)


def test_add_import_goes_between_its_neighbours():
    result = add_import(SIMPLE_IMPORTS, "liger_kernel.ops.softmax", "LigerSoftmaxFunction")
    assert result == SIMPLE_IMPORTS.replace(
        "from liger_kernel.ops.swiglu",
        "from liger_kernel.ops.softmax import LigerSoftmaxFunction\nfrom liger_kernel.ops.swiglu",
    )


def test_add_import_first_in_group_stays_below_the_banner():
    result = add_import(SIMPLE_IMPORTS, "liger_kernel.ops.geglu", "LigerGELUMulFunction", noqa=True)
    assert "# Kernels\nfrom liger_kernel.ops.geglu import LigerGELUMulFunction  # noqa: F401\n" in result
    assert "LigerGELUMulFunction  # noqa: F401\nfrom liger_kernel.ops.rms_norm" in result
    assert result.startswith('"""Ops."""\n\nimport torch\n\n# Kernels\n')
    assert imports_are_sorted(result)


def test_add_import_last_in_group():
    result = add_import(SIMPLE_IMPORTS, "liger_kernel.ops.tvd", "LigerTVDLossFunction")
    assert result == SIMPLE_IMPORTS + "from liger_kernel.ops.tvd import LigerTVDLossFunction\n"


@pytest.mark.parametrize(
    "existing",
    [
        "from liger_kernel.ops.geglu import LigerGELUMulFunction\n",
        "from liger_kernel.ops.geglu import LigerGELUMulFunction as Geglu\n",
        "from liger_kernel.ops.geglu import (\n    geglu_forward,\n    LigerGELUMulFunction,\n)\n",
    ],
)
def test_add_import_recognises_any_existing_form(existing):
    source = "from liger_kernel.ops.a import A\n" + existing
    assert add_import(source, "liger_kernel.ops.geglu", "LigerGELUMulFunction") == source


def test_add_import_in_unsorted_file_goes_after_the_greatest_smaller_import():
    source = dedent(
        """
        from liger_kernel.ops.zeta import Z
        from liger_kernel.ops.alpha import A
        from liger_kernel.ops.kappa import K
        """
    )
    result = add_import(source, "liger_kernel.ops.beta", "B")
    assert result.splitlines() == [
        "from liger_kernel.ops.zeta import Z",
        "from liger_kernel.ops.alpha import A",
        "from liger_kernel.ops.beta import B",
        "from liger_kernel.ops.kappa import K",
    ]


def test_add_import_keeps_crlf_line_endings():
    source = crlf(SIMPLE_IMPORTS)
    result = add_import(source, "liger_kernel.ops.softmax", "LigerSoftmaxFunction")
    assert "from liger_kernel.ops.softmax import LigerSoftmaxFunction\r\n" in result
    assert result.count("\n") == result.count("\r\n")


TYPE_CHECKING_SOURCE = dedent(
    """
    from typing import TYPE_CHECKING

    from liger_kernel.transformers.rms_norm import LigerRMSNorm  # noqa: F401

    if TYPE_CHECKING:
        from liger_kernel.transformers.monkey_patch import apply_liger_kernel_to_llama  # noqa: F401
    """
)


def test_add_import_inside_type_checking_block():
    result = add_import(
        TYPE_CHECKING_SOURCE, "liger_kernel.transformers.geglu", "apply_geglu", noqa=True, within="type_checking"
    )
    assert "    from liger_kernel.transformers.geglu import apply_geglu  # noqa: F401\n    from" in result
    assert result.count("apply_geglu") == 1
    # The module-level import of the same name does not count for the TYPE_CHECKING block, and vice versa.
    again = add_import(
        TYPE_CHECKING_SOURCE, "liger_kernel.transformers.rms_norm", "LigerRMSNorm", within="type_checking"
    )
    assert again.count("import LigerRMSNorm") == 2


def test_add_import_errors_name_the_problem_in_one_line():
    with pytest.raises(InsertError, match="TYPE_CHECKING"):
        add_import(SIMPLE_IMPORTS, "liger_kernel.ops.a", "A", within="type_checking")
    with pytest.raises(InsertError, match="no `from liger_kernel... import` lines"):
        add_import("import torch\n", "liger_kernel.ops.a", "A")
    with pytest.raises(InsertError) as error:
        add_import("def broken(:\n", "liger_kernel.ops.a", "A")
    assert "does not parse" in str(error.value) and "\n" not in str(error.value)
    assert isinstance(error.value, ValueError)


# --- add_to_all ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "before, after",
    [
        (
            '__all__ = [\n    "a",\n    "c",\n]\n',
            '__all__ = [\n    "a",\n    "b",\n    "c",\n]\n',
        ),
        (
            '__all__ = [\n    "a",\n    "c"\n]\n',  # no trailing comma
            '__all__ = [\n    "a",\n    "b",\n    "c"\n]\n',
        ),
        ('__all__ = ["a", "c"]\n', '__all__ = ["a", "b", "c"]\n'),
        ("__all__ = ('a', 'c')\n", "__all__ = ('a', 'b', 'c')\n"),
        ('__all__ = ("a",)\n', '__all__ = ("a", "b",)\n'),
        ('__all__ = ["c"]\n', '__all__ = ["b", "c"]\n'),
        ("__all__ = []\n", '__all__ = ["b"]\n'),
        (
            '__all__ = [\n    "a",  # the first\n    # Group two\n    "c",\n]\n',
            '__all__ = [\n    "a",  # the first\n    "b",\n    # Group two\n    "c",\n]\n',
        ),
        (
            '__all__ = [\n    "a",\n    "a2",  # last one\n]\n',
            '__all__ = [\n    "a",\n    "a2",  # last one\n    "b",\n]\n',
        ),
        ('__all__: list[str] = ["a"]\n', '__all__: list[str] = ["a", "b"]\n'),
    ],
)
def test_add_to_all_keeps_layout(before, after):
    assert add_to_all(before, "b") == after
    assert add_to_all(after, "b") == after


def test_add_to_all_orders_like_isort_types_and_tolerates_unsorted_lists():
    source = '__all__ = [\n    "is_available",\n    "LigerB",\n    "liger_fn",\n    "LigerA",\n]\n'
    result = add_to_all(source, "LigerAb")
    assert result == source.replace('"LigerA",\n', '"LigerA",\n    "LigerAb",\n')
    # Unsorted: right after the greatest smaller entry, even though a greater one ("liger_fn") comes later.
    result = add_to_all(source, "liger_c")
    assert result == source.replace('"is_available",\n', '"is_available",\n    "liger_c",\n')


def test_add_to_all_absent_leaves_source_unchanged():
    source = "x = 1\n"
    assert add_to_all(source, "b") == source
    assert add_to_all(source, "b", lazy=True) == source


def test_add_to_all_lazy_targets_the_extend_list_and_skips_names_exported_elsewhere():
    source = fixture("transformers_init_upstream.txt")
    result = add_to_all(source, "apply_liger_kernel_to_mistral", lazy=True)
    assert '            "apply_liger_kernel_to_llama",\n            "apply_liger_kernel_to_mistral",\n' in result
    assert add_to_all(source, "LigerRMSNorm", lazy=True) == source  # already in the main __all__
    assert add_to_all(source, "_apply_liger_kernel") == source  # already in the extension


# --- add_lazy_symbol ----------------------------------------------------------------------------------------------


def test_add_lazy_symbol_host_dict_layout():
    source = fixture("transformers_init_host.txt")
    result = add_lazy_symbol(source, "apply_liger_geglu", "liger_kernel.transformers.geglu")
    assert '    "apply_liger_geglu": "liger_kernel.transformers.geglu",\n    "apply_liger_kernel_to_llama"' in result
    assert "    from liger_kernel.transformers.geglu import apply_liger_geglu  # noqa: F401\n" in result
    assert '            "apply_liger_geglu",\n            "apply_liger_kernel_to_llama",\n' in result
    assert_invariants(
        source, result, lambda text: add_lazy_symbol(text, "apply_liger_geglu", "liger_kernel.transformers.geglu")
    )


def test_add_lazy_symbol_upstream_set_layout_for_an_existing_module():
    source = fixture("transformers_init_upstream.txt")
    module = "liger_kernel.transformers.monkey_patch"
    result = add_lazy_symbol(source, "apply_liger_kernel_to_mistral", module)
    assert '        "apply_liger_kernel_to_llama",\n        "apply_liger_kernel_to_mistral",\n' in result
    assert f"    from {module} import apply_liger_kernel_to_mistral  # noqa: F401\n" in result
    assert result.count('"apply_liger_kernel_to_mistral"') == 2  # the set and __all__.extend
    assert_invariants(source, result, lambda text: add_lazy_symbol(text, "apply_liger_kernel_to_mistral", module))


def test_add_lazy_symbol_upstream_set_layout_new_module_gets_its_own_branch():
    source = fixture("transformers_init_upstream.txt")
    module = "liger_kernel.transformers.geglu"
    result = add_lazy_symbol(source, "apply_geglu", module)
    assert '    geglu_symbols = {\n        "apply_geglu",\n    }\n\n    if name in geglu_symbols:\n' in result
    assert "return getattr(module, name)\n\n    raise AttributeError" in result
    assert_invariants(source, result, lambda text: add_lazy_symbol(text, "apply_geglu", module))
    # The new branch really resolves the name.
    # The new branch really resolves the name: run the generated __getattr__ against a recording importlib.
    tree = cst.parse_module(result)
    function = next(s for s in tree.body if isinstance(s, cst.FunctionDef) and s.name.value == "__getattr__")
    imported = []

    class RecordingImportlib:
        @staticmethod
        def import_module(name):
            imported.append(name)
            return type("Module", (), {"apply_geglu": "resolved"})

    namespace = {"importlib": RecordingImportlib, "_TRANSFORMERS_AVAILABLE": True}
    exec(tree.code_for_node(function), namespace)
    assert namespace["__getattr__"]("apply_geglu") == "resolved"
    assert imported == [module]


def test_add_lazy_symbol_without_any_table_is_an_error():
    with pytest.raises(InsertError, match="no lazy symbol table"):
        add_lazy_symbol(TYPE_CHECKING_SOURCE, "apply_x", "liger_kernel.transformers.x")


# --- add_function -------------------------------------------------------------------------------------------------

FUNCTIONS = dedent(
    '''
    """Functional API."""

    from liger_kernel.ops.b import BFunction
    from liger_kernel.ops.d import DFunction


    def liger_b(x):
        return BFunction.apply(x)


    # --- the D family ---
    def liger_d(x):
        return DFunction.apply(x)
    '''
)


def test_add_function_between_existing_functions_keeps_the_next_banner():
    result = add_function(FUNCTIONS, "def liger_c(x):\n    return x\n")
    expected = "return BFunction.apply(x)\n\n\ndef liger_c(x):\n    return x\n\n\n# --- the D family ---\ndef liger_d"
    assert expected in result
    assert_invariants(FUNCTIONS, result, lambda text: add_function(text, "def liger_c(x):\n    return x\n"))


def test_add_function_first_and_last():
    first = add_function(FUNCTIONS, "def liger_a(x):\n    return x\n")
    assert "DFunction\n\n\ndef liger_a(x):\n    return x\n\n\ndef liger_b(x):" in first
    last = add_function(FUNCTIONS, "def liger_e(x):\n    return x\n")
    assert last == FUNCTIONS + "\n\ndef liger_e(x):\n    return x\n"


def test_add_function_existing_name_is_unchanged_and_bad_snippets_are_errors():
    assert add_function(FUNCTIONS, "def liger_b(y):\n    return y\n") == FUNCTIONS
    with pytest.raises(InsertError, match="exactly one top-level def"):
        add_function(FUNCTIONS, "x = 1\n")


def test_add_function_without_functions_goes_after_the_imports():
    source = "from liger_kernel.ops.a import AFunction\n\nCONSTANT = 1\n"
    result = add_function(source, "def liger_a(x):\n    return x\n", after_imports_of="liger_kernel.ops")
    assert result == "from liger_kernel.ops.a import AFunction\n\n\ndef liger_a(x):\n    return x\n\n\nCONSTANT = 1\n"
    assert add_function("x = 1\n", "def f():\n    pass\n") == "x = 1\n\n\ndef f():\n    pass\n"


def test_add_function_crlf_with_multiline_docstring_and_decorator():
    source = crlf(FUNCTIONS)
    snippet = '@torch.no_grad()\ndef liger_c(x):\n    """Doc.\n\n    More."""\n    return x\n'
    result = add_function(source, snippet)
    assert result.count("\n") == result.count("\r\n")
    assert crlf(snippet) in result
    assert_invariants(source, result, lambda text: add_function(text, snippet))


def test_add_function_follows_a_one_blank_line_convention():
    source = "def a():\n    pass\n\ndef c():\n    pass\n"
    assert (
        add_function(source, "def b():\n    pass\n")
        == "def a():\n    pass\n\ndef b():\n    pass\n\ndef c():\n    pass\n"
    )


# --- register_kernel on fixture layouts ---------------------------------------------------------------------------


def geglu_registration(lazy_names: tuple[str, ...] = ("apply_liger_geglu",)) -> Registration:
    return Registration(
        kernel="geglu",
        ops_module="liger_kernel.ops.geglu",
        ops_names=("LigerGELUMulFunction", "geglu_forward", "geglu_backward"),
        transformers_module="liger_kernel.transformers.geglu",
        module_names=("LigerGEGLUMLP",),
        lazy_names=lazy_names,
        functional_name="liger_geglu",
        functional_source='def liger_geglu(a, b):\n    """GEGLU."""\n    return LigerGELUMulFunction.apply(a, b)\n',
        function_class_name="LigerGELUMulFunction",
    )


def fixture_files(transformers_fixture: str = "transformers_init_host.txt") -> dict[str, str]:
    return {
        OPS_INIT: fixture("ops_init.txt"),
        TRANSFORMERS_INIT: fixture(transformers_fixture),
        FUNCTIONAL: fixture("functional.txt"),
    }


@pytest.mark.parametrize("layout", ["transformers_init_host.txt", "transformers_init_upstream.txt"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_register_kernel_on_fixture_layouts(layout, newline):
    files = {path: text.replace("\n", newline) for path, text in fixture_files(layout).items()}
    registration = geglu_registration()
    changed = register_kernel(files, registration)
    assert set(changed) == set(files)
    for path, text in changed.items():
        assert_invariants(
            files[path], text, lambda source, path=path: register_kernel({path: source}, registration).get(path, source)
        )
    n = newline
    ops = changed[OPS_INIT]
    assert (
        f"{n}from liger_kernel.ops.geglu import LigerGELUMulFunction{n}from liger_kernel.ops.geglu import geglu_backward{n}"
        in ops
    )
    assert f'    "LigerGELUMulFunction",{n}    "LigerRMSNormFunction",' in ops
    transformers = changed[TRANSFORMERS_INIT]
    assert f"from liger_kernel.transformers.geglu import LigerGEGLUMLP  # noqa: F401{n}" in transformers
    # The host layout re-exports functional.py's helpers; upstream's exports only rope's own liger_* functions.
    assert transformers.count('"liger_geglu"') == (1 if layout == "transformers_init_host.txt" else 0)
    assert ("import liger_geglu" in transformers) == (layout == "transformers_init_host.txt")
    functional = changed[FUNCTIONAL]
    assert f"from liger_kernel.ops.geglu import LigerGELUMulFunction{n}from liger_kernel.ops.rms_norm" in functional
    assert f"{n}{n}{n}def liger_geglu(a, b):" in functional
    assert register_kernel({**files, **changed}, registration) == {}


@needs_ruff
def test_register_kernel_output_is_ruff_clean(tmp_path):
    for layout in ["transformers_init_host.txt", "transformers_init_upstream.txt"]:
        for path, text in register_kernel(fixture_files(layout), geglu_registration()).items():
            target = tmp_path / layout / Path(path).name
            target.parent.mkdir(exist_ok=True)
            target.write_text(text)
    config = str(REPO_ROOT / "pyproject.toml")
    check = subprocess.run(
        [RUFF, "check", "--config", config, "--select", "E,F,I,W", str(tmp_path)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout
    form = subprocess.run(
        [RUFF, "format", "--config", config, "--check", str(tmp_path)], capture_output=True, text=True
    )
    assert form.returncode == 0, form.stdout


@pytest.mark.skipif(not all((REPO_ROOT / path).exists() for path in EDITED_PATHS), reason="host files not present")
def test_register_kernel_on_this_checkout(tmp_path):
    """The real registration files of this repository (dict-style lazy table) take a made-up kernel cleanly."""
    files = {path: (REPO_ROOT / path).read_text() for path in EDITED_PATHS}
    registration = registration_for("kgprobe", lazy=True)
    changed = register_kernel(files, registration)
    for path, text in changed.items():
        assert_invariants(
            files[path], text, lambda source, path=path: register_kernel({path: source}, registration).get(path, source)
        )
    assert "from liger_kernel.ops.kgprobe import LigerKgprobeFunction" in changed[OPS_INIT]
    assert '"apply_liger_kgprobe": "liger_kernel.transformers.kgprobe"' in changed[TRANSFORMERS_INIT]
    assert "\n\n\ndef liger_kgprobe(x):\n" in changed[FUNCTIONAL]
    if RUFF is not None:
        for index, text in enumerate(changed.values()):
            (tmp_path / f"file_{index}.py").write_text(text)
        config = str(REPO_ROOT / "pyproject.toml")
        check = subprocess.run(
            [RUFF, "check", "--config", config, "--select", "I", str(tmp_path)], capture_output=True, text=True
        )
        assert check.returncode == 0, check.stdout


def test_register_kernel_skips_functionals_when_the_package_exports_none():
    files = fixture_files()
    files[TRANSFORMERS_INIT] = (
        files[TRANSFORMERS_INIT]
        .replace("from liger_kernel.transformers.functional import liger_rms_norm  # noqa: F401\n", "")
        .replace('    "liger_rms_norm",\n', "")
    )
    changed = register_kernel(files, geglu_registration(lazy_names=()))
    assert "liger_geglu" not in changed[TRANSFORMERS_INIT]
    assert "LigerGEGLUMLP" in changed[TRANSFORMERS_INIT]


def test_register_kernel_imports_functions_from_the_ops_package_when_functional_py_does():
    """Upstream's functional.py imports every Function from ``liger_kernel.ops`` (so backend replacement applies);
    the new one joins them there. A file importing from submodules keeps doing so."""
    package_style = dedent(
        """
        import torch

        from liger_kernel.ops import LigerRMSNormFunction
        from liger_kernel.ops import LigerSiLUMulFunction


        def liger_rms_norm(x, weight, eps):
            return LigerRMSNormFunction.apply(x, weight, eps)
        """
    )
    changed = register_kernel({FUNCTIONAL: package_style}, geglu_registration(lazy_names=()))[FUNCTIONAL]
    assert (
        "from liger_kernel.ops import LigerGELUMulFunction\nfrom liger_kernel.ops import LigerRMSNormFunction\n"
        in changed
    )
    assert "liger_kernel.ops.geglu" not in changed
    submodule_style = fixture("functional.txt")
    changed = register_kernel({FUNCTIONAL: submodule_style}, geglu_registration(lazy_names=()))[FUNCTIONAL]
    assert "from liger_kernel.ops.geglu import LigerGELUMulFunction\n" in changed


def test_register_kernel_errors_name_the_file():
    files = fixture_files()
    with pytest.raises(InsertError, match=f"^{OPS_INIT}: does not parse"):
        register_kernel({**files, OPS_INIT: "from (\n"}, geglu_registration())
    with pytest.raises(InsertError, match=f"^{OPS_INIT}: no module-level `from liger_kernel.ops."):
        register_kernel({**files, OPS_INIT: '"""Empty."""\nimport torch\n'}, geglu_registration())
    with pytest.raises(InsertError, match=f"^{TRANSFORMERS_INIT}: no lazy symbol table"):
        register_kernel({TRANSFORMERS_INIT: TYPE_CHECKING_SOURCE}, geglu_registration())
    with pytest.raises(InsertError, match="should define only liger_geglu"):
        bad = Registration(**{**geglu_registration().__dict__, "functional_source": "def other():\n    pass\n"})
        register_kernel({FUNCTIONAL: files[FUNCTIONAL]}, bad)


def test_check_invariants_rejects_each_violation():
    original = "from liger_kernel.a import a\nfrom liger_kernel.c import c\n"
    check_invariants(
        "f.py", original, original.replace("c import c", "b import b\nfrom liger_kernel.c import c"), lambda t: t
    )
    with pytest.raises(InsertError, match="f.py: the edit dropped"):
        check_invariants("f.py", original, "from liger_kernel.a import a\n", lambda t: t)
    with pytest.raises(InsertError, match="line endings"):
        check_invariants("f.py", original, crlf(original), lambda t: t)
    with pytest.raises(InsertError, match="not idempotent"):
        check_invariants("f.py", original, original, lambda t: t + "x = 1\n")
    with pytest.raises(InsertError, match="unsorted"):
        check_invariants("f.py", original, original + "from liger_kernel.b import b\n", lambda t: t)
    with pytest.raises(InsertError, match="does not parse"):
        check_invariants("f.py", original, original + "def (\n", lambda t: t)


# --- property-based: generated layouts ----------------------------------------------------------------------------

kernel_names = st.from_regex(r"[a-z][a-z0-9]{0,6}(_[a-z0-9]{1,3})?", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)
)


def camel(kernel: str) -> str:
    return "".join(part.capitalize() for part in kernel.split("_"))


def registration_for(kernel: str, lazy: bool) -> Registration:
    function_class = f"Liger{camel(kernel)}Function"
    return Registration(
        kernel=kernel,
        ops_module=f"liger_kernel.ops.{kernel}",
        ops_names=(function_class, f"{kernel}_forward", f"{kernel}_backward"),
        transformers_module=f"liger_kernel.transformers.{kernel}",
        module_names=(f"Liger{camel(kernel)}",),
        lazy_names=(f"apply_liger_{kernel}",) if lazy else (),
        functional_name=f"liger_{kernel}",
        functional_source=f"def liger_{kernel}(x):\n    return {function_class}.apply(x)\n",
        function_class_name=function_class,
    )


@st.composite
def import_lines(draw, lines: list[tuple[str, str]], noqa: bool, banner: str | None) -> str:
    """``from m import n`` lines, sorted or shuffled, with an optional banner above one of them."""
    if draw(st.integers(0, 3)):  # mostly sorted, so that the isort-clean invariant is exercised often
        lines = sorted(lines, key=lambda pair: from_import_key(*pair))
    else:
        lines = draw(st.permutations(lines))
    comment = "  # noqa: F401" if noqa else ""
    rendered = [f"from {module} import {name}{comment}\n" for module, name in lines]
    if banner and rendered:
        position = draw(st.integers(0, len(rendered) - 1))
        # ruff wants one blank line above a comment inside a block; leave it out sometimes (not isort-clean).
        spacing = "\n" if position and draw(st.booleans()) else ""
        rendered.insert(position, f"{spacing}# {banner}\n")
    return "".join(rendered)


@st.composite
def all_literal(draw, names: list[str], indent: str = "") -> str:
    """``__all__`` as a list or tuple, one-line or one-per-line, any quotes, sorted or not, maybe absent."""
    style = draw(st.sampled_from(["absent", "list", "list-one-line", "tuple", "tuple-one-line"]))
    if style == "absent":
        return ""
    quote = draw(st.sampled_from(['"', "'"]))
    if draw(st.booleans()):
        names = sorted(names)
    opening, closing = ("[", "]") if style.startswith("list") else ("(", ")")
    items = [f"{quote}{name}{quote}" for name in names]
    if style.endswith("one-line"):
        trailing = "," if len(items) == 1 and opening == "(" else ""
        return f"__all__ = {opening}{', '.join(items)}{trailing}{closing}\n"
    trailing = "," if draw(st.booleans()) or (len(items) == 1 and opening == "(") else ""
    body = ",\n".join(f"{indent}    {item}" for item in items)
    return f"__all__ = {opening}\n{body}{trailing}\n{closing}\n"


@st.composite
def ops_init_layouts(draw) -> str:
    kernels = draw(st.lists(kernel_names, min_size=1, max_size=5, unique_by=camel))
    lines = [(f"liger_kernel.ops.{k}", name) for k in kernels for name in registration_for(k, False).ops_names]
    parts = []
    if draw(st.booleans()):
        parts.append('"""Kernel entry points."""\n' + "\n" * draw(st.integers(1, 2)))
    if draw(st.booleans()):
        parts.append("import torch\n\n")
    banner = draw(st.sampled_from([None, "Kernels", "Always-safe imports"]))
    parts.append(draw(import_lines(lines, noqa=draw(st.booleans()), banner=banner)))
    exported = draw(all_literal([name for _, name in lines]))
    if exported:
        parts.append("\n" * draw(st.sampled_from([1, 1, 2])) + exported)
    return "".join(parts)


@st.composite
def functional_layouts(draw) -> str:
    kernels = draw(st.lists(kernel_names, min_size=1, max_size=5, unique_by=camel))
    registrations = [registration_for(k, False) for k in kernels]
    parts = []
    if draw(st.booleans()):
        parts.append('"""Functional forms."""\n\n')
    if draw(st.booleans()):
        parts.append("from typing import Optional\n\n")
    lines = [(r.ops_module, r.function_class_name) for r in registrations]
    parts.append(draw(import_lines(lines, noqa=False, banner=None)))
    defined = draw(st.lists(st.sampled_from(registrations), unique_by=lambda r: r.kernel))
    if draw(st.booleans()):
        defined = sorted(defined, key=lambda r: r.functional_name)
    for registration in defined:
        if draw(st.integers(0, 3)) == 0:
            parts.append(f"\n\n# --- {registration.kernel} ---\n{registration.functional_source}")
        else:
            parts.append(f"\n\n{registration.functional_source}")
    if draw(st.booleans()):
        parts.append("\n\nDEFAULT_EPS = 1e-6\n")
    return "".join(parts)


@st.composite
def transformers_init_layouts(draw) -> str:
    kernels = draw(st.lists(kernel_names, min_size=1, max_size=4, unique_by=camel))
    registrations = [registration_for(k, True) for k in kernels]
    classes = [(r.transformers_module, r.module_names[0]) for r in registrations]
    lazy = [(r.transformers_module, r.lazy_names[0]) for r in registrations]
    functionals = [("liger_kernel.transformers.functional", r.functional_name) for r in registrations]
    exports_functionals = draw(st.booleans())
    eager = classes + (functionals if exports_functionals else [])
    parts = []
    if draw(st.booleans()):
        parts.append('"""Liger modules."""\n\n')
    parts.append("import importlib\n\nfrom typing import TYPE_CHECKING\n\n")
    parts.append(draw(import_lines(eager, noqa=True, banner=draw(st.sampled_from([None, "Always-safe imports"])))))
    parts.append("\nif TYPE_CHECKING:\n")
    typed = draw(import_lines(lazy, noqa=True, banner=None))
    parts.append("".join(f"    {line}" if line.strip() else line for line in typed.splitlines(True)))
    if draw(st.booleans()):  # host layout: a dict table
        entries = "".join(f'    "{name}": "{module}",\n' for module, name in draw(st.permutations(lazy)))
        parts.append(f"\n_TRANSFORMERS_DEPENDENT_SYMBOLS = {{\n{entries}}}\n")
        parts.append(
            "\n\ndef __getattr__(name: str):\n"
            "    module = _TRANSFORMERS_DEPENDENT_SYMBOLS.get(name)\n"
            "    if module is None:\n"
            "        raise AttributeError(name)\n"
            "    return getattr(importlib.import_module(module), name)\n"
        )
    else:  # upstream layout: sets inside __getattr__, one branch per module
        parts.append("\n\ndef __getattr__(name: str):\n")
        for module, name in lazy:
            variable = f"{module.rsplit('.', 1)[-1]}_symbols"
            parts.append(
                f'    {variable} = {{\n        "{name}",\n    }}\n\n'
                f"    if name in {variable}:\n"
                f'        module = importlib.import_module("{module}")\n'
                "        return getattr(module, name)\n\n"
            )
        parts.append("    raise AttributeError(name)\n")
    parts.append("\n\n" + draw(all_literal([name for _, name in eager])))
    if draw(st.booleans()):
        items = "".join(f'            "{name}",\n' for _, name in lazy)
        parts.append(
            f"\nif importlib.util.find_spec('transformers'):\n    __all__.extend(\n        [\n{items}        ]\n    )\n"
        )
    return "".join(parts)


def _check_registration(path: str, original: str, registration: Registration) -> str:
    changed = register_kernel({path: original}, registration)
    result = changed.get(path, original)
    assert_invariants(original, result, lambda text: register_kernel({path: text}, registration).get(path, text))
    return result


PROPERTY_SETTINGS = settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(layout=ops_init_layouts(), kernel=kernel_names, use_crlf=st.booleans())
def test_property_ops_init(layout, kernel, use_crlf):
    original = crlf(layout) if use_crlf else layout
    registration = registration_for(kernel, False)
    result = _check_registration(OPS_INIT, original, registration)
    for name in registration.ops_names:
        assert add_import(result, registration.ops_module, name) == result  # each name is imported
        if "__all__" in original:
            assert f"'{name}'" in result or f'"{name}"' in result


@PROPERTY_SETTINGS
@given(layout=functional_layouts(), kernel=kernel_names, use_crlf=st.booleans())
def test_property_functional(layout, kernel, use_crlf):
    original = crlf(layout) if use_crlf else layout
    registration = registration_for(kernel, False)
    result = _check_registration(FUNCTIONAL, original, registration)
    module = cst.parse_module(result)
    defined = [statement.name.value for statement in module.body if isinstance(statement, cst.FunctionDef)]
    assert defined.count(registration.functional_name) == 1
    # Inserting into a sorted sequence of defs keeps it sorted.
    original_defined = [s.name.value for s in cst.parse_module(original).body if isinstance(s, cst.FunctionDef)]
    if original_defined == sorted(original_defined):
        assert defined == sorted(defined)


@PROPERTY_SETTINGS
@given(layout=transformers_init_layouts(), kernel=kernel_names, use_crlf=st.booleans(), lazy=st.booleans())
def test_property_transformers_init(layout, kernel, use_crlf, lazy):
    original = crlf(layout) if use_crlf else layout
    registration = registration_for(kernel, lazy)
    result = _check_registration(TRANSFORMERS_INIT, original, registration)
    assert add_import(result, registration.transformers_module, registration.module_names[0]) == result
    for name in registration.lazy_names:
        assert add_import(result, registration.transformers_module, name, within="type_checking") == result
        assert f'"{name}"' in result


@needs_ruff
@settings(
    deadline=None,
    max_examples=5,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=ops_init_layouts(), functional=functional_layouts(), init=transformers_init_layouts(), kernel=kernel_names)
def test_property_ruff_agrees_output_stays_isort_clean(tmp_path, ops, functional, init, kernel):
    """On a few generated layouts, ruff itself confirms: isort-clean in, isort-clean out."""
    registration = registration_for(kernel, True)
    files = {OPS_INIT: ops, FUNCTIONAL: functional, TRANSFORMERS_INIT: init}
    changed = register_kernel(files, registration)
    for index, (path, text) in enumerate(files.items()):
        (tmp_path / f"in_{index}.py").write_text(text)
        (tmp_path / f"out_{index}.py").write_text(changed.get(path, text))
    config = str(REPO_ROOT / "pyproject.toml")
    command = [RUFF, "check", "--config", config, "--select", "I", "--output-format", "json", str(tmp_path)]
    report = json.loads(subprocess.run(command, capture_output=True, text=True).stdout)
    flagged = {Path(item["filename"]).name for item in report}
    for index in range(len(files)):
        if f"in_{index}.py" not in flagged:
            assert f"out_{index}.py" not in flagged
        # Our comparator agrees with ruff on both files.
        for prefix in ("in", "out"):
            name = f"{prefix}_{index}.py"
            assert (name in flagged) == (not imports_are_sorted((tmp_path / name).read_text())), name


def test_registrations_of_every_built_in_with_and_without_fused_linear_are_ruff_clean(tmp_path):
    """The import lines of every built-in's registration (and of its fused linear form: the longest names, past
    the line length with their ``# noqa``) are as ruff's isort writes them: all registered in one checkout, the
    registration files have no finding ruff would not have had before."""
    from test.kernelgen.conftest import copy_checkout
    from tools.kernelgen.analyze import analyze
    from tools.kernelgen.analyze import list_builtin_references
    from tools.kernelgen.formatting import lint_findings
    from tools.kernelgen.generate import fused_linear_registration
    from tools.kernelgen.generate import registration_for
    from tools.kernelgen.layout import kernel_paths

    root = copy_checkout(tmp_path / "liger")
    loss = analyze("kl_div")  # the names below derive from the kernel name alone; one analysis serves them all
    texts = {path: (root / path).read_text() for path in (OPS_INIT, TRANSFORMERS_INIT, FUNCTIONAL)}
    before = {path: lint_findings(text, root, path) for path, text in texts.items()}
    # A built-in the checkout has a kernel of already (rms_norm, swiglu) is refused by new before registering.
    for name in [name for name in list_builtin_references() if not (root / kernel_paths(name)["ops"]).exists()]:
        profile = loss.renamed(name)
        forms = [(registration_for, profile.functional_name, profile.function_class_name)]
        forms.append((fused_linear_registration, profile.fused_linear_classes[2], profile.fused_linear_classes[0]))
        for make, functional, function_class in forms:
            source = f"def {functional}(*args):\n    return {function_class}.apply(*args)\n"
            texts.update(register_kernel(texts, make(profile, source)))
    assert "LigerFusedLinearCrossEntropyEntropyBonusLoss" in texts[TRANSFORMERS_INIT]
    for path, text in texts.items():
        assert lint_findings(text, root, path) == before[path], path
