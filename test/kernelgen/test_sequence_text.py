"""The sequence stage's source reads as the reference wrote it: the reference's names, single-use temporaries
inlined, tuple assignments, arguments at their defaults dropped (tools/kernelgen/analyze/sequence_text.py)."""

import textwrap

import pytest
import torch

from test.kernelgen.test_per_row_inputs import _analyzed
from test.kernelgen.test_sequence_stages import REFERENCES
from tools.kernelgen.analyze.sequence_text import readable_function

FX_ORPO = textwrap.dedent(
    """
    def sequence_stage(logp, labels, beta):
        ne = labels.ne(-100)
        mul = logp * ne
        sum_1 = mul.sum(dim = 1)
        sum_2 = ne.sum(dim = 1)
        truediv = sum_1 / sum_2
        getattr_1 = labels.shape
        getitem = getattr_1[0]
        floordiv = getitem // 2
        getitem_1 = truediv[slice(None, floordiv, None)]
        getitem_2 = truediv[slice(floordiv, None, None)]
        sub = getitem_1 - getitem_2
        exp = getitem_1.exp()
        neg = -exp
        log1p = torch.log1p(neg)
        sub_1 = sub - log1p
        log_sigmoid = torch.nn.functional.logsigmoid(sub_1)
        mean = log_sigmoid.mean()
        mul_1 = beta * mean
        return mul_1
    """
)


def _run(source, *args):
    namespace = {"torch": torch}
    exec(compile(source, "<sequence>", "exec"), namespace)  # noqa: S102
    return namespace["sequence_stage"](*args)


def test_named_values_keep_their_statement_and_temporaries_are_written_where_they_are_read():
    names = {"ne": "keep", "truediv": "average", "floordiv": "half", "getitem_1": "chosen", "getitem_2": "rejected"}
    source = readable_function(FX_ORPO, names, [["getitem_1", "getitem_2"]])
    assert source.splitlines() == [
        "def sequence_stage(logp, labels, beta):",
        "    keep = labels.ne(-100)",
        "    average = (logp * keep).sum(dim=1) / keep.sum(dim=1)",
        "    half = labels.shape[0] // 2",
        "    chosen = average[:half]",
        "    rejected = average[half:]",
        "    return beta * torch.nn.functional.logsigmoid(chosen - rejected - torch.log1p(-chosen.exp())).mean()",
    ]
    logp, labels = torch.randn(4, 5) - 3, torch.randint(-1, 3, (4, 5)) * 50
    torch.testing.assert_close(_run(source, logp, labels, 0.5), _run(FX_ORPO, logp, labels, 0.5), rtol=0, atol=0)


def test_a_value_read_by_an_in_place_op_is_not_moved_past_it():
    fx_text = textwrap.dedent(
        """
        def sequence_stage(x):
            mul = x * 2
            add_ = x.add_(1)
            sum_1 = mul.sum()
            return sum_1
        """
    )
    source = readable_function(fx_text, {}, [])
    assert "mul = x * 2" in source and "add_ = x.add_(1)" in source
    torch.testing.assert_close(_run(source, torch.ones(3)), torch.tensor(6.0))


def test_a_reassigned_name_is_reused_only_where_the_earlier_value_is_read_no_more():
    fx_text = textwrap.dedent(
        """
        def sequence_stage(x):
            exp = x.exp()
            add = exp + 1
            mul = add * exp
            return mul
        """
    )
    # The reference's ``loss = x.exp()`` then ``loss = loss + 1`` then ``loss = loss * <the first loss>``: the first
    # value is read after the second assignment, so the second keeps another name.
    source = readable_function(fx_text, {"exp": "loss", "add": "loss", "mul": "loss"}, [])
    assert source.splitlines()[1:] == [
        "    loss = x.exp()",
        "    loss_1 = loss + 1",
        "    loss = loss_1 * loss",
        "    return loss",
    ]
    torch.testing.assert_close(_run(source, torch.zeros(2)), torch.full((2,), 2.0))


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    path = tmp_path_factory.mktemp("sequence_text") / "refs.py"
    path.write_text(REFERENCES)
    return path


def test_a_reference_s_own_statements_come_back(references):
    simpo = _analyzed(f"{references}:SimPOLoss").math.loss.sequence
    assert "    chosen, rejected = average.chunk(2)\n" in simpo
    grpo = _analyzed(f"{references}:GRPOLoss").math.loss.sequence
    assert "    per_token_loss = per_token_loss + beta * (torch.exp(delta) - delta - 1)\n" in grpo
    ranking = _analyzed(f"{references}:listwise_ranking").math.loss.sequence
    assert "torch.nn.functional.softmax(rewards, dim=0)" in ranking and "_stacklevel" not in ranking
    # dpo_flattened unpacks ``B, T, V = logits.shape`` and its sequence stage reads B alone: ``B = logp.shape[0]``.
    for entry in ("dpo_sigmoid", "GRPOLoss", "orpo", "SimPOLoss", "kto_sigmoid", "listwise_ranking", "dpo_flattened"):
        source = _analyzed(f"{references}:{entry}").math.loss.sequence
        assert not [line for line in source.splitlines() if "getattr_" in line or "getitem" in line], source


def test_a_rewrite_that_computes_another_value_leaves_fx_s_own_text(references, monkeypatch):
    """The analysis checks the sequence stage against the reference; where the rewritten text fails that check, the
    one fx printed (one statement per op, its names) is what the profile keeps."""
    from tools.kernelgen.analyze import analyze
    from tools.kernelgen.analyze import stages

    monkeypatch.setattr(stages, "readable_function", lambda text, *_: text.replace("return ", "return 2 * ", 1))
    source = analyze(f"{references}:SimPOLoss").math.loss.sequence
    assert "chunk = " in source and "2 * " not in source


def test_a_formula_names_a_shared_value_as_the_reference_does(tmp_path):
    """forward_computation (the docstrings' formula) writes a value read twice under the reference's name for it;
    a name the reference also gives an input keeps fx's, which cannot be mistaken for the input."""
    from tools.kernelgen.analyze import analyze

    path = tmp_path / "refs.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch


            def centered_scale(x, eps: float = 1e-5):
                centered = x - x.mean(-1, keepdim=True)
                return centered * torch.rsqrt((centered * centered).mean(-1, keepdim=True) + eps)


            def rebinds_input(x, eps: float = 1e-5):
                x = x - x.mean(-1, keepdim=True)
                return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)
            """
        )
    )
    assert analyze(f"{path}:centered_scale").forward_computation.startswith("centered = x - mean(x, dim=-1")
    rebound = analyze(f"{path}:rebinds_input").forward_computation
    assert rebound.startswith("sub = x - mean(x, dim=-1") and "x = x -" not in rebound


def test_a_formula_writes_subscripts_and_size_arithmetic_as_python_does(references):
    """``all_logps[:logits.shape[0] // 2]``, not ``getitem(all_logps, index=slice(None, floordiv, None))``."""
    dpo = _analyzed(f"{references}:dpo_sigmoid").forward_computation
    assert "all_logps[:logits.shape[0] // 2]" in dpo and "all_logps[logits.shape[0] // 2:]" in dpo
    grpo = _analyzed(f"{references}:GRPOLoss").forward_computation
    assert "[..., 0]" in grpo or "[:, :, 0]" in grpo
    for formula in (dpo, grpo):
        assert not [word for word in ("slice(", "getitem", "size_arithmetic", "floordiv") if word in formula], formula


def test_a_mask_cast_to_the_logits_dtype_stays_in_the_sequence_stage(tmp_path):
    """``mask = (labels != -100).to(logits.dtype)``, Llama-style, reads the logits' dtype only: the loss still splits
    into two stages, its sequence stage casting to the statistics' dtype, and ``torch.chunk`` reads as written."""
    from tools.kernelgen.analyze import analyze

    path = tmp_path / "refs.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch
            import torch.nn as nn


            class CastIPO(nn.Module):
                def __init__(self, tau: float = 0.1):
                    super().__init__()
                    self.tau = tau

                def forward(self, logits, labels):
                    logits = logits.to(torch.float32)
                    mask = (labels != -100).to(logits.dtype)
                    token_logps = torch.log_softmax(logits, dim=-1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
                    seq = torch.sum(token_logps * mask, dim=-1) / torch.clamp(mask.sum(-1), min=1.0)
                    chosen, rejected = torch.chunk(seq, 2, dim=0)
                    return torch.mean((chosen - rejected - 1.0 / (2.0 * self.tau)) ** 2)
            """
        )
    )
    source = analyze(f"{path}:CastIPO").math.loss.sequence
    assert "    mask = (labels != -100).to(token_logps.dtype)\n" in source
    assert "    chosen, rejected = torch.chunk(seq, 2, dim=0)\n" in source


def test_a_shape_read_twice_is_written_where_it_is_read(tmp_path):
    """``B, T, _ = logits.shape`` with B and T both read by the sequence stage: each from the statistic's shape, not
    fx's ``getattr_1 = logps.shape`` read twice."""
    from tools.kernelgen.analyze import analyze

    path = tmp_path / "refs.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch


            def flattened_grpo(logits, input_ids, old_logps, advantages, mask, epsilon: float = 0.2):
                B, T, _ = logits.shape
                logps = logits.view(B * T, -1).log_softmax(-1).gather(-1, input_ids.view(-1, 1)).view(-1)
                ratio = torch.exp(logps - old_logps.view(-1))
                clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon)
                adv = advantages[:, None].expand(B, T).reshape(-1)
                per_token = -torch.min(ratio * adv, clipped * adv) * mask.view(-1)
                return (per_token.view(B, T).sum(1) / mask.sum(1).clamp(min=1.0)).mean()
            """
        )
    )
    source = analyze(f"{path}:flattened_grpo").math.loss.sequence
    assert "    B = logps.shape[0]\n    T = logps.shape[1]\n" in source, source
    assert "getattr" not in source and "    ratio = torch.exp(logps.reshape(-1) - old_logps.view(-1))\n" in source
