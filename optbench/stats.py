"""Speedup of paired timings and its bootstrap confidence interval."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
_BOOTSTRAP_RESAMPLES = 2000


@dataclass(frozen=True)
class Interval:
    """A point estimate with the bounds of its confidence interval."""

    point: float
    low: float
    high: float
    confidence: float = CONFIDENCE

    @property
    def relative_half_width(self) -> float:
        return (self.high - self.low) / (2 * self.point)

    def text(self) -> str:
        return f"{self.point:.2f}x [{self.low:.2f}, {self.high:.2f}]"

    def as_dict(self) -> dict[str, float]:
        return {"point": self.point, "low": self.low, "high": self.high, "confidence": self.confidence}


def _median_ratio(reference: np.ndarray, optimized: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(reference, axis=axis) / np.median(optimized, axis=axis)


def speedup(reference: Sequence[float], optimized: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """median(reference) / median(optimized), with a paired percentile-bootstrap interval.

    Rounds are resampled as pairs, so drift of the machine that hit both
    variants of a round cancels out instead of widening the interval.
    """
    ref = np.asarray(reference, dtype=float)
    opt = np.asarray(optimized, dtype=float)
    if ref.shape != opt.shape or ref.size < 2:
        raise ValueError(f"need at least 2 paired rounds, got {ref.size} reference and {opt.size} optimized")
    point = float(_median_ratio(ref, opt))
    if np.all(ref == ref[0]) and np.all(opt == opt[0]):
        return Interval(point, point, point, confidence)
    result = stats.bootstrap(
        (ref, opt),
        _median_ratio,
        paired=True,
        vectorized=True,
        confidence_level=confidence,
        n_resamples=_BOOTSTRAP_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(0),
    )
    low, high = result.confidence_interval
    return Interval(point, float(low), float(high), confidence)


def rounds_for_precision(
    reference: Sequence[float], optimized: Sequence[float], half_width: float, confidence: float = CONFIDENCE
) -> int:
    """Paired rounds needed for the speedup interval to be about +-half_width (relative).

    Uses the pilot's robust spread (scaled MAD, blind to the rare stalls a
    median ignores too) of log times per variant and the asymptotic
    efficiency of the median (its standard error is about sqrt(pi/2) times
    that of the mean). The spreads add as if unpaired: each median picks its
    own round, so pairing cancels only part of the drift; erring wide is safer.
    """
    log_reference = np.log(np.asarray(reference, dtype=float))
    log_optimized = np.log(np.asarray(optimized, dtype=float))
    if log_reference.size < 2:
        return 2
    spread = math.hypot(
        stats.median_abs_deviation(log_reference, scale="normal"),
        stats.median_abs_deviation(log_optimized, scale="normal"),
    )
    z = stats.norm.ppf(0.5 + confidence / 2)
    needed = (z * math.sqrt(math.pi / 2) * spread / math.log1p(half_width)) ** 2
    return max(2, math.ceil(needed))
