import os

import pytest
import torch

pytest_plugins = ["pytester"]

MACHINE_THREADS = torch.get_num_threads()
"""Read before the optbench plugin configures this process: under xdist it gives each worker a share."""


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
    and take itself for a worker (untimed, its threads shared), and an environment key a test computes here would
    name the share. The tests that run under xdist on purpose start their own workers."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    for variable in [name for name in os.environ if name.startswith("PYTEST_XDIST")]:
        monkeypatch.delenv(variable)
    share = torch.get_num_threads()
    torch.set_num_threads(MACHINE_THREADS)
    yield
    torch.set_num_threads(share)
