"""What a new reference adds to a kernel's math, as affine maps around the math the kernel already has.

The kernel as it is computes the new reference at the defaults of its new hyper-parameters (that is what keeps
every existing test passing). ``math_delta`` finds, with sympy, input maps ``x -> alpha * x + beta`` and output
maps ``y -> k * y + c`` (``alpha``, ``beta``, ``k``, ``c``: expressions of the new hyper-parameters alone) such
that the new formulas are exactly the old ones composed with them. Those maps are the only math kernelgen adds to
a hand-written kernel, and their gradients follow from them: the input gradient is multiplied by ``alpha``, the
incoming output gradient by ``k``. Anything else (a hyper-parameter inside a nonlinearity, or the output put
through one) is not derivable this way, and ``NotDerivable`` says so.
"""

from __future__ import annotations

import itertools

from dataclasses import dataclass
from dataclasses import field

import sympy

from tools.kernelgen.profile import HyperParameter
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.synth import make_symbols
from tools.kernelgen.synth import parse_formula
from tools.kernelgen.synth import print_triton
from tools.kernelgen.synth import to_sympy_number
from tools.kernelgen.synth.printer import format_formula
from tools.kernelgen.synth.symbols import RESERVED_NAMES

MAX_COMBINATIONS = 256


class NotDerivable(ValueError):
    """The new math is not the old math with affine maps around it; the message says why, in one line."""


@dataclass(frozen=True)
class Affine:
    """``value -> scale * value + shift``, both expressions of the new hyper-parameters."""

    scale: sympy.Expr = sympy.S.One
    shift: sympy.Expr = sympy.S.Zero

    @property
    def identity(self) -> bool:
        return self.scale == 1 and self.shift == 0

    def apply(self, value: sympy.Expr) -> sympy.Expr:
        return self.scale * value + self.shift

    def triton(self, name: str) -> str:
        """The map applied to the Triton variable ``name``."""
        return print_triton(self.apply(sympy.Symbol(name, real=True)))

    def renamed(self, names: dict[str, str]) -> Affine:
        """The same map with hyper-parameter ``h`` spelled ``names[h]`` (a kernel that already uses ``h``)."""
        symbols = self.scale.free_symbols | self.shift.free_symbols
        mapping = {s: sympy.Symbol(names[s.name], real=True) for s in symbols if s.name in names}
        return Affine(self.scale.xreplace(mapping), self.shift.xreplace(mapping))

    def text(self, name: str) -> str:
        return format_formula(self.apply(sympy.Symbol(name, real=True)))


@dataclass
class MathDelta:
    hypers: list[HyperParameter]  # the new hyper-parameters, in the reference's order
    inputs: dict[str, Affine] = field(default_factory=dict)  # only the inputs that change
    outputs: dict[str, Affine] = field(default_factory=dict)  # only the outputs that change

    @property
    def empty(self) -> bool:
        return not self.inputs and not self.outputs

    def describe(self) -> str:
        parts = [f"{name} -> {affine.text(name)}" for name, affine in self.inputs.items()]
        parts += [f"{name} -> {affine.text(name)}" for name, affine in self.outputs.items()]
        return ", ".join(parts) or "no change of the math"


# Points where a difference of formulas is evaluated before sympy is asked to prove it zero (cheap rejections).
PROBES = (0.37, 1.61, -0.83)


def _numerically_nonzero(expr: sympy.Expr) -> bool:
    symbols = sorted(expr.free_symbols, key=lambda s: s.name)
    for offset in range(2):
        point = {s: sympy.Float(PROBES[(i + offset) % len(PROBES)] + 0.1 * i) for i, s in enumerate(symbols)}
        try:
            value = complex(expr.xreplace(point).evalf())
        except (TypeError, ValueError):
            return False  # not a number there (a branch, a cast): leave it to sympy
        if abs(value) > 1e-9:
            return True
    return False


def _zero(expr: sympy.Expr) -> bool:
    if expr == 0:
        return True
    if _numerically_nonzero(expr):
        return False
    try:
        return sympy.simplify(expr) == 0
    except (TypeError, ValueError, NotImplementedError):  # pragma: no cover - sympy giving up
        return sympy.expand(expr) == 0


def _affine_parts(expr: sympy.Expr, x: sympy.Symbol, hypers: set[sympy.Symbol]) -> Affine | None:
    """``expr`` as ``alpha * x + beta`` with ``alpha``, ``beta`` functions of ``hypers`` alone, else None."""
    alpha = sympy.simplify(sympy.diff(expr, x))
    beta = sympy.simplify(expr.subs(x, 0))
    if not (alpha.free_symbols | beta.free_symbols) <= hypers or alpha == 0:
        return None
    if not _zero(expr - (alpha * x + beta)):
        return None
    return Affine(alpha, beta)


def _input_candidates(x: sympy.Symbol, formulas: list[sympy.Expr], hypers: set[sympy.Symbol]) -> list[Affine]:
    """Maps of input ``x`` worth trying: the identity, every affine subexpression of ``x`` and the new
    hyper-parameters in the formulas (``a * g`` inside ``silu``), and a scale or shift by each hyper-parameter
    (sympy multiplies ``(s * x)**2`` out, so the subexpression itself may be gone)."""
    found: list[Affine] = [Affine()]
    for formula in formulas:
        for node in sympy.preorder_traversal(formula):
            symbols = getattr(node, "free_symbols", set())
            if x in symbols and symbols & hypers and symbols <= hypers | {x}:
                affine = _affine_parts(node, x, hypers)
                if affine is not None:
                    found.append(affine)
    for h in sorted(hypers, key=lambda s: s.name):
        found += [Affine(h), Affine(1 / h), Affine(sympy.S.One, h), Affine(sympy.S.One, -h)]
    unique: list[Affine] = []
    for affine in found:
        if not any(_zero(affine.scale - u.scale) and _zero(affine.shift - u.shift) for u in unique):
            unique.append(affine)
    return unique


def _varies_beyond(expr: sympy.Expr, hypers: set[sympy.Symbol]) -> bool:
    """Whether ``expr`` changes when the symbols other than ``hypers`` do (numerically; False when unsure)."""
    others = sorted(expr.free_symbols - hypers, key=lambda s: s.name)
    if not others:
        return False
    fixed = {h: sympy.Float(0.7 + 0.1 * i) for i, h in enumerate(sorted(hypers, key=lambda s: s.name))}
    values = []
    for offset in range(2):
        point = {s: sympy.Float(PROBES[(i + offset) % len(PROBES)] + 0.1 * i) for i, s in enumerate(others)}
        try:
            values.append(complex(expr.xreplace({**fixed, **point}).evalf()))
        except (TypeError, ValueError):
            return False
    return abs(values[0] - values[1]) > 1e-9 * (1 + abs(values[0]))


def _output_map(new: sympy.Expr, old: sympy.Expr, hypers: set[sympy.Symbol]) -> Affine | None:
    """``Affine(k, c)`` with ``new == k * old + c``, or None."""
    if _zero(new - old):
        return Affine()
    for v in sorted(old.free_symbols - hypers, key=lambda s: s.name):
        slope = sympy.diff(old, v)
        if _zero(slope):
            continue
        ratio = sympy.diff(new, v) / slope
        if _varies_beyond(ratio, hypers):
            continue
        k = sympy.simplify(ratio)
        if not k.free_symbols <= hypers:
            continue
        c = sympy.simplify(new - k * old)
        if c.free_symbols <= hypers and _zero(new - (k * old + c)):
            return Affine(k, c)
    return None


def math_delta(profile: KernelProfile, new_hypers: list[str]) -> MathDelta:
    """The affine maps that turn the kernel's math (``profile`` at the defaults of ``new_hypers``) into
    ``profile``'s; raises ``NotDerivable``."""
    hypers = [hp for hp in profile.hyperparameters if hp.name in new_hypers]
    delta = MathDelta(hypers)
    if not hypers:
        return delta
    if profile.tier not in (1, 2):
        raise NotDerivable(
            f"tier {profile.tier} kernels (losses over a class dimension) take their math from a template, not from "
            f"formulas kernelgen derives"
        )
    if profile.math.triton is not None or not profile.math.outputs:
        raise NotDerivable("the profile's math is hand-written Triton (math.triton), not formulas kernelgen derives")
    for hp in hypers:
        numeric = isinstance(hp.default, (int, float)) and not isinstance(hp.default, bool)
        if hp.type not in ("float", "int") or not numeric or hp.constexpr or hp.choices:
            raise NotDerivable(
                f"the new hyper-parameter {hp.name} is a {hp.type} switch ({hp.default!r}), not a number the math "
                f"scales or shifts by"
            )
    inputs = [t.name for t in profile.inputs]
    names = inputs + [p.name for p in profile.parameters] + profile.formula_hyperparameters
    names += [s.name for s in profile.math.statistics] + ["n_cols"]
    symbols = make_symbols(dict.fromkeys(names), reserved=RESERVED_NAMES)
    try:
        statistics = [parse_formula(s.of, list(symbols)) for s in profile.math.statistics]
        outputs = {name: parse_formula(text, list(symbols)) for name, text in profile.math.outputs.items()}
    except ValueError as error:
        raise NotDerivable(f"the profile's formulas do not parse: {error}") from None
    new_symbols = {symbols[hp.name] for hp in hypers}
    defaults = {symbols[hp.name]: to_sympy_number(hp.default) for hp in hypers}
    old_statistics = [s.xreplace(defaults) for s in statistics]
    old_outputs = {name: f.xreplace(defaults) for name, f in outputs.items()}
    formulas = statistics + list(outputs.values())

    candidates = [_input_candidates(symbols[x], formulas, new_symbols) for x in inputs]
    combinations = sorted(
        itertools.islice(itertools.product(*candidates), MAX_COMBINATIONS),
        key=lambda combo: sum(not affine.identity for affine in combo),
    )
    for combo in combinations:
        mapping = {symbols[x]: affine.apply(symbols[x]) for x, affine in zip(inputs, combo) if not affine.identity}
        if not all(_zero(new - old.xreplace(mapping)) for new, old in zip(statistics, old_statistics)):
            continue
        output_maps = {}
        for name, new in outputs.items():
            found = _output_map(new, old_outputs[name].xreplace(mapping), new_symbols)
            if found is None:
                break
            output_maps[name] = found
        else:
            delta.inputs = {x: affine for x, affine in zip(inputs, combo) if not affine.identity}
            delta.outputs = {name: affine for name, affine in output_maps.items() if not affine.identity}
            _check(delta, profile, defaults)
            return delta
    listed = ", ".join(hp.name for hp in hypers)
    where = next((f"{name} = {text}" for name, text in profile.math.outputs.items()), "")
    raise NotDerivable(
        f"{listed} enter(s) the math other than by scaling or shifting an input or an output ({where}): kernelgen "
        f"cannot derive that change of the kernel's hand-written math"
    )


def _check(delta: MathDelta, profile: KernelProfile, defaults: dict) -> None:
    for name, affine in {**delta.inputs, **delta.outputs}.items():
        if not (_zero(affine.scale.xreplace(defaults) - 1) and _zero(affine.shift.xreplace(defaults))):
            raise NotDerivable(
                f"at the defaults of the new hyper-parameters, {name} -> {affine.text(name)} is not {name}"
            )
    if profile.tier == 2:
        shifted = [name for name, affine in delta.inputs.items() if affine.shift != 0]
        if shifted:
            raise NotDerivable(
                f"shifting {shifted[0]} before a row reduction would count the padded lanes of each row; only a "
                f"scale of a row-reduced input can be threaded"
            )
