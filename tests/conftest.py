import os

import numpy.fft  # noqa: F401
import pytest
import torch

# Imported before any test: pytester's in-process runs (runpytest) put sys.modules back as they found it, and a
# numpy extension first imported inside one cannot be imported again in that process ("cannot load module more
# than once per process"): scipy.stats, imported by a later test of the same xdist worker, then failed on numpy.fft.

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _pytest_runs_a_test_starts_leave_hypothesis_out(monkeypatch):
    """Hypothesis's pytest plugin imports hypothesis at every session's end (1.9 s); the pytest runs the tests
    start, a hundred or so in all, have no property-based test to report on."""
    options = os.environ.get("PYTEST_ADDOPTS", "")
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{options} -p no:hypothesispytest".strip())


@pytest.fixture(autouse=True)
def _a_test_runs_as_in_a_plain_pytest_run(monkeypatch):
    """Under `pytest -n`, xdist marks its workers by environment variables and the optbench plugin gives each
    worker a share of the threads. A pytest run or a case process that a test starts would inherit the variables
    and take itself for a worker (untimed), so they go; the tests that run under xdist on purpose start their own
    workers.

    The share stays, in this process and in every process a test starts (OMP_NUM_THREADS): two workers at the
    machine's thread count each oversubscribe the cores, and OpenMP's spinning threads then wait on each other.
    The training catalogue on examples/cnn_bn.py, twice at once on 2 cores, took 316 s at 2 threads each and 50 s
    at 1. An environment key computed here and one a started run computes name the same share."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    for variable in [name for name in os.environ if name.startswith("PYTEST_XDIST")]:
        monkeypatch.delenv(variable)
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch.get_num_threads()))
    yield
