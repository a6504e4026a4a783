"""Text helpers of rendering: the reference split into imports and body, docstrings wrapped to 120 columns."""

from __future__ import annotations

import ast
import textwrap

from dataclasses import dataclass

from tools.kernelgen.reference_text import needed_statements

TRIPLE_DOUBLE = '"' * 3
TRIPLE_SINGLE = "'" * 3


def split_reference(source: str, entry: str) -> tuple[list[str], str]:
    """The reference's import lines (hoisted to the test's header) and the top-level definitions ``entry`` needs
    (``reference_text.needed_statements``): no other statement of the file reaches generated code."""
    if not source.strip():
        return [], ""
    tree = ast.parse(source)
    lines = source.splitlines()
    import_nodes, definitions = needed_statements(tree, entry)
    imports = [line for node in import_nodes for line in single_line_imports(node)]
    segments = []
    for node in definitions:
        start = node.lineno - 1
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.decorator_list:
            start = node.decorator_list[0].lineno - 1
        segments.append("\n".join(lines[start : node.end_lineno]))
    return imports, "\n\n\n".join(segments)


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
    if lines[-1].endswith('"'):
        lines[-1] = lines[-1][:-1] + '\\"'  # a quote at the end would close the docstring early
    if len(lines) == 1:
        return lines[0]
    pad = " " * indent
    return "\n".join([lines[0]] + [pad + line if line else "" for line in lines[1:]]) + "\n" + pad


# The width of the generated files' section banners (Liger's line length).
BANNER_WIDTH = 120


def banner(title: str) -> str:
    """A section banner comment, ``# --- title ---...``, padded with dashes to ``BANNER_WIDTH``."""
    return f"# --- {title} ".ljust(BANNER_WIDTH, "-")


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
