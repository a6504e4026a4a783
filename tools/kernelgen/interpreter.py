"""Run kernels written for compiled Triton under the Triton interpreter.

Compiled Triton passes a Python float argument to a kernel as an fp32 scalar (kernels call ``eps.to(...)`` on it)
and takes a scalar's integer value wherever Python wants an index (``range(0, n_cols, BLOCK_SIZE)``). The
interpreter passes floats through as Python floats, reads a scalar as a one-element array, which current NumPy
refuses to turn into an int, and cannot call libdevice functions (``rsqrt``, ``tanh`` imported from
``triton.language.extra``): ``triton.language.math`` has interpreted twins of most, ``tanh`` is written here. Autotuners time their configurations on a GPU. ``compiled_scalars``
makes the interpreter do what the compiler does (and autotuners take their first configuration), for the time of a
``with`` block, so that a target's hand-written kernels (upstream's among them) run on the CPU.

Run as a script from a checkout's root, it is pytest there with those kernels interpreted so:
``python3 PATH/TO/interpreter.py test/transformers/test_geglu.py -q``.
"""

from __future__ import annotations

import contextlib
import os
import sys

from collections.abc import Iterator
from pathlib import Path

# This file, which ``verify`` and ``validate`` run as a script (pytest under the shim).
SCRIPT = Path(__file__).resolve()


def _tanh(x):
    """libdevice's tanh in the interpreter's terms (called inside an interpreted kernel, where ``tl`` computes)."""
    import triton.language as tl

    return 2.0 * tl.sigmoid(2.0 * x) - 1.0


@contextlib.contextmanager
def compiled_scalars() -> Iterator[None]:
    import numpy as np
    import triton.language as tl

    from triton.runtime import autotuner
    from triton.runtime import interpreter

    convert, patch_tensor, patch_lang = (
        interpreter._implicit_cvt,
        interpreter._patch_lang_tensor,
        interpreter._patch_lang,
    )

    def as_compiled(arg):
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return convert(arg)

    def patch_with_index(tensor, scope):
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    twins = {"tanh": _tanh}

    def twin(value):
        name = getattr(value, "__name__", "")
        return getattr(tl.math, name, None) or twins.get(name)

    def patch_with_math(fn):
        scope = patch_lang(fn)
        replaced = {
            name: value
            for name, value in fn.__globals__.items()
            if (getattr(value, "__module__", "") or "").startswith("triton.language.extra") and twin(value)
        }
        fn.__globals__.update({name: twin(value) for name, value in replaced.items()})
        restore = scope.restore

        def restore_all():
            fn.__globals__.update(replaced)
            restore()

        scope.restore = restore_all
        return scope

    originals = (convert, patch_tensor, patch_lang)
    interpreter._implicit_cvt, interpreter._patch_lang_tensor, interpreter._patch_lang = (
        as_compiled,
        patch_with_index,
        patch_with_math,
    )
    bench = autotuner.Autotuner._bench
    # Autotuned kernels (upstream's dyt) time their configurations on a GPU; interpreted, every one ties and the
    # first runs: the configurations differ in speed, not in what they compute.
    autotuner.Autotuner._bench = lambda self, *args, config, **meta: [0.0, 0.0, 0.0]
    try:
        yield
    finally:
        interpreter._implicit_cvt, interpreter._patch_lang_tensor, interpreter._patch_lang = originals
        autotuner.Autotuner._bench = bench


def main(argv: list[str]) -> int:
    """pytest with ``argv`` in the current directory's checkout (its ``src`` and root first on ``sys.path``, in
    place of this script's folder), Triton interpreted, kernels run as compiled."""
    os.environ["TRITON_INTERPRET"] = "1"
    root = Path.cwd()
    sys.path[0:1] = [str(root / "src"), str(root)]
    import pytest

    with compiled_scalars():
        return pytest.main(argv)


__all__ = ["compiled_scalars", "main"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
