"""Write .gpu-run/tier12_tests.txt, the test files of the element-wise and row kernels generated into .gpu-run, and
tier3_tests.txt, those of the losses (not their fused linear forms: model-sized matmuls); the generation records say
the tier. Run from the checkout root after the build."""

from pathlib import Path

import yaml

root = Path(".gpu-run")
tests, losses = [], []
for record in sorted((root / ".kernelgen-state" / "records").glob("*.yaml")):
    data = yaml.safe_load(record.read_text())
    profile = data.get("profile", data)
    if not (root / "test" / "transformers" / f"test_{record.stem}.py").exists():
        continue
    if profile.get("tier") in (1, 2):
        tests.append(f"test/transformers/test_{record.stem}.py")
    elif not record.stem.startswith("fused_linear_"):
        losses.append(f"test/transformers/test_{record.stem}.py")
(root / "tier12_tests.txt").write_text(" ".join(tests) + "\n")
(root / "tier3_tests.txt").write_text(" ".join(losses) + "\n")
print(len(tests), "tier-1/2 test files,", len(losses), "loss test files")
