"""Root conftest: runs before any test module, so Triton is configured before anything imports it."""

import os

# A pytest-xdist worker gets its share of the cores for torch's intra-op threads (read when torch starts, here and in
# the processes the tests start): more threads than cores only contend, and idle OpenMP threads spin on CPU time the
# other workers need.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, cores // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

import torch  # noqa: E402

# Without an accelerator Triton kernels run on the CPU under Triton's interpreter; the variable is read when
# triton is first imported, so it must be set here, before any test module imports liger_kernel.
if not torch.cuda.is_available() and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_finish(session):
    """Everything the collection imported (torch, transformers, sympy, the test modules) lives as long as the session:
    out of the collector's way, so that each full collection during the run and the several at its end (pytest's,
    for unraisable exceptions) pass over the objects the tests make, not over all of torch's again."""
    import gc

    gc.collect()
    gc.freeze()
