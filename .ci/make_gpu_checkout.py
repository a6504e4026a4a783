"""Build .gpu-run/: a scratch Liger checkout with every kernel the GPU run checks already generated.

Generation needs libcst and ruff, which the GPU machine lacks; the generated checkout travels instead
(device `run` with carry=[".gpu-run"]), and `.ci/gpu` runs there. Kernels: geglu (as the README makes it) and
dyt, every tier-1, tier-2 and tier-3 built-in as NAME_gen (cross entropy with its fused linear kernel), three losses
with class weights as NAME_gen (``test_class_weights.WEIGHTED_STYLES``: F.cross_entropy(weight=), a hand-written
gather with its fused linear kernel, a module buffer), the three example profiles as NAME_ex (the round trips of
issue 4), the element-wise references of issue 16's performance table (benchmark/references/) as NAME_ref, the
references with broadcast inputs of issue 42 (test/kernelgen/fixtures/broadcast/) as NAME_bc, its GroupNorms
(test/kernelgen/fixtures/groups/) as NAME_grp and PolyNorm (test/kernelgen/fixtures/norms/) as NAME_gen, the index-map
references of issue 42 (``test_index_maps.GENERATED``) as NAME_map, the per-row losses of issue 44
(``test_per_row_inputs``) and its losses in two stages (``test_sequence_stages``: DPO, GRPO with a KL penalty, ...)
under their test's names, and with
``--tiling-variants`` copies of rms_norm, layer_norm, softmax, cross_entropy and kl_div under other launch
settings (``NAME_tv_...``) for a tiling sweep.
"""

import shutil
import sys

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from test.kernelgen.conftest import EXAMPLES  # noqa: E402
from test.kernelgen.conftest import copy_checkout  # noqa: E402
from test.kernelgen.test_analyze import TIER1_BUILTINS  # noqa: E402
from test.kernelgen.test_analyze import TIER2_BUILTINS  # noqa: E402
from test.kernelgen.test_class_weights import WEIGHTED_STYLES  # noqa: E402
from test.kernelgen.test_index_maps import GENERATED as INDEX_MAPS  # noqa: E402
from test.kernelgen.test_losses import TIER3_BUILTINS  # noqa: E402
from test.kernelgen.test_per_row_inputs import GENERATED as PER_ROW_LOSSES  # noqa: E402
from test.kernelgen.test_per_row_inputs import REFERENCES as PER_ROW_REFERENCES  # noqa: E402
from test.kernelgen.test_sequence_stages import GENERATED as STAGED_LOSSES  # noqa: E402
from test.kernelgen.test_sequence_stages import REFERENCES as STAGED_REFERENCES  # noqa: E402
from tools.kernelgen.analyze import analyze  # noqa: E402
from tools.kernelgen.generate import plan_new  # noqa: E402
from tools.kernelgen.profile import load_profile  # noqa: E402
from tools.kernelgen.repo import LigerRepo  # noqa: E402
from tools.kernelgen.writer import write_all  # noqa: E402

REFERENCES = ROOT / "benchmark" / "references"
# References with inputs that broadcast against the first one (issue 42): generated as NAME_bc.
BROADCAST_REFERENCES = ROOT / "test" / "kernelgen" / "fixtures" / "broadcast"
# References with statistics over groups of channels (issue 42): generated as NAME_grp.
GROUP_REFERENCES = ROOT / "test" / "kernelgen" / "fixtures" / "groups"
# Norms upstream has a kernel of that are no built-ins (issue 42's PolyNorm): generated as NAME_gen.
NORM_REFERENCES = ROOT / "test" / "kernelgen" / "fixtures" / "norms"
# Class-weighted losses (reference entry -> kernel name); their tests: pytest test/transformers -k weighted.
WEIGHTED_KERNELS = {
    "weighted_cross_entropy": "weighted_cross_entropy_gen",
    "gathered_weighted_nll": "gathered_weighted_nll_gen",
    "WeightedCrossEntropy": "held_weighted_cross_entropy_gen",
}
# (block_elements, programs_per_sm, num_warps) of the tier-2 tiling sweep; None: the template's choice.
TILING_VARIANTS = [(4096, programs, warps) for programs in (1, 2, 4, 8) for warps in (4, 8, 16, 32)]
# (block_elements, num_warps) of the loss sweep (cross entropy: two sweeps over the row; KL: one).
LOSS_TILING_VARIANTS = [(block, warps) for block in (4096, 8192, 16384, 32768) for warps in (8, 16, 32)]


def tiling_variants() -> list:
    variants = []
    for base in ("rms_norm", "layer_norm", "softmax"):
        for block_elements, programs_per_sm, num_warps in TILING_VARIANTS:
            if base == "softmax" and programs_per_sm != 2:
                continue  # no parameter gradients: the backward's grid does not depend on it
            name = f"{base}_tv_{block_elements}_{programs_per_sm}_{num_warps or 'auto'}"
            profile = analyze(base, name=name)
            profile.tiling.block_elements = block_elements
            profile.tiling.programs_per_sm = programs_per_sm
            profile.tiling.num_warps = num_warps
            variants.append(profile)
    for base in ("cross_entropy", "kl_div"):
        for block_elements, num_warps in LOSS_TILING_VARIANTS:
            profile = analyze(base, name=f"{base}_tv_{block_elements}_{num_warps}")
            profile.tiling.block_elements = block_elements
            profile.tiling.num_warps = num_warps
            variants.append(profile)
    return variants


def main() -> None:
    arguments = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    # An optional folder instead of .gpu-run/ (e.g. to diff what a generator change does to every kernel).
    destination = Path(arguments[0]).resolve() if arguments else ROOT / ".gpu-run"
    shutil.rmtree(destination, ignore_errors=True)
    copy_checkout(destination)
    # geglu and dyt under their own names: upstream's test_geglu.py and test_dyt.py import them so.
    profiles = [analyze("geglu"), analyze("dyt")]
    profiles += [analyze(name, name=f"{name}_gen") for name in TIER1_BUILTINS + TIER2_BUILTINS + TIER3_BUILTINS]
    for profile in profiles:
        if profile.operation_name == "cross_entropy_gen":
            profile.fused_linear.enabled = True  # and fused_linear_cross_entropy_gen beside it
    profiles += [analyze(str(path), name=f"{path.stem}_ref") for path in sorted(REFERENCES.glob("*.py"))]
    profiles += [analyze(str(path), name=f"{path.stem}_bc") for path in sorted(BROADCAST_REFERENCES.glob("*.py"))]
    profiles += [analyze(str(path), name=f"{path.stem}_grp") for path in sorted(GROUP_REFERENCES.glob("*.py"))]
    profiles += [analyze(str(path), name=f"{path.stem}_gen") for path in sorted(NORM_REFERENCES.glob("*.py"))]
    weighted = destination / "weighted_losses.py"
    weighted.write_text(WEIGHTED_STYLES)
    for entry, name in WEIGHTED_KERNELS.items():
        profiles.append(analyze(f"{weighted}:{entry}", name=name))
        profiles[-1].fused_linear.enabled = name == "gathered_weighted_nll_gen"
    profiles += [analyze(reference, name=name) for name, (reference, *_) in INDEX_MAPS.items()]
    per_row = destination / "per_row_losses.py"
    per_row.write_text(PER_ROW_REFERENCES)
    profiles += [analyze(f"{per_row}:{entry}", name=name) for entry, name in PER_ROW_LOSSES]
    staged = destination / "staged_losses.py"
    staged.write_text(STAGED_REFERENCES)
    for entry, name in STAGED_LOSSES:
        profiles.append(analyze(f"{staged}:{entry}", name=name))
        profiles[-1].fused_linear.enabled = True  # and fused_linear_NAME beside it
    profiles += [
        load_profile(EXAMPLES / f"{e}.yaml").renamed(f"{e}_ex") for e in ("swiglu", "rms_norm", "cross_entropy")
    ]
    if "--tiling-variants" in sys.argv:
        profiles += tiling_variants()
    # plan_new generates as `new --force-new` does: the built-ins that are the host's own kernels at some option
    # values (swiglu_gen, rms_norm_gen, gemma_rms_norm_gen, cross_entropy_gen) are generated all the same.
    for profile in profiles:
        write_all(destination, plan_new(LigerRepo.open(destination), profile).changes)
    print(f"{destination}: {len(profiles)} kernels generated")


if __name__ == "__main__":
    main()
