"""While kernelgen runs a reference (its import, its tracing): what the reference prints goes to stderr, so that a
profile written to stdout stays YAML; and a reference that ends the process (``sys.exit``, ``exit()``, ``os._exit``)
becomes an ``AnalyzeError`` instead of a silent exit status 0 with nothing generated.
"""

from __future__ import annotations

import contextlib
import os
import posix
import sys

from tools.kernelgen.analyze.errors import AnalyzeError


class _ReferenceExited(SystemExit):
    """``os._exit`` called by the reference: raised instead, so that kernelgen can say so."""


def _refuse_hard_exit(status=0):
    raise _ReferenceExited(status)


@contextlib.contextmanager
def _stdout_to_stderr():
    """Python's ``print`` and anything writing file descriptor 1 go to stderr inside."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no descriptor 1 or 2: nothing to redirect at the system level
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


@contextlib.contextmanager
def contained_reference(ref: str):
    """Run the analysis of reference ``ref`` inside (see the module docstring)."""
    hard_exits = {module: module._exit for module in (os, posix)}
    for module in hard_exits:
        module._exit = _refuse_hard_exit
    try:
        with _stdout_to_stderr():
            yield
    except SystemExit as stop:
        how = "os._exit" if isinstance(stop, _ReferenceExited) else "sys.exit"
        raise AnalyzeError(
            f"the reference ends the process ({how}({stop.code!r})) when kernelgen loads or runs it; a reference "
            f"defines a computation and returns its result",
            origin=ref,
        ) from None
    finally:
        for module, original in hard_exits.items():
            module._exit = original
