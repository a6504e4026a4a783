"""The sympy symbols of a kernel's inputs, parameters and hyperparameters (shared with the analyzer)."""

import keyword

import sympy

# Names a statement printed into a hand-written kernel must not shadow: the Triton module alias and Python's
# literals. Generated ops files need no such check: they are rendered with kernel-side names for the user's names
# that clash with their own (render/hygiene.py).
RESERVED_NAMES = frozenset({"tl", "triton", "True", "False", "None"})


def make_symbols(names, reserved=frozenset()) -> dict[str, sympy.Symbol]:
    """``{name: Symbol(name, real=True)}``; every name must be a distinct Python identifier, none of ``reserved``.

    The analyzer and synthesis both build symbols here, so equal names give identical (equal) symbols.
    """
    symbols: dict[str, sympy.Symbol] = {}
    for name in names:
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"{name!r} is not a valid Python identifier for a kernel variable")
        if name in reserved:
            raise ValueError(f"{name!r} is reserved in generated kernels; rename the variable")
        if name in symbols:
            raise ValueError(f"variable {name!r} is declared twice")
        symbols[name] = sympy.Symbol(name, real=True)
    return symbols


__all__ = ["RESERVED_NAMES", "make_symbols"]
