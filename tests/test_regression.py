"""The history-based regression test on synthetic histories: spread estimate, budget, confirmation, power."""

import math
from dataclasses import dataclass, replace

import numpy as np
import pytest
from scipy import stats

from optbench.storage.baselines import Baseline, Recording
from optbench.verdict.regression import (
    PRIOR_SPREAD,
    CaseSpread,
    between_run_variance,
    compare,
    decide,
    deviation,
    pooled_variance,
    threshold_z,
)
from optbench.verdict.stats import Interval

Z95 = 1.959963984540054


def interval(log_point, within):
    return Interval(math.exp(log_point), math.exp(log_point - Z95 * within), math.exp(log_point + Z95 * within))


def history(rng, center=0.4, tau=0.03, within=0.01, runs=12):
    recordings = []
    for _ in range(runs):
        measured = interval(center + rng.normal(0, tau) + rng.normal(0, within), within)
        recordings.append(Recording(measured.point, (measured.low, measured.high)))
    return Baseline(tuple(recordings))


def test_the_standard_error_is_read_back_with_the_quantile_the_interval_was_made_with():
    measured = interval(0.3, 0.02)
    assert measured.standard_error == pytest.approx(0.02)
    assert Recording(measured.point, (measured.low, measured.high)).standard_error == pytest.approx(0.02)
    assert Recording(1.3, None).standard_error == 0.0
    # An interval across three processes: t_2 = 4.30 standard errors each side; read with z, 2.2x the noise.
    t_2 = stats.t.ppf(0.975, 2)
    across = Interval(math.exp(0.3), math.exp(0.3 - t_2 * 0.02), math.exp(0.3 + t_2 * 0.02), degrees_of_freedom=2.0)
    assert across.standard_error == pytest.approx(0.02)
    recorded = Recording(across.point, (across.low, across.high), degrees_of_freedom=2.0)
    assert recorded.standard_error == pytest.approx(0.02)
    at_90 = Interval(1.0, math.exp(-stats.norm.ppf(0.95) * 0.02), math.exp(stats.norm.ppf(0.95) * 0.02), 0.9)
    assert at_90.standard_error == pytest.approx(0.02)


def test_the_gate_reads_a_measurement_across_processes_with_its_own_t():
    """The run's error in the gate's sigma is the processes' standard error, not t_2 / z = 2.2 times it."""
    rng = np.random.default_rng(3)
    past = history(rng, runs=10)
    t_2 = stats.t.ppf(0.975, 2)
    across = Interval(math.exp(0.4), math.exp(0.4 - t_2 * 0.01), math.exp(0.4 + t_2 * 0.01), degrees_of_freedom=2.0)
    assert deviation([across], past, 0.02**2).run_error2 == pytest.approx(0.01**2)


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


@dataclass(frozen=True)
class Budget:
    """The run's false-alarm rate split over its gated cases, and the minimum effect that floors a regression."""

    rate: float = 0.02
    gated_cases: int = 30
    min_effect: float = 0.05

    @property
    def per_case(self) -> float:
        return self.rate / self.gated_cases


def confirmed_decision(rng, past, true, tau, within, budget, confirmations):
    """The gate's outcome for one case: measured, then confirmed while it is not a pass, as the plugin does."""
    measurements = []

    def judged():
        measurements.append(interval(true + rng.normal(0, tau) + rng.normal(0, within), within))
        return decide(measurements, past, tau**2, budget.rate, budget.gated_cases, budget.min_effect, confirmations)

    decision = judged()
    while decision.outcome != "pass" and len(measurements) <= confirmations:
        decision = judged()
    return decision


def run_decisions(slowdown, seed, cases=200, confirmations=2, tau=0.02, within=0.01, budget=Budget(), runs=12):
    """Outcomes of `cases` independent cases whose optimized variant became `slowdown` slower, with confirmation."""
    rng = np.random.default_rng(seed)
    true = 0.4 - math.log1p(slowdown)
    pasts = (history(rng, tau=tau, within=within, runs=runs) for _ in range(cases))
    return [confirmed_decision(rng, past, true, tau, within, budget, confirmations) for past in pasts]


def false_alarms(budget, confirmations, cases=1000, seed=3):
    """Regressions among unchanged cases with the minimum effect off, so only the statistics stand in the way.

    Histories of 60 recordings, so that the spread the test estimates is the true one within about 10% and the
    per-case false-alarm rate is the budget's, not a t distribution's heavier tail.
    """
    outcomes = run_decisions(0.0, seed, cases, confirmations, tau=0.03, budget=replace(budget, min_effect=0.0), runs=60)
    return sum(decision.outcome == "regression" for decision in outcomes)


def budget_band(budget, cases=1000):
    """Where the count of false alarms of `cases` unchanged cases lies 999 times in 1,000 if the budget holds."""
    return stats.binom.interval(0.999, cases, budget.per_case)


GATED = Budget(rate=0.2, gated_cases=10)
"""2% per case: 20 false alarms expected over 1,000 cases, measurable from both sides."""


def test_unchanged_code_false_alarms_at_the_budget_s_rate_where_the_statistics_bind():
    """A single measurement is judged at exactly alpha = rate / cases: too many false alarms and too few both fail.

    Not splitting the budget over the gated cases, or a budget 10x larger, gives 200; an over-cautious z gives 0-3.
    """
    low, high = budget_band(GATED)
    assert low <= false_alarms(GATED, confirmations=0) <= high


def test_confirmations_only_lower_the_false_alarm_rate():
    """A regression must hold after the confirmations too, so the budget is an upper bound there."""
    assert false_alarms(GATED, confirmations=2) <= budget_band(GATED)[1]


def test_the_threshold_grows_with_the_number_of_gated_cases():
    thresholds = [threshold_z(0.02, cases) for cases in (1, 10, 30, 100)]
    assert thresholds == sorted(thresholds) and len(set(thresholds)) == 4


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
    # Within the margin (z 3.09 x sigma 0.032 on the log scale) with the minimum effect off: the statistics decide.
    assert not compare(before, interval(0.42, 0.01), 0.02**2, 0.02, 10, 0.0).significant
    assert compare(before, interval(0.52, 0.01), 0.02**2, 0.02, 10, 0.0).significant


def test_a_measurably_small_slowdown_is_a_pass_not_a_reason_to_confirm():
    """3% slower, beyond the noise but bounded below the 5% minimum effect: nothing a rerun could change."""
    rng = np.random.default_rng(6)
    steady = history(rng, tau=0.002, within=0.002, runs=20)
    decision = decide([interval(0.4 - math.log1p(0.03), 0.002)], steady, 0.002**2, 0.02, 30, 0.05, 2)
    assert decision.outcome == "pass" and 0.02 < decision.slowdown < 0.04
    possible = decide([interval(0.4 - math.log1p(0.045), 0.01)], steady, 0.002**2, 0.02, 30, 0.05, 2)
    assert possible.outcome == "inconclusive"


def test_a_case_counts_in_the_pool_from_three_recordings():
    """Three recordings (two degrees of freedom) are the least that join the environment's pool; two do not."""
    exact = [Recording(s, None) for s in (1.0, 1.1, 1.2)]  # no intervals: all the variance is between runs
    three = Baseline(tuple(exact))
    assert pooled_variance([three]) == pytest.approx(CaseSpread.of(three).variance) != PRIOR_SPREAD**2
    assert pooled_variance([Baseline(tuple(exact[:2]))]) == PRIOR_SPREAD**2


def test_a_change_between_two_runs_reads_as_its_verdict():
    before = interval(0.4, 0.01)
    assert compare(before, interval(0.1, 0.01), 0.02**2, 0.02, 10, 0.05).text().endswith(", significant)")
    assert compare(before, interval(0.41, 0.01), 0.02**2, 0.02, 10, 0.05).text().endswith(", within noise)")


def test_a_history_without_intervals_is_all_between_run_spread_and_one_recording_is_the_pools():
    exact = Baseline(tuple(Recording(s, None) for s in (1.0, 1.1, 1.2)))
    logs = [math.log(s) for s in (1.0, 1.1, 1.2)]
    assert CaseSpread.of(exact) == CaseSpread(pytest.approx(np.var(logs, ddof=1)), 2)
    # Shrunk toward the pool with PRIOR_WEIGHT 4: (nu tau2_case + 4 pooled) / (nu + 4), nu = m - 1.
    assert between_run_variance(exact, 0.01) == pytest.approx((2 * np.var(logs, ddof=1) + 4 * 0.01) / 6)
    assert between_run_variance(Baseline((Recording(1.0, (0.9, 1.1)),)), 0.01) == pytest.approx(0.01)


def test_one_gated_case_gets_the_whole_budget():
    assert threshold_z(0.02, 1) == pytest.approx(stats.norm.ppf(0.98))
    assert threshold_z(0.02, 0) == threshold_z(0.02, 1)


def test_two_runs_are_judged_by_the_documented_margin_and_the_minimum_effect():
    """sigma = sqrt((tau2 + s_after^2) + (tau2 + s_before^2)), z at rate / 2 / cases: the module docstring's
    test with one run on each side; the change must also exceed min_effect, however precise."""
    before, after = interval(0.4, 0.01), interval(0.45, 0.02)
    sigma = math.sqrt((0.02**2 + 0.02**2) + (0.02**2 + 0.01**2))
    z = stats.norm.ppf(1 - 0.02 / 2 / 10)
    change = compare(before, after, 0.02**2, 0.02, 10, 0.05)
    assert change.margin == pytest.approx(math.exp(z * sigma) - 1)
    assert not change.significant  # 5.1% beyond, but within the margin
    precise = compare(interval(0.4, 0.001), interval(0.43, 0.001), 0.001**2, 0.02, 10, 0.05)
    assert not precise.significant and abs(precise.relative) > precise.margin  # 3%: beyond noise, under 5%
    assert compare(interval(0.4, 0.001), interval(0.43, 0.001), 0.001**2, 0.02, 10, 0.0).significant


def test_a_decision_reports_its_runs_spread_margin_and_detectable_slowdown_as_documented():
    rng = np.random.default_rng(8)
    past = history(rng, tau=0.02, within=0.01, runs=10)
    now = [interval(0.38, 0.01), interval(0.39, 0.02)]
    decision = decide(now, past, 0.02**2, 0.02, 30, 0.0, confirmations=2)
    tau2 = between_run_variance(past, 0.02**2)
    history_errors = [r.standard_error**2 for r in past.recordings]
    center_variance = (tau2 + np.mean(history_errors)) / 10

    def sigma(runs):
        return math.sqrt((tau2 + (0.01**2 + 0.02**2) / 2) / runs + center_variance)

    z = threshold_z(0.02, 30)
    assert decision.runs == 2 and decision.history == 10
    assert decision.between_run_spread == pytest.approx(math.sqrt(tau2))
    assert decision.margin == pytest.approx(math.exp(z * sigma(2)) - 1)
    detectable = math.exp((z + stats.norm.ppf(0.95)) * sigma(3)) - 1
    assert decision.minimum_detectable_slowdown == pytest.approx(detectable)
