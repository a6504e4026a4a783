"""One process, one run: a generated kernel against upstream Liger-Kernel's hand-written one, eager torch and
torch.compile of the kernel's own reference, with the device-to-device copy rate as the roofline.

    python benchmark/scripts/compare_with_upstream.py --upstream DIR --helper-dir DIR \
        --kernel rms_norm_gen=rms_norm --kernel layer_norm_gen=layer_norm --sizes 4096 8192 14336

Inputs of other shapes than ``[BT, H]`` (RoPE's q and k of their own heads, cos and sin of ``[B, S, D]``) are named
with ``--shapes`` (then ``--sizes`` and ``--bt`` only label the rows), inputs held fixed with ``--frozen``:

    python benchmark/scripts/compare_with_upstream.py --upstream DIR --helper-dir DIR --kernel rope=rope \
        --shapes q=4x32x2048x128 k=4x8x2048x128 cos=4x2048x128 sin=4x2048x128 --frozen cos sin

``--upstream`` holds upstream's wheel installed with ``pip install --no-deps --target DIR``; ``--helper-dir`` the
folder of ``upstream_liger.py`` (the shared loader). Each ``--kernel`` pairs a generated kernel (its generation
record gives the reference and the arguments) with an upstream kernel of ``UPSTREAM`` (or ``-``
for none). Rows (providers ``liger``, ``liger_upstream``, ``torch``, ``torch_compile``; speed in ms and memory in
MB, full forward + backward, bf16) go to the results CSV; a markdown table with TB/s is printed, bytes counted as
``passes`` reads and writes of one ``[BT, H]`` tensor (see ``BYTES_MODEL``; element-wise kernels: ``elementwise_passes``).
"""

import argparse
import functools
import math
import sys
import types

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import yaml

from benchmark.scripts.utils import SingleBenchmarkRunInput
from benchmark.scripts.utils import paired_rounds
from benchmark.scripts.utils import run_benchmarks
from benchmark.scripts.utils import run_memory_benchmark
from benchmark.scripts.utils import run_speed_benchmark
from benchmark.scripts.utils import run_speed_rounds

ROOT = Path(__file__).resolve().parents[2]
PROVIDERS = ["liger", "liger_upstream", "torch", "torch_compile"]


def _cross_entropy_options(hyper):
    """Upstream cross entropy's options after (logits, target, weight): ignore_index, z-loss scale, smoothing, reduction."""
    return (
        hyper.get("ignore_index", -100),
        hyper.get("lse_square_scale", 0.0),
        hyper.get("label_smoothing", 0.0),
        hyper.get("reduction", "mean"),
    )


# Upstream's hand-written kernels, called as upstream's own modules call them (in-place backward where upstream
# defaults to it). ``params``: the reference module's parameters in profile order.
UPSTREAM = {
    "rms_norm": lambda up, x, params, hyper: up.ops.LigerRMSNormFunction.apply(
        x, params[0], hyper.get("eps", 1e-6), 0.0, "llama", True
    ),
    "gemma_rms_norm": lambda up, x, params, hyper: up.ops.LigerRMSNormFunction.apply(
        x, params[0], hyper.get("eps", 1e-6), 1.0, "gemma", True
    ),
    # An RMSNorm without weight against upstream's RMSNorm with a weight of ones (the same function).
    "weightless_rms_norm": lambda up, x, params, hyper: up.ops.LigerRMSNormFunction.apply(
        x, torch.ones(x.shape[-1], dtype=x.dtype, device=x.device), hyper.get("eps", 1e-6), 0.0, "llama", True
    ),
    "layer_norm": lambda up, x, params, hyper: up.ops.LigerLayerNormFunction.apply(
        x, params[0], params[1], hyper.get("eps", 1e-5)
    ),
    "softmax": lambda up, x, params, hyper: up.ops.LigerSoftmaxFunction.apply(x),
    # HF's apply_rotary_pos_emb: q and k in place, cos and sin held fixed.
    "rope": lambda up, q, k, cos, sin, params, hyper: up.ops.LigerRopeFunction.apply(
        q, k, cos, sin, None, hyper.get("unsqueeze_dim", 1)
    ),
    # Element-wise: upstream's GeGLU and SwiGLU (a, b) and DyT (x, alpha, gamma, beta).
    "geglu": lambda up, a, b, params, hyper: up.ops.LigerGELUMulFunction.apply(a, b),
    "swiglu": lambda up, a, b, params, hyper: up.ops.LigerSiLUMulFunction.apply(a, b),
    "dyt": lambda up, x, params, hyper: up.ops.LigerDyTFunction.apply(x, *params),
    # Upstream's fused add + RMSNorm computes in fp32 throughout ("gemma" casting), like the built-in reference.
    "fused_add_rms_norm": lambda up, x, residual, params, hyper: up.ops.LigerFusedAddRMSNormFunction.apply(
        x, residual, params[0], hyper.get("eps", 1e-6), 0.0, "gemma"
    ),
    # Losses over [BT, V]: the same arguments the generated kernel gets.
    "cross_entropy": lambda up, logits, target, params, hyper: up.ops.LigerCrossEntropyFunction.apply(
        logits, target, None, *_cross_entropy_options(hyper)
    ),
    "kl_div": lambda up, y_pred, y_true, params, hyper: up.ops.LigerKLDivLossFunction.apply(
        y_pred, y_true, hyper.get("reduction", "batchmean"), False
    ),
    "jsd": lambda up, log_q, log_p, params, hyper: up.ops.LigerJSDFunction.apply(
        log_q, log_p, None, hyper.get("beta", 0.5)
    ),
    "tvd": lambda up, p, q, params, hyper: up.ops.LigerTVDLossFunction.apply(
        p, q, None, hyper.get("reduction", "batchmean")
    ),
    # GroupNorm over [BT // channels, channels, H] (GROUP_CHANNELS per group) with its per-channel affine, whether the
    # generated kernel holds it as parameters or takes it as inputs; PolyNorm with its three weights as the one vector
    # that upstream and the generated Function take.
    "group_norm": lambda up, x, *rest: up.ops.LigerGroupNormFunction.apply(
        x, *_affine(rest), x.shape[1], x.shape[1] // GROUP_CHANNELS, rest[-1].get("eps", 1e-6)
    ),
    "poly_norm": lambda up, x, params, hyper: up.ops.LigerPolyNormFunction.apply(
        x, params[0], params[-1], hyper.get("eps", 1e-6), True
    ),
    # Fused linear + distillation: the student's hidden states and weight, the teacher's (frozen: --frozen NAME);
    # upstream's JSD at beta 0 is the forward KL(teacher || student) of the softened distributions.
    "fused_linear_jsd": lambda up, student, student_weight, teacher, teacher_weight, params, hyper: (
        up.ops.LigerFusedLinearJSDFunction.apply(
            student,
            student_weight,
            teacher,
            teacher_weight,
            None,
            hyper.get("beta", 0.0),
            -100,
            hyper.get("temperature", 1.0),
        )
    ),
    # Fused linear + loss: hidden states, the lm_head weight, the targets (no bias).
    "fused_linear_cross_entropy": lambda up, hidden, weight, target, params, hyper: (
        up.ops.LigerFusedLinearCrossEntropyFunction.apply(
            hidden, weight, target, None, None, *_cross_entropy_options(hyper)
        )
    ),
}
# Channels per group of a grouped kernel's inputs, as its generated benchmark and upstream's benchmark take them.
GROUP_CHANNELS = 4


def _affine(rest):
    """A GroupNorm's weight and bias from what follows x: the inputs after it, then the parameters, then the
    hyper-parameters."""
    *tensors, params, _ = rest
    return (*tensors, *params)[:2]


def _groups(record: dict) -> int:
    """The number of groups a grouped kernel (``math.groups``) runs with at its default, 0 for other kernels."""
    name = record["math"].get("groups")
    return next((hp["default"] for hp in record["hyperparameters"] if hp["name"] == name), 0) if name else 0


FUSED_PREFIX = "fused_linear_"  # a fused linear kernel, generated beside the loss whose record it shares
# Reads and writes of one [BT, H] tensor per forward + backward: x in, y out; dy and x in, dx out. Fused add +
# RMSNorm: x and residual in, normed and sum out; both gradients in, the sum in, dx and dresidual out. Losses
# ([BT, V], the loss a scalar): every [BT, V] input read once per pass it needs, the gradient written once. Cross
# entropy: the logits twice (statistics, then the gradient, which needs the row's final sum), the gradient once.
# KL, JSD, TVD: both inputs once (the gradient needs no statistic of the row), the gradient once.
BYTES_MODEL = {"default": 5, "fused_add_rms_norm": 9, "cross_entropy": 3, "kl_div": 3, "jsd": 3, "tvd": 3}
# A loss with no upstream key is counted as cross entropy is: its logits read for the row's statistics and again for
# the gradient, the gradient written once (a generated poly-1 loss was counted as a norm's 5 passes, over 100% of
# the copy rate).
LOSS_PASSES = 3
# A fused linear loss is bound by its matmuls (2 * 3 * BT * H * V flops), not by memory: no TB/s.
BYTES_MODEL["fused_linear_cross_entropy"] = 0
# Losses without an upstream kernel, by the generated kernel's reference: cross entropy minus an entropy bonus
# reads the logits twice, as cross entropy does.
BYTES_MODEL_BY_REFERENCE = {"cross_entropy_entropy_bonus": 3}


def elementwise_passes(record: dict) -> int:
    """Reads and writes of one [BT, H] tensor per forward + backward of an element-wise (tier-1) kernel: the forward
    reads every input and writes every output; the backward reads each output's gradient and every input again and
    writes each input gradient (a GLU, two inputs and one output: 3 + 5 = 8; per-channel parameters are H values,
    not counted)."""
    inputs = [spec for spec in record["inputs"] if spec["dtype"] != "int64"]
    grads = [spec for spec in inputs if spec["requires_grad"]]
    return 2 * len(inputs) + len(grads) + 2 * len(record["outputs"])


def shaped_bytes(record: dict, shapes: dict[str, tuple[int, ...]], frozen: list[str]) -> int:
    """Bytes (bf16) a forward + backward of inputs of ``shapes`` moves at least: the forward reads every input and
    writes every output (as large as the input of its row group, the first input where none is named); the backward
    reads every output's gradient and the frozen inputs again and writes the other inputs' gradients."""
    sizes = {name: math.prod(shape) for name, shape in shapes.items()}
    names = {spec["name"] for spec in record["inputs"]}
    source = {}  # output -> the input of rows of its row group
    for group in (record["math"].get("lanes") or {}).get("groups") or []:
        rows = next(renamed for name, renamed in group.items() if name in names)
        source.update({renamed: rows for name, renamed in group.items() if name not in names})
    outputs = sum(sizes[source.get(output["name"], record["inputs"][0]["name"])] for output in record["outputs"])
    inputs = sum(sizes.values())
    gradients = sum(size for name, size in sizes.items() if name not in frozen)
    frozen_reads = sum(size for name, size in sizes.items() if name in frozen)
    return 2 * (inputs + outputs + outputs + gradients + frozen_reads)


# Where kernelgen keeps generation records (tools/kernelgen/record.py): the git directory's kernelgen/ folder, or
# .kernelgen-state/ in a checkout without git (the GPU checkout), which carries no tools/ to ask.
RECORD_FOLDERS = (ROOT / ".kernelgen-state" / "records", ROOT / ".git" / "kernelgen" / "records")


def load_record(name: str) -> dict:
    found = [folder / f"{name}.yaml" for folder in RECORD_FOLDERS if (folder / f"{name}.yaml").is_file()]
    if not found:
        raise SystemExit(f"no generation record of '{name}' in {' or '.join(map(str, RECORD_FOLDERS))}")
    return yaml.safe_load(found[0].read_text().split("\n", 1)[1])


@functools.cache
def reference_entry(name: str):
    record = load_record(name)
    module = types.ModuleType(f"reference_{name}")
    sys.modules[module.__name__] = module  # torch.compile looks globals up by module
    exec(compile(record["reference"]["source"], f"<reference {name}>", "exec"), module.__dict__)
    return record, getattr(module, record["reference"]["entry"])


@functools.cache
def reference_module(name: str, size: int, compiled: bool):
    record, entry = reference_entry(name)
    defaults = {hp["name"]: hp["default"] for hp in record["hyperparameters"]}
    if record["reference"]["kind"] == "module":
        # The row width sizes the parameters, as in the generated benchmark: a module without any (SwishBeta(beta=1.5))
        # takes no size.
        sizes = record["module"]["size_param"] in {ip["name"] for ip in record["module"]["init_params"]}
        size_args = {record["module"]["size_param"]: size} if record["parameters"] and sizes else {}
        module = entry(**size_args).to("cuda", torch.bfloat16)
        with torch.no_grad():
            for parameter in module.parameters():
                parameter.copy_(torch.rand_like(parameter) + 0.5)
    else:
        module = _FunctionModule(functools.partial(entry, **defaults))
    if not compiled:
        return module
    # Compiled fresh for this shape, static: every reference's forward is one code object (_FunctionModule.forward,
    # or a module class's), and without the reset Dynamo would recompile it per kernel and shape until its recompile
    # limit (8) and then run it eagerly, or compile a dynamic-shape graph from the second shape on.
    torch._dynamo.reset()
    return torch.compile(module, dynamic=False)


class _FunctionModule(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *inputs):
        return self.function(*inputs)


def setup(name: str, upstream_key: str, up, run: SingleBenchmarkRunInput):
    if name.startswith(FUSED_PREFIX):
        return setup_fused_linear(name, upstream_key, up, run)
    record, _ = reference_entry(name)
    size = run.extra_benchmark_config["hidden_size"]
    bt = run.x
    # As the generated benchmarks (kernelgen's profile.benchmark_grad_inputs): a loss's step differentiates its
    # first input only, the logits; a target or a teacher is held fixed.
    differentiated = [spec["name"] for spec in record["inputs"] if spec["requires_grad"] and spec["dtype"] != "int64"]
    differentiated = differentiated[:1] if record["tier"] == 3 else differentiated
    channels = GROUP_CHANNELS * _groups(record)
    shapes, frozen = (
        parse_shapes(run.extra_benchmark_config.get("shapes", "")),
        run.extra_benchmark_config.get("frozen", ""),
    )
    if channels:
        # A grouped kernel: BT tokens as samples of ``channels`` channels of ``size`` elements, its affine per channel.
        shapes = {
            spec["name"]: (channels,) if spec.get("broadcast") else (max(1, bt // channels), channels, size)
            for spec in record["inputs"]
        }
    differentiated = [name for name in differentiated if name not in frozen.split()]
    arguments = [
        _input(spec, bt, size, spec["name"] in differentiated, shapes.get(spec["name"])) for spec in record["inputs"]
    ]
    inputs = [x for x in arguments if x.requires_grad]
    module = reference_module(name, channels or size, run.kernel_provider == "torch_compile")
    params = _taken_parameters(module, record)
    hyper = {hp["name"]: hp["default"] for hp in record["hyperparameters"]}
    if run.kernel_provider == "liger":
        function = getattr(__import__(f"liger_kernel.ops.{name}", fromlist=["_"]), record["function_class_name"])
        forward = lambda: function.apply(*arguments, *params, *hyper.values())  # noqa: E731
    elif run.kernel_provider == "liger_upstream":
        forward = lambda: UPSTREAM[upstream_key](up, *arguments, params, hyper)  # noqa: E731
    else:
        forward = lambda: module(*arguments)  # noqa: E731
    return inputs, _every_output_differentiated(forward)


def parse_shapes(text: str) -> dict[str, tuple[int, ...]]:
    """``q=4x32x2048x128 k=...`` as ``{name: shape}``."""
    shapes = {}
    for item in text.split():
        name, _, dims = item.partition("=")
        shapes[name] = tuple(int(d) for d in dims.split("x"))
    return shapes


class _EveryOutput(torch.autograd.Function):
    """The first output, through which a step's backward also sends a fixed gradient to every other output (RoPE's
    k beside q: both reach the loss in attention, and the harness backpropagates from one tensor)."""

    @staticmethod
    def forward(ctx, gradients, first, *others):
        ctx.gradients = gradients
        return first.view_as(first)

    @staticmethod
    def backward(ctx, grad):
        return (None, grad, *ctx.gradients)


def _every_output_differentiated(forward):
    """``forward`` as a step of one output tensor, the others differentiated with it (losses keep their first)."""
    outputs = forward()
    if not isinstance(outputs, (tuple, list)) or outputs[0].dim() == 0:
        return forward
    gradients = [torch.randn_like(output) for output in outputs[1:]]
    return lambda: _EveryOutput.apply(gradients, *forward())


def setup_fused_linear(name: str, upstream_key: str, up, run: SingleBenchmarkRunInput):
    """Hidden states [BT, H] and a weight [V, H] per logits input of the loss (H: ``--hidden``), its targets."""
    loss = name[len(FUSED_PREFIX) :]
    record, entry = reference_entry(loss)
    n_classes, hidden_size, bt = run.extra_benchmark_config["hidden_size"], run.extra_benchmark_config["hidden"], run.x
    frozen = run.extra_benchmark_config.get("frozen", "").split()
    arguments, targets = [], []
    for spec in record["inputs"]:
        if spec["dtype"] == "int64":
            targets.append(torch.randint(0, n_classes, (bt,), device="cuda"))
            continue
        grad = spec["requires_grad"] and spec["name"] not in frozen  # a distillation's teacher, frozen as in training
        arguments.append(torch.randn(bt, hidden_size, device="cuda", dtype=torch.bfloat16, requires_grad=grad))
        weight = torch.randn(n_classes, hidden_size, device="cuda") / hidden_size**0.5
        arguments.append(weight.to(torch.bfloat16).requires_grad_(grad))
    arguments += targets
    inputs = [x for x in arguments if x.requires_grad]
    hyper = {hp["name"]: hp["default"] for hp in record["hyperparameters"]}
    if run.kernel_provider == "liger":
        function = getattr(__import__(f"liger_kernel.ops.{name}", fromlist=["_"]), _fused_function_class(record))
        biases = [None] * ((len(arguments) - len(targets)) // 2)
        forward = lambda: function.apply(*arguments, *biases, *hyper.values())  # noqa: E731
    elif run.kernel_provider == "liger_upstream":
        forward = lambda: UPSTREAM[upstream_key](up, *arguments, [], hyper)  # noqa: E731
    else:
        module = _linear_then_loss(loss, run.kernel_provider == "torch_compile")
        forward = lambda: module(*arguments)  # noqa: E731
    return inputs, forward


def _fused_function_class(record: dict) -> str:
    module = record["module_class_name"]
    stem = module[len("Liger") :].removesuffix("Loss") if module.startswith("Liger") else module
    return f"LigerFusedLinear{stem}Function"


@functools.cache
def _linear_then_loss(loss: str, compiled: bool):
    record, entry = reference_entry(loss)
    defaults = {hp["name"]: hp["default"] for hp in record["hyperparameters"]}
    n_logits = sum(spec["dtype"] != "int64" for spec in record["inputs"])

    def forward(*arguments):
        logits = [arguments[2 * i] @ arguments[2 * i + 1].t() for i in range(n_logits)]
        return entry(*logits, *arguments[2 * n_logits :], **defaults)

    module = _FunctionModule(forward)
    return torch.compile(module) if compiled else module


def _taken_parameters(module, record: dict) -> list[torch.Tensor]:
    """The reference's parameters as the generated Function takes them: a vector read by element (PolyNorm's
    ``weight[0]``, ``[1]``, ``[2]``) whole where the kernel is a derived row kernel, its elements (views) otherwise."""
    whole = record["tier"] == 2 and record["math"].get("triton") is None and record["reference"]["kind"] == "module"
    taken = []
    for spec in record["parameters"]:
        path = spec.get("attribute") or spec["name"]
        held, bracket, _ = path.partition("[")
        if bracket and whole:
            vector = module.get_parameter(held)
            taken += [] if any(t is vector for t in taken) else [vector]
        else:
            taken.append(_parameter(module, path))
    return taken


def _parameter(module, path: str) -> torch.Tensor:
    """The reference's parameter at ``path``, or the element ``weight[0]`` of a vector it holds (a view of it)."""
    held, _, index = path.partition("[")
    parameter = module.get_parameter(held)
    return parameter[int(index[:-1])] if index else parameter


def _input(spec: dict, bt: int, size: int, grad: bool, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    """One bf16 [BT, size] input (or of ``shape``) as the kernel's tests draw it (class indices, distributions,
    positive or any)."""
    if spec["dtype"] == "int64":
        return torch.randint(0, size, (bt,), device="cuda")
    x = torch.randn(shape or (bt, size), device="cuda")
    domain = spec.get("domain", "")
    if domain == "probabilities":
        x = torch.softmax(x, dim=-1)
    elif domain == "log_probabilities":
        x = torch.log_softmax(x, dim=-1)
    elif domain == "positive":
        x = x.abs() + 0.1
    return x.to(torch.bfloat16).requires_grad_(grad)


QUEUE_AHEAD_CYCLES = 4_000_000  # ~2 ms of GPU clock: longer than the host needs to queue one step


def gpu_step_ms(forward, inputs, reps: int = 40) -> float:
    """Median GPU time of forward + backward with the host kept out: a GPU-side wait is queued before each start
    event, so the whole step is queued before the GPU reaches it (do_bench's figure includes host time whenever
    launching a step takes longer than running it)."""
    output = _first(forward())
    dy = None if output.dim() == 0 else torch.randn_like(output)  # a loss backpropagates from 1.0
    events = []
    for index in range(reps + 5):
        for tensor in inputs:
            tensor.grad = None
        torch.cuda._sleep(QUEUE_AHEAD_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        _first(forward()).backward(dy)
        end.record()
        if index >= 5:
            events.append((start, end))
    torch.cuda.synchronize()
    times = sorted(start.elapsed_time(end) for start, end in events)
    return times[len(times) // 2]


def kernel_breakdown(forward, inputs) -> list[tuple[str, float]]:
    """GPU microseconds of each kernel in one forward + backward (torch.profiler), longest first."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile

    output = _first(forward())
    dy = None if output.dim() == 0 else torch.randn_like(output)
    for tensor in inputs:
        tensor.grad = None
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        _first(forward()).backward(dy)
        torch.cuda.synchronize()
    kernels = [(e.key, e.self_device_time_total / e.count) for e in prof.key_averages() if e.self_device_time_total > 0]
    return sorted(kernels, key=lambda kernel: -kernel[1])


def _first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


class Consume(torch.autograd.Function):
    """An op that reads y and keeps nothing of it (a scalar out), whose backward hands autograd a new gradient
    buffer for y (a copy of ``dy``): y is freed after the forward, as a norm's output is by the time the norm's
    backward runs in training, and the gradient the kernel gets is autograd's alone."""

    @staticmethod
    def forward(ctx, y, dy):
        ctx.dy = dy
        return y.new_zeros(())

    @staticmethod
    def backward(ctx, grad):
        return ctx.dy.clone(), None


def handed_over(forward):
    """``forward`` as a step whose first output a later op reads and drops (``Consume``); a loss (a scalar) is a
    step already."""
    output = _first(forward())
    if output.dim() == 0:
        return forward
    dy = torch.randn_like(output)
    return lambda: Consume.apply(_first(forward()), dy)


def measure(
    setup_fn,
    kernel_name: str,
    providers,
    config: dict,
    bt: int,
    csv_path,
    speed_only: bool = False,
    rounds: int = 1,
    memory_dy: str = "caller",
) -> dict:
    """``{provider: {"speed": ms, "memory": MB}}`` of one full forward + backward at ``[bt, config's size]``, each run
    also a row of the results CSV; ``setup_fn(run)`` gives a provider's inputs and forward. With ``rounds`` > 1 the
    speeds are ``run_speed_rounds``' (providers taking turns; the row's median is the median of the rounds').
    ``memory_dy``: the peak with d(y) the caller's (``y.backward(dy)``: a kernel that writes d(x) over it, as
    upstream's in-place RMSNorm does, overwrites the caller's tensor) or ``autograd``'s (``handed_over``, training's
    case, where a generated row kernel takes d(y)'s buffer too)."""
    figures = {}
    by_rounds = {}
    if rounds > 1:
        steps = {}
        for provider in providers:
            inputs, forward = setup_fn(SingleBenchmarkRunInput(bt, provider, "full", dict(config)))
            steps[provider] = (forward, inputs)
        per_round = {}
        by_rounds = run_speed_rounds(steps, "full", rounds, per_round)
    metrics = [("speed", "ms", run_speed_benchmark), ("memory", "MB", run_memory_benchmark)]
    for metric, unit, runner in metrics[:1] if speed_only else metrics:

        def bench(run, runner=runner, metric=metric):
            if metric == "speed" and by_rounds:
                return by_rounds[run.kernel_provider]
            inputs, forward = setup_fn(run)
            if metric == "memory" and memory_dy == "autograd":
                forward = handed_over(forward)
            return runner(forward, "full", inputs)

        rows = run_benchmarks(
            bench, kernel_name, metric, unit, "BT", "B * T", [bt], providers,
            extra_benchmark_configs=[config], overwrite=True, csv_path=csv_path,
        )  # fmt: skip
        for row in rows:
            figures.setdefault(row["kernel_provider"], {})[metric] = row["y_value_50"]
    for provider, output in by_rounds.items():  # the rounds' 20th-80th percentile, beside the median
        figures.setdefault(provider, {})["spread"] = (output.y_20, output.y_80)
        if provider != "torch" and "torch" in per_round:  # against eager, round by round
            figures[provider]["vs_torch"] = paired_rounds(per_round[provider], per_round["torch"])
    return figures


def copy_rate_tb_s() -> float:
    """Device-to-device copy of 2 GiB: bytes read plus bytes written over the median time."""
    import triton.testing

    source = torch.empty(2**30, dtype=torch.bfloat16, device="cuda")
    target = torch.empty_like(source)
    ms = triton.testing.do_bench(lambda: target.copy_(source), rep=200, return_mode="median")
    return 2 * source.numel() * source.element_size() / (ms * 1e-3) / 1e12


def add_common_arguments(parser: argparse.ArgumentParser, upstream_required: bool) -> None:
    """The options the comparison scripts share: where upstream is, which kernels, which sizes."""
    parser.add_argument("--upstream", required=upstream_required, help="folder with upstream liger_kernel installed")
    parser.add_argument("--helper-dir", required=upstream_required, help="folder holding upstream_liger.py")
    parser.add_argument("--kernel", action="append", required=True, help="GENERATED=UPSTREAM (UPSTREAM may be -)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 14336])
    parser.add_argument("--bt", type=int, default=16384)


def upstream_from(args):
    """Upstream's modules (``load_upstream``), or None without ``--upstream``; before this repo's are imported."""
    if not args.upstream:
        return None
    sys.path.insert(0, args.helper_dir)
    from upstream_liger import load_upstream

    # Upstream's JSD runs through its backend registry, which imports its Triton kernel on first use: by then
    # `liger_kernel` is this repo's package, so the kernel module is loaded here, with upstream's.
    return load_upstream(args.upstream, modules=("ops", "transformers.functional", "ops.backends._triton.jsd"))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, upstream_required=True)
    parser.add_argument("--hidden", type=int, default=4096, help="hidden size of fused linear kernels")
    parser.add_argument("--shapes", nargs="+", default=[], help="NAME=D0xD1x...: an input's own shape")
    parser.add_argument(
        "--frozen",
        nargs="+",
        default=[],
        help="inputs drawn without a gradient (RoPE's cos, sin; a distillation's teacher)",
    )
    parser.add_argument("--csv", default=None, help="results CSV (default: the harness's)")
    parser.add_argument("--providers", nargs="+", default=PROVIDERS)
    parser.add_argument("--gpu-time", action="store_true", help="also the GPU-only time (host kept out) per step")
    parser.add_argument("--breakdown", action="store_true", help="print each kernel's GPU time in one step")
    parser.add_argument("--speed-only", action="store_true", help="skip the peak-memory measurement")
    parser.add_argument(
        "--memory-dy",
        choices=["caller", "autograd"],
        default="caller",
        help="peak memory with d(y) passed to backward by the caller, or handed over by autograd as in training",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="time the providers in turns over this many rounds (host-bound shapes)"
    )
    args = parser.parse_args(argv)

    up = upstream_from(args)
    rate = copy_rate_tb_s()
    print(f"device-to-device copy: {rate:.2f} TB/s", flush=True)
    # Rows are printed as they are measured: a run stopped at a time limit still shows what it measured.
    print("| kernel | H | provider | full ms | peak MB | TB/s | % copy | GPU-only ms | GPU-only % copy |", flush=True)
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for pair in args.kernel:
        name, upstream_key = pair.split("=")
        providers = [p for p in args.providers if p != "liger_upstream" or upstream_key in UPSTREAM]
        for size in args.sizes:
            config = {"hidden_size": size, "hidden": args.hidden, "dtype": "bfloat16", "model": "compare"}
            config |= {"shapes": " ".join(args.shapes)} if args.shapes else {}
            config |= {"frozen": " ".join(args.frozen)} if args.frozen else {}
            config |= {"memory_dy": args.memory_dy} if args.memory_dy != "caller" else {}
            figures = measure(
                lambda run: setup(name, upstream_key, up, run),
                name,
                providers,
                config,
                args.bt,
                args.csv,
                args.speed_only,
                args.rounds,
                args.memory_dy,
            )
            for provider in providers if args.gpu_time or args.breakdown else []:
                run = SingleBenchmarkRunInput(args.bt, provider, "full", dict(config))
                inputs, forward = setup(name, upstream_key, up, run)
                if args.gpu_time:
                    figures.setdefault(provider, {})["gpu"] = gpu_step_ms(forward, inputs)
                if args.breakdown:
                    for kernel, us in kernel_breakdown(forward, inputs)[:6]:
                        print(f"  {name} H={size} {provider}: {us:8.1f} us  {kernel[:90]}", flush=True)
            record_name = name.removeprefix(FUSED_PREFIX)
            reference = load_record(record_name)["reference"]["origin"].removeprefix("builtin:")
            record = load_record(record_name)
            default = {1: elementwise_passes(record), 3: LOSS_PASSES}.get(record["tier"], BYTES_MODEL["default"])
            units = BYTES_MODEL.get(upstream_key, BYTES_MODEL_BY_REFERENCE.get(reference, default))
            if name.startswith(FUSED_PREFIX):
                units = 0
            moved = units * args.bt * size * 2
            if args.shapes:  # each input read once and each output written once a pass, their gradients as many
                moved = shaped_bytes(record, parse_shapes(config["shapes"]), args.frozen)
            for provider in providers:
                ms = figures.get(provider, {}).get("speed")
                mb = figures.get(provider, {}).get("memory")
                if ms is None:
                    continue
                tb_s = moved / (ms * 1e-3) / 1e12 if moved else float("nan")
                gpu = figures[provider].get("gpu")
                mb = float("nan") if mb is None else mb
                gpu_text = f"{gpu:.3f}" if gpu is not None else "-"
                gpu_share = f"{moved / (gpu * 1e-3) / 1e12 / rate:.0%}" if gpu and moved else "-"
                spread = figures[provider].get("spread")
                ms_text = f"{ms:.3f}" + (f" ({spread[0]:.3f}-{spread[1]:.3f})" if spread else "")
                print(
                    f"| {name} | {size} | {provider} | {ms_text} | {mb:.0f} | {tb_s:.2f} | {tb_s / rate:.0%} | {gpu_text} "
                    f"| {gpu_share} |",
                    flush=True,
                )
            for provider in providers:
                if "vs_torch" in figures.get(provider, {}):
                    wins, ratio = figures[provider]["vs_torch"]
                    print(
                        f"{name} H={size} {provider} vs torch, round by round: no slower in {wins} of {args.rounds} "
                        f"rounds, median ratio {ratio:.3f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
