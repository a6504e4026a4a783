"""The one error kernelgen's inserter raises, and parsing that turns libcst's errors into it."""

import functools

import libcst as cst

# Path used when an edit runs on a bare string; ``register_kernel`` re-raises with the real file path.
SOURCE_PLACEHOLDER = "<source>"


class InsertError(ValueError):
    """A file could not be edited: it does not parse, an anchor is missing, or an invariant broke."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        # Callers print these in one line next to other diagnostics, so newlines are folded away.
        self.message = " ".join(message.split())
        super().__init__(f"{path}: {self.message}")


@functools.lru_cache(maxsize=128)
def _parse_cached(source: str) -> cst.Module:
    return cst.parse_module(source)


def parse_source(source: str, path: str = SOURCE_PLACEHOLDER) -> cst.Module:
    """Parse ``source`` with libcst, raising :class:`InsertError` instead of a multi-line parser error.

    Parsing dominates the cost of an edit and chained edits (and the idempotence re-run) parse the same text
    again and again; libcst trees are immutable, so sharing a cached tree is safe.
    """
    try:
        return _parse_cached(source)
    except cst.ParserSyntaxError as error:
        raise InsertError(path, f"does not parse: {error.message}") from error


def replace_in_statement(tree: cst.Module, index: int, old: cst.CSTNode, new: cst.CSTNode) -> cst.Module:
    """``tree`` with ``old`` replaced by ``new`` inside top-level statement ``index``.

    Same result as ``tree.deep_replace(old, new)``, but only that statement is rebuilt: a whole-module transform
    costs tens of milliseconds, which adds up over the many small edits of a registration.
    """
    body = list(tree.body)
    body[index] = new if body[index] is old else body[index].deep_replace(old, new)
    return tree.with_changes(body=body)
