"""Build .gpu-upstream/: a scratch copy of upstream Liger-Kernel with kernels kernelgen generated into it (two new
ones, and rope, group_norm and poly_norm in place of upstream's) and options kernelgen's ``modify`` added to two of
upstream's hand-written kernels, and put upstream's unit tests of the five host kernels into .gpu-run/test/upstream/
(after make_gpu_checkout.py).

Both are for the GPU checks of issue 15 and are never committed (both folders are ignored): on the GPU machine the
generated tests run in the upstream copy and the generated benchmarks append rows to its
benchmark/data/all_benchmark_data.csv; upstream's test_swiglu/geglu/rms_norm/cross_entropy/dyt run against this
repository's library in .gpu-run. Generation needs libcst and ruff, so it happens here, not on the GPU machine.

usage: python3 .ci/make_upstream_checkout.py GIT_DIR [REV]   (GIT_DIR: a bare clone of linkedin/Liger-Kernel)
"""

import ast
import re
import shutil
import subprocess
import sys

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESTINATION = ROOT / ".gpu-upstream"
EXPORTED = ("src", "benchmark", "test", "pyproject.toml", "setup.py")
# Built-in references upstream does not have: a module with a per-channel parameter, a function with a float
# hyper-parameter.
KERNELS = ("snake", "leaky_relu_mul")
# Hand-written upstream kernels and the reference whose new option ``modify`` adds (issue 41): upstream's own tests of
# these kernels, with the appended case of the option, run in .gpu-upstream on the GPU.
MODIFIED = {
    "geglu": ROOT / "test" / "kernelgen" / "fixtures" / "modify" / "geglu_scaled.py",
    "softmax": ROOT / "test" / "kernelgen" / "fixtures" / "modify" / "softmax_temperature.py",
}
UPSTREAM_TESTS = ("swiglu", "geglu", "rms_norm", "cross_entropy", "dyt")
# Upstream kernels the generated ones take the place of (issue 42): upstream's files and registrations removed, the
# reference generated under upstream's name, and upstream's own test kept as test_NAME_upstream.py to run against it.
REPLACED = {
    "rope": f"{ROOT / 'test' / 'kernelgen' / 'fixtures' / 'index_maps' / 'hf_rope.py'}:apply_rotary_pos_emb",
    "group_norm": str(ROOT / "test" / "kernelgen" / "fixtures" / "groups" / "group_norm.py"),
    "poly_norm": str(ROOT / "test" / "kernelgen" / "fixtures" / "norms" / "poly_norm.py"),
}


def git(git_dir: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, check=False)


def export(git_dir: str, rev: str, destination: Path) -> None:
    """The files of ``EXPORTED`` at ``rev`` (regular files only; blobs the mirror lacks, such as large test
    resources, are skipped)."""
    listing = git(git_dir, "ls-tree", "-r", "-z", rev, "--", *EXPORTED)
    if listing.returncode != 0:
        sys.exit(f"make_upstream_checkout: cannot list {rev} in {git_dir}: {listing.stderr.decode().strip()}")
    for entry in listing.stdout.decode().split("\0"):
        if not entry:
            continue
        meta, path = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind != "blob" or mode == "120000":
            continue
        blob = git(git_dir, "cat-file", "blob", sha)
        if blob.returncode == 0:
            target = destination / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob.stdout)


def remove_upstream_kernel(name: str) -> None:
    """Upstream's kernel ``name`` out of DESTINATION: its ops and module files, benchmark, the lines of the two
    __init__ files that import or list it and the functional that calls it; its test kept aside as
    test_NAME_upstream.py. Upstream's test_rope builds HF's LlamaRotaryEmbedding with ``device=``, which transformers
    5 no longer takes; the rotary module computes on its input's device anyway, so the argument is dropped."""
    library = DESTINATION / "src" / "liger_kernel"
    for path in (library / "ops" / f"{name}.py", library / "transformers" / f"{name}.py"):
        path.unlink()
    (DESTINATION / "benchmark" / "scripts" / f"benchmark_{name}.py").unlink(missing_ok=True)
    tests = DESTINATION / "test" / "transformers"
    test = tests / f"test_{name}.py"
    text = test.read_text().replace('head_dim=head_dim), "device": device}', "head_dim=head_dim)}")
    (tests / f"test_{name}_upstream.py").write_text(text)
    test.unlink()
    pascal = "".join(part.title() for part in name.split("_"))
    mentions = re.compile(rf"\b(liger_kernel\.(ops|transformers)\.{name}\b|Liger{pascal}\w*|liger_{name}\b)")
    for path in (library / "ops" / "__init__.py", library / "transformers" / "__init__.py"):
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(line for line in lines if not mentions.search(line)))
    functional = library / "transformers" / "functional.py"
    source = functional.read_text()
    spans = [
        (node.lineno - 1 - len(getattr(node, "decorator_list", [])), node.end_lineno)
        for node in ast.parse(source).body
        if (isinstance(node, ast.FunctionDef) and node.name == f"liger_{name}")
        or (isinstance(node, ast.ImportFrom) and any(mentions.search(alias.name) for alias in node.names))
    ]
    lines = source.splitlines(keepends=True)
    for start, end in sorted(spans, reverse=True):
        del lines[start:end]
    functional.write_text("".join(lines))


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[-1])
    git_dir, rev = sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else "HEAD"
    shutil.rmtree(DESTINATION, ignore_errors=True)
    export(git_dir, rev, DESTINATION)
    # Upstream's benchmark utils read the installed liger-kernel version; run from src/, this stands in for it.
    info = DESTINATION / "src" / "liger_kernel-0.0.0+upstream.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: liger-kernel\nVersion: 0.0.0+upstream\n")
    for name in KERNELS:
        subprocess.run(
            # --force-new: these kernels are compared with upstream's own, even where one is a variant of them.
            [sys.executable, "-m", "tools.kernelgen", "new", name, "--repo", str(DESTINATION), "--force-new"],
            cwd=ROOT,
            check=True,
        )
    for name, reference in MODIFIED.items():
        subprocess.run(
            [sys.executable, "-m", "tools.kernelgen", "modify", name, "--reference", str(reference)]
            + ["--repo", str(DESTINATION)],
            cwd=ROOT,
            check=True,
        )
    for name, reference in REPLACED.items():
        remove_upstream_kernel(name)
        subprocess.run(
            [sys.executable, "-m", "tools.kernelgen", "new", name, "--reference", reference]
            + ["--repo", str(DESTINATION), "--force-new"],
            cwd=ROOT,
            check=True,
        )
    print(f"{DESTINATION}: upstream {rev} with {', '.join(KERNELS)} generated, {', '.join(MODIFIED)} modified")
    print(f"{DESTINATION}: {', '.join(REPLACED)} generated in place of upstream's (their tests: test_NAME_upstream.py)")
    gpu_run = ROOT / ".gpu-run"
    if gpu_run.is_dir():
        tests = gpu_run / "test" / "upstream"
        tests.mkdir(parents=True, exist_ok=True)
        (tests / "__init__.py").write_text("")
        for name in UPSTREAM_TESTS:
            shown = git(git_dir, "show", f"{rev}:test/transformers/test_{name}.py")
            if shown.returncode != 0:
                sys.exit(f"make_upstream_checkout: no test_{name}.py at {rev}: {shown.stderr.decode().strip()}")
            (tests / f"test_{name}.py").write_bytes(shown.stdout)
        print(f"{tests}: upstream's tests of {', '.join(UPSTREAM_TESTS)}")


if __name__ == "__main__":
    main()
