"""Build .gpu-run/: a scratch Liger checkout with every kernel the GPU run checks already generated.

Generation needs libcst and ruff, which the GPU machine lacks; the generated checkout travels instead
(device `run` with carry=[".gpu-run"]), and `.ci/gpu` runs there. Kernels: geglu (as the README makes it), every
tier-1 built-in as NAME_gen, and the three example profiles as NAME_ex (the round trips of issue 4).
"""

import shutil
import sys

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from test.kernelgen.conftest import EXAMPLES  # noqa: E402
from test.kernelgen.conftest import copy_checkout  # noqa: E402
from test.kernelgen.test_analyze import TIER1_BUILTINS  # noqa: E402
from tools.kernelgen.analyze import analyze  # noqa: E402
from tools.kernelgen.generate import plan_new  # noqa: E402
from tools.kernelgen.profile import load_profile  # noqa: E402
from tools.kernelgen.repo import LigerRepo  # noqa: E402
from tools.kernelgen.writer import write_all  # noqa: E402


def main() -> None:
    # An optional folder instead of .gpu-run/ (e.g. to diff what a generator change does to every kernel).
    destination = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT / ".gpu-run"
    shutil.rmtree(destination, ignore_errors=True)
    copy_checkout(destination)
    profiles = [analyze("geglu")] + [analyze(name, name=f"{name}_gen") for name in TIER1_BUILTINS]
    profiles += [
        load_profile(EXAMPLES / f"{e}.yaml").renamed(f"{e}_ex") for e in ("swiglu", "rms_norm", "cross_entropy")
    ]
    for profile in profiles:
        write_all(destination, plan_new(LigerRepo.open(destination), profile).changes)
    print(f"{destination}: {len(profiles)} kernels generated")


if __name__ == "__main__":
    main()
