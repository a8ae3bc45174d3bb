import numpy as np
import pytest

from optbench.stats import rounds_for_precision, speedup


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


def test_planned_rounds_reach_the_target_width():
    pilot = paired_timings(1.3, rounds=10, noise=0.08, seed=3)
    needed = rounds_for_precision(*pilot, half_width=0.03)
    measured = speedup(*paired_timings(1.3, rounds=needed, noise=0.08, seed=4))
    assert measured.relative_half_width < 0.04


def test_identical_timings_give_a_zero_width_interval():
    interval = speedup([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    assert (interval.low, interval.point, interval.high) == (2.0, 2.0, 2.0)


def test_unpaired_input_is_rejected():
    with pytest.raises(ValueError, match="paired"):
        speedup([1.0, 2.0, 3.0], [1.0, 2.0])
