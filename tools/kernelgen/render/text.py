"""Text helpers of rendering: the reference split into imports and body, docstrings wrapped to 120 columns."""

from __future__ import annotations

import ast
import textwrap

from dataclasses import dataclass

TRIPLE_DOUBLE = '"' * 3
TRIPLE_SINGLE = "'" * 3


def split_reference(source: str) -> tuple[list[str], str]:
    """The reference's import lines (hoisted to the test's header) and the rest of its code.

    The ``KERNELGEN`` hints of built-in references are dropped: they steer analysis, not the reference.
    """
    if not source.strip():
        return [], ""
    tree = ast.parse(source)
    lines = source.splitlines()
    imports: list[str] = []
    body_ranges: list[tuple[int, int]] = []
    for node in tree.body:
        start = node.lineno - 1
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.decorator_list:
            start = node.decorator_list[0].lineno - 1
        segment = (start, node.end_lineno)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            imports.extend(single_line_imports(node))
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("KERNELGEN", "__all__") for t in node.targets
        ):
            continue
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node is tree.body[0]:
            continue  # module docstring
        else:
            body_ranges.append(segment)
    body = "\n\n\n".join("\n".join(lines[a:b]) for a, b in body_ranges)
    return imports, body


def single_line_imports(node: ast.Import | ast.ImportFrom) -> list[str]:
    """``from a import b, c`` -> [``from a import b``, ``from a import c``]: one import per line, as isort keeps them."""
    out = []
    for alias in node.names:
        suffix = f" as {alias.asname}" if alias.asname else ""
        if isinstance(node, ast.Import):
            out.append(f"import {alias.name}{suffix}")
        else:
            out.append(f"from {'.' * node.level}{node.module or ''} import {alias.name}{suffix}")
    return out


def wrap_docstring(text: str, indent: int = 4) -> str:
    """A docstring body wrapped to fit 120 columns at ``indent``, with quotes and backslashes made harmless."""
    text = text.replace(TRIPLE_DOUBLE, TRIPLE_SINGLE).replace("\\", "\\\\")
    lines: list[str] = []
    for index, paragraph in enumerate(text.split("\n\n")):
        if index:
            lines.append("")
        lines.extend(textwrap.wrap(" ".join(paragraph.split()), width=110 - indent) or [""])
    if len(lines) == 1:
        return lines[0]
    pad = " " * indent
    return "\n".join([lines[0]] + [pad + line if line else "" for line in lines[1:]]) + "\n" + pad


def fstring_chunks(fields: list[str]) -> str:
    """``f"a={self.a}, b={self.b}"`` split into implicitly concatenated f-strings of at most ~90 columns."""
    if not fields:
        return '""'
    chunks, current = [], ""
    for index, field_text in enumerate(fields):
        piece = field_text + (", " if index < len(fields) - 1 else "")
        if current and len(current) + len(piece) > 90:
            chunks.append(current)
            current = ""
        current += piece
    chunks.append(current)
    if len(chunks) == 1:
        return f'f"{chunks[0]}"'
    return "(" + " ".join(f'f"{chunk}"' for chunk in chunks) + ")"


@dataclass(frozen=True)
class Defaulted:
    """An argument with a default value, as ``signature`` prints hyper-parameters."""

    name: str
    default: object


def signature(items, required: frozenset[str] = frozenset()) -> str:
    """``a, b, eps=1e-06``: plain names for tensors and required sizes, ``name=default`` for hyper-parameters
    (a default of None stays None: an optional feature that is off)."""
    plain, defaulted = [], []
    for item in items:
        if isinstance(item, str):
            plain.append(item)
        elif item.name in required:
            plain.append(item.name)
        else:
            defaulted.append(f"{item.name}={item.default!r}")
    return ", ".join(plain + defaulted)
