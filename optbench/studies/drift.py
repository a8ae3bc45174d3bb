"""How much does a case's speedup drift with time alone? Sessions of timed rounds, back to back in one process.

With `--sessions N` each case's process times its rounds N times in a row,
nothing else running between them: the same compiled code, allocator state and
inputs. Each session gets its own interval (optbench.verdict.stats). If the sessions'
points spread more than their intervals allow, what moves them is time: the
host's other tenants, its clocks, its memory traffic. The spread beyond the
intervals is the random-effects variance of the sessions, by DerSimonian and
Laird's estimator (sessions' intervals differ a lot in width, and one wide
session must not hide the others' spread, as a plain Var - mean(s^2) lets it):

    y_i = ln(point_i),  s_i = the standard error behind session i's interval
          (optbench.verdict.stats.Interval.standard_error),  w_i = 1 / s_i^2,
    Q = sum w_i (y_i - ybar_w)^2,  ybar_w = sum w_i y_i / sum w_i,
    tau2 = max(0, (Q - (k - 1)) / (sum w_i - sum w_i^2 / sum w_i)),

k sessions. Q is chi-square with k - 1 degrees of freedom when the sessions
share one speedup. A tau near the gate's prior (PRIOR_SPREAD) means one run's
interval cannot promise what the next run, a minute later, will read: two runs
of the case then differ by about sqrt(2) tau with no change in the code, the
process or its order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..reporting.report import case_label, markdown_table
from ..storage.record import Record
from ..verdict.regression import PRIOR_SPREAD
from ..verdict.stats import Interval

MIN_ERROR = 1e-6


@dataclass(frozen=True)
class Drift:
    case: str
    sessions: tuple[Interval, ...]

    @classmethod
    def from_record(cls, record: Record) -> Drift | None:
        if not record.sessions or len(record.sessions) < 2:
            return None
        return cls(record.case, tuple(record.sessions))

    @property
    def spread(self) -> float:
        """Highest over lowest session point, minus 1."""
        points = [session.point for session in self.sessions]
        return max(points) / min(points) - 1

    @property
    def disjoint(self) -> bool:
        """Whether two sessions' intervals do not overlap: they cannot both hold the same speedup."""
        return max(session.low for session in self.sessions) > min(session.high for session in self.sessions)

    @property
    def tau(self) -> float:
        """The spread of ln(speedup) between sessions beyond their intervals (module docstring)."""
        logs = [math.log(session.point) for session in self.sessions]
        # A session with no spread at all would weigh infinitely; a floor far below any real timing error.
        weights = [1 / max(s.standard_error, MIN_ERROR) ** 2 for s in self.sessions]
        total = sum(weights)
        center = sum(w * y for w, y in zip(weights, logs, strict=True)) / total
        q = sum(w * (y - center) ** 2 for w, y in zip(weights, logs, strict=True))
        scale = total - sum(w * w for w in weights) / total
        return math.sqrt(max(0.0, (q - (len(logs) - 1)) / scale))


def drift_markdown(drifts: Sequence[Drift]) -> str:
    headers = ["case", "sessions (speedup [95% interval], in time order)", "spread", "disjoint", "tau"]
    rows = [
        [
            case_label(d.case),
            "; ".join(session.text(digits=3) for session in d.sessions),
            f"{d.spread:.1%}",
            "YES" if d.disjoint else "no",
            f"{d.tau:.1%}",
        ]
        for d in drifts
    ]
    disjoint = sum(d.disjoint for d in drifts)
    tau = math.sqrt(sum(d.tau**2 for d in drifts) / len(drifts)) if drifts else 0.0
    return (
        markdown_table(rows, headers)
        + f"\n\ncases whose sessions' intervals are disjoint: {disjoint}/{len(drifts)}; tau over the cases "
        + f"(root mean square): {tau:.1%} (the gate's prior between-run spread: {PRIOR_SPREAD:.0%})"
    )
