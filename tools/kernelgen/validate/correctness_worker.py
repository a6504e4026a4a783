"""Staged correctness of a generated kernel against its reference, run as its own process.

``python -m tools.kernelgen.validate.correctness_worker REPO NAME OUT.json [--samples=FILE] [SPEC]``: a process of
its own so that
``TRITON_INTERPRET=1`` is set (when there is no GPU) before anything imports triton, and so that importing the
target checkout's ``liger_kernel`` cannot clash with this one. Writes one JSON document with a verdict per stage;
the parent prints the ``CORRECTNESS_VALIDATION`` block from it. With ``--samples`` a last stage runs the kernel on
every input set of that test-case sampler (``samples.py``) and counts the sets that pass and fail.

Every comparison is against ``torch.autograd`` of the reference in float64, forward outputs and every gradient:
``|kernel - reference| <= atol + rtol * |reference|`` with the profile's float32 tolerances, and no NaN/Inf where
the reference is finite. The magnitude stage scales ``atol`` by the largest reference value (a relative-error
test that does not break on outputs that are tiny by construction).
"""

from __future__ import annotations

import json
import math
import os
import sys
import traceback

from pathlib import Path

import torch

# Set before the harness imports the kernel (and with it triton): the interpreter is chosen at triton import.
CUDA = torch.cuda.is_available()
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

from tools.kernelgen.profile import group_count  # noqa: E402
from tools.kernelgen.profile import hyper_cases  # noqa: E402
from tools.kernelgen.render.vectors import parameter_shape  # noqa: E402
from tools.kernelgen.validate.correctness import AS_COMPILED_OPTION  # noqa: E402
from tools.kernelgen.validate.harness import Case  # noqa: E402
from tools.kernelgen.validate.harness import KernelUnderTest  # noqa: E402
from tools.kernelgen.validate.harness import RunResult  # noqa: E402
from tools.kernelgen.validate.harness import read_spec  # noqa: E402
from tools.kernelgen.validate.samples import draw_samples  # noqa: E402

# Non-power-of-2 widths, one column, many short rows (one past a 512-row tile), one long row; on a GPU also more
# rows than the interpreter runs in reasonable time (it runs a row kernel's programs one by one) and model sizes.
CPU_SHAPES = [(1, 1), (3, 1), (513, 7), (5, 4099)]
GPU_SHAPES = CPU_SHAPES + [(2049, 7), (4096, 4096), (3, 32769)]
GPU_LOSS_SHAPES = CPU_SHAPES + [(2049, 7), (4096, 32000), (333, 128256)]
SCALES = [1e3, 1e-3, 1e4, 1e-30]
SCALES_IF_FINITE = {1e4, 1e-30}  # run only where the reference itself stays finite in float32
SMALLEST_FP32 = 1e-37  # below fp32's normal range: differences there are flush-to-zero, not errors
# Extreme magnitudes lose digits in any fp32 evaluation (sin of 1e3, products of tiny numbers): the magnitude
# stage allows 10x the base tolerance plus ten times PyTorch's own fp32 error on the same inputs.
MAGNITUDE_TOLERANCE_FACTOR = 10.0
FP32_ERROR_FACTOR = 10.0


class Mismatch(AssertionError):
    pass


def compare(
    kernel: torch.Tensor,
    reference: torch.Tensor,
    atol: float,
    rtol: float,
    what: str,
    scaled=False,
    fp32_error: float = 0.0,
) -> float:
    """Largest |kernel - reference| (raises ``Mismatch`` naming the worst element when out of tolerance).

    ``scaled``: ``atol`` is relative to the largest reference value. ``fp32_error``: how far PyTorch's own float32
    evaluation of the reference strays from float64; the kernel may stray a few times as far."""
    if tuple(kernel.shape) != tuple(reference.shape):
        raise Mismatch(f"{what}: shape {tuple(kernel.shape)} vs reference {tuple(reference.shape)}")
    k = kernel.detach().double().cpu()
    r = reference.detach().double().cpu()
    finite = torch.isfinite(r)
    broken = finite & ~torch.isfinite(k)
    if broken.any():
        index = _index(broken.nonzero()[0], k)
        raise Mismatch(
            f"{what}: {int(broken.sum())} NaN/Inf where the reference is finite, e.g. at {index}: "
            f"kernel {k[index].item()} vs reference {r[index].item()}"
        )
    if not finite.any():
        return 0.0
    if scaled:
        atol = atol * float(r[finite].abs().max()) + SMALLEST_FP32
    atol += FP32_ERROR_FACTOR * fp32_error
    diff = torch.where(finite, (k - r).abs(), torch.zeros_like(r))
    excess = diff - (atol + rtol * r.abs())
    bad = finite & (excess > 0)
    if bad.any():
        worst = _index(torch.argmax(torch.where(bad, excess, torch.full_like(excess, -1.0))), k)
        raise Mismatch(
            f"{what}: {int(bad.sum())} of {k.numel()} elements off (atol {atol:.3g}, rtol {rtol:.3g}); worst at "
            f"{worst}: kernel {k[worst].item():.8g} vs reference {r[worst].item():.8g}"
        )
    return float(diff.max())


def _index(flat_or_nd, tensor: torch.Tensor) -> tuple:
    if tensor.dim() == 0:
        return ()
    if isinstance(flat_or_nd, torch.Tensor) and flat_or_nd.dim() == 1:
        return tuple(int(i) for i in flat_or_nd)
    return tuple(int(i) for i in torch.unravel_index(flat_or_nd, tensor.shape))


def compare_results(
    kut: KernelUnderTest,
    kernel: RunResult,
    reference: RunResult,
    *,
    rows: int,
    scaled=False,
    reference32: RunResult | None = None,
) -> float:
    atol, rtol = kut.tolerances
    if scaled:
        atol, rtol = atol * MAGNITUDE_TOLERANCE_FACTOR, rtol * MAGNITUDE_TOLERANCE_FACTOR
    if len(kernel.outputs) < len(reference.outputs):
        raise Mismatch(f"kernel returned {len(kernel.outputs)} tensors, the reference {len(reference.outputs)}")

    def fp32_error(index_or_name) -> float:
        if reference32 is None:
            return 0.0
        ref = reference.outputs[index_or_name] if isinstance(index_or_name, int) else reference.grads[index_or_name]
        ref32 = (
            reference32.outputs[index_or_name] if isinstance(index_or_name, int) else reference32.grads[index_or_name]
        )
        deviation = (ref32.double() - ref.double()).abs()
        deviation = deviation[torch.isfinite(deviation)]
        return float(deviation.max()) if deviation.numel() else 0.0

    names = [t.name for t in kut.profile.outputs]
    worst = 0.0
    for index, (out, ref) in enumerate(zip(kernel.outputs, reference.outputs)):
        name = names[index] if index < len(names) else f"output {index}"
        worst = max(worst, compare(out, ref, atol, rtol, f"[forward {name}]", scaled, fp32_error(index)))
    params = {p.name for p in kut.profile.parameters}
    for name in kut.grad_labels():
        # A parameter's gradient is a sum over rows: fp32 rounding grows with sqrt(rows) of them.
        grad_atol = atol * math.sqrt(rows) if name in params else atol
        worst = max(
            worst,
            compare(
                kernel.grads[name], reference.grads[name], grad_atol, rtol, f"[grad {name}]", scaled, fp32_error(name)
            ),
        )
    return worst


def check_case(kut: KernelUnderTest, case: Case, scaled=False, eager_floor=False) -> float:
    """``eager_floor``: the tolerance is at least a few times eager float32's own error (degenerate inputs, where
    the reference's float32 evaluation loses digits too)."""
    rows = case.inputs[0].shape[0]
    reference32 = kut.run_reference(case, torch.float32) if scaled or eager_floor else None
    try:
        return compare_results(
            kut,
            kut.run_kernel(case),
            kut.run_reference(case, torch.float64),
            rows=rows,
            scaled=scaled,
            reference32=reference32,
        )
    except Mismatch as error:
        raise Mismatch(f"{case.label}: {error}") from None


# Stages ----------------------------------------------------------------------------------------------------
def stage_smoke(kut: KernelUnderTest) -> str:
    rows, cols = (4, 127) if kut.tier == 3 else (4, 33)
    cases = hyper_cases(kut.profile)
    worst = 0.0
    for index, hyper in enumerate(cases):
        label = f"{rows}x{cols} {_describe(hyper)}"
        worst = max(worst, check_case(kut, kut.make_case(rows, cols, seed=index, hyper=hyper, label=label)))
    return f"{rows}x{cols}, {len(cases)} hyper-parameter set(s), max |err| {worst:.2e}"


def stage_shapes(kut: KernelUnderTest) -> str:
    shapes = CPU_SHAPES if not CUDA else GPU_LOSS_SHAPES if kut.tier == 3 else GPU_SHAPES
    worst = 0.0
    for index, (rows, cols) in enumerate(shapes):
        worst = max(worst, check_case(kut, kut.make_case(rows, cols, seed=10 + index, label=f"shape {rows}x{cols}")))
    return f"{len(shapes)} shapes ({', '.join(f'{r}x{c}' for r, c in shapes)}), max |err| {worst:.2e}"


def stage_stability(kut: KernelUnderTest) -> str:
    rows, cols = (16, 509) if kut.tier == 3 else (16, 127)
    ran, skipped = [], []
    for scale in SCALES:
        base = kut.make_case(rows, cols, seed=20)
        inputs = [x * scale if x.is_floating_point() else x for x in base.inputs]
        case = kut.with_inputs(base, inputs, f"inputs x{scale:g}")
        if scale in SCALES_IF_FINITE and not _finite(kut.run_reference(case, torch.float32)):
            skipped.append(f"x{scale:g}")
            continue
        check_case(kut, case, scaled=True)
        ran.append(f"x{scale:g}")
    details = f"{rows}x{cols} inputs scaled {', '.join(ran)}: finite and close"
    if skipped:
        details += f"; skipped {', '.join(skipped)} (the reference overflows/underflows in float32)"
    return details


def stage_determinism(kut: KernelUnderTest) -> str:
    if CUDA:
        rows, cols = (2048, 32000) if kut.tier == 3 else (4096, 4096)
    else:
        rows, cols = (33, 509) if kut.tier == 3 else (65, 257)
    case = kut.make_case(rows, cols, seed=30, label="determinism")
    first, second = kut.run_kernel(case), kut.run_kernel(case)
    pairs = [(f"[forward {i}]", a, b) for i, (a, b) in enumerate(zip(first.outputs, second.outputs))]
    pairs += [(f"[grad {name}]", first.grads[name], second.grads[name]) for name in kut.grad_labels()]
    for what, a, b in pairs:
        if not _bit_identical(a, b):
            differing = int((a != b).sum())
            raise Mismatch(f"{what}: two runs on the same data differ in {differing} of {a.numel()} elements")
    return f"{rows}x{cols}: two runs bit-identical (outputs and {len(kut.grad_labels())} gradient(s))"


def stage_edges(kut: KernelUnderTest) -> str:
    rows, cols = (6, 67)
    base = kut.make_case(rows, cols, seed=40)
    edges: dict[str, list[torch.Tensor] | None] = {}

    def constant_rows(x: torch.Tensor) -> torch.Tensor:
        if groups and x.dim() >= 3:  # the kernel's row: a group of channels of a sample
            grouped = x.reshape(x.shape[0] * groups, -1)
            return grouped[..., :1].expand_as(grouped).reshape(x.shape).contiguous()
        return x[..., :1].expand_as(x).contiguous()  # any rank: inputs that broadcast may have fewer dims

    groups = group_count(kut.profile) if kut.profile.math.groups else 0

    floating = [x for x in base.inputs if x.is_floating_point()]
    if kut.positive:
        edges["zeros"] = edges["negative zeros"] = None
    else:
        edges["zeros"] = [torch.zeros_like(x) for x in floating]
        edges["negative zeros"] = [torch.full_like(x, -0.0) for x in floating]
    edges["identical values in each row"] = [constant_rows(x) for x in floating]
    checked, skipped = [], []
    for label, values in edges.items():
        if values is None:
            skipped.append(label)
            continue
        replaced = iter(values)
        inputs = [next(replaced) if x.is_floating_point() else x for x in base.inputs]
        # Zeros and constant rows normalize by sqrt(eps) alone, which magnifies rounding: as much as eager fp32's is
        # accepted.
        check_case(kut, kut.with_inputs(base, inputs, label), eager_floor=True)
        checked.append(label)
    if kut.tier == 3 and isinstance(kut.defaults.get("ignore_index"), int):
        logits, target = base.inputs
        all_ignored = [logits, torch.full_like(target, kut.defaults["ignore_index"])]
        check_case(kut, kut.with_inputs(base, all_ignored, "every target ignored"))
        checked.append("every target ignored")
    details = f"{rows}x{cols}: {', '.join(checked)}"
    if skipped:
        details += f"; skipped {', '.join(skipped)} (positive input domain)"
    return details


def stage_samples(kut: KernelUnderTest, samples: list, tally: dict) -> str:
    """Every input set of the workspace's sampler (``validate --samples``): forward and gradients against the
    reference, each counted passed or failed; a crash in the kernel or the reference fails that set only."""
    failures = []
    for index, sample in enumerate(samples):
        cols = sample.inputs[0].shape[-1] if sample.inputs[0].dim() else 1
        generator = torch.Generator().manual_seed(50 + index)
        params = [
            sample.params[p.name]
            if p.name in sample.params
            else (
                torch.rand(parameter_shape(p, cols) if p.shape != "channel" else (cols,), generator=generator) + 0.5
            ).to(kut.device, sample.inputs[0].dtype)
            for p in kut.profile.parameters
        ]
        case = Case(sample.inputs, params, sample.hyper, 50 + index, sample.label)
        try:
            compare_results(
                kut,
                kut.run_kernel(case),
                kut.run_reference(case, torch.float64),
                rows=sample.rows,
                reference32=kut.run_reference(case, torch.float32),
            )
        except Mismatch as error:
            failures.append({"label": sample.label, "details": str(error)})
        except Exception as error:  # the set broke the kernel (or the reference): a failed set, not a crash here
            failures.append({"label": sample.label, "details": _crash(error)})
    tally.update(passed=len(samples) - len(failures), failed=len(failures), failures=failures)
    counts = f"{len(samples)} input set(s): {len(samples) - len(failures)} passed, {len(failures)} failed"
    if failures:
        raise Mismatch(f"{counts}; first: {failures[0]['label']}: {failures[0]['details']}")
    return counts


STAGES = [
    ("smoke", stage_smoke),
    ("shape_sweep", stage_shapes),
    ("numerical_stability", stage_stability),
    ("determinism", stage_determinism),
    ("edge_cases", stage_edges),
]
PASSED = "PASSED"
FAILED = "FAILED"


def _finite(result: RunResult) -> bool:
    tensors = result.outputs + list(result.grads.values())
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point())


def _bit_identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def _describe(hyper: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in hyper.items()) or "no hyper-parameters"


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".strip()


def _crash(error: BaseException) -> str:
    where = traceback.extract_tb(error.__traceback__)[-1]
    return f"{_one_line(error)} ({Path(where.filename).name}:{where.lineno})"


# Why a kernel cannot run here: TileLang compiles for CUDA GPUs only (there is no CPU interpreter as for Triton).
NO_CUDA_FOR_TILELANG = "TileLang kernels run on CUDA GPUs only; run validate on a GPU machine with tilelang installed"
# A two-stage loss's inputs are per sequence: the stages' draws of [rows, classes] are not its inputs.
SEQUENCE_INPUTS = (
    "a two-stage loss takes [B, T, V] logits and per-sequence inputs, which these stages do not draw: its generated "
    "tests compare it with the reference (the unit tests stage)"
)


def run(
    repo: Path, name: str, spec: dict | None = None, samples_path: str | None = None, as_compiled: bool = False
) -> dict:
    """``as_compiled``: a hand-written kernel, which the interpreter runs as compiled Triton would (libdevice math,
    float scalars with ``.to``: ``tools/kernelgen/interpreter.py``)."""
    if as_compiled and not CUDA:
        from tools.kernelgen.interpreter import compiled_scalars

        with compiled_scalars():
            return run(repo, name, spec, samples_path)
    device = "cuda" if CUDA else "cpu"
    report = {"device": torch.cuda.get_device_name() if CUDA else "cpu (Triton interpreter)", "cuda": CUDA}
    torch.manual_seed(0)
    kut = KernelUnderTest(repo, name, device, spec)
    if kut.profile.backend == "tilelang" and not CUDA:
        return {**report, "device": "cpu", "skipped": NO_CUDA_FOR_TILELANG}
    stages_to_run = list(STAGES)
    if any(t.sequence_shape for t in kut.profile.inputs):
        if not samples_path:
            return {**report, "skipped": SEQUENCE_INPUTS}
        stages_to_run = []
    if samples_path:
        tally = {"file": samples_path}
        # validate checked the sampler before any stage ran; drawn here again on this process's device
        samples = draw_samples(samples_path, kut.profile, device)
        stages_to_run.append(("samples", lambda kut: stage_samples(kut, samples, tally)))
        report["samples"] = tally
    stages = []
    for label, stage in stages_to_run:
        try:
            stages.append({"stage": label, "verdict": PASSED, "details": stage(kut)})
        except Mismatch as error:
            stages.append({"stage": label, "verdict": FAILED, "details": str(error)})
        except Exception as error:  # the kernel or the reference raised: a failed stage that could not run
            stages.append({"stage": label, "verdict": FAILED, "details": _crash(error), "raised": True})
    report["stages"] = stages
    report["overall"] = PASSED if all(s["verdict"] == PASSED for s in stages) else FAILED
    return report


SAMPLES_OPTION = "--samples="


def main(argv: list[str]) -> int:
    repo, name, out = Path(argv[0]), argv[1], Path(argv[2])
    samples = next((a[len(SAMPLES_OPTION) :] for a in argv[3:] if a.startswith(SAMPLES_OPTION)), None)
    as_compiled = AS_COMPILED_OPTION in argv[3:]
    rest = [a for a in argv[3:] if not a.startswith(SAMPLES_OPTION) and a != AS_COMPILED_OPTION]
    report = run(repo, name, read_spec(rest[0] if rest else None), samples, as_compiled)
    out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
