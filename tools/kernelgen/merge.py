"""Line-based three-way merge (diff3), pure Python: what ``--modify`` uses to keep hand edits in generated files.

``base`` is what kernelgen generated last time, ``ours`` the file as it is now (with hand edits), ``theirs``
what kernelgen generates now. Lines that both sides keep from the base anchor the merge; between anchors a
side that left the base alone takes the other side's change, equal changes merge, and different changes
become a conflict written with git's markers. Same results as ``git merge-file``, except that lines one side
only added next to the other side's change merge (see ``_adjacent_merge``).
"""

from __future__ import annotations

import difflib

from dataclasses import dataclass
from dataclasses import field

OURS_LABEL = "current"
THEIRS_LABEL = "kernelgen"


@dataclass(frozen=True)
class Conflict:
    """One overlapping change: the lines of each side, and where the conflict starts in the merged text."""

    line: int  # 1-based line of the ``<<<<<<<`` marker in the merged text
    base: tuple[str, ...]
    ours: tuple[str, ...]
    theirs: tuple[str, ...]


@dataclass
class MergeResult:
    text: str
    conflicts: list[Conflict] = field(default_factory=list)
    resolved: list[Conflict] = field(default_factory=list)  # conflicts settled by ``prefer`` (line: in the text)
    reconciled: int = 0  # overlapping changes where the hand edit already holds the new text

    @property
    def clean(self) -> bool:
        return not self.conflicts


SIDES = ("ours", "theirs")


def _contains(ours: list[str], theirs: list[str]) -> bool:
    """Whether the hand edit ``ours`` already holds the new generated lines ``theirs``: each non-blank line of
    ``theirs``, stripped, is found inside a line of ``ours``, in order (a person who reconciled a conflict by
    writing the new text into their edit)."""
    wanted = [line.strip() for line in theirs if line.strip()]
    if not wanted:
        return False
    position = 0
    for line in ours:
        if position < len(wanted) and wanted[position] in line:
            position += 1
    return position == len(wanted)


def _matches(base: list[str], other: list[str]) -> list[tuple[int, int, int]]:
    # autojunk=False: generated code repeats lines (blank lines, closing brackets) far more than the 1% that
    # the heuristic tolerates, and treating them as junk would misalign long files.
    matcher = difflib.SequenceMatcher(None, base, other, autojunk=False)
    return [(block.a, block.b, block.size) for block in matcher.get_matching_blocks() if block.size]


def _stable_regions(base: list[str], ours: list[str], theirs: list[str]) -> list[tuple[int, int, int, int]]:
    """``(base_start, length, ours_start, theirs_start)`` of runs of base lines that both sides kept, in order.

    A sentinel of length 0 at the ends of all three closes the last unstable region.
    """
    ours_matches, theirs_matches = _matches(base, ours), _matches(base, theirs)
    regions = []
    i = j = 0
    while i < len(ours_matches) and j < len(theirs_matches):
        o_base, o_start, o_size = ours_matches[i]
        t_base, t_start, t_size = theirs_matches[j]
        start = max(o_base, t_base)
        end = min(o_base + o_size, t_base + t_size)
        if start < end:
            regions.append((start, end - start, o_start + start - o_base, t_start + start - t_base))
        # Advance whichever block ends first in the base; the other may still overlap the next one.
        if o_base + o_size < t_base + t_size:
            i += 1
        else:
            j += 1
    regions.append((len(base), 0, len(ours), len(theirs)))
    return regions


def _terminated(lines: list[str]) -> list[str]:
    """Lines with a final newline, so a conflict marker after them starts on a line of its own."""
    if lines and not lines[-1].endswith(("\n", "\r")):
        return [*lines[:-1], lines[-1] + "\n"]
    return lines


def _trim_common(ours: list[str], theirs: list[str]) -> tuple[int, int]:
    """Lengths of the common prefix and suffix of the two sides (they merge; only the middle conflicts)."""
    prefix = 0
    while prefix < min(len(ours), len(theirs)) and ours[prefix] == theirs[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(ours), len(theirs)) - prefix
        and ours[len(ours) - 1 - suffix] == theirs[len(theirs) - 1 - suffix]
    ):
        suffix += 1
    return prefix, suffix


def _surrounds(lines: list[str], base: list[str]) -> bool:
    """Whether ``lines`` starts or ends with all of ``base`` (only added lines before or after it)."""
    return len(lines) >= len(base) and (lines[: len(base)] == base or lines[len(lines) - len(base) :] == base)


def _adjacent_merge(base: list[str], ours: list[str], theirs: list[str]) -> list[str] | None:
    """The merge of a change on one side with lines the other side only added right before or after it.

    ``git merge-file`` calls this a conflict (the edits touch); here a helper appended after a function whose
    last lines the new render changes merges cleanly, since the base lines themselves changed on one side only.
    """
    if not base:
        return None  # two insertions at the same place: their order is a real question
    for keeper, changer in ((ours, theirs), (theirs, ours)):
        if len(keeper) <= len(base) or _surrounds(changer, base):
            continue  # the keeper did not only add lines, or both sides only added: a real conflict
        if keeper[: len(base)] == base:
            return changer + keeper[len(base) :]
        if keeper[len(keeper) - len(base) :] == base:
            return keeper[: len(keeper) - len(base)] + changer
    return None


def merge3(
    base: str,
    ours: str,
    theirs: str,
    *,
    ours_label: str = OURS_LABEL,
    theirs_label: str = THEIRS_LABEL,
    prefer: str | None = None,
) -> MergeResult:
    """Merge ``ours`` and ``theirs``, two descendants of ``base``; conflicts get ``<<<<<<<``/``=======``/``>>>>>>>``.

    A hand edit that already contains the new lines is taken as it is (``reconciled``). ``prefer`` ("ours" or
    "theirs") settles each remaining conflict with that side, as ``git merge-file --ours/--theirs`` does."""
    base_lines = base.splitlines(keepends=True)
    ours_lines = ours.splitlines(keepends=True)
    theirs_lines = theirs.splitlines(keepends=True)
    out: list[str] = []
    conflicts: list[Conflict] = []
    resolved: list[Conflict] = []
    reconciled = 0
    b = o = t = 0
    for base_start, size, ours_start, theirs_start in _stable_regions(base_lines, ours_lines, theirs_lines):
        base_chunk = base_lines[b:base_start]
        ours_chunk = ours_lines[o:ours_start]
        theirs_chunk = theirs_lines[t:theirs_start]
        adjacent = _adjacent_merge(base_chunk, ours_chunk, theirs_chunk)
        if ours_chunk == base_chunk:
            out.extend(theirs_chunk)
        elif theirs_chunk == base_chunk or ours_chunk == theirs_chunk:
            out.extend(ours_chunk)
        elif adjacent is not None:
            out.extend(adjacent)
        elif _contains(ours_chunk, theirs_chunk):
            out.extend(ours_chunk)
            reconciled += 1
        elif prefer in SIDES:
            prefix, suffix = _trim_common(ours_chunk, theirs_chunk)
            ours_middle = ours_chunk[prefix : len(ours_chunk) - suffix]
            theirs_middle = theirs_chunk[prefix : len(theirs_chunk) - suffix]
            out.extend(ours_chunk[:prefix])
            resolved.append(Conflict(len(out) + 1, tuple(base_chunk), tuple(ours_middle), tuple(theirs_middle)))
            out.extend(ours_middle if prefer == "ours" else theirs_middle)
            out.extend(ours_chunk[len(ours_chunk) - suffix :])
        else:
            prefix, suffix = _trim_common(ours_chunk, theirs_chunk)
            out.extend(ours_chunk[:prefix])
            ours_middle = ours_chunk[prefix : len(ours_chunk) - suffix]
            theirs_middle = theirs_chunk[prefix : len(theirs_chunk) - suffix]
            out[:] = _terminated(out)
            conflicts.append(Conflict(len(out) + 1, tuple(base_chunk), tuple(ours_middle), tuple(theirs_middle)))
            out.append(f"<<<<<<< {ours_label}\n")
            out.extend(_terminated(ours_middle))
            out.append("=======\n")
            out.extend(_terminated(theirs_middle))
            out.append(f">>>>>>> {theirs_label}\n")
            out.extend(ours_chunk[len(ours_chunk) - suffix :])
        out.extend(ours_lines[ours_start : ours_start + size])
        b, o, t = base_start + size, ours_start + size, theirs_start + size
    return MergeResult("".join(out), conflicts, resolved, reconciled)
