"""Every case's earlier processes run in waves across the run, before any case is judged
(optbench.running.interleave)."""

import random

from synthetic import HALF_THE_WORK

from optbench.running.interleave import EarlierProcesses, waves
from optbench.storage.record import read_records
from optbench.verdict.stats import Interval

CASES = ["a", "b", "c", "d"]


def test_each_wave_is_every_case_once_in_an_order_of_its_own():
    rng = random.Random(0)
    drawn = [waves(CASES, 3, rng) for _ in range(200)]
    assert all(len(order) == 2 and all(sorted(wave) == CASES for wave in order) for order in drawn)
    # Random: each case leads some wave, and a run's two waves are not one order repeated.
    assert {order[0][0] for order in drawn} == set(CASES)
    assert sum(order[0] != order[1] for order in drawn) > 150
    assert waves(CASES, 1, rng) == []


class Forks:
    """A fake zygote: which case each timing-only fork ran, in order; `stopping` cases time nothing."""

    def __init__(self, stopping: frozenset[str] = frozenset()) -> None:
        self.ran: list[tuple[str, int]] = []
        self.stopping = stopping

    def time_only(self, case: str, number: int) -> Interval | None:
        self.ran.append((case, number))
        if case in self.stopping:
            return None
        speedup = 1 + len(self.ran) / 100
        return Interval(speedup, speedup - 0.01, speedup + 0.01)


def test_the_first_case_judged_waits_for_every_case_s_earlier_processes_in_waves():
    forks = Forks(stopping=frozenset({"c"}))
    earlier = EarlierProcesses(CASES, 3, forks.time_only, interleaved=True, rng=random.Random(1))
    first = earlier.of("a")
    # Wave 1 forks every case once before any case's second; a case that timed nothing is not forked again.
    assert sorted(case for case, number in forks.ran[:4]) == CASES and {number for _, number in forks.ran[:4]} == {1}
    assert sorted(forks.ran[4:]) == [("a", 2), ("b", 2), ("d", 2)]
    # Each case gets its own intervals, in the order they ran; nothing is forked again as the others are judged.
    assert [interval.point for interval in first] == [1 + (forks.ran.index(("a", n)) + 1) / 100 for n in (1, 2)]
    assert len(earlier.of("b")) == 2 and earlier.of("c") == [] and len(earlier.of("d")) == 2
    assert len(forks.ran) == 7


def test_a_case_that_timed_nothing_is_skipped_in_later_waves_not_the_cases_after_it():
    """Wherever the stopped case falls in a later wave, every case after it in that wave is still forked."""
    for seed in range(20):
        forks = Forks(stopping=frozenset({"c"}))
        EarlierProcesses(CASES, 4, forks.time_only, interleaved=True, rng=random.Random(seed)).of("a")
        expected = [(case, 1) for case in CASES] + [(case, number) for case in "abd" for number in (2, 3)]
        assert sorted(forks.ran) == sorted(expected), seed


def test_a_case_not_scheduled_or_judged_again_has_its_processes_back_to_back():
    forks = Forks()
    earlier = EarlierProcesses(CASES, 3, forks.time_only, interleaved=True, rng=random.Random(2))
    assert len(earlier.of("elsewhere")) == 2 and forks.ran == [("elsewhere", 1), ("elsewhere", 2)]
    earlier.of("a")
    del forks.ran[:]
    assert len(earlier.of("a")) == 2 and forks.ran == [("a", 1), ("a", 2)]


def test_an_xdist_worker_runs_each_case_s_processes_back_to_back():
    forks = Forks(stopping=frozenset({"b"}))
    earlier = EarlierProcesses(CASES, 4, forks.time_only, interleaved=False, rng=random.Random(3))
    assert len(earlier.of("a")) == 3 and forks.ran == [("a", 1), ("a", 2), ("a", 3)]
    assert earlier.of("b") == [] and forks.ran[3:] == [("b", 1)]


TWO_CASES = HALF_THE_WORK.replace(
    "def test_half_the_work(optbench):",
    """import os


@pytest.mark.parametrize("name", ["first", "second"])
def test_half_the_work(optbench, name):
    with open(os.environ["FORK_LOG"], "a") as log:
        log.write(name + "\\n")""",
).replace("import torch\n", "import pytest\nimport torch\n")


def test_a_run_forks_each_case_s_earlier_processes_before_judging_any(pytester, monkeypatch):
    pytester.makeconftest('pytest_plugins = ["optbench.plugin"]\n')
    pytester.makepyfile(test_synthetic=TWO_CASES)
    log = pytester.path / "forks.log"
    monkeypatch.setenv("FORK_LOG", str(log))
    options = ("--processes", "3", "--case-budget", "0.6", "--block-target", "0.01", "--confirm", "0")
    pytester.runpytest_subprocess(*options).assert_outcomes(passed=2)
    # The run's own process enters each test to hand it to its forks. Back to back, each case's three forks would
    # follow it; interleaved, both cases' two earlier ones follow the first test's entry, then the two judges.
    ran = log.read_text().split()
    assert ran[0] == "first" and sorted(ran[1:5]) == ["first", "first", "second", "second"]
    assert ran[5:] == ["first", "second", "second"]
    assert all(len(record.processes) == 3 for record in read_records(pytester.path / ".optbench"))
