"""Speedup of paired block timings, with an interval that survives autocorrelation and stalls.

The data are `n` paired rounds. A round is one block of back-to-back calls of
the reference and one of the optimized variant, adjacent in time (ABBA
order); each block gives a time per call. The statistic is the log ratio of
each pair,

    d_i = ln(reference_i / optimized_i),  i = 1..n,

so whatever slowed the machine for both blocks of a pair cancels. The speedup
is exp of the 20%-trimmed mean of the d_i: the trimming drops stalled blocks
(a stall of the VM lands in one block of a pair and makes its d_i an
outlier), and it keeps about 94% of the mean's efficiency on normal data.

Its standard error is Tukey and McLaughlin's for a trimmed mean,

    se = s_w / ((1 - 2g) sqrt(n)),

s_w being the standard deviation of the g-winsorized d_i, inflated for
autocorrelation by a long-run variance factor f of the winsorized series: the
larger of a Bartlett-window (Newey-West) estimate over L lags and the AR(1)
factor of the bias-corrected lag-1 autocorrelation (Kendall),

    f_NW = 1 + 2 sum_{l=1..L} (1 - l / (L + 1)) r_l,   L = ceil(1.5 n^(1/3)),
    f_AR = (1 + p) / (1 - p),   p = min(0.9, r_1 + (1 + 3 r_1) / n),

r_l being its lag-l autocorrelation. With 20-60 rounds a Bartlett window
underestimates strong autocorrelation, and r_1 is biased low by about
(1 + 4 rho) / n; each estimate covers the other's blind spot. f is held at 1
or more (a negative estimate at these sample sizes is mostly noise, and
shrinking on it would be optimistic). The interval is exp(mean_t +- t_{df} se sqrt(f)), Student's t with

    df = (h - 1) / f_2,   f_2 = (1 + p^2) / (1 - p^2)   (p >= 0),

h = n - 2 floor(g n) the kept rounds. f_2 is Bartlett's factor for the
variance of a sample variance under AR(1): it is what autocorrelation costs
the *spread* estimate in degrees of freedom, while f is what it costs the
mean. Dividing df by f instead (as optbench did) charged autocorrelation
twice: at 24 rounds of rho 0.8 the mean half-width was 1.87x that of an
oracle knowing the true variance, and a lag-1 estimate at its cap (f = 19)
left one degree of freedom, t = 12.7, an interval twenty times wide.
Simulated in tests/test_interval_coverage.py, both ways: coverage 0.92-0.985
and the half-width against that oracle's.

Below MIN_AUTOCORRELATION_ROUNDS rounds (the planner's 10-round pilot)
f is the Bartlett window's alone, at most 1 + L, and df is not reduced: r_1's standard error is 1/sqrt(n) >= 0.3
there and Kendall's correction alone adds (1 + 3 r_1) / n >= 0.1, so a
white-noise pilot read f up to 19 and planned hundreds of rounds for a
1.4%-noise case. The timed rounds, at least 24, estimate it.

A percentile bootstrap that resamples rounds as independent (what optbench
used before) covers the true ratio far less often than it claims once
rounds are autocorrelated: tests/test_stats.py simulates both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

CONFIDENCE = 0.95
TRIM = 0.2
"""Share of rounds trimmed from each end of the log ratios."""
MAX_AUTOCORRELATION = 0.8
"""Cap on the bias-corrected lag-1 estimate p (f <= 9): beyond it 24-60 rounds cannot tell rho apart."""
MIN_AUTOCORRELATION_ROUNDS = 12
PLAN_ITERATIONS = 4
PILOT_SPREAD_QUANTILE = 0.05


@dataclass(frozen=True)
class Interval:
    """A point estimate with the bounds of its confidence interval."""

    point: float
    low: float
    high: float
    confidence: float = CONFIDENCE
    degrees_of_freedom: float | None = None
    """Of the t quantile the bounds were made with; None for a normal quantile (and in records from before it was
    kept, whose rounds made t close to normal)."""

    @property
    def relative_half_width(self) -> float:
        return (self.high - self.low) / (2 * self.point)

    @property
    def standard_error(self) -> float:
        """Of ln(point), read back from the bounds with the quantile they were made with: an interval across three
        processes is t_2 = 4.30 standard errors each side, not 1.96, and reading it with z would make the gate and
        the A/A check see 2.2x the noise there is."""
        freedom = math.inf if self.degrees_of_freedom is None else self.degrees_of_freedom
        return (math.log(self.high) - math.log(self.low)) / (2 * t_quantile(0.5 + self.confidence / 2, freedom))

    def text(self, digits: int = 2) -> str:
        return f"{self.point:.{digits}f}x [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def speedup_text(speedup: Interval | None) -> str:
    """The one way a speedup is written in tables: `1.23x [1.20, 1.26]`, or `not timed`."""
    return speedup.text() if speedup else "not timed"


def log_ratios(reference: Sequence[float], optimized: Sequence[float]) -> np.ndarray:
    """ln(reference / optimized) per paired round."""
    ref = np.asarray(reference, dtype=float)
    opt = np.asarray(optimized, dtype=float)
    if ref.shape != opt.shape or ref.ndim != 1 or ref.size < 2:
        raise ValueError(f"need at least 2 paired rounds, got {ref.size} reference and {opt.size} optimized")
    if np.any(ref <= 0) or np.any(opt <= 0):
        raise ValueError("block times must be positive")
    return np.log(ref) - np.log(opt)


def _winsorized(values: np.ndarray, trim: float) -> np.ndarray:
    cut = math.floor(trim * values.size)
    if cut == 0:
        return values
    ordered = np.sort(values)
    return np.clip(values, ordered[cut], ordered[-cut - 1])


@dataclass(frozen=True)
class Autocorrelation:
    """What autocorrelation of the rounds costs: the mean's variance factor f and the spread's factor f_2."""

    variance_factor: float
    degrees_of_freedom_factor: float

    @classmethod
    def of(cls, values: np.ndarray) -> Autocorrelation:
        """max(1, f_NW, f_AR) and f_2 of the module docstring; f_NW alone below MIN_AUTOCORRELATION_ROUNDS."""
        n = values.size
        centered = values - values.mean()
        variance = float(centered @ centered)
        if n < 3 or variance == 0:
            return cls(1.0, 1.0)

        def autocorrelation(lag: int) -> float:
            return float(centered[lag:] @ centered[:-lag]) / variance

        lags = min(n - 1, math.ceil(1.5 * n ** (1 / 3)))
        newey_west = 1 + 2 * sum((1 - lag / (lags + 1)) * autocorrelation(lag) for lag in range(1, lags + 1))
        if n < MIN_AUTOCORRELATION_ROUNDS:
            return cls(max(1.0, newey_west), 1.0)
        lag_one = min(MAX_AUTOCORRELATION, autocorrelation(1) + (1 + 3 * autocorrelation(1)) / n)
        spread = max(0.0, lag_one) ** 2
        return cls(max(1.0, newey_west, (1 + lag_one) / (1 - lag_one)), (1 + spread) / (1 - spread))


def long_run_variance_factor(values: np.ndarray) -> float:
    """max(1, f_NW, f_AR): how much autocorrelation inflates the variance of a mean (module docstring)."""
    return Autocorrelation.of(values).variance_factor


@dataclass(frozen=True)
class LogRatioEstimate:
    """The trimmed mean of the log ratios and what its interval is made of."""

    mean: float
    standard_error: float
    """Already inflated by sqrt(autocorrelation_factor)."""
    degrees_of_freedom: float
    autocorrelation_factor: float

    def interval(self, confidence: float = CONFIDENCE) -> Interval:
        if self.standard_error == 0:
            point = math.exp(self.mean)
            return Interval(point, point, point, confidence)
        margin = t_quantile(0.5 + confidence / 2, self.degrees_of_freedom) * self.standard_error
        bounds = math.exp(self.mean - margin), math.exp(self.mean + margin)
        return Interval(math.exp(self.mean), *bounds, confidence, float(self.degrees_of_freedom))


def _special() -> ModuleType:
    """scipy.special, imported at first use, and not scipy.stats: the stats module took 1.2 s of every case process
    (2-core Xeon), its special functions 0.14 s (2-core AMD EPYC), and each pytest process that times nothing
    loads the plugin without either. Case processes fork from a zygote that imported it
    (optbench.plugin.ZYGOTE_PRELOAD)."""
    from scipy import special

    return special


def t_quantile(probability: float, degrees_of_freedom: float) -> float:
    """Student's t quantile (scipy.stats.t.ppf); the normal one at infinite degrees of freedom."""
    return float(_special().stdtrit(degrees_of_freedom, probability))


def chi2_quantile(probability: float, degrees_of_freedom: float) -> float:
    """The chi-square quantile (scipy.stats.chi2.ppf): chdtri inverts the upper tail."""
    return float(_special().chdtri(degrees_of_freedom, 1 - probability))


def trimmed_mean(values: np.ndarray, trim: float) -> float:
    """The mean of `values` without the floor(trim n) smallest and largest (scipy.stats.trim_mean)."""
    cut = math.floor(trim * values.size)
    return float(np.mean(np.sort(values)[cut : values.size - cut]))


def estimate(reference: Sequence[float], optimized: Sequence[float], trim: float = TRIM) -> LogRatioEstimate:
    """The trimmed-mean log ratio of paired rounds, its autocorrelation-corrected error and degrees of freedom."""
    d = log_ratios(reference, optimized)
    n = d.size
    kept = n - 2 * math.floor(trim * n)
    winsorized = _winsorized(d, trim)
    found = Autocorrelation.of(winsorized)
    spread = float(np.std(winsorized, ddof=1))
    standard_error = spread / ((1 - 2 * trim) * math.sqrt(n)) * math.sqrt(found.variance_factor)
    return LogRatioEstimate(
        mean=trimmed_mean(d, trim),
        standard_error=standard_error,
        degrees_of_freedom=max(1.0, (kept - 1) / found.degrees_of_freedom_factor),
        autocorrelation_factor=found.variance_factor,
    )


def speedup(reference: Sequence[float], optimized: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """exp(trimmed mean of ln(reference/optimized)) over paired rounds, with its interval (module docstring)."""
    return estimate(reference, optimized).interval(confidence)


def rounds_for_precision(
    reference: Sequence[float], optimized: Sequence[float], half_width: float, confidence: float = CONFIDENCE
) -> int:
    """Paired rounds needed for the speedup interval to be about +-half_width (relative), from pilot rounds.

    The pilot's standard error scales as 1/sqrt(n), so n = n_pilot (t se_pilot / ln(1 + half_width))^2,
    t being Student's on the planned rounds' own kept rounds (solved by iteration: n shrinks t, t grows n);
    a pilot is short, so its spread is taken at the upper end of its own 90% chi-square range
    (with the pilot's degrees of freedom: its kept rounds). A 10-round pilot's winsorized spread is
    low more often than chi-square says: at the 80% range 81% of 200 simulated plans reached a +-3%
    target, at 90% 90% did, and 87% with z for t (tests/test_stats.py). Such a pilot's autocorrelation is read from the
    Bartlett window alone, which is bounded (module docstring); the AR(1) factor's cap read 19 on
    white noise and planned 1,009 rounds for a case of 1.4% noise.
    """
    pilot = estimate(reference, optimized)
    n_pilot = len(reference)
    if pilot.standard_error == 0:
        return 2
    pessimism = pilot.degrees_of_freedom / chi2_quantile(PILOT_SPREAD_QUANTILE, pilot.degrees_of_freedom)
    quantile = 0.5 + confidence / 2
    needed = 2
    for _ in range(PLAN_ITERATIONS):
        kept = needed - 2 * math.floor(TRIM * needed)
        t = t_quantile(quantile, max(1, kept - 1))
        needed = max(2, math.ceil(n_pilot * pessimism * (t * pilot.standard_error / math.log1p(half_width)) ** 2))
    return needed
