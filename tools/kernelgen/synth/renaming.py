"""Slow steps of a derivation reused for the same program over other names.

The ops file's name check (``render/hygiene.py``) renders a kernel again with every user name replaced by a probe:
its row or loss program is the one just derived with its names renamed, and sympy would take as long again to
simplify it. Inside ``renamed_names(mapping)`` a memoized step (``RenamingMemo``) whose arguments, renamed back, are
those of a step taken before returns that step's result renamed by ``mapping``: the same math over the new names
(``grad_{name}`` follows its name, as the profile's renaming has it). Arguments that are no exact renaming (a name of
the renamed program that is also one of the originals) are derived anew, and so is everything outside the context.
"""

from __future__ import annotations

import contextlib
import contextvars

from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import sympy

from tools.kernelgen.synth.naming import renamed_name

T = TypeVar("T")

# {original name: name in the program derived now} while ``renamed_names`` lasts.
_RENAMING: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("renaming", default=None)


@contextlib.contextmanager
def renamed_names(mapping: dict[str, str]):
    """Inside: the programs derived are (or may be) programs derived before with their names renamed by
    ``mapping``."""
    token = _RENAMING.set(dict(mapping))
    try:
        yield
    finally:
        _RENAMING.reset(token)


class RenamingMemo:
    """The results of one pure step by its arguments (the ``kept`` latest), reused over renamed names inside
    ``renamed_names``. Arguments and results are sympy expressions, names, and tuples, lists, sets and dicts of
    them."""

    def __init__(self, kept: int):
        self._kept = kept
        self._results: OrderedDict = OrderedDict()

    def __call__(self, arguments: tuple, compute: Callable[[], T]) -> T:
        mapping = _RENAMING.get()
        if mapping:
            inverse = {new: old for old, new in mapping.items()}
            original = _renamed(arguments, inverse)
            # A name of these arguments that renaming back would merge with another cannot be renamed forward again.
            if original in self._results and _renamed(original, mapping) == arguments:
                return _renamed(self._results[original], mapping)
        if arguments in self._results:
            self._results.move_to_end(arguments)
            return self._results[arguments]
        result = compute()
        self._results[arguments] = result
        if len(self._results) > self._kept:
            self._results.popitem(last=False)
        return result


def _renamed(value, mapping: dict[str, str]):
    """``value`` with every name in it renamed by ``mapping``: sympy symbols, strings, and the items of tuples,
    lists, sets and dicts."""
    if isinstance(value, sympy.Basic):
        symbols = {
            symbol: sympy.Symbol(renamed_name(symbol.name, mapping), **symbol.assumptions0)
            for symbol in value.atoms(sympy.Symbol)
            if not isinstance(symbol, sympy.Dummy) and renamed_name(symbol.name, mapping) != symbol.name
        }
        return value.xreplace(symbols) if symbols else value
    if isinstance(value, str):
        return renamed_name(value, mapping)
    if isinstance(value, (tuple, list, frozenset, set)):
        return type(value)(_renamed(item, mapping) for item in value)
    if isinstance(value, dict):
        return {_renamed(key, mapping): _renamed(item, mapping) for key, item in value.items()}
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise TypeError(f"cannot rename the names of a {type(value).__name__}")


__all__ = ["RenamingMemo", "renamed_names"]
