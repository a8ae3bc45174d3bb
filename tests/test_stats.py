import math

import numpy as np
import pytest
import scipy.stats

from optbench.verdict.stats import (
    chi2_quantile,
    estimate,
    long_run_variance_factor,
    rounds_for_precision,
    speedup,
    t_quantile,
    trimmed_mean,
)


def paired_timings(true_ratio, rounds, noise, seed=0, drift=0.2):
    """Reference = ratio x optimized, both multiplied by shared drift and independent noise."""
    rng = np.random.default_rng(seed)
    drift = np.exp(rng.normal(0, drift, rounds))
    optimized = 0.01 * drift * np.exp(rng.normal(0, noise, rounds))
    reference = true_ratio * 0.01 * drift * np.exp(rng.normal(0, noise, rounds))
    return reference.tolist(), optimized.tolist()


@pytest.mark.parametrize("true_ratio", [0.8, 1.0, 1.8])
def test_interval_covers_the_true_ratio(true_ratio):
    reference, optimized = paired_timings(true_ratio, rounds=200, noise=0.05)
    interval = speedup(reference, optimized)
    assert interval.low <= true_ratio <= interval.high
    assert interval.low <= interval.point <= interval.high
    assert interval.relative_half_width < 0.05


def test_pairing_narrows_the_interval_under_shared_drift():
    reference, optimized = paired_timings(1.5, rounds=100, noise=0.02)
    rng = np.random.default_rng(7)
    unpaired = speedup(rng.permutation(reference), optimized)
    assert speedup(reference, optimized).relative_half_width < unpaired.relative_half_width / 2


def test_more_rounds_narrow_the_interval():
    few = speedup(*paired_timings(1.2, rounds=20, noise=0.1, seed=1))
    many = speedup(*paired_timings(1.2, rounds=400, noise=0.1, seed=1))
    assert many.relative_half_width < few.relative_half_width / 2


def test_noisier_pilots_need_more_rounds():
    quiet = rounds_for_precision(*paired_timings(1.2, rounds=10, noise=0.01, drift=0), half_width=0.03)
    noisy = rounds_for_precision(*paired_timings(1.2, rounds=10, noise=0.2, drift=0), half_width=0.03)
    assert noisy > 10 * quiet


def ideal_rounds(noise, half_width):
    """Rounds an oracle knowing the spread would plan: z se = ln(1 + half_width), se of the 20%-trimmed mean.

    A 20%-winsorized normal has 0.77 of its standard deviation, and the trimmed mean's error is that over 0.6.
    """
    spread = noise * np.sqrt(2) * 0.77 / 0.6
    return (1.96 * spread / np.log1p(half_width)) ** 2


def test_a_short_white_noise_pilot_plans_a_bounded_number_of_rounds():
    """Its lag-1 autocorrelation is noise: 1,009 rounds were planned for 1.4% noise from one such pilot (seed 0).

    The plan errs long by design (the 90% chi-square end of a 5-degree spread: 4.4x, times t^2 / z^2), so up to
    about 6x the oracle's is the plan working; what the capped AR(1) factor added on top (f up to 19) is not.
    """
    plans = [rounds_for_precision(*paired_timings(1.2, 10, 0.014, seed, drift=0), 0.03) for seed in range(100)]
    ideal = ideal_rounds(0.014, 0.03)
    assert np.median(plans) < 6 * ideal and np.quantile(plans, 0.9) < 15 * ideal
    assert all(
        estimate(*paired_timings(1.2, 10, 0.014, seed, drift=0)).autocorrelation_factor < 5 for seed in range(100)
    )


def test_planned_rounds_reach_the_target_width():
    """The plan errs long: from a 10-round pilot, 9 runs in 10 reach the target."""
    reached = 0
    for seed in range(200):
        pilot = paired_timings(1.3, rounds=10, noise=0.08, seed=seed)
        needed = rounds_for_precision(*pilot, half_width=0.03)
        reached += speedup(*paired_timings(1.3, rounds=needed, noise=0.08, seed=100 + seed)).relative_half_width < 0.03
    assert reached >= 180


def test_a_stalled_round_does_not_move_the_speedup():
    reference, optimized = paired_timings(1.5, rounds=40, noise=0.02, seed=5)
    stalled = list(reference)
    stalled[7] *= 3
    assert speedup(stalled, optimized).point == pytest.approx(speedup(reference, optimized).point, rel=0.01)


def test_autocorrelated_rounds_widen_the_interval():
    rng = np.random.default_rng(11)
    independent = rng.normal(0, 0.05, 60)
    autocorrelated = np.convolve(rng.normal(0, 0.05, 69), np.ones(10) / np.sqrt(10), mode="valid")
    optimized = [0.01] * 60
    wide = estimate((0.015 * np.exp(autocorrelated)).tolist(), optimized)
    narrow = estimate((0.015 * np.exp(independent)).tolist(), optimized)
    assert wide.autocorrelation_factor > 3 > narrow.autocorrelation_factor
    assert long_run_variance_factor(independent) < 2


def test_identical_timings_give_a_zero_width_interval():
    interval = speedup([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    assert (interval.low, interval.point, interval.high) == (2.0, 2.0, 2.0)


def test_unpaired_input_is_rejected():
    with pytest.raises(ValueError, match="paired"):
        speedup([1.0, 2.0, 3.0], [1.0, 2.0])


# The module docstring's formulas, each computed here on its own and held against the estimate (docs/mutation.md).


def documented_factors(x):
    """f = max(1, f_NW, f_AR) and f_2 exactly as optbench.verdict.stats's docstring states them (f_AR from 12
    rounds)."""
    n = len(x)
    centered = x - x.mean()
    variance = centered @ centered

    def r(lag):
        return centered[lag:] @ centered[:-lag] / variance

    window = min(n - 1, math.ceil(1.5 * n ** (1 / 3)))
    newey_west = 1 + 2 * sum((1 - lag / (window + 1)) * r(lag) for lag in range(1, window + 1))
    if n < 12:
        return max(1.0, newey_west), 1.0, newey_west, None
    p = min(0.8, r(1) + (1 + 3 * r(1)) / n)
    ar = (1 + p) / (1 - p)
    f2 = (1 + max(0.0, p) ** 2) / (1 - max(0.0, p) ** 2)
    return max(1.0, newey_west, ar), f2, newey_west, ar


def ar1(rho, n, seed):
    rng = np.random.default_rng(seed)
    x = np.empty(n)
    x[0] = rng.normal()
    for i in range(1, n):
        x[i] = rho * x[i - 1] + rng.normal()
    return x


SERIES = [ar1(rho, n, seed) for rho, n, seed in [(0.5, 30, 1), (0.9, 24, 2), (-0.5, 40, 3), (0.9, 10, 3), (0.0, 60, 5)]]
SERIES.append(np.convolve(np.random.default_rng(6).normal(size=49), np.ones(10), mode="valid"))  # 40, moving average
_E = np.random.default_rng(7).normal(size=34)
SERIES.append(_E[4:] + _E[2:-2] + _E[:-4])  # correlated at lags 2 and 4 only: the window sees what lag 1 misses


def test_the_autocorrelation_factors_are_the_documented_ones():
    """Bartlett-window and AR(1) factors, the larger of them and 1, and Bartlett's f_2 for the degrees of freedom."""
    from optbench.verdict.stats import Autocorrelation

    documented = [documented_factors(x) for x in SERIES]
    for x, (f, f2, _, _) in zip(SERIES, documented, strict=True):
        found = Autocorrelation.of(x)
        assert (found.variance_factor, found.degrees_of_freedom_factor) == (pytest.approx(f), pytest.approx(f2))
    # The series exercise each branch: the window wins, the AR(1) factor wins (and one at its cap), neither does.
    assert any(nw > ar > 1 for _, _, nw, ar in documented if ar)
    assert any(ar > max(nw, 1) for _, _, nw, ar in documented if ar)
    assert any(f == pytest.approx(9.0) for f, _, _, _ in documented)
    assert any(f == 1.0 and f2 == 1.0 for f, f2, _, _ in documented)
    assert any(ar is None and f > 1 for f, _, _, ar in documented)


@pytest.mark.parametrize("rounds", [5, 10, 30])
def test_the_standard_error_is_tukey_and_mclaughlins_inflated_by_the_autocorrelation(rounds):
    """se = s_w / ((1 - 2g) sqrt(n)) sqrt(f), df = (h - 1) / f_2, the mean trimmed: the module docstring."""
    rng = np.random.default_rng(rounds)
    d = 0.3 + 0.05 * np.cumsum(rng.normal(size=rounds)) / 3
    d[1] += 1.0  # a stall, trimmed and winsorized away
    cut = math.floor(0.2 * rounds)
    ordered = np.sort(d)
    winsorized = np.clip(d, ordered[cut], ordered[-cut - 1])
    f, f2, _, _ = documented_factors(winsorized)
    found = estimate(np.exp(d).tolist(), [1.0] * rounds)
    assert found.mean == pytest.approx(ordered[cut : rounds - cut].mean())
    assert found.standard_error == pytest.approx(winsorized.std(ddof=1) / (0.6 * math.sqrt(rounds)) * math.sqrt(f))
    assert found.degrees_of_freedom == pytest.approx(max(1.0, (rounds - 2 * cut - 1) / f2))
    assert found.autocorrelation_factor == pytest.approx(f)


def test_an_interval_has_the_confidence_asked_for():
    reference, optimized = paired_timings(1.2, rounds=30, noise=0.05, seed=3)
    ninety, ninety_five = speedup(reference, optimized, 0.9), speedup(reference, optimized)
    assert (ninety.confidence, ninety_five.confidence) == (0.9, 0.95)
    assert ninety_five.low < ninety.low < ninety.point < ninety.high < ninety_five.high
    assert speedup([2.0, 2.0], [1.0, 1.0], 0.9).confidence == 0.9


def test_block_times_must_be_positive_on_either_side_and_come_as_one_series_of_two_or_more():
    zero_or_negative = [
        ([1.0, 0.0], [1.0, 1.0]),
        ([1.0, 1.0], [0.0, 1.0]),
        ([1.0, 1.0], [1.0, -1.0]),
        ([-1.0, 1.0], [1.0, 1.0]),
    ]
    for reference, optimized in zero_or_negative:
        with pytest.raises(ValueError, match=r"^block times must be positive$"):
            speedup(reference, optimized)
    assert speedup([2.0, 2.0], [1.0, 1.0]).point == pytest.approx(2.0)  # two rounds are enough
    for reference, optimized in [([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0, 4.0]]), ([1.0], [1.0])]:
        with pytest.raises(ValueError, match="need at least 2 paired rounds"):
            speedup(reference, optimized)


def test_a_noiseless_pilot_plans_the_fewest_rounds():
    assert rounds_for_precision([2.0] * 10, [1.0] * 10, half_width=0.03) == 2


@pytest.mark.parametrize("degrees_of_freedom", [1, 2.5, 23, 400])
def test_its_quantiles_and_trimmed_mean_are_scipy_stats_own(degrees_of_freedom):
    """optbench.verdict.stats computes them from scipy.special, without the 1 s import of scipy.stats in every case
    process."""
    for probability in (0.05, 0.9, 0.975):
        assert t_quantile(probability, degrees_of_freedom) == pytest.approx(
            scipy.stats.t.ppf(probability, degrees_of_freedom), rel=1e-9
        )
        assert chi2_quantile(probability, degrees_of_freedom) == pytest.approx(
            scipy.stats.chi2.ppf(probability, degrees_of_freedom), rel=1e-9
        )
    values = np.random.default_rng(int(degrees_of_freedom)).lognormal(size=23)
    for trim in (0.0, 0.1, 0.25):
        assert trimmed_mean(values, trim) == pytest.approx(scipy.stats.trim_mean(values, trim), rel=1e-12)
