"""AST-aware edits (libcst) that register a generated kernel in an existing Liger checkout.

Each edit takes and returns source text, does one thing, and is idempotent: it first looks for what it would add.
Code changes by replacing CST nodes, so comments, blank lines, quote styles and CRLF endings survive.
"""

from tools.kernelgen.insert.errors import InsertError
from tools.kernelgen.insert.exports import add_to_all
from tools.kernelgen.insert.functions import add_function
from tools.kernelgen.insert.imports import add_import
from tools.kernelgen.insert.invariants import check_invariants
from tools.kernelgen.insert.invariants import is_line_subsequence
from tools.kernelgen.insert.lazy import add_lazy_symbol
from tools.kernelgen.insert.ordering import import_order_problems
from tools.kernelgen.insert.ordering import imports_are_sorted
from tools.kernelgen.insert.registration import Registration
from tools.kernelgen.insert.registration import register_kernel
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import OPS_INIT
from tools.kernelgen.layout import TRANSFORMERS_INIT

__all__ = [
    "FUNCTIONAL",
    "OPS_INIT",
    "TRANSFORMERS_INIT",
    "InsertError",
    "Registration",
    "add_function",
    "add_import",
    "add_lazy_symbol",
    "add_to_all",
    "check_invariants",
    "import_order_problems",
    "imports_are_sorted",
    "is_line_subsequence",
    "register_kernel",
]
