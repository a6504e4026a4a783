"""Run a kernel and its PyTorch reference on the same data (imported only inside worker processes).

The worker sets ``TRITON_INTERPRET`` and ``sys.path`` before this module imports the kernel. A kernel validated
against its own generation record is called as ``Function.apply(*inputs, *params, *hyper-parameters)``, the order
its template gives it; any other (hand-written, or checked against another reference) is called through its
functional with every argument by name, as ``hostapi.match_arguments`` mapped them (the target spec). Inputs mirror the
generated unit tests: tier 1/2 take every profile input as a ``(rows, cols)`` tensor (``randn * input_scale``, or
``rand * input_scale + 0.1`` for a positive input domain) plus learnable parameters drawn in ``[0.5, 1.5)``; tier 3
takes logits and integer targets. Each run gets fresh copies, because kernels may write gradients over the
buffers they saved (Liger's in-place backward).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import sys
import types

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import torch

from tools.kernelgen.analyze.load import remember_source
from tools.kernelgen.broadcast import first_input_dims
from tools.kernelgen.broadcast import shape_for
from tools.kernelgen.float64_casts import kept_float64
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import group_count
from tools.kernelgen.profile import load_yaml
from tools.kernelgen.record import read_record
from tools.kernelgen.render.reference_hypers import reference_hypers
from tools.kernelgen.render.vectors import hold_vectors_whole
from tools.kernelgen.render.vectors import parameter_shape


@dataclass
class Case:
    """One set of data: inputs and parameters in float32 (or the dtype under test), hyper-parameters, seed."""

    inputs: list[torch.Tensor]
    params: list[torch.Tensor]
    hyper: dict
    seed: int
    label: str = ""


@dataclass
class RunResult:
    outputs: list[torch.Tensor]
    grads: dict[str, torch.Tensor] = field(default_factory=dict)


def import_from_checkout(repo: Path, module_name: str, attribute: str):
    """``module_name.attribute`` of the target checkout's ``liger_kernel`` (its ``src`` first on ``sys.path``)."""
    src = str(repo / "src")
    if src in sys.path:
        sys.path.remove(src)
    sys.path.insert(0, src)
    for module in [m for m in sys.modules if m == "liger_kernel" or m.startswith("liger_kernel.")]:
        del sys.modules[module]
    value = importlib.import_module(module_name)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def import_function_class(repo: Path, profile: KernelProfile):
    """The kernel's autograd Function, imported from the target checkout."""
    return import_from_checkout(repo, f"liger_kernel.ops.{profile.operation_name}", profile.function_class_name)


def read_spec(path: str | Path | None) -> dict | None:
    """The target spec the parent wrote (``{"profile": YAML, "call": {...}}``), or None: the kernel's record."""
    if not path:
        return None
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _takes_argument(cls, name: str) -> bool:
    """Whether ``cls(name=...)`` is accepted: a parameter of that name, or ``**kwargs`` (not nn.Module's own, whose
    ``*args, **kwargs`` a module without an ``__init__`` of its own inherits, and which takes no argument)."""
    if isinstance(cls, type) and cls.__init__ is torch.nn.Module.__init__:
        return False
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return True
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def _install_parameters(module: torch.nn.Module, specs: list, leaves: list[torch.Tensor]) -> None:
    """``leaves`` as the module's learnable parameters: each in place of the attribute it stands for; elements of a
    vector read by index (``weight[0]``) as that vector rebuilt from them, so each element's gradient is its leaf's."""
    vectors: dict[str, dict[int, torch.Tensor]] = {}
    for spec, leaf in zip(specs, leaves):
        path = spec.attribute or spec.name
        base, bracket, index = path.partition("[")
        if bracket:
            vectors.setdefault(base, {})[int(index.rstrip("]"))] = leaf
            continue
        _set_attribute(module, path, leaf)
    for base, elements in vectors.items():
        owner_path, _, attribute = base.rpartition(".")
        owner = module.get_submodule(owner_path) if owner_path else module
        held = getattr(owner, attribute)
        values = list(held.detach().reshape(-1).unbind())
        for index, leaf in elements.items():
            values[index] = leaf.reshape(())
        owner._parameters.pop(attribute, None)  # a plain tensor of the leaves takes the parameter's place
        setattr(owner, attribute, torch.stack(values).reshape(held.shape))


def _set_attribute(module: torch.nn.Module, path: str, value: torch.Tensor) -> None:
    """``value`` in place of the module's attribute at ``path`` (``weight``, ``norm.weight``)."""
    owner, _, attribute = path.rpartition(".")
    setattr(module.get_submodule(owner) if owner else module, attribute, value)


def _holding_inputs(module: torch.nn.Module, held: dict[int, str]):
    """A module reference that holds some of the kernel's inputs itself (a class-weight buffer, ``self.loss.weight``)
    as a callable of all of them, as the kernel takes them: it sets the ones at ``held`` (index: attribute path) on
    the module and passes it the others."""

    def call(*tensors, **hypers):
        for index, path in held.items():
            _set_attribute(module, path, tensors[index])
        return module(*(tensor for index, tensor in enumerate(tensors) if index not in held), **hypers)

    return call


def load_reference(profile: KernelProfile):
    """The reference's entry, executed as a registered module (torch.compile looks its globals up by module)."""
    name = f"kernelgen_reference_{profile.operation_name}"
    module = types.ModuleType(name)
    module.__file__ = f"<reference {profile.reference.origin or profile.operation_name}>"
    sys.modules[name] = module
    remember_source(module.__file__, profile.reference.source)  # a @torch.jit.script reference compiles from it
    exec(compile(profile.reference.source, module.__file__, "exec"), module.__dict__)
    return getattr(module, profile.reference.entry)


class ReferenceRunner:
    """The reference of a profile on a device: the data the stages draw and its float64 autograd results. Needs no
    kernel (``samples`` checks a test-case sampler with it before the kernel exists)."""

    def __init__(self, profile: KernelProfile, device: str):
        # The parameters as the kernel's interface takes them: a held vector (PolyNorm's weight) whole.
        self.profile = hold_vectors_whole(profile)
        self.device = device
        self.reference = load_reference(self.profile)
        self.defaults = {hp.name: hp.default for hp in self.profile.hyperparameters}
        self.tier = self.profile.tier
        self.positive = self.profile.test.input_domain == "positive"
        atol, rtol = self.profile.test.tolerances.get("float32", [1e-5, 1e-5])
        self.tolerances = (float(atol), float(rtol))

    # Data ---------------------------------------------------------------------------------------------------
    def make_case(self, rows: int, cols: int, seed: int, *, hyper=None, dtype=torch.float32, label="") -> Case:
        """Inputs of ``rows`` rows of ``cols`` columns (of ``cols`` per lane for an index map: rows of whole lanes,
        the stages' odd widths kept as odd lane lengths)."""
        lanes = self.profile.math.lanes
        cols *= lanes.count if lanes is not None else 1
        generator = torch.Generator().manual_seed(seed)
        hyper = dict(self.defaults if hyper is None else hyper)
        if self.tier == 3:
            inputs = [self._loss_input(spec, rows, cols, hyper, generator) for spec in self.profile.inputs]
            inputs = [x.to(self.device, dtype) if x.is_floating_point() else x.to(self.device) for x in inputs]
            return Case(inputs, [], hyper, seed, label)
        scale = float(self.profile.test.input_scale)
        # Inputs that broadcast against the first one in their own shapes, the rows grouped as their patterns need.
        patterns = [t.broadcast for t in self.profile.inputs if t.broadcast]
        full = first_input_dims(patterns, rows, cols, rank=self.profile.example_rank())
        if self.profile.math.groups:
            # rows samples of three channels a group, cols elements each: a group of a 1 x 1 case is no pair (whose
            # normalized values are +-1 exactly, and their gradients cancel to rounding).
            full = (rows, 3 * group_count(self.profile), cols)
        inputs = []
        for spec in self.profile.inputs:
            shape = shape_for(spec.broadcast, full) if spec.broadcast else full
            if self.positive:
                value = torch.rand(shape, generator=generator) * scale + 0.1
            else:
                value = torch.randn(shape, generator=generator) * scale
            inputs.append(value.to(self.device, dtype))
        params = []
        for param in self.profile.parameters:
            size = parameter_shape(param, cols, full[1]) if param.shape != "channel" else (cols,)
            params.append((torch.rand(size, generator=generator) + 0.5).to(self.device, dtype))
        return Case(inputs, params, hyper, seed, label)

    @staticmethod
    def _loss_input(spec, rows: int, cols: int, hyper: dict, generator: torch.Generator) -> torch.Tensor:
        """One input of a loss over ``rows`` rows of ``cols`` classes, drawn as its spec says it is read: class
        indices (every third row the ignore index, where the loss has one), one value per row, one per class (class
        weights), a distribution over each row, or logits."""
        if spec.dtype == "int64":
            target = torch.randint(0, cols, (rows,), generator=generator)
            ignore_index = hyper.get("ignore_index")
            if isinstance(ignore_index, int) and rows >= 3:
                target[1::3] = ignore_index  # some ignored rows in every multi-row case
            return target
        if spec.per_class:
            return torch.rand(cols, generator=generator) + 0.5
        if spec.per_row:
            return torch.randn(rows, generator=generator)
        logits = torch.randn(rows, cols, generator=generator) * 4
        if spec.domain == "probabilities":
            return logits.softmax(-1)
        if spec.domain == "log_probabilities":
            return logits.log_softmax(-1)
        return logits

    def with_inputs(self, case: Case, inputs: list[torch.Tensor], label: str) -> Case:
        return Case(inputs, case.params, case.hyper, case.seed, label)

    def grad_outputs(self, outputs: list[torch.Tensor], seed: int) -> list[torch.Tensor]:
        generator = torch.Generator().manual_seed(seed + 1000)
        grads = []
        for out in outputs:
            if out.dim() == 0 or self.tier == 3:
                grads.append(torch.rand(out.shape, generator=generator) + 0.5)
            else:
                grads.append(torch.randn(out.shape, generator=generator))
        return [g.to(out.device, out.dtype) for g, out in zip(grads, outputs)]

    # Names of what gets a gradient ---------------------------------------------------------------------------
    def grad_labels(self) -> list[str]:
        inputs = [t.name for t in self.profile.inputs if t.requires_grad]
        return inputs + [p.name for p in self.profile.parameters]

    # Runs ---------------------------------------------------------------------------------------------------
    def run_reference(self, case: Case, dtype: torch.dtype, *, backward: bool = True) -> RunResult:
        inputs = [
            self.leaf(x.to(dtype) if x.is_floating_point() else x, spec.requires_grad)
            for x, spec in zip(case.inputs, self.profile.inputs)
        ]
        # nn.Parameter leaves: a module reference adopts these very objects, so gradients land on them.
        params = [torch.nn.Parameter(p.detach().to(dtype).clone()) for p in case.params]
        callable_ = self.reference_callable(self.parameter_size(inputs[0].shape), case.hyper, dtype, params)
        with kept_float64(dtype):
            outputs = callable_(*inputs, *([] if self.owns_params else params), **self.forward_hypers(case.hyper))
        outputs = _tensors(outputs)
        return self._finish(outputs, inputs, params, case.seed, backward)

    @property
    def owns_params(self) -> bool:
        return self.profile.reference.kind == "module" and bool(self.profile.parameters)

    def parameter_size(self, shape) -> int:
        """The size a module reference's per-channel parameters take for a first input of ``shape``: its channels
        (dim 1) where the kernel's rows are groups of them, else its row length."""
        return shape[1] if self.profile.math.groups else shape[-1]

    def reference_callable(self, n_cols: int, hyper: dict, dtype: torch.dtype, params: list[torch.Tensor]):
        """A callable of the tensor inputs (and, for function references, the parameters) computing the reference;
        a module's ``forward`` takes the hyper-parameters it has as arguments (``forward_hypers``).

        A module reference is built as the generated tests build it (``reference_hypers``: constructor arguments,
        then the values it holds set on it); one that owns the learnable parameters gets ``params`` installed as its
        own, so their gradients land on the caller's leaves."""
        profile = self.profile
        if profile.reference.kind != "module":
            return lambda *tensors: self.reference(*tensors, **hyper)
        places = reference_hypers(profile)
        arguments = {name: hyper[name] for name in places.constructor}
        if _takes_argument(self.reference, profile.module.size_param):
            arguments[profile.module.size_param] = n_cols
        module = self.reference(**arguments).to(device=self.device, dtype=dtype if params else None)
        for name in places.held:
            held = getattr(module, name)
            value = torch.full_like(held, hyper[name]) if torch.is_tensor(held) else hyper[name]
            setattr(module, name, value)
        _install_parameters(module, profile.parameters, params)
        held_inputs = {index: spec.attribute for index, spec in enumerate(profile.inputs) if spec.attribute}
        return _holding_inputs(module, held_inputs) if held_inputs else module

    def forward_hypers(self, hyper: dict) -> dict:
        if self.profile.reference.kind != "module":
            return {}
        return {name: hyper[name] for name in reference_hypers(self.profile).forward}

    @staticmethod
    def leaf(value: torch.Tensor, requires_grad: bool) -> torch.Tensor:
        leaf = value.detach().clone()
        if requires_grad and leaf.is_floating_point():
            leaf.requires_grad_(True)
        return leaf

    def _finish(self, outputs, inputs, params, seed, backward) -> RunResult:
        result = RunResult([o.detach().clone() for o in outputs])
        if not backward:
            return result
        # A loss's other outputs are values it reports (as upstream's z_loss): the gradients compared are the first
        # output's alone (a one-kernel loss's Function derives no other; test_reported_outputs.py).
        reported = outputs[:1] if self.profile.tier == 3 else outputs
        differentiable = [o for o in reported if o.requires_grad]
        if differentiable:
            torch.autograd.backward(differentiable, self.grad_outputs(differentiable, seed))
        names = [t.name for t in self.profile.inputs]
        for name, leaf, spec in zip(names, inputs, self.profile.inputs):
            if spec.requires_grad and leaf.is_floating_point():
                result.grads[name] = _grad_or_zeros(leaf)
        for param, leaf in zip(self.profile.parameters, params):
            result.grads[param.name] = _grad_or_zeros(leaf)
        return result


class KernelUnderTest(ReferenceRunner):
    """A kernel of the checkout at ``repo`` beside its reference: its record's Function, or the callable of a target
    spec (see the module docstring for the two calling conventions)."""

    def __init__(self, repo: Path, name: str, device: str, spec: dict | None = None):
        self.repo = repo
        if spec is None:
            profile = read_record(repo, name)
            self.call = None
            self.function = import_function_class(repo, profile)
        else:
            profile = load_yaml(spec["profile"], source=f"<profile for {name}>", validate=False)
            self.call = spec["call"]
            self.function = import_from_checkout(repo, self.call["module"], self.call["callable"])
        super().__init__(profile, device)

    def call_kernel(self, inputs: list[torch.Tensor], params: list[torch.Tensor], hyper: dict):
        """The kernel's outputs for these arguments (see the module docstring for the two calling conventions)."""
        if self.call is None:
            return self.function.apply(*inputs, *params, *[hyper[hp.name] for hp in self.profile.hyperparameters])
        names = [t.name for t in self.profile.inputs] + [p.name for p in self.profile.parameters]
        kwargs = {self.call["tensors"][name]: value for name, value in zip(names, [*inputs, *params])}
        kwargs.update({self.call["hypers"][name]: value for name, value in hyper.items()})
        if self.call["by_name"]:
            return self.function(**kwargs)
        # Function.apply takes positions only: the forward's defaults fill the gaps up to the last argument given.
        order = [name for name, _ in self.call["params"]]
        last = max(order.index(name) for name in kwargs)
        defaults = dict(self.call["params"])
        args = [kwargs[name] if name in kwargs else ast.literal_eval(defaults[name]) for name in order[: last + 1]]
        return self.function(*args)

    def run_kernel(self, case: Case, *, backward: bool = True) -> RunResult:
        inputs = [self.leaf(x, spec.requires_grad) for x, spec in zip(case.inputs, self.profile.inputs)]
        params = [self.leaf(p, True) for p in case.params]
        outputs = _tensors(self.call_kernel(inputs, params, case.hyper))
        return self._finish(outputs, inputs, params, case.seed, backward)


def _grad_or_zeros(leaf: torch.Tensor) -> torch.Tensor:
    # A missing gradient is a wrong gradient (zeros), not a crash: the comparison names it.
    return leaf.grad.detach().clone() if leaf.grad is not None else torch.zeros_like(leaf).detach()


def _tensors(result) -> list[torch.Tensor]:
    values = result if isinstance(result, (tuple, list)) else (result,)
    return [v for v in values if isinstance(v, torch.Tensor)]
