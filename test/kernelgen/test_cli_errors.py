"""Bad input found by using kernelgen as a new user would: each is one line on stderr, exit 2, and nothing
half-written (or, for Ctrl-C during the final swap, everything written and said so)."""

import importlib
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import types

import pytest
import yaml

from test.kernelgen.conftest import EXAMPLES
from test.kernelgen.conftest import REPO_ROOT
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import snapshot
from tools.kernelgen import generate
from tools.kernelgen import writer
from tools.kernelgen.cli import main
from tools.kernelgen.record import has_record


@pytest.mark.parametrize(
    "argv",
    [
        ["new", "class"],
        ["new", "lambda", "--reference", "geglu"],
        ["modify", "class", "--reference", "geglu"],
        ["validate", "lambda"],
        ["analyze", "geglu", "--name", "class"],
    ],
)
def test_a_python_keyword_is_not_a_kernel_name(argv, checkout):
    if argv[0] != "analyze":
        argv = argv + ["--repo", str(checkout)]
    assert "is a Python keyword; it cannot name a module" in one_line_error(run_kernelgen(*argv))


def test_analyze_into_a_missing_folder_writes_nothing(tmp_path):
    target = tmp_path / "missing" / "geglu.yaml"
    line = one_line_error(run_kernelgen("analyze", "geglu", "-o", str(target)))
    assert line == f"kernelgen: error: -o {target}: folder {target.parent} does not exist; nothing written"
    assert not target.parent.exists()


def test_analyze_into_a_read_only_folder_writes_nothing(tmp_path, monkeypatch):
    # chmod cannot make a folder read-only for root: ask the same question the check asks.
    monkeypatch.setattr(writer.os, "access", lambda path, mode: False)
    line = one_line_error(run_kernelgen("analyze", "geglu", "-o", str(tmp_path / "geglu.yaml")))
    assert "is not writable (permission denied); nothing written" in line
    assert list(tmp_path.iterdir()) == []


def test_a_write_that_fails_midway_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    calls = []

    def failing_mkstemp(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise PermissionError(13, "Permission denied", str(tmp_path / "b.yaml"))
        return real(*args, **kwargs)

    real = tempfile.mkstemp
    monkeypatch.setattr(writer.tempfile, "mkstemp", failing_mkstemp)
    with pytest.raises(writer.WriteError, match="cannot write .*b.yaml: Permission denied"):
        writer.write_all(tmp_path, {"a.yaml": "a", "b.yaml": "b"})
    assert list(tmp_path.iterdir()) == []


def test_save_profile_to_a_bad_path_is_refused_before_anything_is_written(checkout, tmp_path):
    before = snapshot(checkout)
    bad = tmp_path / "no" / "such" / "folder" / "profile.yaml"
    line = one_line_error(run_kernelgen("new", "geglu", "--repo", str(checkout), "--save-profile", str(bad)))
    assert "--save-profile" in line and "does not exist; nothing written" in line
    assert snapshot(checkout) == before


def test_ctrl_c_during_the_final_swap_finishes_the_write_and_says_so(checkout, capsys, monkeypatch):
    monkeypatch.setattr(writer, "_completed", [])
    real_replace = os.replace
    sent = []

    def replace_then_interrupt(source, target):
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)  # held by the writer until the swap is complete
        return real_replace(source, target)

    monkeypatch.setattr(writer.os, "replace", replace_then_interrupt)
    assert main(["new", "geglu", "--repo", str(checkout)]) == 0  # the whole kernel is written: a success
    err = capsys.readouterr().err
    assert "interrupted after the write had finished: all" in err and "nothing was written" not in err
    assert has_record(checkout, "geglu")
    assert (checkout / "src/liger_kernel/ops/geglu.py").exists()
    assert not [p for p in checkout.rglob("*") if p.name.endswith(writer.BACKUP_SUFFIX)]


def test_ctrl_c_while_staging_writes_nothing_and_says_so(checkout, capsys, monkeypatch):
    monkeypatch.setattr(writer, "_completed", [])
    before = snapshot(checkout)
    real = tempfile.mkstemp
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(writer.tempfile, "mkstemp", interrupted)
    assert main(["new", "geglu", "--repo", str(checkout)]) == 130
    assert capsys.readouterr().err.strip() == "kernelgen: interrupted; nothing was written"
    assert snapshot(checkout) == before


@pytest.mark.parametrize("name", ["init", "model_configs"])
def test_a_name_taken_by_a_file_of_no_kernel_says_so_and_not_to_modify_it(checkout, name):
    """test/transformers/test_init.py and benchmark_model_configs.py exist, with no ops file: the name is taken,
    but there is no kernel to modify (modify would then refuse too)."""
    (checkout / "test/transformers/test_init.py").write_text("def test_imports():\n    import liger_kernel  # noqa\n")
    line = one_line_error(run_kernelgen("new", name, "--reference", "geglu", "--repo", str(checkout)))
    assert f"the name '{name}' is taken by " in line and "which is no kernel" in line and "modify" not in line


def test_a_signal_a_library_swallows_still_stops_the_command_before_it_writes(checkout, capsys, monkeypatch):
    """SIGTERM raised inside a bare ``except:`` of third-party code (as one in ``import torch``'s chain did): the
    command goes on, but writes nothing and says it was interrupted, instead of writing everything and exiting 0."""
    monkeypatch.setattr(writer, "_completed", [])
    before = snapshot(checkout)
    real = generate.plan_new

    def swallowing(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except BaseException:  # noqa: BLE001, S110 - what the library does
            pass
        return real(*args, **kwargs)

    monkeypatch.setattr(generate, "plan_new", swallowing)
    assert main(["new", "geglu", "--repo", str(checkout)]) == 128 + signal.SIGTERM
    assert capsys.readouterr().err.strip() == "kernelgen: interrupted; nothing was written"
    assert snapshot(checkout) == before
    monkeypatch.setattr(generate, "plan_new", real)
    assert main(["new", "geglu", "--repo", str(checkout), "--dry-run"]) == 0  # the next command starts afresh


@pytest.mark.parametrize(
    "where, value, expected",
    [
        ("triton", "y = a * b; import os", "must be one statement (an assignment), not 2"),
        ("formula", "a * b; import os", "does not parse"),
    ],
)
def test_a_math_fragment_with_a_second_statement_is_refused(checkout, tmp_path, where, value, expected):
    data = yaml.safe_load((EXAMPLES / "swiglu.yaml").read_text())
    if where == "triton":
        data["math"] = {"statistics": [], "outputs": {}, "triton": {"forward": [value], "backward": ["grad_a = a"]}}
    else:
        data["math"]["outputs"]["y"] = value
    profile = tmp_path / "p.yaml"
    profile.write_text(yaml.safe_dump(data, sort_keys=False))
    before = snapshot(checkout)
    assert expected in one_line_error(
        run_kernelgen("new", "my_gate", "--profile", str(profile), "--repo", str(checkout))
    )
    assert snapshot(checkout) == before


def test_a_reference_annotated_with_integer_tensors_is_not_made_a_float_kernel(checkout, tmp_path):
    reference = tmp_path / "intmul.py"
    reference.write_text("import torch\n\n\ndef intmul(x: torch.LongTensor, y: torch.Tensor):\n    return x * y\n")
    line = one_line_error(run_kernelgen("new", "intmul", "--reference", str(reference), "--repo", str(checkout)))
    assert f"{reference}:4: input 'x' is annotated torch.LongTensor" in line


@pytest.mark.parametrize("name", ["rms_norm", "cross_entropy"])
def test_new_on_an_existing_kernel_says_it_exists_before_any_analysis(checkout, name):
    line = one_line_error(run_kernelgen("new", name, "--repo", str(checkout)))
    assert f"kernel '{name}' already exists" in line and "tier" not in line


def test_a_matrix_product_is_one_line_without_a_shape_propagation_traceback(checkout, tmp_path):
    reference = tmp_path / "mm.py"
    reference.write_text("import torch\n\n\ndef mm(x, y):\n    return x @ y\n")
    result = run_kernelgen("new", "mm", "--reference", str(reference), "--repo", str(checkout))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert f"{reference}:5: `operator.matmul` is a matrix product" in result.stderr


def test_the_readme_minute_runs_in_order_after_the_readme_first_command(tmp_path):
    """Every kernelgen command of "kernelgen in one minute", in order, in a checkout where the README's first
    command (new geglu) already ran. The pytest and validate lines are the subject of other tests and are skipped."""
    checkout = copy_checkout(tmp_path / "liger")
    assert run_kernelgen("new", "geglu", "--repo", str(checkout)).returncode == 0
    workdir = tmp_path / "work"  # where the README's relative files (reglu.yaml) go; kernelgen itself via a link
    workdir.mkdir()
    (workdir / "tools").symlink_to(REPO_ROOT / "tools")
    text = (REPO_ROOT / "README.md").read_text()
    block = re.search(r"## kernelgen in one minute\n\n```bash\n(.*?)```", text, re.S).group(1)
    ran = 0
    for line in block.splitlines():
        command = line.split("  #")[0].strip()
        if "python3 -m tools.kernelgen" not in command or " validate " in command:
            continue
        pipe, _, command = command.rpartition("| ")
        arguments = shlex.split(command)[3:]
        if arguments[0] in ("new", "modify", "tune"):  # tune: one SKIP line here, without a GPU
            arguments += ["--repo", str(checkout)]
        stdin = None
        if pipe:
            stdin = shlex.split(pipe)[1].encode().decode("unicode_escape")
        result = run_kernelgen(*arguments, cwd=workdir, stdin=stdin)
        assert result.returncode == 0, f"{line}\n{result.stdout[-2000:]}{result.stderr}"
        ran += 1
    assert ran >= 5


def test_python_dash_m_reports_the_same_one_line_error():
    # The errors above come from main() in process; ``python -m tools.kernelgen`` must route to it.
    result = run_kernelgen("new", "class", in_process=False)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "kernelgen: error: kernel name 'class' is a Python keyword; it cannot name a module\n"


def test_new_refuses_a_kernel_whose_smoke_run_disagrees_with_its_reference(checkout, tmp_path):
    """A profile whose math was edited away from its reference generates code that runs but computes something else:
    new's smoke run (forward and backward once, on a tiny CPU input) says so in one line and writes nothing."""
    profile = yaml.safe_load(run_kernelgen("analyze", "geglu").stdout)
    profile["math"]["outputs"]["y"] = f"2 * ({profile['math']['outputs']['y']})"
    path = tmp_path / "geglu_edited.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    before = snapshot(checkout)
    line = one_line_error(run_kernelgen("new", "geglu", "--profile", str(path), "--repo", str(checkout)))
    assert line.startswith("kernelgen: error: the generated 'geglu', run once on a tiny CPU input, fails: ")
    assert "differs from the reference's" in line and line.endswith("; nothing written")
    # A profile's formula edited alone: the line says where the other half of the edit goes.
    assert "a formula edited in the profile needs the same edit there" in line
    assert snapshot(checkout) == before


def test_new_runs_what_it_generated_once_before_it_says_so(checkout):
    """The smoke run imports the generated module from a scratch copy: nothing of it stays in this process."""
    import sys

    modules = {name for name in sys.modules if name.startswith("liger_kernel")}
    result = run_kernelgen("new", "dyt", "--repo", str(checkout))
    assert result.returncode == 0, result.stderr
    assert {name for name in sys.modules if name.startswith("liger_kernel")} == modules
    assert not any("kernelgen-smoke-" in entry for entry in sys.path)


def test_a_torchscript_reference_passes_the_smoke_run(checkout, tmp_path):
    """A ``@torch.jit.script`` reference is run as written by the smoke run, which compiles it from the source the
    profile holds (it never was a file of its own there)."""
    reference = tmp_path / "scripted_gate.py"
    reference.write_text(
        "import torch\n\n\n@torch.jit.script\ndef scripted_gate(x, y):\n"
        '    return torch.nn.functional.gelu(x, approximate="none") * y.sigmoid()\n'
    )
    result = run_kernelgen("new", "scripted_gate", "--reference", str(reference), "--repo", str(checkout))
    assert result.returncode == 0, result.stderr
    assert "no smoke run" not in result.stderr


@pytest.mark.parametrize(
    "styles, entry",
    [
        ("test_rows", "HeldEpsNorm"),  # a hyper-parameter the module sets itself
        ("test_rows", "BufferGainNorm"),  # one held as a buffer
        ("test_rows", "IndexedPolyNorm"),  # a parameter vector read by element
        ("test_rows", "PolyNorm"),  # ... and a constructor that takes no size
        ("test_rows", "WideWeightRMSNorm"),  # a weight held as [1, 1, H]
        ("test_rows", "ClipLayerNorm"),  # float32 casts before torch's LayerNorm: the float64 truth keeps float64
        ("test_losses", "TemperedSmoothedNLL"),
    ],
)
def test_the_smoke_run_builds_module_references_as_the_generated_tests_do(checkout, tmp_path, styles, entry):
    """The smoke run calls the reference the way the generated tests do: constructor arguments, forward arguments,
    values the module holds, parameters in the shape and place the module holds them."""
    module = importlib.import_module(f"test.kernelgen.{styles}")
    reference = tmp_path / f"{styles}_styles.py"
    reference.write_text(module.STYLES)
    result = run_kernelgen(
        "new", "styled", "--reference", f"{reference}:{entry}", "--repo", str(checkout), "--force-new"
    )
    assert result.returncode == 0, result.stderr


def test_no_smoke_run_where_triton_was_imported_without_its_interpreter():
    """Triton's own jit helpers are interpreted only when Triton was imported with TRITON_INTERPRET=1: a process that
    imported it otherwise skips the smoke run with a note instead of failing a kernel that is fine."""
    from tools.kernelgen.analyze import analyze
    from tools.kernelgen.smoke import skip_reason

    script = (
        "import sys, triton.language.standard\n"
        "from tools.kernelgen.analyze import analyze\n"
        "from tools.kernelgen.smoke import skip_reason\n"
        "print(skip_reason(analyze('dyt')))\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert result.stdout.strip() == "Triton was imported into this process without its interpreter", result.stderr
    assert skip_reason(analyze("dyt")) is None  # this suite imports Triton with its interpreter


def test_ctrl_c_while_main_imports_the_writer_is_one_line(monkeypatch, capsys):
    """SIGINT after the arguments are parsed, while main still imports the writer (json, then re): the same one line
    and 130 as before any import, not a traceback out of the import (seen once in CI)."""
    interrupting = types.ModuleType("tools.kernelgen.writer")

    def interrupt(name):
        raise KeyboardInterrupt

    interrupting.__getattr__ = interrupt
    monkeypatch.setitem(sys.modules, "tools.kernelgen.writer", interrupting)
    assert main(["references"]) == 128 + signal.SIGINT
    assert capsys.readouterr().err.strip() == "kernelgen: interrupted; nothing was written"


def test_ctrl_c_while_the_cli_still_imports_is_one_line(tmp_path):
    """SIGINT before any command runs (torch is still importing): one line and 130, not a KeyboardInterrupt
    traceback out of an import."""
    started = subprocess.Popen(
        [sys.executable, "-m", "tools.kernelgen", "references"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    try:
        started.wait(timeout=0.3)
    except subprocess.TimeoutExpired:
        started.send_signal(signal.SIGINT)
    _, stderr = started.communicate(timeout=60)
    if started.returncode == 0:
        pytest.skip("the CLI finished before the signal")
    assert started.returncode == 130 and stderr.strip() == "kernelgen: interrupted; nothing was written", stderr


@pytest.mark.parametrize("reference", ["missing.py", "syntax.py", "no_such_builtin"])
def test_knowledge_of_a_reference_that_does_not_load_is_bad_input(checkout, tmp_path, reference):
    """A reference analysis refuses is what ``knowledge`` is for (exit 0); one that does not load is bad input."""
    (tmp_path / "syntax.py").write_text("def f(x:\n")
    path = reference if reference == "no_such_builtin" else str(tmp_path / reference)
    one_line_error(run_kernelgen("knowledge", path, "--repo", str(checkout)))


def test_a_profile_float_written_without_a_dot_is_a_float(checkout, tmp_path):
    """``default: 1e-2`` (YAML 1.1 reads it as a string without a dot) is the float people mean."""
    profile = tmp_path / "p.yaml"
    assert run_kernelgen("analyze", "leaky_relu_mul", "-o", str(profile)).returncode == 0
    text = profile.read_text()
    assert "default: 0.01" in text
    profile.write_text(text.replace("default: 0.01", "default: 1e-2"))
    from tools.kernelgen.profile import load_profile

    assert [hp.default for hp in load_profile(profile).hyperparameters] == [0.01]
