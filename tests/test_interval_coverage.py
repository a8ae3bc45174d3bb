"""Does the speedup's 95% interval keep its promise on timings like a shared VM's, from both sides?

From below: it contains the true ratio at least 92% of the time. From above:
it is not wider than it needs to be, which coverage alone cannot show (an
interval that always covers because it is huge passes any lower bound). So
each scenario also checks

- coverage at most 98.5%, where the estimate's errors are near normal; and
- the mean half-width (log scale) against an oracle's that knows the
  estimate's true standard deviation sd (measured over the simulations):
  z_0.975 sd. At most 1.3x that at 60 rounds (measured: 1.10-1.13); at the
  harness's smallest design (24 rounds, 16 kept), 1.6x: estimating the spread
  at all costs t_15 / z = 1.087, and a long-run variance factor estimated
  from 24 autocorrelated rounds scatters, its tail making the mean (at rho
  0.8 its median is right, its mean 1.2x too high). Measured there: 1.02-1.34
  for most scenarios, 1.35-1.57 for rho 0.8 over seeds 0-3 of 600-1,000
  simulations.

Stalls are the exception to the upper coverage bound, by measurement: there
the estimate's errors are heavy-tailed (excess kurtosis 2.6-7) and each
interval is wide exactly when its error is large (correlation 0.66-0.82), so
it covers 98-99.6% at the oracle's mean width. That is an interval that
adapts, not one too wide; the width bound still holds there.

Timings are simulated call by call in time order, as the harness takes them:
blocks of `calls` back-to-back calls of one variant, in ABBA order, each
block giving its time per call. The true optimized call takes 1/RATIO of the
reference's. On top of that, as seen on this project's 2-core VMs:

- independent: 5% log-normal noise per call;
- AR(1): each variant's calls are slowed by an AR(1) process of their own
  (rho 0.5 or 0.8; cache and page-fault state one model suffers more than the
  other), on top of the machine's own AR(1) slowness shared by both;
- stalls: 3% of calls take twice as long;
- drift: the machine slows by 20% over the run.

The grid is the harness's smallest design (MIN_ROUNDS rounds of MIN_BLOCK_CALLS
calls) and a larger one: fewer rounds of single calls cannot keep the promise
under rho 0.8, which is why blocks have at least MIN_BLOCK_CALLS calls. (The
percentile bootstrap optbench used before block rounds, resampling rounds as
independent, covered 88.5% at rho 0.5 and 64.5% at rho 0.8 on 20 rounds of
single calls, as it ran them.)
"""

import math
from dataclasses import dataclass, replace

import numpy as np
import pytest
from scipy import stats as scipy_stats

from optbench.measuring.measurement import MIN_BLOCK_CALLS
from optbench.profiles import PROFILES
from optbench.verdict.stats import estimate

RATIO = 1.3
SIMULATIONS = 600
REQUIRED_COVERAGE = 0.92
MAX_COVERAGE = 0.985


def ar1(rng, length, rho, sigma):
    noise = rng.normal(0, sigma * np.sqrt(1 - rho**2), length)
    series = np.empty(length)
    series[0] = rng.normal(0, sigma)
    for index in range(1, length):
        series[index] = rho * series[index - 1] + noise[index]
    return series


def simulated_rounds(rng, scenario, rounds, calls):
    """(reference, optimized) time per call of each block, for `rounds` ABBA pairs of `calls`-call blocks."""
    total = 2 * rounds * calls
    log_noise = rng.normal(0, 0.05 if scenario == "independent" else 0.02, total)
    if scenario.startswith("ar"):
        log_noise += ar1(rng, total, float(scenario[2:]), 0.05)
    if scenario == "drift":
        log_noise += np.linspace(0, np.log(1.2), total)
    times = np.exp(log_noise)
    if scenario == "stalls":
        times[rng.random(total) < 0.03] *= 2
    blocks = times.reshape(2 * rounds, calls)
    reference_first = np.resize([True, False], rounds)  # ABBA: pair i is AB for even i, BA for odd i
    first, second = blocks[0::2], blocks[1::2]
    reference = np.where(reference_first[:, None], first, second)
    optimized = np.where(reference_first[:, None], second, first)
    if scenario.startswith("ar"):
        rho = float(scenario[2:])
        reference = reference * np.exp(ar1(rng, rounds * calls, rho, 0.05)).reshape(rounds, calls)
        optimized = optimized * np.exp(ar1(rng, rounds * calls, rho, 0.05)).reshape(rounds, calls)
    return RATIO * reference.mean(axis=1), optimized.mean(axis=1)


@dataclass(frozen=True)
class Simulated:
    """What `simulations` intervals of one scenario did, against the truth and against the oracle."""

    coverage: float
    width_over_oracle: float
    """Mean log half-width over z_0.975 times the true standard deviation of the log point."""
    error_kurtosis: float


def simulate(scenario, rounds, calls, simulations=SIMULATIONS, seed=0, method=estimate):
    rng = np.random.default_rng(seed)
    points, half_widths, covered = [], [], 0
    for _ in range(simulations):
        found = method(*simulated_rounds(rng, scenario, rounds, calls))
        interval = found.interval()
        covered += interval.low <= RATIO <= interval.high
        points.append(found.mean)
        half_widths.append(math.log(interval.high / interval.low) / 2)
    oracle = scipy_stats.norm.ppf(0.975) * np.std(points, ddof=1)
    return Simulated(covered / simulations, float(np.mean(half_widths)) / oracle, float(scipy_stats.kurtosis(points)))


SCENARIOS = ["independent", "ar0.5", "ar0.8", "stalls", "drift"]
MIN_ROUNDS = min(profile.min_rounds for profile in PROFILES.values())
DESIGNS = {(MIN_ROUNDS, MIN_BLOCK_CALLS): 1.6, (60, 8): 1.3}
"""Rounds and calls per block, with the most the mean half-width may exceed the oracle's (module docstring)."""
NEAR_NORMAL_KURTOSIS = 1.0


@pytest.fixture(scope="module", params=list(DESIGNS), ids=lambda design: f"{design[0]}x{design[1]}")
def design(request):
    return request.param


@pytest.fixture(scope="module", params=SCENARIOS)
def simulated(request, design):
    return simulate(request.param, *design)


def test_interval_keeps_its_coverage(simulated):
    assert simulated.coverage >= REQUIRED_COVERAGE


def test_interval_is_no_wider_than_its_coverage_needs(simulated, design):
    assert simulated.width_over_oracle <= DESIGNS[design]
    if simulated.error_kurtosis < NEAR_NORMAL_KURTOSIS:
        assert simulated.coverage <= MAX_COVERAGE


def test_the_check_from_above_fails_an_interval_four_times_too_wide():
    """What coverage alone let through: the standard error x 4 covers everything and must fail here."""
    wide = simulate("independent", 60, 8, simulations=100, method=lambda *rounds: scaled(estimate(*rounds), 4))
    assert wide.coverage > MAX_COVERAGE and wide.width_over_oracle > DESIGNS[(60, 8)]


def scaled(found, factor):
    return replace(found, standard_error=found.standard_error * factor)
