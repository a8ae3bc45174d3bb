"""Variance components: unbiased at each level, an allocation that costs least, and the study end to end."""

import math
from dataclasses import replace

import numpy as np
import pytest
from synthetic import HALF_THE_WORK, run_study

from optbench.measuring.measurement import RoundPlan
from optbench.profiles import MIN_ROUNDS_FLOOR, MOST_ROUNDS
from optbench.storage.record import TimeSummary, Timing
from optbench.studies.components import Components, Moments, components_markdown, moments
from optbench.verdict.stats import Interval, t_quantile
from tests.records import make_record

TRUTH = {"tau_process2": 0.05**2, "tau_session2": 0.02**2}
PROCESSES, SESSIONS, STUDIES = 5, 3, 4000


def simulated_study(generator: np.random.Generator) -> tuple[list[list[float]], list[list[float]]]:
    """One study: each process draws its effect, each session its drift and its rounds' error (of its own size)."""
    errors = generator.uniform(0.005, 0.02, (PROCESSES, SESSIONS))
    process = generator.normal(0, math.sqrt(TRUTH["tau_process2"]), (PROCESSES, 1))
    session = generator.normal(0, math.sqrt(TRUTH["tau_session2"]), (PROCESSES, SESSIONS))
    logs = 0.3 + process + session + generator.normal(0, errors)
    return logs.tolist(), errors.tolist()


def test_the_moment_estimates_are_unbiased_at_both_levels():
    """Over 4,000 simulated studies of 5 processes x 3 sessions, each raw estimate's mean is within four of its
    standard errors of the truth, from above and below: dividing by P instead of P - 1 (22% low for tau_p^2 here),
    or leaving the sessions' own error in tau_s^2 (+40%), is far outside that."""
    generator = np.random.default_rng(0)
    found = [moments(*simulated_study(generator)) for _ in range(STUDIES)]
    for level, truth in TRUTH.items():
        estimates = np.array([getattr(m, level) for m in found])
        standard_error = estimates.std(ddof=1) / math.sqrt(STUDIES)
        assert abs(estimates.mean() - truth) < 4 * standard_error, (level, estimates.mean(), truth, standard_error)
        assert standard_error < 0.05 * truth  # precise enough to see a bias of 20%


def test_an_unbalanced_or_too_small_design_is_refused():
    with pytest.raises(ValueError, match="at least 2 processes x 2 sessions"):
        moments([[0.1, 0.2]], [[0.01, 0.01]])
    with pytest.raises(ValueError, match="balanced"):
        moments([[0.1, 0.2], [0.1]], [[0.01, 0.01], [0.01]])


def components(tau_process: float, tau_session: float = 0.0, rounds_se: float = 0.01) -> Components:
    moments = Moments(rounds_se**2, tau_session**2, tau_process**2)
    return Components("smoke:b.py::test_x[a]", 5, 3, 24, moments, 0.05, 6.0)


def per_process_variance(found: Components, rounds: int) -> float:
    """v: one process's variance of ln(speedup) with `rounds` rounds in one session (module docstring)."""
    return found.moments.tau_process2 + found.moments.tau_session2 + found.round_variance / rounds


def cost_for_variance(found: Components, rounds: int) -> float:
    """What a given precision V costs with `rounds` per process, up to the factor 1 / V: it takes k = v / V
    processes of variance v each, and each costs a process and its rounds."""
    return per_process_variance(found, rounds) * (found.process_s + rounds * found.round_s)


@pytest.mark.parametrize(
    ("tau_process", "tau_session"), [(0.005, 0.0), (0.02, 0.01), (0.08, 0.0), (0.0, 0.03), (0.0, 0.0)]
)
def test_the_allocation_takes_the_rounds_per_process_that_cost_least(tau_process, tau_session):
    """Brute force over every count of rounds per process: none buys the same precision for less than the one
    chosen (within rounding to a whole round); then the least processes that reach the target, and no fewer,
    and what they cost."""
    found = components(tau_process, tau_session)
    allocation = found.allocation(0.03)
    best = min(range(MIN_ROUNDS_FLOOR, MOST_ROUNDS + 1), key=lambda rounds: cost_for_variance(found, rounds))
    assert abs(allocation.rounds - best) <= 1, (allocation, best)
    variance = per_process_variance(found, allocation.rounds)
    width = lambda k: t_quantile(0.975, k - 1) * math.sqrt(variance / k)  # noqa: E731
    assert width(allocation.processes) <= math.log1p(0.03)
    assert allocation.processes == 2 or width(allocation.processes - 1) > math.log1p(0.03)
    per_process_s = found.process_s + allocation.rounds * found.round_s
    assert allocation.seconds == pytest.approx(allocation.processes * per_process_s)


def test_more_spread_between_processes_takes_more_processes_and_fewer_rounds_each():
    quiet, noisy = components(0.005).allocation(0.03), components(0.08).allocation(0.03)
    assert noisy.processes > quiet.processes and noisy.rounds < quiet.rounds
    assert components(0.0).allocation(0.03).rounds == MOST_ROUNDS  # nothing above the rounds varies
    assert replace(components(0.02), round_s=0.0).allocation(0.03).rounds == MOST_ROUNDS  # rounds cost nothing


def process_record(points: list[float], rounds: int = 24):
    """A case's record of one process: its sessions at `points`, each +-1%, and its phases."""
    record = make_record()
    timing = Timing(RoundPlan(rounds, rounds, rounds), 4, False, TimeSummary.of([1.0]), TimeSummary.of([1.0]))
    sessions = [Interval(p, p / 1.01, p * 1.01) for p in points]
    phases = {"first calls (compilation)": 4.0, "warm-up": 2.0, "timed rounds": 1.2, "more sessions (--sessions)": 1.2}
    return replace(record, timing=timing, sessions=sessions, phases_s=phases)


def test_a_cases_components_and_costs_come_from_its_processes_records():
    """Two processes at 1.0x and 1.2x, each steady over its two sessions: all the spread is the processes'; a
    round costs its share of the timed phases over its own process's rounds, and a process its first calls and
    warm-up. A record without sessions (an untimed process) is left out."""
    untimed = replace(process_record([1.0, 1.0]), sessions=None)
    found = Components.of("case", [process_record([1.0, 1.0]), process_record([1.2, 1.2], rounds=48), untimed])
    assert found is not None and (found.case, found.processes, found.sessions, found.rounds) == ("case", 2, 2, 36)
    assert found.tau_session == 0.0
    # Between-process mean square S * sum (m - grand)^2 / (P - 1) = ln(1.2)^2, none within: tau_p^2 = ln(1.2)^2 / S.
    assert found.tau_process == pytest.approx(math.log(1.2) / math.sqrt(2), rel=1e-9)
    assert found.round_s == pytest.approx((2.4 / 48 + 2.4 / 96) / 2) and found.process_s == pytest.approx(6.0)
    assert found.moments.within == pytest.approx((math.log(1.01) / 1.959964) ** 2, rel=1e-5)  # +-1% at 95%
    assert Components.of("case", [process_record([1.0, 1.0])]) is None  # one process tells no spread


def test_the_components_command_times_each_case_in_fresh_processes_of_sessions(pytester):
    pytester.makeconftest('pytest_plugins = ["optbench.plugin"]\n')
    pytester.makepyfile(test_synthetic=HALF_THE_WORK)
    study = ("components", "--tests", "test_synthetic.py", "--sessions", "2")
    fast = ("--", "--case-budget", "0.3", "--block-target", "0.01", "--min-rounds", "4")
    finished = run_study(pytester.path, *study, "--processes", "2", *fast)
    assert finished.returncode == 0, finished.stderr[-2000:]
    table = (pytester.path / "components.md").read_text()
    (row,) = [line for line in table.splitlines() if line.startswith("| test_half_the_work")]
    assert "| 2 x 2 x " in row and "median over 1 cases" in table, table
    refused = run_study(pytester.path, *study, "--processes", "1")
    assert refused.returncode == 2 and "at least 2" in refused.stderr


def test_the_table_gives_each_case_its_levels_costs_and_allocation_and_the_median_of_the_cases():
    """Case a by hand: round variance 24 x 1e-4, tau^2 = 0.02^2 (a negative tau_process^2 reads 0), so
    r* = sqrt(9 / 0.25 x 2.4e-3 / 4e-4) = 14.7 -> 15 rounds; then V = 4e-4 + 2.4e-3 / 15 per process, and
    t(4) sqrt(V / 5) = 2.94% <= ln 1.03 = 2.96% < t(3) sqrt(V / 4) = 3.77%: 5 processes, 5 x (9 + 15 x 0.25) s."""
    a = Components("smoke:benchmarks/test_x.py::test_x[a]", 4, 3, 24, Moments(0.01**2, 0.02**2, -1e-4), 0.25, 9.0)
    b = Components("smoke:benchmarks/test_x.py::test_x[b]", 2, 2, 50, Moments(0.03**2, 0.0, 0.04**2), 0.1, 3.0)
    lines = components_markdown([a, b], 0.03).splitlines()
    assert lines[0] == (
        "| case | processes x sessions x rounds | within (session se) | tau session | tau process | round s | "
        "process s | for +-3%: rounds x processes | its timing s |"
    )
    assert lines[2] == "| test_x[a] | 4 x 3 x 24 | 1.0% | 2.0% | 0.0% | 0.250 | 9.0 | 15 x 5 | 64 |"
    # b: r* = sqrt(3 / 0.1 x 0.045 / 1.6e-3) = 29.0; t(16) sqrt(V / 17) = 2.89% <= 2.96% < t(15) sqrt(V / 16) = 2.99%.
    assert lines[3] == "| test_x[b] | 2 x 2 x 50 | 3.0% | 0.0% | 4.0% | 0.100 | 3.0 | 29 x 17 | 100 |"
    assert lines[4:] == ["", "median over 2 cases: session se 2.0%, tau session 1.0%, tau process 2.0%"]
    assert "median" not in components_markdown([], 0.03)
