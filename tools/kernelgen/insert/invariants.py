"""Checks every edit must pass: it parses, keeps every original line in order, keeps the newline style,
adds nothing when run again, and keeps an isort-clean file isort-clean."""

from collections.abc import Callable
from difflib import SequenceMatcher

from tools.kernelgen.insert.errors import InsertError
from tools.kernelgen.insert.errors import parse_source
from tools.kernelgen.insert.ordering import import_order_problems


def _is_char_subsequence(short: str, long: str) -> bool:
    remaining = iter(long)
    return all(char in remaining for char in short)


def _grew_from(line: str, candidate: str) -> bool:
    """``candidate`` is ``line`` with only insertions (a one-line ``__all__`` that gained an entry)."""
    return line == candidate or (bool(line.strip()) and _is_char_subsequence(line, candidate))


def is_line_subsequence(original: str, result: str) -> bool:
    """Every line of ``original`` is still in ``result``, in the same order (line endings aside).

    A line may have grown by insertions only — adding to a one-line ``__all__`` cannot leave that line as it was —
    but no line may be dropped, moved, or lose a character.
    """
    old = [line.rstrip("\r\n") for line in original.splitlines()]
    new = [line.rstrip("\r\n") for line in result.splitlines()]
    for tag, old_start, old_end, new_start, new_end in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "delete":
            return False
        if tag == "replace":
            candidates = iter(new[new_start:new_end])
            if not all(any(_grew_from(line, candidate) for candidate in candidates) for line in old[old_start:old_end]):
                return False
    return True


def keeps_newline_style(original: str, result: str) -> bool:
    """A CRLF-only file stays CRLF-only and an LF-only file stays LF-only."""
    crlf = original.count("\r\n")
    if crlf and crlf == original.count("\n"):
        return result.count("\r\n") == result.count("\n")
    if not crlf:
        return "\r\n" not in result
    return True


def check_invariants(path: str, original: str, result: str, rerun: Callable[[str], str]) -> None:
    """Raise :class:`InsertError` naming ``path`` when ``result`` breaks one of the invariants."""
    parse_source(result, path)
    if not is_line_subsequence(original, result):
        raise InsertError(path, "the edit dropped or reordered existing lines")
    if not keeps_newline_style(original, result):
        raise InsertError(path, "the edit changed the file's line endings")
    if rerun(result) != result:
        raise InsertError(path, "the edit is not idempotent: a second run changed the file again")
    if not import_order_problems(original):
        problems = import_order_problems(result)
        if problems:
            raise InsertError(path, f"the edit left imports unsorted: {problems[0]}")
