"""Post-training losses fused with the lm_head (issue 44): the generated ``fused_linear_NAME`` kernels of losses in two
stages against upstream Liger-Kernel's chunked losses and torch.compile of the reference on ``hidden @ weight.T``,
full forward + backward, bf16, one process.

    python benchmark/scripts/compare_post_training.py --upstream DIR --helper-dir DIR \\
        --kernel dpo_sigmoid=dpo --kernel orpo_odds_ratio=orpo --kernel simpo_margin=simpo \\
        --kernel kto_sigmoid=kto --kernel grpo_kl=grpo --B 8 --T 1024 --hidden 4096 --vocab 128256

``--upstream`` holds upstream's wheel installed with ``pip install --no-deps --target DIR``, ``--helper-dir`` the
folder of ``upstream_liger.py``. Each ``--kernel`` pairs a generated loss (its generation record gives the reference
and its inputs, in the order of test/kernelgen/test_sequence_stages.py's references) with one of ``UPSTREAM``'s
chunked losses, called as close to the reference as its options allow: the reference model's log-probabilities
are inputs of ours, so upstream runs without a reference model where it would otherwise run one (DPO, KTO; the
subtraction it skips is [B]-sized), SimPO without its NLL term, GRPO with ``loss_type="grpo"`` (TRL's masked mean
per sequence). Rows (providers ``liger``, ``liger_upstream``, ``torch_compile``) go to the results CSV
(``benchmark/data/all_benchmark_data.csv`` unless ``--csv``); a markdown table is printed as rows are measured.
"""

import argparse
import functools
import math
import sys

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from benchmark.scripts.compare_with_upstream import _first
from benchmark.scripts.compare_with_upstream import _fused_function_class
from benchmark.scripts.compare_with_upstream import measure
from benchmark.scripts.compare_with_upstream import reference_entry

PROVIDERS = ["liger", "liger_upstream", "torch_compile"]
DEVICE = "cuda"


def _hyper(record: dict) -> dict:
    return {hp["name"]: hp["default"] for hp in record["hyperparameters"]}


# Upstream's chunked losses (liger_kernel.chunked_loss, 0.8.5): (up, hidden, weight, our inputs after the logits,
# our hyper-parameters) -> the module's output. Its KTO takes one KL baseline for the batch (ours: any shape).
UPSTREAM = {
    "dpo": lambda up, h, w, others, hyper: up.chunked_loss.LigerFusedLinearDPOLoss(
        beta=hyper["beta"], use_ref_model=False
    )(w, h, others[0]),
    "orpo": lambda up, h, w, others, hyper: up.chunked_loss.LigerFusedLinearORPOLoss(beta=hyper["beta"])(
        w, h, others[0]
    ),
    "simpo": lambda up, h, w, others, hyper: up.chunked_loss.LigerFusedLinearSimPOLoss(
        beta=hyper["beta"], gamma=hyper["gamma"], compute_nll_loss=False
    )(w, h, others[0]),
    "kto": lambda up, h, w, others, hyper: up.chunked_loss.LigerFusedLinearKTOLoss(beta=hyper["beta"])(
        h, w, others[0], None, preference_labels=others[3], kl=others[2].float().mean()
    ),
    "grpo": lambda up, h, w, others, hyper: up.chunked_loss.LigerFusedLinearGRPOLoss(
        beta=hyper["beta"], loss_type="grpo", epsilon_low=hyper["epsilon"], epsilon_high=hyper["epsilon"]
    )(h, w, others[0], others[4], others[3], None, others[2], others[1]),
}


def _others(record: dict, B: int, T: int, vocab: int) -> list:
    """The loss's inputs after its logits, drawn as its generated tests draw them (bf16 where they are numbers)."""
    drawn = []
    for spec in record["inputs"][1:]:
        if spec["dtype"] == "int64":
            ids = torch.randint(0, vocab, (B, T), device=DEVICE)
            if "!= -100" in record["math"]["loss"]["sequence"]:
                ids[:, : T // 8] = -100  # a prompt's tokens, which the loss skips
            drawn.append(ids)
            continue
        shape = tuple(eval(f"({spec['sequence_shape']},)", {}, {"B": B, "T": T}))  # noqa: S307 - the record's words
        if spec["dtype"] == "bool":
            drawn.append(torch.rand(shape, device=DEVICE) > 0.5)
        elif spec.get("domain") == "log_probabilities":
            scale = 1 if len(shape) == 2 else T
            drawn.append((torch.randn(shape, device=DEVICE) * 0.5 - math.log(vocab) * scale).to(torch.bfloat16))
        else:
            drawn.append(torch.rand(shape, device=DEVICE).to(torch.bfloat16))  # a mask, advantages, a KL: >= 0
    return drawn


@functools.cache
def _compiled_reference(name: str):
    record, entry = reference_entry(name)
    hyper = _hyper(record)
    called = entry() if isinstance(entry, type) else entry

    def forward(hidden, weight, *others):
        return called(hidden @ weight.t(), *others, **({} if isinstance(entry, type) else hyper))

    torch._dynamo.reset()
    return torch.compile(forward, dynamic=False)


def setup(name: str, upstream_key: str, up, run, B: int, T: int, hidden_size: int, vocab: int):
    record, _ = reference_entry(name)
    torch.manual_seed(0)
    hidden = (torch.randn(B, T, hidden_size, device=DEVICE) * 4 / hidden_size**0.5).to(torch.bfloat16)
    weight = (torch.randn(vocab, hidden_size, device=DEVICE) / hidden_size**0.5).to(torch.bfloat16)
    hidden.requires_grad_(True)
    weight.requires_grad_(True)
    others = _others(record, B, T, vocab)
    hyper = _hyper(record)
    if run.kernel_provider == "liger":
        ops = __import__(f"liger_kernel.ops.fused_linear_{name}", fromlist=["_"])
        function = getattr(ops, _fused_function_class(record))
        forward = lambda: function.apply(hidden, weight, *others, None, *hyper.values(), None)  # noqa: E731
    elif run.kernel_provider == "liger_upstream":
        forward = lambda: _first(UPSTREAM[upstream_key](up, hidden, weight, others, hyper))  # noqa: E731
    else:
        compiled = _compiled_reference(name)
        forward = lambda: compiled(hidden, weight, *others)  # noqa: E731
    return [hidden, weight], forward


def keep_upstream_chunked_loss(up) -> None:
    """Upstream's chunked losses under their module names: torch.compile imports them by name while tracing
    (``liger_kernel.chunked_loss...``), which would otherwise find this repo's ``liger_kernel``, which has none."""
    import types

    import liger_kernel  # noqa: F401 - this repo's package, the parent of the names registered below

    package = up.chunked_loss
    sys.modules[package.__name__] = package
    for value in vars(package).values():
        if isinstance(value, types.ModuleType) and value.__name__.startswith(f"{package.__name__}."):
            sys.modules[value.__name__] = value


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", help="folder with upstream liger_kernel 0.8.5 installed (pip --target)")
    parser.add_argument("--helper-dir", help="folder holding upstream_liger.py")
    parser.add_argument("--kernel", action="append", required=True, help="GENERATED=UPSTREAM (one of UPSTREAM, or -)")
    parser.add_argument("--B", type=int, default=8, help="sequences (pairs: B / 2)")
    parser.add_argument("--T", type=int, default=1024, help="tokens per sequence")
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--providers", nargs="+", default=PROVIDERS)
    parser.add_argument("--csv", default=None, help="results CSV (default: the harness's)")
    parser.add_argument("--device", default=DEVICE, help="cpu: a smoke run under TRITON_INTERPRET=1, tiny sizes")
    args = parser.parse_args(argv)
    globals()["DEVICE"] = args.device
    up = None
    if args.upstream:
        sys.path.insert(0, args.helper_dir)
        from upstream_liger import load_upstream

        up = load_upstream(args.upstream, modules=("chunked_loss",))
        keep_upstream_chunked_loss(up)
    print("| loss | provider | full ms | peak MB |", flush=True)
    print("|---|---|---|---|", flush=True)
    for pair in args.kernel:
        name, upstream_key = pair.split("=")
        providers = [
            p for p in args.providers if p != "liger_upstream" or (up is not None and upstream_key in UPSTREAM)
        ]
        config = {
            "hidden_size": args.vocab,
            "hidden": args.hidden,
            "B": args.B,
            "dtype": "bfloat16",
            "model": "post_training",
        }
        figures = measure(
            lambda run: setup(name, upstream_key, up, run, args.B, args.T, args.hidden, args.vocab),
            f"fused_linear_{name}",
            providers,
            config,
            args.B * args.T,
            args.csv,
        )
        for provider in providers:
            row = figures.get(provider, {})
            print(
                f"| {name} | {provider} | {row.get('speed', float('nan')):.2f} | {row.get('memory', float('nan')):.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
