"""A derivation's slow steps reused for the same program over renamed names (``synth/renaming.py``): the ops file's
name check derives each row and loss program again over probe names, and takes the first derivation's adjoints."""

import sympy

from tools.kernelgen.synth import parse_formula
from tools.kernelgen.synth.losses import synthesize_loss
from tools.kernelgen.synth.renaming import RenamingMemo
from tools.kernelgen.synth.renaming import renamed_names
from tools.kernelgen.synth.rows import _Program
from tools.kernelgen.synth.rows import synthesize_rows

X, Y, PROBE = (sympy.Symbol(name, real=True) for name in ("x", "y", "kgprobe0q"))


def test_a_step_over_renamed_names_takes_the_earlier_result_renamed():
    memo, computed = RenamingMemo(kept=4), []

    def step(expr, name):
        computed.append(expr)
        return {name: sympy.exp(expr), f"grad_{name}": [2 * expr, "s"]}

    memo((X + Y, "x"), lambda: step(X + Y, "x"))
    with renamed_names({"x": "kgprobe0q"}):
        again = memo((PROBE + Y, "kgprobe0q"), lambda: step(PROBE + Y, "kgprobe0q"))
    assert computed == [X + Y]
    assert again == {"kgprobe0q": sympy.exp(PROBE + Y), "grad_kgprobe0q": [2 * PROBE + 2 * Y, "s"]}


def test_arguments_that_are_no_exact_renaming_are_computed_anew():
    """Renamed back, ``kgprobe0q + x`` would be ``2 * x``, a step taken before; but it is no renaming of it (x is one
    of the original names), and outside the context nothing is renamed at all."""
    memo = RenamingMemo(kept=4)
    memo((2 * X,), lambda: "doubled x")
    with renamed_names({"x": "kgprobe0q"}):
        assert memo((PROBE + X,), lambda: "computed") == "computed"
    assert memo((2 * PROBE,), lambda: "outside") == "outside"


def test_the_oldest_results_beyond_the_kept_number_are_dropped():
    memo = RenamingMemo(kept=2)
    for index in range(3):
        memo((X + index,), lambda index=index: index)
    assert memo((X,), lambda: "again") == "again"  # the first was dropped
    assert memo((X + 2,), lambda: "again") == 2


def _counted_adjoints(monkeypatch) -> list:
    derived = []
    original = _Program._derived_adjoints

    def counted(self):
        derived.append(self)
        return original(self)

    monkeypatch.setattr(_Program, "_derived_adjoints", counted)
    return derived


def _softmax_plus_eps(x: str, eps: str, y: str):
    statistics = [("m", "max", parse_formula(x, [x])), ("s", "sum", parse_formula(f"exp({x} - m)", [x, "m"]))]
    output = parse_formula(f"exp({x} - m) / s + {eps}", [x, "m", "s", eps])
    return synthesize_rows(statistics, {y: output}, [x], hyperparameters=[eps])


def test_a_row_program_over_probe_names_prints_what_its_own_derivation_prints(monkeypatch):
    derived = _counted_adjoints(monkeypatch)
    first = _softmax_plus_eps("scores_rn", "eps_rn", "y_rn")
    probes = {"scores_rn": "kgprobe0q", "eps_rn": "kgprobe1q", "y_rn": "kgprobe2q"}
    with renamed_names(probes):
        renamed = _softmax_plus_eps(*probes.values())
    assert len(derived) == 1
    assert renamed == _softmax_plus_eps(*probes.values())  # derived anew outside the context
    assert len(derived) == 2
    assert "grad_kgprobe0q = exp_kgprobe0q_minus_m * inv_s * (grad_kgprobe2q - inv_s * row_sum)" in renamed.backward
    assert first.backward != renamed.backward


def _cross_entropy(x: str, target: str, loss: str):
    names = [x, target, "col", "n_cols"]
    statistics = [("m", "max", parse_formula(x, names)), ("s", "sum", parse_formula(f"exp({x} - m)", names + ["m"]))]
    statistics.append(("hit", "sum", parse_formula(f"where(col == {target}, {x}, 0)", names)))
    outputs = {loss: parse_formula("m + log(s) - hit", names + ["m", "s", "hit"])}
    return synthesize_loss(statistics, outputs, [x], row_inputs=[target])


def test_a_loss_over_probe_names_prints_what_its_own_derivation_prints(monkeypatch):
    derived = _counted_adjoints(monkeypatch)
    _cross_entropy("logits_rn", "target_rn", "loss_rn")
    probes = {"logits_rn": "kgprobe0q", "target_rn": "kgprobe1q", "loss_rn": "kgprobe2q"}
    with renamed_names(probes):
        renamed = _cross_entropy(*probes.values())
    assert len(derived) == 1
    assert renamed == _cross_entropy(*probes.values())
    assert len(derived) == 2
    assert renamed.gradient == [
        "grad_kgprobe0q = grad_s * tl.exp(kgprobe0q - m_shift) + tl.where(col == kgprobe1q, grad_hit, 0.0)"
    ]
