"""Build .gpu-patch/ and .gpu-uppatch/: this repository's tree at HEAD and upstream Liger-Kernel's, each with
``patch MODEL --generate`` applied for the model types of issue 45, for the GPU's bf16 convergence tests and
``patch-step`` timings (.ci/gpu step ``patch``). Both folders are scratch (git-ignored), rebuilt from nothing.
Patching reads the installed transformers' modeling files and runs the mini models on the CPU, so it happens here.

usage: python3 .ci/make_patch_checkouts.py UPSTREAM_GIT_DIR [MODEL ...]   (a bare clone of linkedin/Liger-Kernel)
"""

import io
import shutil
import subprocess
import sys
import tarfile

from pathlib import Path

from make_upstream_checkout import export

ROOT = Path(__file__).resolve().parents[1]
# One with a Gemma-style norm (and a gated GELU, RoPE to generate), one whose activation and norm kernelgen
# generates, and an MoE text model.
MODELS = ("vaultgemma", "arcee", "olmoe")


def this_repository(destination: Path) -> None:
    """HEAD's committed tree (what a clean clone holds), not the working tree."""
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(destination, filter="data")


def patch(destination: Path, models: tuple[str, ...]) -> None:
    for model in models:
        subprocess.run(
            [sys.executable, "-m", "tools.kernelgen", "patch", model, "--repo", str(destination), "--generate"],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    git_dir, models = sys.argv[1], tuple(sys.argv[2:]) or MODELS
    for name, build in ((".gpu-patch", this_repository), (".gpu-uppatch", lambda d: export(git_dir, "HEAD", d))):
        destination = ROOT / name
        shutil.rmtree(destination, ignore_errors=True)
        destination.mkdir()
        build(destination)
        patch(destination, models)
        print(f"{destination}: {', '.join(models)} patched (test/convergence/test_mini_MODEL.py)")


if __name__ == "__main__":
    main()
