"""Did a case's speedup change between two runs, and is the change more than noise?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

ALPHA = 0.05


def per_round_speedups(record: dict[str, Any]) -> np.ndarray:
    """Each paired round's reference time over its optimized time."""
    timing = record["timing"]
    return np.asarray(timing["reference_s"]["data"]) / np.asarray(timing["optimized_s"]["data"])


@dataclass(frozen=True)
class Change:
    before: float
    after: float
    p_value: float
    """Two-sided Mann-Whitney U test of the per-round speedups of the two runs."""

    @property
    def relative(self) -> float:
        return self.after / self.before - 1

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA

    def text(self) -> str:
        verdict = "significant" if self.significant else "not significant"
        return f"{self.before:.2f}x -> {self.after:.2f}x ({self.relative:+.1%}, p={self.p_value:.3g}, {verdict})"


def compare_records(before: dict[str, Any], after: dict[str, Any]) -> Change | None:
    """The change of one case between two runs; None when either run did not time it."""
    if not (before.get("timing") and after.get("timing")):
        return None
    result = stats.mannwhitneyu(per_round_speedups(before), per_round_speedups(after), alternative="two-sided")
    return Change(before["speedup"]["point"], after["speedup"]["point"], float(result.pvalue))
