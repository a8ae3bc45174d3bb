"""Did a case's speedup change between two runs? The gate's own test (optbench.verdict.regression.compare), both ways.

The between-run spread comes from the environment's history where a run has
one (the plugin passes the pooled variance of its baselines), else from the
prior; the false-alarm budget is split over the cases compared.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..storage.record import Record
from .regression import PRIOR_SPREAD, Change, compare


@dataclass(frozen=True)
class ComparisonSettings:
    pooled_variance: float = PRIOR_SPREAD**2
    false_alarm_rate: float = 0.02
    min_effect: float = 0.05
    cases: int = 1


def compare_records(before: Record, after: Record, settings: ComparisonSettings) -> Change | None:
    """The change of one case between two runs; None when either run did not time it."""
    if before.speedup is None or after.speedup is None:
        return None
    return compare(
        before.speedup,
        after.speedup,
        settings.pooled_variance,
        settings.false_alarm_rate,
        settings.cases,
        settings.min_effect,
    )
