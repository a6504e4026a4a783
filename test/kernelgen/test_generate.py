"""The ``new`` command end to end: round trips from the example profiles, dry runs, errors, atomic writes."""

import importlib
import os
import shutil
import sys
import types

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
import yaml

from liger_kernel.ops.utils import erfc
from liger_kernel.ops.utils import expm1
from liger_kernel.ops.utils import log1p
from liger_kernel.ops.utils import log1p_unit
from liger_kernel.ops.utils import widen_to_fp32
from test.kernelgen.conftest import EXAMPLES
from test.kernelgen.conftest import REPO_ROOT
from test.kernelgen.conftest import WITHOUT_DTENSOR
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import one_line_error
from test.kernelgen.conftest import run_kernelgen
from test.kernelgen.conftest import run_pytest
from test.kernelgen.conftest import snapshot
from test.utils import assert_verbose_allclose
from test.utils import infer_device
from tools.kernelgen import writer
from tools.kernelgen.analyze import analyze
from tools.kernelgen.formatting import lint_findings
from tools.kernelgen.formatting import sort_imports
from tools.kernelgen.generate import GenerateError
from tools.kernelgen.generate import plan_new
from tools.kernelgen.kernel_helpers import CORE_SOURCES
from tools.kernelgen.kernel_helpers import GET_NUM_SMS_SOURCE
from tools.kernelgen.kernel_helpers import HOST_SOURCES
from tools.kernelgen.kernel_helpers import add_kernel_helpers
from tools.kernelgen.kernel_helpers import jit_math_block
from tools.kernelgen.kernel_helpers import missing_helpers
from tools.kernelgen.layout import OPS_UTILS
from tools.kernelgen.layout import TRANSFORMERS_INIT
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import ModuleSpec
from tools.kernelgen.profile import ProfileError
from tools.kernelgen.profile import from_dict
from tools.kernelgen.profile import load_profile
from tools.kernelgen.profile import validate_profile
from tools.kernelgen.pyrun import run_python
from tools.kernelgen.record import record_key
from tools.kernelgen.repo import LigerRepo

FIXTURES = REPO_ROOT / "test" / "kernelgen" / "fixtures"


@pytest.mark.parametrize("example", ["swiglu", "rms_norm", "cross_entropy"])
def test_round_trip_from_example_profile_is_ruff_clean_and_its_tests_pass(checkout, example):
    name = f"{example}_gen"
    # Each example is the host's own kernel at some option values: --force-new generates it all the same.
    result = run_kernelgen(
        "new", name, "--profile", str(EXAMPLES / f"{example}.yaml"), "--repo", str(checkout), "--force-new"
    )
    assert result.returncode == 0, result.stderr
    paths = kernel_paths(name)
    for role in ("ops", "module", "test"):
        text = (checkout / paths[role]).read_text()
        assert lint_findings(text, checkout, paths[role]) == []
    tests = run_pytest(checkout, paths["test"], *WITHOUT_DTENSOR)
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert " passed" in tests.stdout
    # The generated benchmark runs too (tiny shapes on the CPU) and writes harness rows.
    csv_path = checkout / "smoke.csv"
    bench = run_python([paths["benchmark"], "--smoke", "--csv", str(csv_path)], cwd=checkout)
    assert bench.returncode == 0, bench.stderr[-3000:]
    rows = csv_path.read_text().splitlines()
    assert rows[0].startswith("kernel_name,kernel_provider,kernel_operation_mode")
    assert len(rows) > 1 and all(row.startswith(f"{name},") for row in rows[1:])


def test_dry_run_prints_the_diff_and_writes_nothing(checkout):
    before = snapshot(checkout)
    result = run_kernelgen(
        "new",
        "rms_norm_gen",
        "--profile",
        str(EXAMPLES / "rms_norm.yaml"),
        "--repo",
        str(checkout),
        "--dry-run",
        "--force-new",
    )
    assert result.returncode == 0, result.stderr
    assert "+++ b/src/liger_kernel/ops/rms_norm_gen.py" in result.stdout
    assert "+from liger_kernel.ops.rms_norm_gen import LigerRmsNormGenFunction  # noqa: F401" in result.stdout
    assert snapshot(checkout) == before


def test_registration_keeps_every_original_line(checkout):
    repo = LigerRepo.open(checkout)
    profile = load_profile(EXAMPLES / "rms_norm.yaml").renamed("rms_norm_gen")
    changes = plan_new(repo, profile)
    for path in changes.modified:
        original = changes.originals[path].splitlines()
        updated = iter(changes.changes[path].splitlines())
        assert all(line in updated for line in original), f"{path} lost or reordered a line"


def test_bad_kernel_name_is_one_line_error(checkout):
    before = snapshot(checkout)
    line = one_line_error(run_kernelgen("new", "GeGLU-2", "--repo", str(checkout)))
    assert "'GeGLU-2' is not a snake_case identifier" in line
    assert snapshot(checkout) == before


def test_existing_kernel_suggests_modify(checkout):
    before = snapshot(checkout)
    profile = EXAMPLES / "rms_norm.yaml"
    line = one_line_error(run_kernelgen("new", "rms_norm", "--profile", str(profile), "--repo", str(checkout)))
    assert "already exists" in line and "hand-written" in line and "modify rms_norm --reference REF" in line
    assert "--force" not in line  # never advised for a hand-written kernel
    assert snapshot(checkout) == before


def test_invalid_profile_lists_every_problem_with_its_path(checkout, tmp_path):
    data = yaml.safe_load((EXAMPLES / "rms_norm.yaml").read_text())
    data["tier"] = 7
    data["inputs"][0]["name"] = "not valid"
    data["bogus"] = 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    line = one_line_error(run_kernelgen("new", "rms_norm_gen", "--profile", str(bad), "--repo", str(checkout)))
    assert "bogus: unknown field" in line
    assert "tier: 7 is not one of 1, 2, 3" in line
    assert "inputs[0].name: 'not valid' is not a Python identifier" in line
    assert "template does not read it" not in line  # no tier, no template: its fields are not judged by one


def test_not_a_checkout_names_the_missing_file(tmp_path):
    line = one_line_error(
        run_kernelgen("new", "rms_norm_gen", "--profile", str(EXAMPLES / "rms_norm.yaml"), "--repo", str(tmp_path))
    )
    assert "is not a Liger-Kernel checkout: src/liger_kernel/ops/__init__.py is missing" in line


def test_missing_profile_file_is_one_line_error(checkout, tmp_path):
    line = one_line_error(
        run_kernelgen("new", "x_gen", "--profile", str(tmp_path / "nope.yaml"), "--repo", str(checkout))
    )
    assert "nope.yaml" in line and "cannot read" in line


def test_failure_while_swapping_files_restores_everything(checkout, monkeypatch):
    repo = LigerRepo.open(checkout)
    changes = plan_new(repo, load_profile(EXAMPLES / "rms_norm.yaml").renamed("rms_norm_gen"))
    before = snapshot(checkout)
    real_replace = os.replace
    calls = {"n": 0}

    def flaky_replace(src, dst):
        calls["n"] += 1
        if calls["n"] == 6:  # part-way through: some files already swapped in
            raise OSError(28, "No space left on device", str(dst))
        return real_replace(src, dst)

    monkeypatch.setattr(writer.os, "replace", flaky_replace)
    with pytest.raises(writer.WriteError):
        writer.write_all(checkout, changes.changes)
    monkeypatch.setattr(writer.os, "replace", real_replace)
    assert snapshot(checkout) == before


def test_interrupt_while_staging_leaves_the_checkout_unchanged(checkout, monkeypatch):
    repo = LigerRepo.open(checkout)
    changes = plan_new(repo, load_profile(EXAMPLES / "rms_norm.yaml").renamed("rms_norm_gen"))
    before = snapshot(checkout)
    real_fdopen = os.fdopen
    calls = {"n": 0}

    def interrupted_fdopen(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_fdopen(*args, **kwargs)

    monkeypatch.setattr(writer.os, "fdopen", interrupted_fdopen)
    with pytest.raises(KeyboardInterrupt):
        writer.write_all(checkout, changes.changes)
    assert snapshot(checkout) == before


def test_unwritable_target_directory_is_reported_and_nothing_written(checkout):
    repo = LigerRepo.open(checkout)
    changes = plan_new(repo, load_profile(EXAMPLES / "rms_norm.yaml").renamed("rms_norm_gen"))
    # A file where a directory must be created: fails for root too, unlike permission bits.
    shutil.rmtree(checkout / "test" / "transformers")
    (checkout / "test" / "transformers").write_text("not a directory")
    before = snapshot(checkout)
    with pytest.raises(writer.WriteError):
        writer.write_all(checkout, changes.changes)
    assert snapshot(checkout) == before


def test_force_regenerates_an_existing_generated_kernel(checkout):
    profile = str(EXAMPLES / "rms_norm.yaml")
    first = run_kernelgen("new", "rms_norm_gen", "--profile", profile, "--repo", str(checkout), "--force-new")
    assert first.returncode == 0, first.stderr
    again = run_kernelgen(
        "new", "rms_norm_gen", "--profile", profile, "--repo", str(checkout), "--force", "--force-new"
    )
    assert again.returncode == 0, again.stderr
    ops_init = (checkout / "src/liger_kernel/ops/__init__.py").read_text()
    assert ops_init.count("from liger_kernel.ops.rms_norm_gen import LigerRmsNormGenFunction") == 1


def test_generation_record_reloads_as_the_same_profile(checkout):
    repo = LigerRepo.open(checkout)
    profile = load_profile(EXAMPLES / "rms_norm.yaml").renamed("rms_norm_gen")
    changes = plan_new(repo, profile)
    record = changes.changes[record_key(checkout, "rms_norm_gen")]
    assert yaml.safe_load(record)["operation_name"] == "rms_norm_gen"
    with pytest.raises(GenerateError, match="already exists"):
        copy = copy_checkout(checkout.parent / "second")
        writer.write_all(copy, changes.changes)
        plan_new(LigerRepo.open(copy), profile)


def test_generated_files_quote_the_reference_by_a_portable_path(checkout, tmp_path):
    """A reference file outside the checkout is named by its file name, one inside by its repository-relative path:
    no machine's absolute path reaches the test, the benchmark or the record (the ops file names none)."""
    source = "import torch\n\n\ndef my_act(x):\n    return torch.sigmoid(x) * x\n"
    outside = tmp_path / "elsewhere" / "my_act_ref.py"
    inside = checkout / "refs" / "my_act_ref.py"
    for path in (outside, inside):
        path.parent.mkdir(parents=True)
        path.write_text(source)
    repo = LigerRepo.open(checkout)
    for path, expected in ((outside, "my_act_ref.py"), (inside, "refs/my_act_ref.py")):
        changes = plan_new(repo, analyze(str(path), name="my_act"))
        texts = [changes.changes[p] for p in (*kernel_paths("my_act").values(), record_key(checkout, "my_act"))]
        assert all(str(tmp_path) not in text for text in texts)
        # The test's copy of the reference says where it came from; the ops docstring says what it computes.
        assert f"# --- PyTorch reference ({expected}) ---" in changes.changes[kernel_paths("my_act")["test"]]
        assert "forward and backward in Triton." in texts[0] and expected not in texts[0]
        assert yaml.safe_load(texts[-1])["reference"]["origin"] == expected
    assert repo.portable_origin("builtin:geglu") == "builtin:geglu"
    assert repo.portable_origin("<stdin>") == "<stdin>"
    assert repo.portable_origin("examples/rms_norm.yaml") == "examples/rms_norm.yaml"  # relative, not in the checkout


def test_this_host_s_utils_has_the_helpers_kernels_import_and_they_are_kernelgen_s():
    """Nothing is added to a checkout that has the helpers: this host's jit math block is exactly what kernelgen adds
    to one that lacks it."""
    host = (REPO_ROOT / OPS_UTILS).read_text()
    jit_math = ["erfc", "expm1", "log1p", "pow", "tanh"]
    assert missing_helpers(host, {"ensure_contiguous", "get_num_sms", "is_triton_interpreter", *jit_math}) == []
    block = jit_math_block(jit_math, "is_triton_interpreter()")
    without = host.replace(f"\n\n{block}", "")
    assert without != host and missing_helpers(without, set(jit_math)) == jit_math
    assert add_kernel_helpers(without, jit_math, lambda text: text) == host
    # The core-op helpers are kernelgen's text too (this host defines them, so none is inserted here).
    assert missing_helpers(host, set(CORE_SOURCES) | set(HOST_SOURCES)) == []
    assert all(CORE_SOURCES[name].strip("\n") in host for name in CORE_SOURCES)
    assert all(HOST_SOURCES[name].strip("\n") in host for name in HOST_SOURCES)


def test_the_get_num_sms_added_to_a_target_counts_an_xpus_subslices():
    # Upstream runs on Intel XPUs too (its dyt sizes its grid by gpu_subslice_count); the helper kernelgen adds to a
    # utils that lacks it answered the CPU's stand-in, 4, there: a persistent backward of 8 programs.
    properties = types.SimpleNamespace(gpu_subslice_count=64)
    xpu = types.SimpleNamespace(
        is_available=lambda: True, current_device=lambda: 0, get_device_properties=lambda d: properties
    )
    namespace = {"torch": types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False), xpu=xpu)}
    exec(GET_NUM_SMS_SOURCE, namespace)
    assert namespace["get_num_sms"]() == 64


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")  # log2(0), 0 * inf of the masked-off branches
def test_a_utils_without_helpers_or_their_imports_gets_them_sorted_and_working(tmp_path):
    """An old upstream utils: no get_num_sms, no jit math, neither os nor triton.language imported. The helpers come
    with their imports where the target's isort settings put them, ruff-clean, and tanh and pow compute (under the
    interpreter, the core-op formulas) what torch does."""
    old = (FIXTURES / "upstream_layout" / "ops_utils_old.py.txt").read_text()
    helpers = ["get_num_sms", "is_triton_interpreter", "log1p", "pow", "tanh", "tanh_from_exp", "widen_to_fp32"]
    updated = add_kernel_helpers(old, helpers, lambda t: sort_imports(t, REPO_ROOT, OPS_UTILS))
    assert all(line in updated.splitlines() for line in old.splitlines())
    assert "import os\n" in updated and "import triton.language as tl\n" in updated
    assert lint_findings(updated, REPO_ROOT, OPS_UTILS) == []
    assert add_kernel_helpers(updated, helpers, lambda t: t) == updated
    (tmp_path / "old_liger_utils.py").write_text(updated)
    (tmp_path / "old_liger_kernel.py").write_text(
        "import triton\nimport triton.language as tl\n\n"
        "from old_liger_utils import log1p\nfrom old_liger_utils import pow\nfrom old_liger_utils import tanh\n"
        "from old_liger_utils import tanh_from_exp\n\n\n"
        "@triton.jit\ndef apply(x_ptr, y_ptr, t_ptr, e_ptr, p_ptr, l_ptr, BLOCK: tl.constexpr):\n"
        "    offsets = tl.arange(0, BLOCK)\n    x = tl.load(x_ptr + offsets)\n"
        "    tl.store(t_ptr + offsets, tanh(x))\n    tl.store(e_ptr + offsets, tanh_from_exp(x))\n"
        "    tl.store(p_ptr + offsets, pow(x, tl.load(y_ptr + offsets)))\n"
        "    tl.store(l_ptr + offsets, log1p(tl.load(y_ptr + offsets)))\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        utils, kernel = importlib.import_module("old_liger_utils"), importlib.import_module("old_liger_kernel")
    finally:
        sys.path.remove(str(tmp_path))
    assert utils.get_num_sms() > 0
    assert utils.is_triton_interpreter() == (os.environ.get("TRITON_INTERPRET") == "1")
    x = torch.tensor([-30.0, -2.0, -2.0, -0.5, -1e-3, 0.0, 0.0, 1e-4, 0.3, 2.0, 5.0, 40.0, 3.0, -3.0, 0.0, 2.0])
    y = torch.tensor([3.0, 2.0, 0.5, 0.0, 1.0, 0.0, 2.5, 2.0, -1.5, 0.5, 3.0, 1.0, -2.0, 3.0, 0.0, 3.0])
    device = infer_device()
    t, e, p, log1p = (torch.empty_like(x, device=device) for _ in range(4))
    kernel.apply[(1,)](x.to(device), y.to(device), t, e, p, log1p, BLOCK=16)
    assert_verbose_allclose(t.cpu(), torch.tanh(x.double()).float(), atol=1e-7, rtol=1e-6)
    assert_verbose_allclose(e.cpu(), torch.tanh(x.double()).float(), atol=1e-7, rtol=1e-6)
    assert torch.allclose(p.cpu(), torch.pow(x.double(), y.double()).float(), rtol=1e-5, atol=0, equal_nan=True)
    # log1p keeps the digits of small arguments that 1 + y rounds away, and is exact at -1 and infinity.
    v = torch.tensor(
        [1e-9, -3e-8, 1e-5, -0.25, 0.5, 1.0, 3.0, 1e30, float("inf"), -1.0, -2.0, float("nan")] + [0.0] * 4
    )
    kernel.apply[(1,)](x.to(device), v.to(device), t, e, p, log1p, BLOCK=16)
    expected = torch.log1p(v.double()).float()
    assert torch.allclose(log1p.cpu(), expected, rtol=2e-7, atol=0, equal_nan=True), (log1p.cpu(), expected)


@triton.jit
def _log1p_unit(v_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, log1p_unit(tl.load(v_ptr + offsets, mask=mask, other=0.0)), mask=mask)


def test_log1p_unit_is_within_a_few_ulps_of_log1p_over_the_unit_interval():
    """The polynomial the printer emits for softplus's log(1 + exp(-|u|)), against float64 log1p over [0, 1]:
    uniform draws, exp(-88 u) (small arguments down to subnormals, whose digits 1 + v would round away), the ends."""
    generator = torch.Generator().manual_seed(0)
    v = torch.cat(
        [
            torch.rand(20000, generator=generator),
            torch.exp(-88 * torch.rand(20000, generator=generator)),
            torch.tensor([0.0, 1.0, 1e-45, 1e-38, 1e-30, 0.5, 2.0**-24]),
        ]
    ).float()
    device = infer_device()
    y = torch.empty_like(v, device=device)
    _log1p_unit[(triton.cdiv(v.numel(), 4096),)](v.to(device), y, v.numel(), BLOCK=4096)
    expected = torch.log1p(v.double())
    ulp = torch.from_numpy(np.spacing(expected.float().numpy())).double()
    errors = (y.cpu().double() - expected).abs() / ulp
    assert errors.max() <= 3, (errors.max(), v[errors.argmax()])
    assert y[-7] == 0  # exact at 0


@triton.jit
def _accurate_forms(x_ptr, expm1_ptr, erfc_ptr, log1p_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(expm1_ptr + offsets, expm1(x), mask=mask)
    tl.store(erfc_ptr + offsets, erfc(x), mask=mask)
    tl.store(log1p_ptr + offsets, log1p(tl.abs(x)), mask=mask)


def test_expm1_erfc_and_log1p_keep_the_digits_of_small_results():
    """The utils' expm1, erfc and log1p (libdevice's compiled, core-op formulas interpreted), against float64 torch:
    where exp(x) - 1, 1 - erf(x) and log(1 + x) written out lose a small result to the 1 (1e-7, erfc's tail)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.cat(
        [
            torch.randn(8000, generator=generator) * 3,
            torch.exp(-30 * torch.rand(4000, generator=generator)) * torch.sign(torch.randn(4000, generator=generator)),
            torch.tensor([0.0, 1e-7, -1e-7, 0.5, -0.5, 4.0, 5.0, 9.0, -6.0, 30.0]),
        ]
    ).float()
    device = infer_device()
    out = [torch.empty_like(x, device=device) for _ in range(3)]
    _accurate_forms[(triton.cdiv(x.numel(), 4096),)](x.to(device), *out, x.numel(), BLOCK=4096)
    wide = x.double()
    for got, want, worst in (
        (out[0], torch.expm1(wide), 4e-7),
        (out[1], torch.special.erfc(wide), 2e-5),  # exp(-x^2) of an fp32 x^2: its rounding times x^2 at x = 9
        (out[2], torch.log1p(wide.abs()), 4e-7),
    ):
        seen = want.abs() > 1e-30  # what fp32 holds (erfc(30) is below it)
        errors = (got.cpu().double() - want).abs()[seen] / want.abs()[seen]
        assert errors.max() <= worst, (errors.max(), x[seen][errors.argmax()])


@pytest.mark.parametrize(
    "body, helper",
    [
        ("torch.expm1(x) * y", "expm1("),  # sympy distributes it: y * exp(x) - y
        ("x * y + torch.special.erfc(y) * x", "erfc("),
        ("F.elu(x, alpha=0.5) * y", "expm1("),
        ("torch.special.expit(x) * y + torch.special.erfc(y)", "erfc("),
        ("torch.log1p(x * x) * y", "log1p("),
    ],
)
def test_expm1_erfc_and_log1p_of_the_reference_print_as_the_utils_functions(tmp_path, body, helper):
    path = tmp_path / "accurate.py"
    path.write_text(f"import torch\nimport torch.nn.functional as F\n\n\ndef accurate(x, y):\n    return {body}\n")
    from tools.kernelgen.render import render_kernel

    files = render_kernel(analyze(f"{path}:accurate"))
    ops = files.files["src/liger_kernel/ops/accurate.py"]
    forward_kernel = ops.split("def _accurate_backward_kernel")[0]
    assert helper in forward_kernel and f"from liger_kernel.ops.utils import {helper[:-1]}" in ops


@pytest.mark.parametrize(
    "body, forward",
    [
        ("torch.expm1(x - x.mean(-1, keepdim=True))", "y = expm1(-mean + x)"),
        ("torch.special.erfc(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))", "y = erfc("),
    ],
)
def test_row_kernels_print_expm1_and_erfc_as_the_utils_functions(tmp_path, body, forward):
    """The row programs' statements take the accurate forms too (rows.py's _schedule, as tier-1 passes do)."""
    from tools.kernelgen.render import render_kernel

    path = tmp_path / "row_accurate.py"
    path.write_text(f"import torch\n\n\ndef row_accurate(x):\n    return {body}\n")
    ops = render_kernel(analyze(f"{path}:row_accurate")).files["src/liger_kernel/ops/row_accurate.py"]
    assert forward in ops and "- 1.0" not in ops and "1.0 - tl.erf" not in ops


@triton.jit
def _widen(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(y_ptr + offsets, widen_to_fp32(tl.load(x_ptr + offsets)))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_widen_to_fp32_is_the_exact_conversion_for_every_storage_dtype(dtype):
    """The tier-2 backwards' second widening of a held row (bf16 by bits, others by conversion) gives what
    ``Tensor.float()`` gives, infinities, NaN, -0 and the smallest values included (on the CPU under the interpreter,
    bf16 too)."""
    torch.manual_seed(0)
    x = (torch.randn(64) * 1000).to(dtype)
    x[:5] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, torch.finfo(dtype).tiny / 4]).to(dtype)
    device = infer_device()
    y = torch.empty(64, dtype=torch.float32, device=device)
    _widen[(1,)](x.to(device), y, BLOCK=64)
    expected = x.float()
    assert torch.equal(y.cpu().view(torch.int32), expected.view(torch.int32))  # bit for bit, NaN's bits too


def test_new_geglu_into_an_upstream_style_checkout_registers_and_its_tests_pass(checkout):
    # Upstream's transformers/__init__.py: set-style lazy table inside __getattr__, __all__.extend under a flag,
    # and no functional names re-exported at the top.
    upstream_init = (FIXTURES / "upstream_layout" / "transformers_init.py.txt").read_text()
    (checkout / TRANSFORMERS_INIT).write_text(upstream_init)
    result = run_kernelgen("new", "geglu_up", "--reference", "geglu", "--repo", str(checkout))
    assert result.returncode == 0, result.stderr
    text = (checkout / TRANSFORMERS_INIT).read_text()
    assert "from liger_kernel.transformers.geglu_up import LigerGegluUpMLP  # noqa: F401\n" in text
    assert '    "LigerGegluUpMLP",\n' in text
    assert "liger_geglu_up" not in text  # upstream does not re-export functional names there
    assert all(line in text.splitlines() for line in upstream_init.splitlines())
    tests = run_pytest(checkout, kernel_paths("geglu_up")["test"], *WITHOUT_DTENSOR)
    assert tests.returncode == 0, tests.stdout[-3000:]


def test_a_name_ending_in_the_module_suffix_keeps_one():
    # focal_loss's module was LigerFocalLossLoss, a gated_mlp's LigerGatedMlpMLP.
    assert KernelProfile("focal_loss", tier=3, module=ModuleSpec(kind="loss")).module_class_name == "LigerFocalLoss"
    assert KernelProfile("gated_mlp", module=ModuleSpec(kind="mlp")).module_class_name == "LigerGatedMLP"
    assert KernelProfile("cross_entropy", tier=3, module=ModuleSpec(kind="loss")).module_class_name == (
        "LigerCrossEntropyLoss"
    )
    assert KernelProfile("geglu", module=ModuleSpec(kind="mlp")).module_class_name == "LigerGegluMLP"


def test_missing_names_do_not_hide_the_other_problems():
    data = yaml.safe_load((EXAMPLES / "rms_norm.yaml").read_text())
    for derived in ("operation_name", "function_class_name", "module_class_name", "functional_name"):
        data.pop(derived, None)
    del data["inputs"][0]["name"]
    data["tier"] = 9
    with pytest.raises(ProfileError) as caught:
        from_dict(data)
    problems = caught.value.problems
    assert "operation_name: missing" in problems
    assert "inputs[0].name: missing" in problems
    assert "tier: 9 is not one of 1, 2, 3" in problems
    # Nothing about the stand-in values or the names derived from the missing operation_name.
    assert not [problem for problem in problems if "''" in problem or problem.startswith("function_class_name")]


def test_field_types_come_from_the_profile_annotations():
    data = yaml.safe_load((EXAMPLES / "rms_norm.yaml").read_text())
    data["hyperparameters"][0]["choices"] = 5
    data["tiling"]["programs_per_sm"] = "many"
    data["tier"] = True
    data["outputs"][0]["dtype"] = "float16"
    with pytest.raises(ProfileError) as caught:
        from_dict(data)
    problems = caught.value.problems
    assert "hyperparameters[0].choices: expected list, got int" in problems
    assert "tiling.programs_per_sm: expected int, got str" in problems
    assert "tier: expected int, got bool" in problems
    assert any(problem.startswith("outputs[0].dtype: 'float16' is not one of") for problem in problems)


def test_a_profile_without_math_is_invalid():
    data = yaml.safe_load((EXAMPLES / "rms_norm.yaml").read_text())
    del data["math"]
    problems = validate_profile(from_dict(data, validate=False))
    assert problems == ["math.outputs: a formula for every output is required (or hand-written math.triton)"]


def test_a_format_1_profile_names_each_field_that_moved():
    data = yaml.safe_load((EXAMPLES / "swiglu.yaml").read_text())
    data["profile_version"] = 1
    data["tier_reason"] = "only element-wise ops"
    data["backward"]["saved_tensors"] = ["a", "b"]
    data["math"]["forward"] = ["y = a * b * tl.sigmoid(a)"]
    with pytest.raises(ProfileError) as caught:
        from_dict(data)
    problems = caught.value.problems
    assert "tier_reason: moved to notes.tier_reason in profile format 2" in problems
    assert any(problem.startswith("backward.saved_tensors: removed in profile format 2") for problem in problems)
    assert any(problem.startswith("math.forward: moved to math.triton.forward") for problem in problems)
    assert "profile_version: 1; this kernelgen reads format 2" in problems
    assert "\n" not in str(caught.value)  # one line on screen


def test_loss_modules_and_tier_3_go_together():
    data = yaml.safe_load((EXAMPLES / "cross_entropy.yaml").read_text())
    data["module"]["kind"] = "elementwise"
    problems = validate_profile(from_dict(data, validate=False))
    assert "module.kind: 'elementwise' with tier 3: a loss needs the 'loss' module" in problems
    data = yaml.safe_load((EXAMPLES / "swiglu.yaml").read_text())
    data["module"]["kind"] = "loss"
    problems = validate_profile(from_dict(data, validate=False))
    assert "module.kind: 'loss' needs tier 3 (a loss over rows)" in problems


def test_tier2_takes_one_input():
    data = yaml.safe_load((EXAMPLES / "rms_norm.yaml").read_text())
    data["inputs"].append(dict(data["inputs"][0], name="residual"))
    problems = validate_profile(from_dict(data, validate=False))
    assert "inputs: hand-written tier-2 math takes exactly one input, the row x" in problems


def test_tier3_profile_problems_are_reported_together():
    data = yaml.safe_load((EXAMPLES / "cross_entropy.yaml").read_text())
    data["hyperparameters"] = [hp for hp in data["hyperparameters"] if hp["name"] != "reduction"]
    data["inputs"][1]["requires_grad"] = True
    data["math"]["loss"]["denominator"] = "where(target != nowhere, 1, 0)"
    problems = validate_profile(from_dict(data, validate=False))
    assert "math.loss.reduction: 'reduction' is neither one of mean, sum, none nor a str hyper-parameter" in problems
    assert "inputs[1].requires_grad: class indices have no gradient" in problems
    assert any(problem.startswith("math.loss.denominator:") and "nowhere" in problem for problem in problems)
    data = yaml.safe_load((EXAMPLES / "cross_entropy.yaml").read_text())
    del data["math"]["loss"]
    problems = validate_profile(from_dict(data, validate=False))
    assert "math.loss: tier 3 needs the reduction of its per-row values (reduction, denominator)" in problems


def test_a_module_taking_torch_s_device_and_dtype_makes_its_parameters_with_them(tmp_path):
    """diffusers' FP32LayerNorm subclasses nn.LayerNorm and keeps its ``device=None, dtype=None``: the generated module
    made its parameters without them (and kept them as attributes, shown by extra_repr)."""
    from tools.kernelgen.render import render_kernel

    path = tmp_path / "fp32_ln.py"
    path.write_text(
        "import torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass FP32LayerNorm(nn.LayerNorm):\n"
        "    def forward(self, inputs):\n"
        "        return F.layer_norm(inputs.float(), self.normalized_shape, self.weight.float(), self.bias.float(),"
        " self.eps).to(inputs.dtype)\n"
    )
    module = render_kernel(analyze(str(path))).files["src/liger_kernel/transformers/fp32_layer_norm.py"]
    assert "device=None, dtype=None" in module
    assert "self.weight = nn.Parameter(torch.ones(normalized_shape, device=device, dtype=dtype))" in module
    assert "self.device" not in module and "self.dtype" not in module
    # The docstring's formula names the normalized dims by count, not by the probe's traced size.
    assert "normalized_shape=inputs.shape[-1:]" in module and "(8,)" not in module


def test_a_size_with_a_default_keeps_its_place_and_default_in_the_module_s_constructor(tmp_path):
    """``GroupNormHand(num_groups=4, num_channels=16)``: the size was made required and moved first, so a call of the
    reference's positional order gave the generated module the groups as channels."""
    from tools.kernelgen.render import render_kernel

    path = tmp_path / "gn.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass GroupNormHand(nn.Module):\n"
        "    def __init__(self, num_groups=4, num_channels=16, eps=1e-5):\n        super().__init__()\n"
        "        self.num_groups = num_groups\n        self.eps = eps\n"
        "        self.weight = nn.Parameter(torch.ones(num_channels))\n\n"
        "    def forward(self, x):\n        B, C, L = x.shape\n        x = x.view(B, self.num_groups, -1)\n"
        "        mean = x.mean(-1, keepdim=True)\n        var = x.var(-1, keepdim=True, unbiased=False)\n"
        "        return ((x - mean) / torch.sqrt(var + self.eps)).view(B, C, L) * self.weight[:, None]\n"
    )
    module = render_kernel(analyze(f"{path}:GroupNormHand", name="gn")).files["src/liger_kernel/transformers/gn.py"]
    assert "def __init__(self, num_groups=4, num_channels=16, eps=1e-05):" in module
