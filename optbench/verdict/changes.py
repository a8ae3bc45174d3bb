"""Change points in a case's nightly speedups: segment, then confirm each candidate with a test.

Following E-Divisive-then-t-test (MongoDB's change-point detection, Apache
Otava), on y_i = log(speedup of night i):

1. Noise scale from successive differences, robust to the steps themselves
   and to outlier nights: sigma = MAD(y_{i+1} - y_i) / (0.6745 * sqrt(2)).
2. Segmentation by PELT with an L2 cost (`ruptures`), minimum segment
   `MIN_NIGHTS`, penalty `PENALTY * sigma^2 * log(n)`: a split is kept when it
   explains more variance than a BIC-like price for one more mean.
3. Confirmation: for each candidate at night k, Welch's t-test (`scipy.stats`)
   between up to `WINDOW` nights before k and after it, bounded by the
   neighbouring change points. A change is confirmed when p < `ALPHA` and its
   size |exp(mean_after - mean_before) - 1| is at least `MIN_SIZE`; otherwise
   it is a watch item. Its size's interval is exp of Welch's interval for
   the difference of the two means.

A single outlier night cannot make a segment (`MIN_NIGHTS` > 1); a slow
drift shows as one or more slowdowns once it has moved far enough. The
settings were chosen on 90-night series resampled from real unchanged runs
of six smoke cases on a 2-core AVX512-BF16 EPYC (15 runs each; between-run
standard deviation of the log speedup 1.1-2.7% for four cases, 7% and 20%
for the other two), 30-50 seeds each: a 10% step is found within one night
in 30 of 30 series of the four, 23/30 at 7% and 0/30 at 20%; flat series
gave 0 confirmed changes in 50 for five cases, 1-2 in 50 at the noisiest.
With `MIN_NIGHTS` 3 and penalty 3, three lucky nights in a row made a
change in 2-4 of 30 flat series. A change is seen `MIN_NIGHTS` nights
after it lands at the earliest; the per-run gate catches the large ones on
the night itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import ruptures
from scipy import stats

from ..storage.history import Night

MIN_NIGHTS = 4
PENALTY = 5.0
WINDOW = 15
ALPHA = 0.001
MIN_SIZE = 0.03
CONFIDENCE = 0.95
RECENT_NIGHTS = 7
"""Changes this close to the newest night are news: a confirmed one fails the nightly job."""


@dataclass(frozen=True)
class Change:
    case: str
    index: int
    """Position in the case's series of the first night after the change."""
    before: Night
    """The last night before it."""
    after: Night
    """The first night after it."""
    size: float
    """Relative change of the speedup: -0.1 is 10% slower."""
    low: float
    high: float
    p_value: float
    nights_before: int
    nights_after: int
    nights_since: int
    """Nights from this change to the newest one, this one included."""
    confirmed: bool

    def text(self) -> str:
        direction = "slower" if self.size < 0 else "faster"
        status = "confirmed" if self.confirmed else "watch"
        return (
            f"{self.case}: {abs(self.size):.1%} {direction} [{self.low:+.1%}, {self.high:+.1%}] from night "
            f"{self.after.run} (commit {(self.after.commit or '?')[:8]}, torch {self.after.torch}); before it "
            f"{self.before.run} (commit {(self.before.commit or '?')[:8]}, torch {self.before.torch}); "
            f"{self.nights_before} nights before, {self.nights_after} after, p={self.p_value:.1g}, {status}"
        )


def noise_scale(values: np.ndarray) -> float:
    differences = np.diff(values)
    if differences.size == 0:
        return 0.0
    return float(np.median(np.abs(differences - np.median(differences))) / (0.6745 * math.sqrt(2)))


def _welch(before: np.ndarray, after: np.ndarray) -> tuple[float, float, float, float]:
    """Difference of means (after - before), its interval, and Welch's p-value."""
    result = stats.ttest_ind(after, before, equal_var=False)
    interval = result.confidence_interval(CONFIDENCE)
    difference = float(after.mean() - before.mean())
    return difference, float(interval.low), float(interval.high), float(result.pvalue)


def case_changes(case: str, nights: list[Night]) -> list[Change]:
    """Candidate and confirmed changes in one case's series, in night order."""
    values = np.log(np.array([night.speedup for night in nights]))
    if len(values) < 2 * MIN_NIGHTS:
        return []
    sigma = noise_scale(values)
    if sigma == 0:
        sigma = float(np.std(values)) or 1e-12
    penalty = PENALTY * sigma**2 * math.log(len(values))
    ends = ruptures.Pelt(model="l2", min_size=MIN_NIGHTS, jump=1).fit(values.reshape(-1, 1)).predict(pen=penalty)
    bounds = [0, *ends]
    changes = []
    for previous, index, following in zip(bounds, bounds[1:], bounds[2:], strict=False):
        before = values[max(previous, index - WINDOW) : index]
        after = values[index : min(following, index + WINDOW)]
        difference, low, high, p_value = _welch(before, after)
        size = math.expm1(difference)
        changes.append(
            Change(
                case=case,
                index=index,
                before=nights[index - 1],
                after=nights[index],
                size=size,
                low=math.expm1(low),
                high=math.expm1(high),
                p_value=p_value,
                nights_before=len(before),
                nights_after=len(after),
                nights_since=len(values) - index,
                confirmed=p_value < ALPHA and abs(size) >= MIN_SIZE,
            )
        )
    return changes


def alert_markdown(changes: list[Change], recent: int = RECENT_NIGHTS) -> tuple[str, bool]:
    """The job summary's block for changes in the newest `recent` nights, and whether one is confirmed."""
    news = [change for change in changes if change.nights_since <= recent]
    confirmed = [change for change in news if change.confirmed]
    watch = [change for change in news if not change.confirmed]
    lines = [f"## Change points in the last {recent} nights", ""]
    if confirmed:
        lines += ["**Confirmed (this fails the job):**", "", *(f"- {change.text()}" for change in confirmed), ""]
    if watch:
        lines += ["Watch items (not significant yet):", "", *(f"- {change.text()}" for change in watch), ""]
    if not news:
        lines.append("none")
    return "\n".join(lines) + "\n", bool(confirmed)
