"""Test-case samplers: a ``sample_inputs.py`` of the workspace that says which inputs a kernel must get right.

The sampler phase of the skill writes it; ``samples FILE --profile PROFILE`` checks it before the kernel exists and
``validate NAME --samples FILE`` runs the kernel on every input set in its correctness stages. The file defines::

    def sample_inputs(device, dtype):
        return [
            {"label": "one long row", "inputs": {"x": torch.randn(1, 4099, device=device, dtype=dtype), ...}},
            {"label": "large values", "inputs": {...}, "hyper": {"beta": 2.0}, "params": {"weight": ...}},
        ]

one dict per input set: ``inputs`` (every tensor input of the profile by name, on ``device``; floating ones in
``dtype``, class indices ``int64``), optional ``params`` (learnable parameters by name; drawn in ``[0.5, 1.5)``
when left out), ``hyper`` (hyper-parameters moved off their defaults) and ``label``. Shapes, value ranges and edge
values are the sampler's to choose. A sampler that does not import, does not return that structure or puts a
tensor on the wrong device or dtype is refused in one line (``SamplerError``) naming the file and the input set.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import torch

from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.render.vectors import hold_vectors_whole
from tools.kernelgen.render.vectors import parameter_shape

ENTRY = "sample_inputs"
KEYS = ("label", "inputs", "params", "hyper")
HYPER_TYPES = {"float": (int, float), "int": (int,), "bool": (bool,), "str": (str,)}


class SamplerError(ValueError):
    """A sampler file that cannot be used: one line naming the file, the input set and the problem."""


@dataclass
class Sample:
    """One input set of a sampler, checked against the profile: inputs in profile order."""

    label: str
    inputs: list[torch.Tensor]
    params: dict[str, torch.Tensor] = field(default_factory=dict)
    hyper: dict = field(default_factory=dict)

    @property
    def rows(self) -> int:
        """Rows the kernel reduces a parameter gradient over (every dimension but the last of the first input)."""
        first = self.inputs[0]
        return max(1, first.numel() // max(1, first.shape[-1])) if first.dim() else 1


def default_device() -> str:
    """The device ``validate`` runs its correctness stages on (and so asks the sampler for)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def _where(error: BaseException, path: Path) -> str:
    """`` (line N)`` of the deepest frame of the sampler file in ``error``'s traceback, or nothing."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
    line = frames[-1].lineno if frames else getattr(error, "lineno", None)
    return f" (line {line})" if line else ""


def _first_line(error: BaseException) -> str:
    if isinstance(error, SyntaxError):
        return f"SyntaxError: {error.msg}"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def load_sampler(path: str | Path):
    """The ``sample_inputs`` function of the file at ``path``; raises ``SamplerError``."""
    path = Path(path).resolve()
    if not path.is_file():
        raise SamplerError(f"sampler {path}: no such file (the sampler phase writes sample_inputs.py)")
    if path.suffix != ".py":
        raise SamplerError(f"sampler {path}: not a Python file")
    name = f"kernelgen_sampler_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # anything the file does wrong on import is the sampler's problem, said in one line
        raise SamplerError(f"sampler {path}: does not import: {_first_line(error)}{_where(error, path)}") from None
    finally:
        sys.modules.pop(name, None)
    function = getattr(module, ENTRY, None)
    if not callable(function):
        raise SamplerError(f"sampler {path}: defines no function {ENTRY}(device, dtype)")
    return function


def draw_samples(path: str | Path, profile: KernelProfile, device: str, dtype: torch.dtype = torch.float32):
    """The sampler's input sets for ``profile``, checked; raises ``SamplerError`` at the first problem."""
    path = Path(path).resolve()
    function = load_sampler(path)
    torch.manual_seed(0)  # a sampler drawing from the global generator gives the same sets in every process
    try:
        produced = function(device=device, dtype=dtype)
    except Exception as error:
        raise SamplerError(
            f"sampler {path}: {ENTRY}(device={device!r}, dtype={dtype}) raised {_first_line(error)}"
            f"{_where(error, path)}"
        ) from None
    if not isinstance(produced, (list, tuple)) or not produced:
        raise SamplerError(
            f"sampler {path}: {ENTRY}() returned {type(produced).__name__}, expected a non-empty list of input sets "
            f"(dicts with 'inputs')"
        )
    checker = _SampleChecker(path, profile, device, dtype)
    return [checker.check(index, item) for index, item in enumerate(produced, start=1)]


class _SampleChecker:
    def __init__(self, path: Path, profile: KernelProfile, device: str, dtype: torch.dtype):
        self.path = path
        self.profile = profile
        self.device = torch.device(device).type
        self.dtype = dtype
        self.input_names = [t.name for t in profile.inputs]
        # The parameters as the kernel takes them: a held vector (PolyNorm's weight) whole.
        self.params = {p.name: p for p in hold_vectors_whole(profile).parameters}
        self.param_shapes = {name: p.shape for name, p in self.params.items()}
        self.hypers = {hp.name: hp for hp in profile.hyperparameters}

    def fail(self, where: str, problem: str):
        raise SamplerError(f"sampler {self.path}: {where}: {problem}")

    def check(self, index: int, item) -> Sample:
        where = f"input set {index}"
        if not isinstance(item, dict):
            self.fail(
                where, f"is a {type(item).__name__}, expected a dict with 'inputs' (and 'label', 'params', 'hyper')"
            )
        label = item.get("label", f"sample {index}")
        if not isinstance(label, str):
            self.fail(where, f"'label' is a {type(label).__name__}, expected a string")
        where = f"input set {index} ({label})"
        unknown = sorted(set(item) - set(KEYS))
        if unknown:
            self.fail(where, f"unknown key '{unknown[0]}' (keys: {', '.join(KEYS)})")
        inputs = self._tensors(where, item.get("inputs"), "inputs", self.input_names, required=True)
        self._check_shapes(where, inputs)
        params = self._tensors(where, item.get("params", {}), "params", list(self.param_shapes), required=False)
        cols = inputs[self.input_names[0]].shape[-1] if inputs[self.input_names[0]].dim() else 1
        for name, value in params.items():
            # A per-channel parameter has one value per column, a held vector its elements; a scalar one is () or (1,).
            vector = parameter_shape(self.params[name], cols) if self.param_shapes[name] == "vector" else None
            allowed = [(cols,)] if self.param_shapes[name] == "channel" else [vector] if vector else [(), (1,)]
            if tuple(value.shape) not in allowed:
                wanted = " or ".join(str(shape) for shape in allowed)
                self.fail(where, f"parameter '{name}' has shape {tuple(value.shape)}, expected {wanted}")
        return Sample(label, [inputs[name] for name in self.input_names], params, self._hyper(where, item))

    def _tensors(self, where: str, given, key: str, names: list[str], required: bool) -> dict[str, torch.Tensor]:
        if not isinstance(given, dict):
            self.fail(where, f"'{key}' must be a dict {{name: tensor}} of {', '.join(names) or 'nothing'}")
        missing = [name for name in names if name not in given] if required else []
        if missing:
            self.fail(where, f"'{key}' has no '{missing[0]}' (the kernel's {key}: {', '.join(names)})")
        unknown = [name for name in given if name not in names]
        if unknown:
            self.fail(
                where, f"'{key}' names '{unknown[0]}', which is not one of the kernel's {key} ({', '.join(names)})"
            )
        specs = {t.name: t for t in self.profile.inputs} if key == "inputs" else {}
        what = "input" if key == "inputs" else "parameter"
        for name, value in given.items():
            if not isinstance(value, torch.Tensor):
                self.fail(where, f"{what} '{name}' is a {type(value).__name__}, expected a torch.Tensor")
            if value.device.type != self.device:
                self.fail(where, f"{what} '{name}' is on {value.device.type}, expected {self.device}")
            integer = name in specs and specs[name].dtype in ("int64", "int32")
            expected = getattr(torch, specs[name].dtype) if integer else self.dtype
            if value.dtype != expected:
                self.fail(where, f"{what} '{name}' is {value.dtype}, expected {expected}")
        return dict(given)

    def _check_shapes(self, where: str, inputs: dict[str, torch.Tensor]) -> None:
        floating = [(n, t) for n, t in inputs.items() if t.is_floating_point()]
        first_name, first = floating[0] if floating else next(iter(inputs.items()))
        if first.dim() == 0:
            self.fail(where, f"input '{first_name}' is a scalar; kernels take [..., n_cols] tensors")
        for name, value in inputs.items():
            expected = tuple(first.shape) if value.is_floating_point() else tuple(first.shape[:-1])
            if tuple(value.shape) != expected:
                what = "one class index per row" if not value.is_floating_point() else f"the shape of '{first_name}'"
                self.fail(where, f"input '{name}' has shape {tuple(value.shape)}, expected {expected} ({what})")

    def _hyper(self, where: str, item: dict) -> dict:
        given = item.get("hyper", {})
        if not isinstance(given, dict):
            self.fail(where, "'hyper' must be a dict {name: value}")
        values = {name: hp.default for name, hp in self.hypers.items()}
        for name, value in given.items():
            hp = self.hypers.get(name)
            if hp is None:
                known = ", ".join(self.hypers) or "none"
                self.fail(where, f"hyper-parameter '{name}' is not one of the kernel's ({known})")
            wrong_type = not isinstance(value, HYPER_TYPES[hp.type]) or (hp.type != "bool" and isinstance(value, bool))
            if wrong_type:
                self.fail(where, f"hyper-parameter '{name}' = {value!r} is not a {hp.type}")
            if hp.choices and value not in hp.choices:
                self.fail(where, f"hyper-parameter '{name}' = {value!r} is not one of its choices {hp.choices}")
            values[name] = value
        return values


def check_sampler_file(path: str | Path, profile: KernelProfile, device: str | None = None) -> list[str]:
    """``samples FILE --profile PROFILE``: the sampler checked against the profile and each of its input sets run
    through the reference (float64, forward and backward), before any kernel exists; one line per set. Raises
    ``SamplerError`` for a malformed sampler or a set the reference itself cannot run."""
    from tools.kernelgen.validate.harness import Case
    from tools.kernelgen.validate.harness import ReferenceRunner

    device = device or default_device()
    samples = draw_samples(path, profile, device)
    runner = ReferenceRunner(profile, device)
    lines = []
    for index, sample in enumerate(samples, start=1):
        cols = sample.inputs[0].shape[-1] if sample.inputs[0].dim() else 1
        params = [
            sample.params.get(
                p.name, torch.ones(parameter_shape(p, cols) if p.shape != "channel" else (cols,), device=device)
            )
            for p in runner.profile.parameters  # as the kernel takes them: a held vector whole
        ]
        try:
            runner.run_reference(Case(sample.inputs, params, sample.hyper, index, sample.label), torch.float64)
        except Exception as error:  # inputs the reference cannot take are the sampler's mistake
            raise SamplerError(
                f"sampler {Path(path).resolve()}: input set {index} ({sample.label}): the reference raises "
                f"{_first_line(error)}"
            ) from None
        shapes = ", ".join(f"{t.name} {'x'.join(map(str, s.shape))}" for t, s in zip(profile.inputs, sample.inputs))
        moved = {k: v for k, v in sample.hyper.items() if v != runner.defaults.get(k)}
        lines.append(f"  {index}. {sample.label}: {shapes}" + (f"; {moved}" if moved else ""))
    return lines
