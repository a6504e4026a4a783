"""Replays a kernel wrapper's Triton launches from C++ once the wrapper has run for its arguments' layout.

At small shapes a training step is bound by the host, not the GPU: an element-wise forward + backward at 4096 x 4096
bf16 needs about 70 us of H200 time, while the Python around its two launches (the wrapper's shape logic and
Triton's launcher) takes about as long again, and eager torch's whole step takes 130 us. ``@native_launches`` puts
a wrapper such as ``geglu_forward`` behind a small C++ extension (built once, on first use, with
``torch.utils.cpp_extension``):

- the first call for a layout of the arguments (each tensor's dtype, device, sizes, strides and 16-byte
  alignment, and which tensor arguments are one tensor; every other argument's value) runs the wrapper as written and records what it did, in order: the
  tensors it allocated, the kernels it launched (function, grid, warps, shared memory, arguments), the sums and dtype
  conversions it ran (generated backwards add their parameter gradients' per-program partials so) and the tensors
  it returned;
- when it did nothing else (a dispatch mode sees every torch op: besides those, views only; every launch is one of
  the wrapper module's kernels, with plain arguments), the record is kept in C++, keyed by that layout, and later
  calls with the layout allocate, launch (``cuLaunchKernel``), sum and return from C++;
- anything else keeps the wrapper on its Python path for that layout: a copy or a fill in the wrapper, a DTensor or
  other tensor subclass, a CPU tensor, keyword arguments, torch.compile tracing.

This is sound only for wrappers whose work is a function of that layout (the generated ones: their decisions read
shapes, strides, dtypes and hyper-parameters, never values). Off with ``LIGER_NATIVE_LAUNCH=0``; never on without
CUDA or under ``TRITON_INTERPRET=1``; a failed build warns once and leaves every wrapper on its Python path.
"""

import functools
import os
import struct
import threading
import warnings

import torch
import triton

from torch.utils._python_dispatch import TorchDispatchMode

# Codes the extension's replay returns instead of the wrapper's results.
_RECORD = 0  # an unseen layout: run the wrapper and record it
_PLAIN = 1  # run the wrapper as written (a layout that was refused, or arguments the extension does not take)

_ALLOCATIONS = {
    torch.ops.aten.empty.memory_format,
    torch.ops.aten.empty_strided.default,
    torch.ops.aten.empty_like.default,
    torch.ops.aten.new_empty.default,
    torch.ops.aten.new_empty_strided.default,
}

# A scalar kernel argument's bytes, as Triton's launcher passes it (little-endian, in an 8-byte slot).
_SCALAR_FORMATS = {
    "i1": "b",
    "i8": "b",
    "i16": "h",
    "i32": "i",
    "i64": "q",
    "u1": "B",
    "u8": "B",
    "u16": "H",
    "u32": "I",
    "u64": "Q",
    "fp32": "f",
    "f32": "f",
    "fp64": "d",
}

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <torch/csrc/autograd/python_variable.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda.h>
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace {

using LaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  CUstream, void**, void**);

// cuLaunchKernel from the driver Triton itself opens (no link-time dependency on libcuda).
LaunchKernel launch_kernel() {
  static LaunchKernel function = nullptr;
  if (function == nullptr) {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    TORCH_CHECK(driver != nullptr, "native_launch: cannot open libcuda.so.1");
    function = reinterpret_cast<LaunchKernel>(dlsym(driver, "cuLaunchKernel"));
    TORCH_CHECK(function != nullptr, "native_launch: libcuda.so.1 has no cuLaunchKernel");
  }
  return function;
}

// A kernel argument: a tensor's address plus a byte offset, or a scalar's bytes.
struct Arg {
  bool pointer;
  int slot;
  int64_t offset;
  uint64_t bits;
};

struct Launch {
  CUfunction function;
  unsigned grid[3];
  unsigned threads;
  unsigned shared;
  std::vector<Arg> args;
};

// A tensor a step reads or the wrapper returns: a slot as it is, or a view of it (element offset relative to the
// slot's own).
struct Ref {
  int slot;  // -1: None
  bool same;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset;
};

// What the wrapper did, in order: allocate a buffer, launch a kernel, or one of the torch ops a replay runs too (a
// sum, a dtype conversion: generated backwards add their parameter gradients' per-program partials with them).
// Allocations and op results become the next slots.
enum StepKind { kAllocate = 0, kLaunch = 1, kSum = 2, kConvert = 3 };

struct Step {
  StepKind kind;
  int64_t numel = 0;                   // kAllocate
  at::ScalarType dtype = at::kFloat;   // kAllocate, kConvert
  Launch launch;                       // kLaunch
  Ref input;                           // kSum, kConvert
  std::vector<int64_t> dims;           // kSum: empty sums every element
  bool keepdim = false;                // kSum
};

struct Plan {
  bool replay = false;
  std::vector<Step> steps;
  std::vector<Ref> outputs;
  bool single = false;
};

constexpr int kRecord = 0;
constexpr int kPlain = 1;
constexpr size_t kMaxPlans = 256;

std::vector<std::unordered_map<std::string, Plan>> tables;

template <typename T>
void put(std::string& key, T value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// The arguments' layout as a key; false when the wrapper must run as written (a tensor that is not a plain dense
// CUDA tensor on one device, or an argument of another type).
bool layout_key(const py::tuple& args, std::string& key, std::vector<at::Tensor>& slots, int& device) {
  device = -1;
  key.reserve(160);
  slots.assign(args.size(), at::Tensor());
  std::vector<const void*> addresses;  // of the tensor arguments so far: the same tensor passed twice is its own layout
  for (size_t i = 0; i < args.size(); ++i) {
    PyObject* object = args[i].ptr();
    if (THPVariable_Check(object)) {
      const at::Tensor& t = THPVariable_Unpack(object);
      if (!t.defined() || !t.is_cuda() || t.layout() != at::kStrided || t.is_neg() || t.is_conj()) return false;
      auto keys = t.key_set();
      if (keys.has(c10::DispatchKey::Python) || keys.has(c10::DispatchKey::FuncTorchBatched) ||
          keys.has(c10::DispatchKey::FuncTorchGradWrapper) || keys.has(c10::DispatchKey::Functionalize) ||
          t._is_zerotensor()) {
        return false;
      }
      int index = t.get_device();
      if (device != -1 && index != device) return false;
      device = index;
      put<char>(key, 'T');
      put<int8_t>(key, static_cast<int8_t>(t.scalar_type()));
      put<int8_t>(key, static_cast<int8_t>(index));
      put<int8_t>(key, static_cast<int8_t>(t.dim()));
      for (int64_t d = 0; d < t.dim(); ++d) {
        put<int64_t>(key, t.size(d));
        put<int64_t>(key, t.stride(d));
      }
      put<bool>(key, reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0);
      int8_t alias = -1;  // the first earlier tensor argument at the same address
      for (size_t j = 0; j < addresses.size() && alias < 0; ++j) {
        if (addresses[j] == t.data_ptr()) alias = static_cast<int8_t>(j);
      }
      put<int8_t>(key, alias);
      addresses.push_back(t.data_ptr());
      slots[i] = t;
    } else if (object == Py_None) {
      put<char>(key, 'N');
    } else if (PyBool_Check(object)) {
      put<char>(key, object == Py_True ? 'Y' : 'F');
    } else if (PyLong_Check(object)) {
      int overflow = 0;
      long long value = PyLong_AsLongLongAndOverflow(object, &overflow);
      if (overflow != 0) return false;
      put<char>(key, 'I');
      put<long long>(key, value);
    } else if (PyFloat_Check(object)) {
      put<char>(key, 'D');
      put<double>(key, PyFloat_AS_DOUBLE(object));
    } else if (PyUnicode_Check(object)) {
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(object, &size);
      if (text == nullptr) {
        PyErr_Clear();
        return false;
      }
      put<char>(key, 'S');
      put<Py_ssize_t>(key, size);
      key.append(text, size);
    } else {
      return false;
    }
  }
  return device != -1;
}

void launch(const Launch& l, const std::vector<at::Tensor>& slots, CUstream stream) {
  if (static_cast<uint64_t>(l.grid[0]) * l.grid[1] * l.grid[2] == 0) return;  // as Triton: an empty grid launches nothing
  const size_t n = l.args.size();
  TORCH_CHECK(n <= 64, "native_launch: more than 64 kernel arguments");
  uint64_t storage[66];
  void* params[66];
  for (size_t i = 0; i < n; ++i) {
    const Arg& a = l.args[i];
    storage[i] = a.pointer ? reinterpret_cast<uint64_t>(static_cast<char*>(slots[a.slot].data_ptr()) + a.offset) : a.bits;
    params[i] = &storage[i];
  }
  // Triton 3.x kernels take two more pointers (global and profile scratch); the plans hold kernels that use neither.
  storage[n] = 0;
  storage[n + 1] = 0;
  params[n] = &storage[n];
  params[n + 1] = &storage[n + 1];
  CUresult result = launch_kernel()(l.function, l.grid[0], l.grid[1], l.grid[2], l.threads, 1, 1, l.shared, stream,
                                    params, nullptr);
  TORCH_CHECK(result == CUDA_SUCCESS, "native_launch: cuLaunchKernel failed with CUDA error ", static_cast<int>(result));
}

py::object wrap(const at::Tensor& t) { return py::reinterpret_steal<py::object>(THPVariable_Wrap(t)); }

at::Tensor view(const Ref& r, const std::vector<at::Tensor>& slots) {
  const at::Tensor& base = slots[r.slot];
  return r.same ? base : base.as_strided(r.sizes, r.strides, base.storage_offset() + r.offset);
}

Ref read_ref(const py::handle& item) {
  if (item.is_none()) return {-1, false, {}, {}, 0};
  auto r = item.cast<py::tuple>();
  return {r[0].cast<int>(), r[1].cast<bool>(), r[2].cast<std::vector<int64_t>>(), r[3].cast<std::vector<int64_t>>(),
          r[4].cast<int64_t>()};
}

at::ScalarType dtype_of(const py::handle& example) { return THPVariable_Unpack(example.ptr()).scalar_type(); }

}  // namespace

int64_t new_table() {
  tables.emplace_back();
  return static_cast<int64_t>(tables.size()) - 1;
}

// The wrapper's results for a recorded layout, else kRecord (unseen layout) or kPlain (run the wrapper as written).
py::object replay(int64_t table, const py::tuple& args) {
  std::string key;
  std::vector<at::Tensor> slots;
  int device = -1;
  if (!layout_key(args, key, slots, device)) return py::int_(kPlain);
  auto& plans = tables.at(table);
  auto found = plans.find(key);
  if (found == plans.end()) return py::int_(plans.size() < kMaxPlans ? kRecord : kPlain);
  const Plan& plan = found->second;
  if (!plan.replay) return py::int_(kPlain);
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  CUstream stream = at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
  for (const Step& step : plan.steps) {
    switch (step.kind) {
      case kAllocate:
        slots.push_back(at::empty({step.numel}, at::TensorOptions().dtype(step.dtype).device(at::kCUDA, device)));
        break;
      case kLaunch:
        launch(step.launch, slots, stream);
        break;
      case kSum:
        slots.push_back(step.dims.empty() ? at::sum(view(step.input, slots))
                                          : at::sum(view(step.input, slots), step.dims, step.keepdim));
        break;
      case kConvert:
        slots.push_back(view(step.input, slots).to(step.dtype));
        break;
    }
  }
  py::tuple results(plan.outputs.size());
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const Ref& o = plan.outputs[i];
    results[i] = o.slot < 0 ? py::object(py::none()) : wrap(view(o, slots));
  }
  if (plan.single) return results[0];
  return std::move(results);
}

// Keeps what the wrapper did for the layout of ``args``: ``spec`` from native_launch.py, or None (run it as written).
void record(int64_t table, const py::tuple& args, const py::object& spec) {
  std::string key;
  std::vector<at::Tensor> slots;
  int device = -1;
  if (!layout_key(args, key, slots, device)) return;
  Plan plan;
  if (!spec.is_none()) {
    auto parts = spec.cast<py::tuple>();
    for (auto item : parts[0].cast<py::list>()) {
      auto s = item.cast<py::tuple>();
      Step step;
      step.kind = static_cast<StepKind>(s[0].cast<int>());
      if (step.kind == kAllocate) {
        step.numel = s[1].cast<int64_t>();
        step.dtype = dtype_of(s[2]);
      } else if (step.kind == kLaunch) {
        Launch& l = step.launch;
        l.function = reinterpret_cast<CUfunction>(s[1].cast<uint64_t>());
        for (int d = 0; d < 3; ++d) l.grid[d] = s[2 + d].cast<unsigned>();
        l.threads = s[5].cast<unsigned>();
        l.shared = s[6].cast<unsigned>();
        for (auto arg : s[7].cast<py::list>()) {
          auto a = arg.cast<py::tuple>();
          l.args.push_back({a[0].cast<bool>(), a[1].cast<int>(), a[2].cast<int64_t>(), a[3].cast<uint64_t>()});
        }
      } else if (step.kind == kSum) {
        step.input = read_ref(s[1]);
        step.dims = s[2].cast<std::vector<int64_t>>();
        step.keepdim = s[3].cast<bool>();
      } else if (step.kind == kConvert) {
        step.input = read_ref(s[1]);
        step.dtype = dtype_of(s[2]);
      } else {
        throw std::runtime_error("native_launch: unknown step");
      }
      plan.steps.push_back(std::move(step));
    }
    for (auto item : parts[1].cast<py::list>()) plan.outputs.push_back(read_ref(item));
    plan.single = parts[2].cast<bool>();
    plan.replay = true;
  }
  tables.at(table)[key] = std::move(plan);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("new_table", &new_table);
  m.def("replay", &replay);
  m.def("record", &record);
}
"""

_state = {"extension": None, "failed": False}
_KEPT_ALIVE = set()  # compiled kernels whose functions plans hold (their modules stay loaded)
_build_lock = threading.Lock()
_record_lock = threading.RLock()
_recording = threading.local()


def native_launch_enabled() -> bool:
    """Whether wrappers may replay their launches from C++: CUDA present, compiled kernels, not switched off."""
    if os.environ.get("LIGER_NATIVE_LAUNCH", "1") == "0" or os.environ.get("TRITON_INTERPRET", "0") == "1":
        return False
    return torch.cuda.is_available() and not _state["failed"]


def _extension():
    """The compiled extension, built on first use (torch's extension cache keeps it across processes); None when it
    cannot be built, after one warning."""
    if _state["extension"] is None and not _state["failed"]:
        with _build_lock:
            if _state["extension"] is None and not _state["failed"]:
                try:
                    from torch.utils.cpp_extension import load_inline

                    _state["extension"] = load_inline(
                        name="liger_native_launch",
                        cpp_sources=_CPP_SOURCE,
                        with_cuda=True,
                        extra_cflags=["-O2"],
                        verbose=False,
                    )
                except Exception as error:  # no compiler, no CUDA headers: the Python path stays
                    _state["failed"] = True
                    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
                    warnings.warn(
                        f"liger_kernel native launches are off (their C++ extension did not build: {first_line}); "
                        "kernels launch from Python",
                        stacklevel=3,
                    )
    return _state["extension"]


def native_launches(wrapper):
    """Replays ``wrapper``'s launches from C++ for argument layouts it has run with (see the module's docstring).
    ``wrapper`` takes positional arguments and returns a tensor or a tuple of tensors (or None)."""
    if not native_launch_enabled():
        return wrapper
    table = []

    @functools.wraps(wrapper)
    def call(*args, **kwargs):
        if kwargs or torch.compiler.is_compiling():  # traced by Dynamo: the wrapper as written, nothing built
            return wrapper(*args, **kwargs)
        extension = _state["extension"] or _extension()
        if extension is None:
            return wrapper(*args)
        if not table:
            table.append(extension.new_table())
        results = extension.replay(table[0], args)
        if type(results) is not int:
            return results
        if results == _PLAIN or getattr(_recording, "active", False):
            return wrapper(*args)
        return _record(extension, table[0], wrapper, args)

    call.plain = wrapper
    return call


class _Watch(TorchDispatchMode):
    """Every torch op the wrapper runs, in order with its launches (``steps``): the storages it allocated, the ops a
    replay runs too (sums, dtype conversions), and whether it ran anything else (a copy, a fill: work a replay would
    skip)."""

    def __init__(self, steps):
        super().__init__()
        self.steps = steps
        self.allocated = set()
        self.other_ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if func in _ALLOCATIONS:
            self.allocated.add(result.untyped_storage().data_ptr())
        elif _replayable(func, args, kwargs):
            self.steps.append(("op", func, args, kwargs, result))
        elif not func.is_view:
            self.other_ops.append(str(func))
        return result


def _replayable(func, args, kwargs) -> bool:
    """A torch op the extension replays: a sum over all elements or given dims (no dtype), a dtype conversion."""
    plain_sum = set(kwargs) <= {"dtype"} and kwargs.get("dtype") is None
    if func is torch.ops.aten.sum.default:
        return len(args) == 1 and plain_sum
    if func is torch.ops.aten.sum.dim_IntList:
        return 2 <= len(args) <= 3 and bool(args[1]) and plain_sum
    if func is torch.ops.aten._to_copy.default:
        return len(args) == 1 and set(kwargs) == {"dtype"}
    return False


class _RecordingKernel:
    """Stands in for one of the wrapper module's kernels while the wrapper is recorded: launches as the kernel does
    and, on the recording thread, keeps the compiled kernel, its grid and its arguments."""

    def __init__(self, kernel, steps):
        self.kernel = kernel
        self.steps = steps

    def __getitem__(self, grid):
        launcher = self.kernel[grid]
        if not getattr(_recording, "active", False):
            return launcher

        def launch(*args, **kwargs):
            compiled = launcher(*args, **kwargs)
            self.steps.append(("launch", self.kernel, compiled, grid, args, kwargs))
            return compiled

        return launch

    def __getattr__(self, name):
        return getattr(self.kernel, name)


def _launched_kernels(wrapper) -> dict:
    """The module-level Triton kernels ``wrapper`` names, itself or through the module's functions it calls (only
    these names are swapped while recording: the kernels' own jit helpers must stay what they compiled against)."""
    namespace, kernels, seen = wrapper.__globals__, {}, set()
    pending = [wrapper.__code__]
    while pending:
        code = pending.pop()
        for name in code.co_names:
            value = namespace.get(name)
            if isinstance(value, triton.runtime.jit.JITFunction):
                kernels[name] = value
            elif callable(value) and getattr(value, "__globals__", None) is namespace and name not in seen:
                seen.add(name)
                pending.append(value.__code__)
        pending.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    return kernels


def _record(extension, table, wrapper, args):
    """Runs ``wrapper(*args)`` as written, watching it; keeps its plan in the extension (or the refusal)."""
    steps, counted = [], []
    namespace = wrapper.__globals__
    with _record_lock:
        kernels = _launched_kernels(wrapper)
        thread = threading.get_ident()

        def count(*_):
            if threading.get_ident() == thread:
                counted.append(1)

        hooks = getattr(getattr(getattr(triton, "knobs", None), "runtime", None), "launch_enter_hook", None)
        if not hasattr(hooks, "add"):  # a Triton without hook chains: launches cannot be counted, so no plan
            extension.record(table, args, None)
            return wrapper(*args)
        for name, kernel in kernels.items():
            namespace[name] = _RecordingKernel(kernel, steps)
        hooks.add(count)
        _recording.active = True
        try:
            with _Watch(steps) as watch:
                results = wrapper(*args)
        finally:
            _recording.active = False
            hooks.remove(count)
            namespace.update(kernels)
    spec = None
    if not watch.other_ops and len(counted) == sum(step[0] == "launch" for step in steps):
        spec = _plan(args, results, steps, watch.allocated)
    extension.record(table, args, spec)
    return results


def _plan(args, results, steps, allocated):
    """The record of one wrapper call as the extension keeps it, or None where it cannot be replayed."""
    arguments = {i: x for i, x in enumerate(args) if isinstance(x, torch.Tensor)}
    plan_steps, storages = [], {}  # storages: data address -> (slot, dtype) of buffers allocated and op results
    next_slot = [len(args)]

    def new_slot(t):
        storages[t.untyped_storage().data_ptr()] = (next_slot[0], t.dtype)
        next_slot[0] += 1

    def locate(t):
        """(slot, byte offset from the slot's address) of tensor ``t``: an argument, a storage the wrapper allocated
        (allocated again by a step added here, before its first use) or an op's result; None otherwise."""
        storage = t.untyped_storage().data_ptr()
        # An argument of the same storage and dtype, the one at the same address first.
        same_storage = [
            i for i, x in arguments.items() if x.untyped_storage().data_ptr() == storage and x.dtype == t.dtype
        ]
        same_storage.sort(key=lambda i: arguments[i].data_ptr() != t.data_ptr())
        if same_storage:
            return same_storage[0], t.data_ptr() - arguments[same_storage[0]].data_ptr()
        if storage not in storages:
            if storage not in allocated:
                return None
            # The extension allocates the storage again, as a 1-D tensor of the dtype (a tensor stands for it).
            plan_steps.append((0, t.untyped_storage().nbytes() // t.element_size(), torch.empty(0, dtype=t.dtype)))
            new_slot(t)
        slot, dtype = storages[storage]
        return (slot, t.data_ptr() - storage) if dtype == t.dtype else None

    def ref(t):
        """How the extension finds tensor ``t``: (slot, is the argument itself, sizes, strides, element offset)."""
        where = locate(t)
        if where is None or where[1] % t.element_size():
            return None
        slot, offset = where
        same = slot < len(args) and t is args[slot]
        return slot, same, list(t.shape), list(t.stride()), offset // t.element_size()

    for step in steps:
        if step[0] == "op":
            _, func, op_args, op_kwargs, result = step
            source = ref(op_args[0])
            if source is None:
                return None
            if func is torch.ops.aten._to_copy.default:
                plan_steps.append((3, source, torch.empty(0, dtype=op_kwargs["dtype"])))
            else:
                dims = list(op_args[1]) if len(op_args) > 1 else []
                plan_steps.append((2, source, dims, bool(op_args[2]) if len(op_args) > 2 else False))
            new_slot(result)
            continue
        _, kernel, compiled, grid, call_args, call_kwargs = step
        metadata = compiled.metadata
        if (
            callable(grid)
            or getattr(metadata, "num_ctas", 1) != 1
            or getattr(metadata, "global_scratch_size", 0)
            or getattr(metadata, "profile_scratch_size", 0)
            or getattr(metadata, "launch_cooperative_grid", False)
            or getattr(metadata, "launch_pdl", False)
        ):
            return None
        names = kernel.arg_names
        bound = dict(zip(names, call_args))
        bound.update((name, value) for name, value in call_kwargs.items() if name in names)
        kernel_args = []
        for name in names:
            kind = compiled.src.signature[name]
            value = bound.get(name)
            if kind == "constexpr":
                continue
            if kind.startswith("*"):
                where = locate(value) if isinstance(value, torch.Tensor) else None
                if where is None:
                    return None
                kernel_args.append((True, where[0], where[1], 0))
            elif kind in _SCALAR_FORMATS and isinstance(value, (bool, int, float)):
                raw = struct.pack("<" + _SCALAR_FORMATS[kind], value).ljust(8, b"\0")
                kernel_args.append((False, 0, 0, int.from_bytes(raw, "little")))
            else:
                return None
        dims = tuple(grid) + (1,) * (3 - len(grid))
        _KEPT_ALIVE.add(compiled)
        plan_steps.append((1, compiled.function, *dims, 32 * metadata.num_warps, metadata.shared, kernel_args))

    single = isinstance(results, torch.Tensor)
    if not single and not isinstance(results, tuple):
        return None
    outputs = []
    for t in (results,) if single else results:
        if t is not None and not isinstance(t, torch.Tensor):
            return None
        outputs.append(None if t is None else ref(t))
        if outputs[-1] is None and t is not None:
            return None
    return plan_steps, outputs, single
