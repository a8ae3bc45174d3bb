"""The reference is timed under the interpreter conditions pytest-benchmark gives the optimized calls."""

import pytest

from optbench.storage.record import read_records

CONFTEST = 'pytest_plugins = ["optbench.plugin"]\n'

SAME_WORK_INSTRUMENTED = """
import sys

import pytest
import torch
from optbench import Case, Exact


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def trace(frame, event, arg):
    return trace


def profile(frame, event, arg):
    return None


# Both hooks make fib 4-6x slower, far above the spread between two sides on a busy machine.
@pytest.mark.parametrize(
    ("install", "hook"), [(sys.settrace, trace), (sys.setprofile, profile)], ids=["trace", "profile"]
)
def test_same_work(optbench, install, hook):
    install(hook)  # as pytest-cov (settrace) or a profiler (setprofile) would for the whole test
    try:
        optbench.run(Case(reference=lambda: torch.tensor(fib(18)), optimized=lambda: torch.tensor(fib(18)),
                          accuracy=Exact(), floor=0.1))
    finally:
        install(None)
"""


@pytest.mark.timed
def test_a_tracer_or_profile_hook_slows_neither_side_of_a_case(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_instrumented=SAME_WORK_INSTRUMENTED)
    pytester.runpytest_subprocess("--case-budget", "1", "--block-target", "0.01", "-p", "no:cacheprovider")
    records = read_records(pytester.path / ".optbench")
    speedups = {record.case.rsplit("[", 1)[-1]: record.speedup for record in records}
    assert set(speedups) == {"trace]", "profile]"}
    for hook, speedup in speedups.items():
        assert 2 / 3 < speedup.point < 1.5, f"{hook}: {speedup}"  # hooked reference: about 5x
