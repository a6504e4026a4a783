import os
import sys


def _interpret_without_an_accelerator() -> None:
    """Without a GPU, Triton kernels run only under Triton's interpreter, and ``TRITON_INTERPRET`` is read when
    Triton is first imported, which analysing a reference may do through torch: set it before anything else, so
    that the smoke run of ``new`` runs the kernel instead of skipping it."""
    if "TRITON_INTERPRET" in os.environ:
        return
    import torch

    if not torch.cuda.is_available() and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        os.environ["TRITON_INTERPRET"] = "1"


if __name__ == "__main__":
    try:
        _interpret_without_an_accelerator()
        from tools.kernelgen.cli import main
    except KeyboardInterrupt:
        # Ctrl-C while torch and the CLI are still importing: before any command ran, so nothing was written.
        print("kernelgen: interrupted; nothing was written", file=sys.stderr)
        sys.stderr.flush()
        # Not sys.exit: a KeyboardInterrupt raised in code an extension runs through PyRun_* (torch's import does)
        # marks the interpreter, which then ends the process by SIGINT at exit (status -2) though it was handled.
        os._exit(130)
    sys.exit(main())
