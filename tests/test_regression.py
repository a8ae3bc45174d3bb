"""The history-based regression test on synthetic histories: spread estimate, budget, confirmation, power."""

import math

import numpy as np
import pytest

from optbench.baselines import Baseline, Recording
from optbench.regression import (
    PRIOR_SPREAD,
    CaseSpread,
    between_run_variance,
    compare,
    decide,
    pooled_variance,
    within_run_error,
)
from optbench.stats import Interval

Z95 = 1.959963984540054


def interval(log_point, within):
    return Interval(math.exp(log_point), math.exp(log_point - Z95 * within), math.exp(log_point + Z95 * within))


def history(rng, center=0.4, tau=0.03, within=0.01, runs=12):
    recordings = []
    for _ in range(runs):
        measured = interval(center + rng.normal(0, tau) + rng.normal(0, within), within)
        recordings.append(Recording(measured.point, (measured.low, measured.high)))
    return Baseline(tuple(recordings))


def test_within_run_error_is_read_back_from_the_interval():
    measured = interval(0.3, 0.02)
    assert within_run_error(measured.low, measured.high) == pytest.approx(0.02)


def test_between_run_spread_is_what_the_runs_vary_beyond_their_intervals():
    rng = np.random.default_rng(1)
    long = history(rng, tau=0.04, within=0.01, runs=200)
    assert math.sqrt(CaseSpread.of(long).variance) == pytest.approx(0.04, rel=0.15)
    steady = history(rng, tau=0.0, within=0.02, runs=200)
    assert math.sqrt(CaseSpread.of(steady).variance) < 0.01


def test_a_short_history_is_shrunk_toward_the_pool():
    rng = np.random.default_rng(2)
    pool = [history(rng, tau=0.02, runs=10) for _ in range(8)]
    pooled = pooled_variance(pool)
    assert math.sqrt(pooled) == pytest.approx(0.02, rel=0.35)
    two_wild = Baseline((Recording(1.0, (0.99, 1.01)), Recording(1.5, (1.48, 1.52))))
    shrunk = between_run_variance(two_wild, pooled)
    assert pooled < shrunk < CaseSpread.of(two_wild).variance


def test_without_any_history_the_prior_spread_is_used():
    assert pooled_variance([]) == PRIOR_SPREAD**2


def run_decisions(slowdown, seed, cases=200, confirmations=2, tau=0.02, within=0.01):
    """Outcomes of `cases` independent cases whose optimized variant became `slowdown` slower, with confirmation."""
    rng = np.random.default_rng(seed)
    outcomes = []
    for _ in range(cases):
        past = history(rng, tau=tau, within=within)
        true = 0.4 - math.log1p(slowdown)
        measurements = [interval(true + rng.normal(0, tau) + rng.normal(0, within), within)]
        decision = decide(measurements, past, tau**2, 0.02, 30, 0.05, confirmations)
        while decision.outcome != "pass" and len(measurements) <= confirmations:
            measurements.append(interval(true + rng.normal(0, tau) + rng.normal(0, within), within))
            decision = decide(measurements, past, tau**2, 0.02, 30, 0.05, confirmations)
        outcomes.append(decision)
    return outcomes


def test_unchanged_code_keeps_within_its_false_alarm_budget():
    outcomes = run_decisions(0.0, seed=3, cases=600)
    # Budget per case: 0.02 / 30. Over 600 cases one false alarm is already unlikely.
    assert sum(d.outcome == "regression" for d in outcomes) <= 1


def test_a_planted_slowdown_above_the_minimum_detectable_one_is_caught():
    outcomes = run_decisions(0.15, seed=4)
    detectable = np.median([d.minimum_detectable_slowdown for d in outcomes])
    assert detectable < 0.15
    assert sum(d.outcome == "regression" for d in outcomes) / len(outcomes) >= 0.9


def test_minimum_detectable_slowdown_grows_with_the_spread_and_shrinks_with_confirmations():
    rng = np.random.default_rng(5)
    past = history(rng, tau=0.02)
    now = [interval(0.4, 0.01)]
    quiet = decide(now, past, 0.02**2, 0.02, 30, 0.05, confirmations=2)
    noisy = decide(now, history(rng, tau=0.08), 0.08**2, 0.02, 30, 0.05, confirmations=2)
    single = decide(now, past, 0.02**2, 0.02, 30, 0.05, confirmations=0)
    assert quiet.minimum_detectable_slowdown < single.minimum_detectable_slowdown < noisy.minimum_detectable_slowdown


def test_two_runs_are_compared_with_the_same_test_both_ways():
    before = interval(0.4, 0.01)
    assert compare(before, interval(0.4 - 0.3, 0.01), 0.02**2, 0.02, 10, 0.05).significant
    assert compare(before, interval(0.4 + 0.3, 0.01), 0.02**2, 0.02, 10, 0.05).significant
    assert not compare(before, interval(0.42, 0.01), 0.02**2, 0.02, 10, 0.05).significant


def test_a_measurably_small_slowdown_is_a_pass_not_a_reason_to_confirm():
    """3% slower, beyond the noise but bounded below the 5% minimum effect: nothing a rerun could change."""
    rng = np.random.default_rng(6)
    steady = history(rng, tau=0.002, within=0.002, runs=20)
    decision = decide([interval(0.4 - math.log1p(0.03), 0.002)], steady, 0.002**2, 0.02, 30, 0.05, 2)
    assert decision.outcome == "pass" and 0.02 < decision.slowdown < 0.04
    possible = decide([interval(0.4 - math.log1p(0.045), 0.01)], steady, 0.002**2, 0.02, 30, 0.05, 2)
    assert possible.outcome == "inconclusive"
