"""The pieces of --modify on hand-written kernels, in process: the math delta (sympy), the libcst edits, reading a
kernel's API and matching a reference's arguments to it by name."""

import pytest

from test.kernelgen.conftest import REPO_ROOT
from tools.kernelgen.hostapi import SignatureMismatch
from tools.kernelgen.hostapi import match_arguments
from tools.kernelgen.hostapi import read_kernel_api
from tools.kernelgen.profile import HyperParameter
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import LearnableParameter
from tools.kernelgen.profile import Math
from tools.kernelgen.profile import OutputSpec
from tools.kernelgen.profile import Reference
from tools.kernelgen.profile import Statistic
from tools.kernelgen.profile import TensorSpec
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.retrofit.delta import NotDerivable
from tools.kernelgen.retrofit.delta import math_delta
from tools.kernelgen.retrofit.edits import AddArg
from tools.kernelgen.retrofit.edits import AddParam
from tools.kernelgen.retrofit.edits import AppendReturnValue
from tools.kernelgen.retrofit.edits import ClassAttribute
from tools.kernelgen.retrofit.edits import EditError
from tools.kernelgen.retrofit.edits import ExtendRepr
from tools.kernelgen.retrofit.edits import FileEdits
from tools.kernelgen.retrofit.edits import InsertStatement
from tools.kernelgen.retrofit.edits import ReplaceExpression
from tools.kernelgen.retrofit.edits import apply_edits


def _profile(formula: str, hypers: dict, inputs=("a", "b"), statistics=(), params=()) -> KernelProfile:
    return KernelProfile(
        operation_name="op",
        tier=2 if statistics else 1,
        inputs=[TensorSpec(name) for name in inputs],
        outputs=[OutputSpec("y")],
        hyperparameters=[HyperParameter(name, default=value) for name, value in hypers.items()],
        parameters=[LearnableParameter(name) for name in params],
        math=Math(statistics=[Statistic(*s) for s in statistics], outputs={"y": formula}),
        reference=Reference(source="def op(a, b):\n    return a\n", entry="op"),
    )


# The math delta -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "formula, hypers, described",
    [
        ("silu(a) * b * scale", {"scale": 1.0}, "y -> scale*y"),
        ("silu(a * gate) * b", {"gate": 1.0}, "a -> a*gate"),
        ("silu(a * gate) * b * down", {"gate": 1.0, "down": 1.0}, "a -> a*gate, y -> down*y"),
        ("silu(a) * b + shift", {"shift": 0.0}, "y -> shift + y"),
        ("sigmoid(a / t) * b", {"t": 1.0}, "a -> a/t"),
        ("silu(a) * b * scale * scale", {"scale": 1.0}, "y -> scale**2*y"),
    ],
)
def test_the_delta_is_the_affine_maps_around_the_old_math(formula, hypers, described):
    assert math_delta(_profile(formula, hypers), list(hypers)).describe() == described


def test_a_row_reduction_gets_an_input_scale_and_an_output_scale():
    profile = _profile(
        "weight*cast_to_input(s*x/sqrt(eps + variance))*k",
        {"eps": 1e-6, "s": 1.0, "k": 1.0},
        inputs=("x",),
        statistics=[("variance", "mean", "s**2*x**2")],
        params=("weight",),
    )
    assert math_delta(profile, ["s", "k"]).describe() == "x -> s*x, y -> k*y"


@pytest.mark.parametrize(
    "formula, hypers, inputs, statistics, reason",
    [
        ("a * sigmoid(beta * a + beta * beta) * b", {"beta": 1.0}, ("a", "b"), (), "other than by scaling or shifting"),
        ("silu(a) * b * (1 + beta * a)", {"beta": 0.0}, ("a", "b"), (), "other than by scaling or shifting"),
        ("(x + c) / sqrt(variance)", {"c": 0.0}, ("x",), [("variance", "mean", "(x + c)**2")], "padded lanes"),
    ],
)
def test_math_that_is_not_an_affine_change_is_not_derivable(formula, hypers, inputs, statistics, reason):
    with pytest.raises(NotDerivable, match=reason):
        math_delta(_profile(formula, hypers, inputs, statistics), list(hypers))


def test_a_switch_is_not_a_number_to_scale_by():
    profile = _profile("silu(a) * b", {})
    profile.hyperparameters = [HyperParameter("fast", type="bool", default=True, constexpr=True)]
    with pytest.raises(NotDerivable, match="fast is a bool switch"):
        math_delta(profile, ["fast"])


# Edits ------------------------------------------------------------------------------------------------------------
SOURCE = '''\
class M:
    """Docstring."""

    def __init__(self, a):
        self.a = a

    def extra_repr(self):
        return (
            f"a={self.a}, "
            f"b=1"
        )


def wrapper(
    x,
    y,
):
    # the comment stays
    z = launch(x, y)
    total = x + y
    return z, total


def other(a, b):
    return f(a)(a, b)
'''


def test_each_edit_changes_its_place_and_keeps_the_file_style():
    edits = FileEdits(
        params=[AddParam("wrapper", "scale=1.0"), AddParam("other", "s", before="b")],
        args=[AddArg((19, 8), "scale", keyword="scale"), AddArg((25, 11), "s", index=1, end=(25, 21))],
        statements=[InsertStatement(19, "x = x * scale"), InsertStatement(20, "total = total * 2", after=True)],
        returns=[AppendReturnValue(21)],
        reprs=[ExtendRepr("M", "scale")],
        attributes=[ClassAttribute("M", "scale = 1.0", "class default")],
        replacements=[ReplaceExpression((20, 12), (20, 17), "(x - y)")],
    )
    text = apply_edits(SOURCE, edits, "m.py")
    assert (
        text
        == '''\
class M:
    """Docstring."""

    # class default
    scale = 1.0

    def __init__(self, a):
        self.a = a

    def extra_repr(self):
        return (
            f"a={self.a}, "
            f"b=1, scale={self.scale}"
        )


def wrapper(
    x,
    y,
    scale=1.0,
):
    x = x * scale
    # the comment stays
    z = launch(x, y, scale=scale)
    total = (x - y)
    total = total * 2
    return z, total, None


def other(a, s, b):
    return f(a)(a, s, b)
'''
    )


def test_an_edit_that_finds_nothing_is_an_error_not_a_silent_skip():
    with pytest.raises(EditError, match="found nothing to change"):
        apply_edits(SOURCE, FileEdits(params=[AddParam("missing", "x=1")]), "m.py")


def test_a_class_without_extra_repr_gets_one():
    text = apply_edits("class M:\n    def f(self):\n        pass\n", FileEdits(reprs=[ExtendRepr("M", "k")]), "m.py")
    assert text.endswith('\n    def extra_repr(self) -> str:\n        return f"k={self.k}"\n')


# Reading a kernel's API, matching a reference by name ------------------------------------------------------------
def test_the_host_kernels_api_is_read_from_their_files():
    repo = LigerRepo.open(REPO_ROOT)
    swiglu = read_kernel_api(repo, "swiglu")
    assert swiglu.function_class == "LigerSiLUMulFunction"
    assert swiglu.entry.text() == "liger_swiglu(a, b, gate_multiplier=1.0, down_multiplier=1.0)"
    assert swiglu.module_classes[0] == "LigerSwiGLUMLP"
    rms = read_kernel_api(repo, "rms_norm")
    assert rms.forward.text().startswith("LigerRMSNormFunction.apply(X, W, eps, offset=0.0")


def test_arguments_match_by_name_case_and_synonym():
    repo = LigerRepo.open(REPO_ROOT)
    rms = _profile("x", {"eps": 1e-6}, inputs=("x",), params=("weight",))
    mapping = match_arguments(rms, read_kernel_api(repo, "rms_norm").entry)
    assert mapping.tensors == {"x": "X", "weight": "W"} and mapping.hypers == {"eps": "eps"}
    loss = _profile("x", {"ignore_index": -100}, inputs=("logits", "target"))
    assert match_arguments(loss, read_kernel_api(repo, "cross_entropy").entry).tensors == {
        "logits": "input",
        "target": "target",
    }


def test_a_new_hyper_parameter_is_listed_only_when_allowed():
    repo = LigerRepo.open(REPO_ROOT)
    entry = read_kernel_api(repo, "swiglu").entry
    profile = _profile("silu(a) * b * scale", {"scale": 1.0})
    assert match_arguments(profile, entry, allow_new_hypers=True).new_hypers == ["scale"]
    with pytest.raises(SignatureMismatch) as error:
        match_arguments(profile, entry)
    assert str(error.value) == (
        "the reference op(a, b, scale=1.0) does not match the kernel's liger_swiglu(a, b, gate_multiplier=1.0, "
        "down_multiplier=1.0) (no parameter named scale)"
    )


# The alias graph of an ops file ----------------------------------------------------------------------------------
def test_roles_follow_tensors_through_views_saves_and_launches():
    from test.kernelgen.handwritten import OPS
    from tools.kernelgen.retrofit.anatomy import NotUnderstood
    from tools.kernelgen.retrofit.anatomy import OpsAnatomy

    indexed = OPS.replace(
        "x, gate = ctx.saved_tensors", "x = ctx.saved_tensors[0]\n        gate = ctx.saved_tensors[1]"
    )
    anatomy = OpsAnatomy(indexed, "mulsig.py", "_MulSigFn")
    seeds = {("_MulSigFn.forward", "gate"): "in:gate", ("_MulSigFn.backward", "dout"): "gout:y"}
    seeds[("_MulSigFn.forward", "<ret 0>")] = "out:y"
    roles = anatomy.roles(seeds)
    assert roles[("_mulsig_fwd", "G")] == {"in:gate"} and roles[("_mulsig_bwd", "G")] == {"in:gate"}
    assert roles[("_mulsig_fwd", "OUT")] == {"out:y"} and roles[("_mulsig_bwd", "DOUT")] == {"gout:y"}
    assert roles.get(("_mulsig_bwd", "DX"), set()) == set()  # a fresh buffer: no role until the backward returns it
    starred = OPS.replace("ctx.save_for_backward(x, gate)", "ctx.save_for_backward(*(x, gate))")
    with pytest.raises(NotUnderstood, match=r"save_for_backward\(\*\.\.\.\) hides what is saved"):
        OpsAnatomy(starred, "mulsig.py", "_MulSigFn")
