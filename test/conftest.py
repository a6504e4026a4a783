"""Fixtures of the whole suite."""

import os

import pytest

from test.forkserver import SERVER
from tools.kernelgen.pyrun import use_runner


@pytest.fixture(scope="session", autouse=True)
def _python_runs_fork_from_one_process():
    """Every Python run kernelgen or a test starts (tools.kernelgen.pyrun) forks from one process that imported torch
    and Triton once, instead of starting an interpreter and importing them again (test/forkserver.py);
    KERNELGEN_FORKSERVER=0 starts a new interpreter for each."""
    if os.environ.get("KERNELGEN_FORKSERVER") == "0":
        yield
        return
    with use_runner(SERVER.run):
        yield
    SERVER.close()
