"""Symbolic synthesis of element-wise (tier 1) kernels: op table, sympy derivation, Triton printing.

``apply_op``/``parse_formula`` build sympy expressions from the canonical op names of ``rules.py``;
``synthesize_elementwise`` derives every gradient with sympy and prints forward/backward statements (Triton, or
TileLang with ``TileLangPrinter``).
"""

from tools.kernelgen.synth.derive import ElementwiseMath
from tools.kernelgen.synth.derive import synthesize_elementwise
from tools.kernelgen.synth.formula import parse_formula
from tools.kernelgen.synth.printer import TritonPrinter
from tools.kernelgen.synth.printer import format_formula
from tools.kernelgen.synth.printer import print_triton
from tools.kernelgen.synth.rules import OPS
from tools.kernelgen.synth.rules import SUPPORTED_OPS
from tools.kernelgen.synth.rules import UnsupportedOpError
from tools.kernelgen.synth.rules import apply_op
from tools.kernelgen.synth.rules import to_sympy_number
from tools.kernelgen.synth.symbols import make_symbols

__all__ = [
    "OPS",
    "SUPPORTED_OPS",
    "ElementwiseMath",
    "TritonPrinter",
    "UnsupportedOpError",
    "apply_op",
    "format_formula",
    "make_symbols",
    "parse_formula",
    "print_triton",
    "synthesize_elementwise",
    "to_sympy_number",
]
