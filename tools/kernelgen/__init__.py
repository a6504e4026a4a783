"""kernelgen: generate Liger-Kernel Triton kernels (ops, module, functional, tests, benchmark) from a reference."""

__version__ = "0.1.0"
