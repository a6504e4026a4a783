"""Forward and backward GPU time of generated kernels under other launch settings and source variants, beside
upstream Liger's kernel and torch.compile of the reference, in one process.

    python benchmark/scripts/sweep_launch_settings.py --upstream DIR --helper-dir DIR \
        --kernel rms_norm_gen=rms_norm --sizes 4096 14336 --warps 8 16 32 --programs 1 2 4 \
        --variant libdevice_tanh

Each setting patches the generated ops module in place: its tile helper (``tile_settings``, ``row_tile_settings``
and the like) returns another tile or warp count, ``get_num_sms`` scales the persistent backward grid (programs per
SM), and a ``--variant`` swaps the module's Triton kernels and host functions for ones from an edited copy of its
source (``VARIANTS``), whose host functions see the other settings too. Times are
medians of CUDA events with a GPU-side wait queued before each timed region, so they are GPU time, not host time.
Bytes for TB/s: the forward reads every input and writes every output once; the backward reads grad_out and the
inputs and writes each input gradient once (one-input norms: 2 and 3 passes of ``[BT, H]``).
"""

import argparse
import importlib.util
import inspect
import re
import sys
import tempfile

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import triton

from benchmark.scripts.compare_with_upstream import QUEUE_AHEAD_CYCLES
from benchmark.scripts.compare_with_upstream import UPSTREAM
from benchmark.scripts.compare_with_upstream import _first
from benchmark.scripts.compare_with_upstream import add_common_arguments
from benchmark.scripts.compare_with_upstream import copy_rate_tb_s
from benchmark.scripts.compare_with_upstream import setup
from benchmark.scripts.compare_with_upstream import upstream_from
from benchmark.scripts.utils import SingleBenchmarkRunInput

# Source edits: name -> (pattern, replacement[, count]) applied to the ops file's text.
_TANH_FDIV = """@triton.jit
def _tanh_fdiv(x):
    x2 = x * x
    series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))))
    e = tl.exp(-2.0 * tl.abs(x))
    magnitude = tl.fdiv(1.0 - e, 1.0 + e)
    return tl.where(tl.abs(x) < 0.1, series, tl.where(x < 0.0, -magnitude, magnitude))
"""
_TANH_APPROX = """@triton.jit
def _tanh_approx(x):
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)
"""

VARIANTS = {
    # libdevice's tanh instead of the core-op formula generated kernels import (tanh_from_exp).
    "libdevice_tanh": [
        (r"(?<![\w.])tanh_from_exp\(", "libdevice.tanh("),
        (
            r"^import triton.language as tl$",
            "import triton.language as tl\n\nfrom triton.language.extra import libdevice",
        ),
    ],
    # softplus's log(1 + exp(-|u|)) as libdevice's log1p of the exponential (torch.compile's form).
    "libdevice_log1p": [
        (r"tl\.log\(1\.0 \+ tl\.exp\(", "libdevice.log1p(tl.exp("),
        (
            r"^import triton.language as tl$",
            "import triton.language as tl\n\nfrom triton.language.extra import libdevice",
        ),
    ],
    # tanh_from_exp with an approximate division (div.full.f32, 2 ulp) instead of the IEEE one.
    "fdiv_tanh": [
        (r"(?<![\w.])tanh_from_exp\(", "_tanh_fdiv("),
        (r"^(@triton.jit\ndef )", _TANH_FDIV + r"\n\n\1", 1),
    ],
    # The SFU's tanh.approx.f32 (about 2^-11 relative error: a bound on what a cheaper tanh can give, not a kernel
    # for fp32 results).
    "approx_tanh": [
        (r"(?<![\w.])tanh_from_exp\(", "_tanh_approx("),
        (r"^(@triton.jit\ndef )", _TANH_APPROX + r"\n\n\1", 1),
    ],
}


def time_steps(forward, inputs, reps: int) -> tuple[float, float]:
    """Median GPU ms of the forward and of the backward, each queued behind a GPU-side wait."""
    output = _first(forward())
    dy = None if output.dim() == 0 else torch.randn_like(output)
    timed = []
    for index in range(reps + 3):
        for tensor in inputs:
            tensor.grad = None
        events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        torch.cuda._sleep(QUEUE_AHEAD_CYCLES)
        events[0].record()
        output = _first(forward())
        events[1].record()
        torch.cuda._sleep(QUEUE_AHEAD_CYCLES)
        events[2].record()
        output.backward(dy)
        events[3].record()
        if index >= 3:
            timed.append(events)
    torch.cuda.synchronize()
    fwd = sorted(e[0].elapsed_time(e[1]) for e in timed)
    bwd = sorted(e[2].elapsed_time(e[3]) for e in timed)
    return fwd[len(fwd) // 2], bwd[len(bwd) // 2]


def load_variant(module, variant: str):
    """The module's source with ``VARIANTS[variant]`` applied, or the edited copy of the module at the path
    ``variant``, imported from a temporary file (Triton reads the kernels' source text)."""
    if variant in VARIANTS:
        text = Path(module.__file__).read_text()
        for pattern, replacement, *count in VARIANTS[variant]:  # an optional count: replace that many
            text = re.sub(pattern, replacement, text, count=count[0] if count else 0, flags=re.MULTILINE)
    else:
        text = Path(variant).read_text()
    path = Path(tempfile.mkdtemp()) / f"{module.__name__.rsplit('.', 1)[-1]}_{Path(variant).stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


class Patched:
    """Launch settings and kernels of one generated ops module, restored on exit."""

    def __init__(self, module, warps=None, programs=None, variant=None, tile=None):
        self.module, self.saved = module, []
        # Launch settings (tile helpers, the SM count) and swapped code (a variant's kernels and host functions).
        self.settings, self.changes = {}, {}
        self.namespaces = [module]

        def patched(original, cols_at):
            def tiles(*arguments, **keywords):
                block_rows, block_cols, num_warps = original(*arguments, **keywords)
                if tile is not None:  # (elements, columns): rows fill the elements, the columns are capped
                    block_cols = min(triton.next_power_of_2(arguments[cols_at]), tile[1])
                    block_rows = max(1, tile[0] // block_cols)
                return block_rows, block_cols, num_warps if warps is None else warps

            return tiles

        # Both passes' tiles: element-wise kernels call layout_utils' tile_settings (trig_tile_settings for a
        # backward that calls sin or cos; older files their own _tile_settings and _backward_tile_settings); row
        # kernels call the shared row_tile_settings (kernel, n_rows, n_cols, ...).
        tile_helpers = (
            ("tile_settings", 1),
            ("trig_tile_settings", 1),
            ("_tile_settings", 1),
            ("_backward_tile_settings", 1),
            ("row_tile_settings", 2),
        )
        for name, cols_at in tile_helpers:
            if (warps is not None or tile is not None) and hasattr(module, name):
                self.settings[name] = patched(getattr(module, name), cols_at)
        source = Path(module.__file__).read_text()
        match = re.search(r"(\d+) \* get_num_sms\(\)", source) or re.search(r"get_num_sms\(\), (\d+)", source)
        if programs is not None and match and hasattr(module, "get_num_sms"):
            base, sms = int(match.group(1)), module.get_num_sms()
            self.settings["get_num_sms"] = lambda: max(1, sms * programs // base)
        if variant is not None:
            edited = load_variant(module, variant)
            # The edited copy's host functions read its own globals: the launch settings go there too.
            self.namespaces.append(edited)
            for name, value in vars(edited).items():
                # JITFunction compiled, InterpretedFunction under TRITON_INTERPRET=1; an edited copy's host
                # functions too (a variant may launch its kernels otherwise)
                kernel = type(value).__name__ in ("JITFunction", "InterpretedFunction")
                host = inspect.isfunction(value) and value.__module__ == edited.__name__
                if (kernel or host) and hasattr(module, name):
                    self.changes[name] = value

    def __enter__(self):
        for namespace in self.namespaces:
            for name, value in self.settings.items():
                if hasattr(namespace, name):
                    self.saved.append((namespace, name, getattr(namespace, name)))
                    setattr(namespace, name, value)
        for name, value in self.changes.items():
            self.saved.append((self.module, name, getattr(self.module, name)))
            setattr(self.module, name, value)
        return self

    def __exit__(self, *exc):
        for namespace, name, value in reversed(self.saved):
            setattr(namespace, name, value)
        self.saved = []


def registers(module) -> str:
    """Registers and spilled bytes per thread of the module's Triton kernels as last compiled (fwd, bwd)."""
    found = []
    for name in sorted(dir(module)):
        kernel = getattr(module, name)
        if not name.endswith("_kernel") or not hasattr(kernel, "device_caches"):
            continue
        try:
            compiled = [c for cache in kernel.device_caches.values() for c in cache[0].values()][-1]
            found.append(f"{'bwd' if 'backward' in name else 'fwd'} {compiled.n_regs}r/{compiled.n_spills}s")
        except (IndexError, AttributeError, TypeError):
            continue
    return " ".join(found)


def input_bytes(inputs, forward) -> tuple[int, int]:
    """Bytes the forward and backward must move at least (see the module docstring)."""
    output = _first(forward())
    reads = sum(t.numel() * t.element_size() for t in inputs)
    writes = output.numel() * output.element_size()
    return reads + writes, writes + 2 * reads


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, upstream_required=False)
    parser.add_argument("--warps", type=int, nargs="*", default=[])
    parser.add_argument("--programs", type=int, nargs="*", default=[])
    parser.add_argument("--tiles", nargs="*", default=[], help="ELEMENTSxMAX_COLS[xWARPS] tiles (tier 1)")
    parser.add_argument("--variant", nargs="*", default=[], help=f"{sorted(VARIANTS)} or an edited copy's path")
    parser.add_argument(
        "--setting", action="append", default=[], help="combined: variant=V,tile=ELEMENTSxCOLS,warps=W,programs=P"
    )
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args(argv)

    up = upstream_from(args)
    rate = copy_rate_tb_s()
    print(f"device-to-device copy: {rate:.2f} TB/s", flush=True)
    print(
        "| kernel | H | setting | fwd us | fwd TB/s | bwd us | bwd TB/s | registers |\n|---|---|---|---|---|---|---|---|"
    )
    for pair in args.kernel:
        name, upstream_key = pair.split("=")
        module = __import__(f"liger_kernel.ops.{name}", fromlist=["_"])
        settings = [("generated", {})]
        settings += [(f"warps={w}", {"warps": w}) for w in args.warps]
        settings += [(f"programs/SM={p}", {"programs": p}) for p in args.programs]
        settings += [(f"variant={v}", {"variant": v}) for v in args.variant]
        for text in args.setting:
            fields = dict(item.split("=", 1) for item in text.split(","))
            patch = {"variant": fields.get("variant"), "warps": None, "programs": None, "tile": None}
            for key in ("warps", "programs"):
                patch[key] = int(fields[key]) if key in fields else None
            if "tile" in fields:
                patch["tile"] = tuple(int(n) for n in fields["tile"].split("x"))
            settings.append((text.replace(fields.get("variant", "-"), Path(fields.get("variant", "-")).stem), patch))
        for text in args.tiles:
            numbers = [int(n) for n in text.split("x")]
            patch = {"tile": tuple(numbers[:2]), "warps": numbers[2] if len(numbers) > 2 else None}
            settings.append((f"tile={text}", patch))
        for size in args.sizes:
            config = {"hidden_size": size, "hidden": 4096, "dtype": "bfloat16", "model": "sweep"}

            def report(label, provider, patch=None):
                run = SingleBenchmarkRunInput(args.bt, provider, "full", dict(config))
                try:
                    inputs, forward = setup(name, upstream_key, up, run)
                    with patch or Patched(module):
                        fwd_bytes, bwd_bytes = input_bytes(inputs, forward)
                        fwd, bwd = time_steps(forward, inputs, args.reps)
                        used = registers(module) if patch else ""
                except Exception as error:  # a setting that does not compile is a result too
                    print(f"| {name} | {size} | {label} | failed: {type(error).__name__}: {str(error)[:80]} |")
                    return
                line = f"| {name} | {size} | {label} | {fwd * 1e3:.1f} | {fwd_bytes / fwd / 1e9:.2f} | "
                print(line + f"{bwd * 1e3:.1f} | {bwd_bytes / bwd / 1e9:.2f} | {used} |", flush=True)

            for label, patch in settings:
                report(label, "liger", Patched(module, **patch))
            if up is not None and upstream_key in UPSTREAM:
                report("upstream", "liger_upstream")
            if not args.no_compile:
                report("torch.compile", "torch_compile")


if __name__ == "__main__":
    main()
