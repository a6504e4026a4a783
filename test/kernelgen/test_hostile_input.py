"""Hostile input: no profile field or reference text reaches generated code except as a literal of its validated
type, a name that was checked, or the math derived from formulas; a reference's other top-level statements stay out
of the generated files; a reference that exits or prints cannot pass for a successful analysis."""

from __future__ import annotations

import ast
import re

import pytest
import yaml

from test.kernelgen.conftest import EXAMPLES
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import snapshot
from tools.kernelgen.cli import user_errors
from tools.kernelgen.generate import plan_new
from tools.kernelgen.profile import from_dict
from tools.kernelgen.repo import LigerRepo

# Breaks out of code, of a string of either quote and of a comment: printed anywhere but as a literal, it is a call.
PAYLOAD = "x'\"\n__import__('os').system('true')\n#"


def _leaves(data, path=()):
    """Every scalar of a profile's YAML data, by its path of keys and indexes (the notes section excluded)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if path or key != "notes":
                yield from _leaves(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _leaves(value, (*path, index))
    elif data is not None:
        yield path


def _replaced(data, path, value):
    data = yaml.safe_load(yaml.safe_dump(data))
    holder = data
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return data


def _calls_smuggled_in(changes: dict[str, str]) -> list[str]:
    found = []
    for path, text in changes.items():
        if not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError as error:
            found.append(f"{path} does not parse ({error.msg}, line {error.lineno})")
            continue
        if any(isinstance(node, ast.Name) and node.id == "__import__" for node in ast.walk(tree)):
            found.append(f"{path} calls __import__")
    return found


@pytest.mark.parametrize("example", ["swiglu", "rms_norm", "cross_entropy"])
def test_no_profile_field_reaches_generated_code_as_code(checkout, example):
    """Each scalar of the profile (free text, names, numbers, list items, dict values) in turn holds code: the
    profile is refused at load, or the generated files hold it only as a string."""
    data = yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text())
    data["reference"]["source"] += "\n\nSIDE_EFFECT = __import__('os').getcwd()\n"
    repo = LigerRepo.open(checkout)
    leaked, refused, generated = [], 0, 0
    for path in _leaves(data):
        try:
            profile = from_dict(_replaced(data, path, PAYLOAD), source="p.yaml").renamed("hostile")
            changes = plan_new(repo, profile).changes
        except user_errors() as error:
            assert "\n" not in str(error).strip(), path
            refused += 1
            continue
        generated += 1
        leaked += [f"{'.'.join(map(str, path))}: {problem}" for problem in _calls_smuggled_in(changes)]
    assert not leaked, leaked
    assert refused and generated  # both kinds of field were tried


def test_a_references_other_top_level_statements_stay_out_of_the_generated_files(checkout, tmp_path):
    """The generated test carries the reference's imports and what its entry needs (a helper, a constant and what
    they read), in the file's order; not a statement that does work at import, nor an unused definition. The
    benchmark imports the reference from the test instead of copying it."""
    marker = tmp_path / "ran"
    reference = tmp_path / "scaled_act.py"
    reference.write_text(
        "import torch\n\n"
        f"open({str(marker)!r}, 'w').close()\n"
        "SCALE = 2.0\n"
        "UNUSED = 3.0\n\n\n"
        "def _scaled(x):\n    return x * SCALE\n\n\n"
        "def unused_helper(x):\n    return x\n\n\n"
        "def scaled_act(x):\n    return torch.sigmoid(_scaled(x))\n\n\n"
        "print('imported')\n"
    )
    from tools.kernelgen.analyze import analyze

    changes = plan_new(LigerRepo.open(checkout), analyze(f"{reference}:scaled_act")).changes
    text = changes["test/transformers/test_scaled_act.py"]
    assert "SCALE = 2.0" in text and "def _scaled(x):" in text and "def scaled_act(x):" in text
    assert text.index("SCALE = 2.0") < text.index("def _scaled(x):") < text.index("def scaled_act(x):")
    assert str(marker) not in text and "print('imported')" not in text
    assert "UNUSED" not in text and "unused_helper" not in text
    benchmark = changes["benchmark/scripts/benchmark_scaled_act.py"]
    assert "from test.transformers.test_scaled_act import scaled_act" in benchmark
    assert "SCALE = 2.0" not in benchmark and str(marker) not in benchmark


@pytest.mark.parametrize(
    "path, value, expected",
    [
        ("hyperparameters", [{"name": "alpha", "type": "float", "default": "x"}], "hyperparameters[0].default: 'x'"),
        ("hyperparameters", [{"name": "alpha", "type": "float", "default": [1, 2]}], "hyperparameters[0].default: [1"),
        ("test.tolerances.float32", [1e-5], "test.tolerances.float32: [1e-05] is not [atol, rtol]"),
        ("benchmark.fixed_config.hidden_size", "x", "benchmark.fixed_config.hidden_size: 'x' is not a positive"),
        ("test.cpu_shapes", [[-2, 3]], "test.cpu_shapes[0]: [-2, 3] is not a shape"),
        ("test.cpu_shapes", [[0, 3]], "test.cpu_shapes[0]: [0, 3] is not a shape"),
        ("test.cpu_shapes", [[]], "test.cpu_shapes[0]: [] is not a shape"),
        ("test.cpu_shapes", [["str", 3]], "test.cpu_shapes[0]: ['str', 3] is not a shape"),
        ("benchmark.providers", ["liger", "junk"], "benchmark.providers[1]: 'junk' is not one of"),
        ("math.outputs.y", " + ".join(["a * b"] * 3000), "math.outputs.y: 'a * b + a * b"),
    ],
)
def test_a_value_of_the_wrong_type_or_range_is_one_line_naming_the_file_and_field(
    checkout, tmp_path, path, value, expected
):
    data = yaml.safe_load((EXAMPLES / "swiglu.yaml").read_text())
    *parents, last = path.split(".")
    holder = data
    for key in parents:
        holder = holder[key]
    holder[last] = value
    profile = tmp_path / "edited.yaml"
    profile.write_text(yaml.safe_dump(data, sort_keys=False))
    before = snapshot(checkout)
    line = one_line_error(run_kernelgen("new", "my_gate", "--profile", str(profile), "--repo", str(checkout)))
    assert f"invalid profile {profile}: " in line and expected in line
    assert snapshot(checkout) == before


@pytest.mark.parametrize("call", ["sys.exit(0)", "os._exit(0)", "exit()"])
def test_a_reference_that_ends_the_process_is_an_error_not_a_silent_success(tmp_path, call):
    reference = tmp_path / "quits.py"
    reference.write_text(f"import os\nimport sys\n\nimport torch\n\n\ndef quits(x):\n    return x * 2\n\n\n{call}\n")
    result = run_kernelgen("analyze", str(reference))
    assert result.returncode == 2 and result.stdout == ""
    assert "the reference ends the process" in one_line_error(result)


def test_what_a_reference_prints_stays_off_the_profile_on_stdout(tmp_path):
    reference = tmp_path / "chatty.py"
    reference.write_text(
        "import torch\n\nprint('loading')\n\n\ndef chatty(x):\n    print('tracing')\n    return torch.relu(x) * x\n"
    )
    result = run_kernelgen("analyze", str(reference))
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["operation_name"] == "chatty"
    assert result.stderr.splitlines() == ["loading", "tracing"]


def test_modify_checks_its_kernel_before_it_runs_the_reference(checkout, tmp_path):
    marker = tmp_path / "ran"
    reference = tmp_path / "other.py"
    reference.write_text(f"import torch\n\nopen({str(marker)!r}, 'w').close()\n\n\ndef other(x):\n    return x * 2\n")
    line = one_line_error(run_kernelgen("modify", "nosuchk", "--reference", str(reference), "--repo", str(checkout)))
    assert "no kernel 'nosuchk'" in line and not marker.exists()


def test_a_kernel_name_too_long_for_a_file_name_is_one_line(checkout):
    line = one_line_error(run_kernelgen("new", "a" * 300, "--repo", str(checkout)))
    assert "is 300 characters long; at most 100" in line


@pytest.mark.parametrize(
    "statement, expected",
    [
        ("y = __import__('os').system('true')", "calls __import__('os').system, which is no tl/libdevice"),
        ("y = x.__class__", "reads x.__class__: only tl and libdevice attributes"),
        ("y = [v for v in x]", "holds a ListComp"),
        ("x.shape = 3", "assigns something other than a name"),
    ],
)
def test_hand_written_triton_is_refused_unless_it_is_math(statement, expected):
    data = yaml.safe_load((EXAMPLES / "rms_norm.yaml").read_text())
    data["math"]["triton"]["forward"] = [statement]
    with pytest.raises(user_errors(), match=r"math\.triton\.forward\[0\]: .*" + re.escape(expected)):
        from_dict(data, source="p.yaml")


def test_a_reference_expression_of_thousands_of_terms_is_one_line(tmp_path):
    reference = tmp_path / "long_sum.py"
    terms = " + ".join(f"a * {index}.0" for index in range(1, 3001))
    reference.write_text(f"import torch\n\n\ndef long_sum(a):\n    return {terms}\n")
    line = one_line_error(run_kernelgen("analyze", str(reference)))
    assert "nested too deeply to process (RecursionError)" in line
