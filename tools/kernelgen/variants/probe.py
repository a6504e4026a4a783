"""Decide by the numbers whether an existing kernel, at some option values, computes what a reference computes.

The kernel runs in this process on the CPU under ``TRITON_INTERPRET=1``, imported from the target checkout's
``src`` (this process's own ``liger_kernel`` modules, ``sys.path`` and environment are put back afterwards); the
reference runs in float64 as ``validate`` runs it. The search: one small forward case first, at the defaults and
at each option moved to one of its candidates (values that leave the kernel's output as it is are set aside), then
best first: the arrangement closest to the reference gets one more option moved, up to three, each move followed
only when it brings the output closer to the reference's. A forward match must then hold on several seeds and
shapes (non-power-of-2 columns, one column), forward and backward, and with each float hyper-parameter of the
reference moved off its default (which a different eps placement or smoothing formula does not survive). Options
that made no difference in float32 (casting modes, in-place flags) are last chosen by float16: the value whose
float16 output is closest to the reference's own float16 output (largest difference, then mean), the default on a
tie.

The data follows the profile: inputs that broadcast in their own shapes, held vectors whole, and class targets that
include the whole numbers the reference writes (an ``ignore_index=7``). Two differences are allowed and said in the
line ``new`` prints: a soft target (a teacher's distribution passed as a kernel's ``target``) the kernel gives no
gradient, and a backward that cannot run on the CPU (the forward then decides: equal functions have equal gradients).
The kernels closest to the reference at their defaults are searched first, within one budget of runs.
"""

from __future__ import annotations

import ast
import contextlib
import heapq
import importlib
import itertools
import math
import warnings

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from typing import NamedTuple

import torch

from tools.kernelgen.analyze.halves import split_of
from tools.kernelgen.broadcast import first_input_dims
from tools.kernelgen.broadcast import shape_for
from tools.kernelgen.interpreter import compiled_scalars
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.render.vectors import parameter_shape
from tools.kernelgen.scratch import library_imports_from
from tools.kernelgen.validate.harness import Case
from tools.kernelgen.validate.harness import ReferenceRunner
from tools.kernelgen.validate.harness import RunResult
from tools.kernelgen.variants.options import Bound
from tools.kernelgen.variants.options import CallPlan
from tools.kernelgen.variants.options import call_text
from tools.kernelgen.variants.options import reference_literals

PROBE_SHAPE = (3, 37)
SEQUENCES_PROBE = (2, 3)  # [B, T]: whether the reference takes [B, T, V] logits where the kernel does not
CHECK_SHAPES = ((4, 37), (2, 64), (1, 1), (5, 129))
CHECK_SEEDS = (11, 12, 13, 14)
MAX_CHANGES = 3
CLOSER = 0.9  # a move worth following takes the kernel's output at least this much closer to the reference
MAX_EVALUATIONS = 150  # forward runs per kernel in the combination search
TOTAL_EVALUATIONS = 600  # runs over every kernel: past it, the search ends without a variant (never a refusal)
ATOL, RTOL = 1e-5, 1e-4  # float32 kernel against the float64 reference, atol relative to the largest value


class Mismatch(Exception):
    """A kernel's result that is not the reference's, within the tolerances."""


@contextlib.contextmanager
def checkout_kernels(root: Path) -> Iterator[None]:
    """Inside: ``liger_kernel`` imports from ``root/src`` with the Triton interpreter; outside, as before."""
    with library_imports_from(root / "src"), compiled_scalars():
        yield


def compared_classes(profile: KernelProfile) -> list[int]:
    """Whole numbers the traced math compares a class input with: ``y != -100`` where the reference leaves
    F.cross_entropy's ignore_index at its default, a class it treats apart that its code never writes."""
    classes = {spec.name for spec in profile.inputs if spec.dtype.startswith("int")}
    found: list[int] = []
    for formula in [*profile.math.outputs.values(), *(statistic.of for statistic in profile.math.statistics)]:
        for node in ast.walk(ast.parse(formula, mode="eval")):
            if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], _COMPARISONS)):
                continue
            sides = [node.left, node.comparators[0]]
            if not any(isinstance(side, ast.Name) and side.id in classes for side in sides):
                continue
            for side in sides:
                try:
                    value = ast.literal_eval(side)
                except ValueError:
                    continue
                # Formulas may print a class as a float (``target != -1.0``): a whole number all the same.
                whole = isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()
                # An order (``labels >= 0``: every negative label is left out) takes the classes around its bound,
                # one of them on the side the reference treats apart, which a kernel that leaves out -100 alone does
                # not.
                around = [-1, 0, 1] if isinstance(node.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) else [0]
                for step in around if whole else []:
                    if int(value) + step not in found:
                        found.append(int(value) + step)
    return found


_COMPARISONS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


class Probe(ReferenceRunner):
    """The reference of a profile beside kernels of a checkout, on the CPU."""

    def __init__(self, profile: KernelProfile):
        super().__init__(profile, "cpu")
        self._truth: dict[tuple, RunResult] = {}
        # Whole numbers the reference writes (``ignore_index=7``): some class targets take them, so that a class the
        # reference treats apart is drawn (at random, one of 37 classes rarely is).
        source = profile.reference.source or ""
        literals = reference_literals(source, profile.reference.entry or "") if source else []
        compared = compared_classes(profile)
        self.written_classes = compared + [v for v in literals if isinstance(v, int) and v not in compared]

    # Data: every input the profile describes, as the generated tests draw it --------------------------------
    def case(
        self, rows: int, cols: int, seed: int, hyper: dict | None = None, scale: float = 1.0, row_scale: float = 1.0
    ) -> Case:
        generator = torch.Generator().manual_seed(seed)
        hyper = dict(self.defaults if hyper is None else hyper)
        # Inputs that broadcast (a per-column weight passed as an argument) take their own shape against the first's.
        patterns = [spec.broadcast for spec in self.profile.inputs if spec.broadcast]
        first = first_input_dims(patterns, rows, cols, rank=self.profile.written_rank())
        inputs = []
        for spec in self.profile.inputs:
            domain = spec.domain or self.profile.test.input_domain
            if spec.dtype.startswith("int"):
                value = torch.randint(0, cols, (rows,), generator=generator)
                ignore_index = hyper.get("ignore_index")
                if isinstance(ignore_index, int) and not isinstance(ignore_index, bool) and rows >= 3:
                    value[1::3] = ignore_index
                for row, written in zip(range(2, rows, 3), itertools.cycle(self.written_classes)):
                    value[row] = written if written < cols else value[row]
                if spec.shift:  # drawn a token late: the reference's shift brings each class back to its row
                    value = value.roll(1)
            elif spec.per_class:
                value = torch.rand(cols, generator=generator) + 0.5
            elif spec.per_row:
                value = torch.randn(rows, generator=generator)
                value = (value.abs() + 0.1 if domain == "positive" else value) * row_scale
            else:
                shape = shape_for(spec.broadcast, first) if spec.broadcast else first
                value = self._floats(shape, domain, generator, scale)
            inputs.append(value)
        params = [torch.rand(parameter_shape(p, cols)[-1:], generator=generator) + 0.5 for p in self.profile.parameters]
        return Case(inputs, params, hyper, seed)

    def as_sequences(self, case: Case, sequences: tuple[int, int]) -> Case:
        """``case``'s rows as [B, T] sequences: [B, T, V] scores, [B, T] class indices and per-row values; a
        per-class input and the parameters as they are."""
        inputs = [
            x if spec.per_class else x.view(*sequences, *x.shape[1:])
            for x, spec in zip(case.inputs, self.profile.inputs)
        ]
        return Case(inputs, case.params, case.hyper, case.seed)

    def _floats(self, shape: tuple[int, ...], domain: str, generator: torch.Generator, scale: float) -> torch.Tensor:
        if domain in ("probabilities", "log_probabilities"):
            value = torch.randn(shape, generator=generator).log_softmax(-1)
            return value if domain == "log_probabilities" else value.exp()
        if domain == "positive":
            return torch.rand(shape, generator=generator) * self.profile.test.input_scale + 0.1
        spread = 4.0 if self.tier == 3 else float(self.profile.test.input_scale)
        return torch.randn(shape, generator=generator) * spread * scale

    def truth(self, case: Case, key: tuple, backward: bool, dtype=torch.float64) -> RunResult:
        if (key, backward, dtype) not in self._truth:
            self._truth[key, backward, dtype] = self.run_reference(case, dtype, backward=backward)
        return self._truth[key, backward, dtype]

    # The kernel -------------------------------------------------------------------------------------------
    def run_kernel(
        self, plan: CallPlan, entry, values: dict[str, Any], case: Case, dtype: torch.dtype, backward: bool
    ) -> RunResult:
        inputs = [
            self.leaf(x.to(dtype) if x.is_floating_point() else x, spec.requires_grad)
            for x, spec in zip(case.inputs, self.profile.inputs)
        ]
        params = [self.leaf(p.to(dtype), True) for p in case.params]
        names = [t.name for t in self.profile.inputs] + [p.name for p in self.profile.parameters]
        kwargs = {plan.tensors[name]: value for name, value in zip(names, [*inputs, *params])}
        for name, value in {**plan.fixed, **values}.items():
            kwargs[name] = case.hyper[value.hyper] if isinstance(value, Bound) else value
        if plan.api.entry_is_functional:
            result = entry(**kwargs)
        else:
            order = [p.name for p in plan.api.entry.params]
            last = max(order.index(name) for name in kwargs)
            result = entry(*[kwargs[n] if n in kwargs else plan.defaults[n] for n in order[: last + 1]])
        values_out = result if isinstance(result, (tuple, list)) else (result,)
        outputs = [v for v in values_out if isinstance(v, torch.Tensor)]
        run = self._finish(outputs, inputs, params, case.seed, backward)
        for name, leaf in zip(names, inputs):
            if name in run.grads and name in plan.soft_targets and leaf.grad is None:
                run.grads[name] = None  # the kernel leaves its target without a gradient (zeros would hide it)
        return run


def _key(values: dict[str, Any]) -> tuple:
    return tuple(sorted((name, repr(value)) for name, value in values.items()))


def _entry(plan: CallPlan):
    entry = plan.api.entry
    module = importlib.import_module(entry.module)
    value = module
    for part in entry.name.split("."):
        value = getattr(value, part)
    return value


def _compare(kernel: RunResult, reference: RunResult, *, backward: bool, ungraded: frozenset = frozenset()) -> None:
    """Raise ``Mismatch`` unless the kernel's outputs (and gradients) are the reference's; an input of ``ungraded``
    may have none (a soft target the kernel does not differentiate)."""
    pairs = list(zip(kernel.outputs, reference.outputs))
    if len(kernel.outputs) < len(reference.outputs):
        raise Mismatch("fewer outputs")
    if backward:
        pairs += [
            (kernel.grads.get(name), grad)
            for name, grad in reference.grads.items()
            if not (name in ungraded and kernel.grads.get(name) is None)
        ]
    for got, want in pairs:
        if got is None or tuple(got.shape) != tuple(want.shape):
            raise Mismatch("shape")
        got, want = got.detach().double(), want.detach().double()
        finite = torch.isfinite(want)
        if not torch.equal(finite, torch.isfinite(got)):
            raise Mismatch("non-finite")
        if not finite.any():
            continue
        atol = ATOL * max(1.0, float(want[finite].abs().max()))
        if ((got - want).abs()[finite] > atol + RTOL * want.abs()[finite]).any():
            raise Mismatch("values")


def _distance(kernel: RunResult, reference: RunResult) -> float:
    """The largest difference of the outputs; infinite when the outputs are not the reference's in number and
    shape."""
    if len(kernel.outputs) != len(reference.outputs):
        return float("inf")
    worst = 0.0
    for got, want in zip(kernel.outputs, reference.outputs):
        if tuple(got.shape) != tuple(want.shape):
            return float("inf")
        difference = (got.double() - want.double()).abs()
        difference = difference[torch.isfinite(difference)]
        worst = max(worst, float(difference.max()) if difference.numel() else 0.0)
    return worst


def _half_distance(kernel: RunResult, reference: RunResult) -> tuple[float, float]:
    """(the largest difference, the mean one) of the outputs: two casting modes off by one float16 ulp at their
    worst differ in how many elements they round otherwise, which the mean tells."""
    worst = _distance(kernel, reference)
    if worst == float("inf"):
        return worst, worst
    means = []
    for got, want in zip(kernel.outputs, reference.outputs):
        difference = (got.double() - want.double()).abs()
        difference = difference[torch.isfinite(difference)]
        means.append(float(difference.mean()) if difference.numel() else 0.0)
    return worst, max(means, default=0.0)


class KernelSearch:
    """The option values at which one kernel computes the reference, if any."""

    def __init__(self, probe: Probe, plan: CallPlan):
        self.probe, self.plan = probe, plan
        self.entry = _entry(plan)
        self.base = {o.name: (o.candidates[0] if o.required else o.default) for o in plan.options}
        self.evaluations = 0
        self.without_gradient: set[str] = set()
        self.backward_unchecked = False
        self.probe_case = probe.case(*PROBE_SHAPE, seed=7)
        self.probe_truth = probe.truth(self.probe_case, ("probe",), False)
        self.runs: dict[tuple, RunResult | None] = {}

    def _run(self, values, case, dtype=torch.float32, backward=False) -> RunResult | None:
        self.evaluations += 1
        try:
            with torch.no_grad() if not backward else contextlib.nullcontext():
                return self.probe.run_kernel(self.plan, self.entry, values, case, dtype, backward)
        except Exception:  # noqa: BLE001 - a kernel that cannot run these values does not compute the reference
            return None

    def _matches(self, values, case, key, backward=False) -> bool:
        result = self._run(values, case, backward=backward)
        if result is None and backward and self._matches(values, case, key):
            # A backward that cannot run on the CPU (upstream's dyt sizes its buffers by the GPU's SMs): a function
            # equal to the reference's has its gradient; the line says the backward went unchecked.
            self.backward_unchecked = True
            return True
        if result is None:
            return False
        try:
            _compare(result, self.probe.truth(case, key, backward), backward=backward, ungraded=self.plan.soft_targets)
        except Mismatch:
            return False
        self.without_gradient |= {name for name, grad in result.grads.items() if grad is None}
        return True

    def takes_rows_only(self, values: dict[str, Any]) -> bool:
        """Whether the reference takes [B, T, V] inputs and flattens them itself (it computes the same on two
        sequences as on their rows) where the kernel at ``values`` does not: it fails on them, or computes another
        thing. A caller with a model's 3-d logits then flattens them first."""
        rows = self.probe.case(math.prod(SEQUENCES_PROBE), PROBE_SHAPE[1], seed=17)
        sequences = self.probe.as_sequences(rows, SEQUENCES_PROBE)
        try:
            flattening = self.probe.truth(sequences, ("sequences",), False)
            _compare(flattening, self.probe.truth(rows, ("rows of sequences",), False), backward=False)
        except Exception:  # noqa: BLE001 - a reference of [rows, classes] only, or one reading the sequences
            return False
        result = self._run(values, sequences)
        if result is None:
            return True
        try:
            _compare(result, flattening, backward=False)
        except Mismatch:
            return True
        return False

    def base_distance(self) -> float:
        """How far the kernel at its defaults is from the reference on the probe case (infinite: it fails, or its
        outputs are of another number or shape)."""
        return self._score(self.base)

    def search(self) -> dict[str, Any] | None:
        """Best first from the defaults: each step moves one more option of the closest arrangement not yet
        expanded (an option moved once stays), until one computes the reference on the probe and then on every
        check, or the budget is spent."""
        base_run = self._probe_run(self.base)
        pools: dict[str, list] = {}
        self.inert: dict[str, list] = {}
        for option in self.plan.options:
            for value in option.candidates[1:] if option.required else option.candidates:
                run = self._probe_run({**self.base, option.name: value})
                if run is None or _distance(run, self.probe_truth) == float("inf"):
                    continue  # it fails, or its outputs are not the reference's: not a value to try
                if base_run is not None and _distance(run, base_run) == 0.0 and not isinstance(value, Bound):
                    self.inert.setdefault(option.name, []).append(value)  # float32 cannot tell: float16 will
                else:
                    pools.setdefault(option.name, []).append(value)
        frontier = [(self._score(self.base), 0, 0, self.base)]
        order, seen = itertools.count(1), {_key(self.base)}
        while frontier and self.evaluations <= MAX_EVALUATIONS:
            score, changes, _, values = heapq.heappop(frontier)
            # Only the defaults may score infinite (a child is pushed when closer): outputs of another shape or
            # number (a loss per row where the default reduces) that a moved option may still make the reference's.
            if score < float("inf") and self._probe_matches(values) and self._holds(values):
                return self._closest_in_half(values)
            if changes >= MAX_CHANGES:
                continue
            for name, pool in pools.items():
                if values[name] != self.base[name]:
                    continue
                for value in pool:
                    child = {**values, name: value}
                    if _key(child) in seen:
                        continue
                    seen.add(_key(child))
                    child_score = self._score(child)
                    if child_score < CLOSER * score:  # a move that takes the kernel no closer leads nowhere
                        heapq.heappush(frontier, (child_score, changes + 1, next(order), child))
        return None

    def _probe_run(self, values: dict[str, Any]) -> RunResult | None:
        key = _key(values)
        if key not in self.runs:
            self.runs[key] = self._run(values, self.probe_case)
        return self.runs[key]

    def _score(self, values: dict[str, Any]) -> float:
        run = self._probe_run(values)
        return float("inf") if run is None else _distance(run, self.probe_truth)

    def _probe_matches(self, values: dict[str, Any]) -> bool:
        run = self._probe_run(values)
        try:
            _compare(run, self.probe_truth, backward=False)
        except Mismatch:
            return False
        return run is not None

    def _holds(self, values: dict[str, Any]) -> bool:
        """The forward match holds on more seeds and shapes, backward too, and off the reference's defaults."""
        # A single row of shifted labels reads only the pad value: no row counts, and a mean of none is nan in torch.
        least = 2 if any(spec.shift for spec in self.probe.profile.inputs) else 1
        cases = [
            (self.probe.case(max(r, least), c, seed), ("check", max(r, least), c, seed))
            for (r, c), seed in zip(CHECK_SHAPES, CHECK_SEEDS)
        ]
        if self.probe.tier in (1, 2):
            cases.append((self.probe.case(4, 37, 21, scale=0.01), ("small", 21)))
            # Where a clamp, a cap or an eps decides: a capped SwiGLU (where(a > 6, 0, ...)) and a mean square
            # clamped at eps agree with the plain ones on values of order one and part beyond them.
            cases.append((self.probe.case(4, 37, 22, scale=10.0), ("large", 22)))
            cases.append((self.probe.case(4, 37, 24, scale=1e-4), ("tiny", 24)))
        if any(spec.per_row for spec in self.probe.profile.inputs):
            # Per-row weights summing below 1: where a clamped denominator (``.clamp(min=1)``) and a plain one part.
            cases.append((self.probe.case(4, 33, 23, row_scale=0.01), ("small rows", 23)))
        for hp in self.probe.profile.hyperparameters:
            for index, value in enumerate(moved_values(hp)):
                hyper = {**self.probe.defaults, hp.name: value}
                cases.append((self.probe.case(4, 33, 31 + index, hyper=hyper), ("hyper", hp.name, index)))
        ran = []
        for case, key in cases:
            try:
                self.probe.truth(case, key, True)
            except Exception:  # noqa: BLE001 - data or a value the reference itself does not take proves nothing
                continue
            ran.append((case, key))
        enough = len(ran) >= 2
        return enough and all(self._matches(values, case, key, backward=True) for case, key in ran)

    def _closest_in_half(self, values: dict[str, Any]) -> dict[str, Any]:
        """Among values float32 cannot tell apart, the one closest to the reference's own float16 output."""
        if not self.inert:
            return values
        case = self.probe.case(6, 37, 41)
        try:
            reference = self.probe.truth(case, ("half",), False, torch.float16)
        except Exception:  # noqa: BLE001 - a reference without float16 leaves the defaults
            return values
        chosen = dict(values)
        for name, pool in self.inert.items():
            runs = [(value, self._run({**chosen, name: value}, case, torch.float16)) for value in [chosen[name], *pool]]
            scored = [(_half_distance(run, reference), index, value) for index, (value, run) in enumerate(runs) if run]
            if scored:
                best = min(scored, key=lambda item: (item[0], item[1]))[2]
                if best != chosen[name] and self._holds({**chosen, name: best}):
                    chosen[name] = best
        return chosen


def moved_values(hp) -> list:
    """Values of a reference hyper-parameter off its default that tell formulas apart: each other choice of a
    string, a float moved well away (an eps 1e-6 -> 0.25, a smoothing 0.1 -> 0.45)."""
    if hp.choices:
        return [choice for choice in hp.choices if choice != hp.default]
    if hp.type == "float" and isinstance(hp.default, (int, float)) and not isinstance(hp.default, bool):
        if math.isinf(hp.default):
            # An unbounded default (a clamp's limit of inf): a bound the example inputs reach (inf moved stays inf).
            return [math.copysign(1.0, hp.default)]
        return [float(hp.default) * 2.0 + 0.25] if math.isfinite(hp.default) else []
    return []


class Match(NamedTuple):
    """A kernel that computes the reference: its plan, the option values, and the reference's inputs it gives no
    gradient (soft targets it treats as data), and whether its backward could not run here."""

    plan: CallPlan
    values: dict[str, Any]
    without_gradient: frozenset[str]
    backward_unchecked: bool
    rows_only: bool = False  # the kernel takes [rows, classes] where the reference takes [B, T, V] too

    def flattened_call(self, profile: KernelProfile) -> str:
        """The call on the reference's tensors flattened to rows: ``liger_cross_entropy(logits.view(-1,
        logits.size(-1)), labels.view(-1))``."""
        flat = {}
        for spec in profile.inputs:
            if spec.per_class:
                flat[spec.name] = spec.name
            elif spec.dtype.startswith("int") or spec.per_row:
                flat[spec.name] = f"{spec.name}.view(-1)"
            else:
                flat[spec.name] = f"{spec.name}.view(-1, {spec.name}.size(-1))"
        defaults = {hp.name: hp.default for hp in profile.hyperparameters}
        return call_text(self.plan, self.values, defaults, tensor_text=flat)

    def call(self, profile: KernelProfile) -> str:
        """The call of the kernel at these values, naming the reference's hyper-parameters where they go."""
        defaults = {hp.name: hp.default for hp in profile.hyperparameters}
        # Where the reference's parameters start: ones or zeros (a module's init_fn), else a constant of theirs.
        starts = {p.init if p.init != "constant" else repr(float(p.init_value or 0.0)) for p in profile.parameters}
        return call_text(
            self.plan,
            self.values,
            defaults,
            name_tensors=split_of(profile.notes.remarks) is not None,
            parameters_start=starts.pop() if len(starts) == 1 else None,
        )


def matching_options(root: Path, profile: KernelProfile, plans: list[CallPlan]) -> Match | None:
    """The first plan (kernel) whose options make it compute ``profile``'s reference, with those option values."""
    try:
        probe = Probe(profile)
        probe.truth(probe.case(*PROBE_SHAPE, seed=7), ("probe",), False)
    except Exception:  # noqa: BLE001 - a number written in it is no class the reference takes: drawn without
        try:
            probe = Probe(profile)
            probe.written_classes = []
            probe.truth(probe.case(*PROBE_SHAPE, seed=7), ("probe",), False)
        except Exception:  # noqa: BLE001 - a reference that does not run on the probe's data cannot be compared
            return None
    with checkout_kernels(root), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations the candidate values provoke are not the user's
        searches = []
        for index, plan in enumerate(plans):
            try:
                search = KernelSearch(probe, plan)
            except Exception:  # noqa: BLE001 - a kernel that does not import is no variant's home
                continue
            searches.append((search.base_distance(), index, search))
        # Closest at its defaults first: the shared budget goes to the kernels (and tensor orders) likeliest to
        # compute the reference, not to those that come first in the alphabet.
        spent = sum(search.evaluations for _, _, search in searches)
        for _, _, search in sorted(searches, key=lambda item: item[:2]):
            if spent > TOTAL_EVALUATIONS:
                break
            before = search.evaluations
            values = search.search()
            spent += search.evaluations - before
            if values is not None:
                without = frozenset(search.without_gradient)
                rows_only = profile.tier == 3 and search.takes_rows_only(values)
                return Match(search.plan, values, without, search.backward_unchecked, rows_only)
    return None


__all__ = ["Match", "checkout_kernels", "matching_options", "moved_values"]
