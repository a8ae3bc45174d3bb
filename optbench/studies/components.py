"""Where a case's speedup varies, what each level costs, and how many of each an interval should take.

A case's speedup is read at three nested levels: rounds within a session of
timed rounds, sessions within one process (optbench.studies.drift), and fresh
processes, each of which draws its own speedup and keeps it (issue 34: 1.44x in
the suite's process, 1.68x in an independent one). On the log scale, for
process p = 1..P and session j = 1..S of it:

    y_pj = mu + a_p + b_pj + e_pj,   var a_p = tau_p^2,  var b_pj = tau_s^2,  var e_pj = s_pj^2,

y_pj the session's ln(speedup), s_pj the standard error its own rounds give it
(read back from its interval: stats.Interval.standard_error; autocorrelation
included), tau_s the drift between sessions of one process, tau_p the draw of a
fresh process. In a balanced design the mean squares have the expectations

    MS_within  = sum_p sum_j (y_pj - ybar_p)^2 / (P (S - 1)),   E = tau_s^2 + mean(s^2)
    MS_between = S sum_p (ybar_p - ybar)^2 / (P - 1),           E = S tau_p^2 + tau_s^2 + mean(s^2)

so tau_s^2 = MS_within - mean(s^2) and tau_p^2 = (MS_between - MS_within) / S,
each unbiased and reported at 0 when negative (the moment estimators Kalibera &
Jones use level by level: "Rigorous Benchmarking in Reasonable Time", ISMM
2013, section 3).

Allocation. A case timed in k processes of r rounds each (one session each)
estimates mu with variance and cost

    V = v / k,   v = tau^2 + sigma^2 / r,   C = k (c_p + r c_r),   tau^2 = tau_p^2 + tau_s^2,  sigma^2 = R mean(s^2),

sigma^2 being one round's share of a session of R rounds, c_r a round's
seconds and c_p a process's besides its rounds (first calls and warm-up; the
fork is not in the records, so c_p is low by a second or two). Minimizing V at
a given C (a Lagrange multiplier; Kalibera & Jones's optimal repetition count,
Cochran's two-stage sampling) gives rounds per process independent of the
budget:

    r* = sqrt((c_p / c_r) (sigma^2 / tau^2)),

and the processes then follow from the target half-width h: the least k >= 2
with t_{k-1} sqrt(v / k) <= ln(1 + h), v at r*. Where tau is 0 no level above
the rounds varies, r* is the most rounds a profile takes, and two processes
still show that it is 0.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..profiles import MIN_ROUNDS_FLOOR, MOST_ROUNDS
from ..reporting.report import case_label, markdown_table
from ..storage.record import Record
from ..verdict.stats import t_quantile
from .order import collect, timed_records

PROCESS_PHASES = ("setup", "first calls (compilation)", "warm-up")
"""What a process costs besides its timed rounds: what each extra process repeats."""
ROUND_PHASES = ("timed rounds", "more sessions (--sessions)")


@dataclass(frozen=True)
class Moments:
    """The raw moment estimates of one case's components (module docstring); negative where sampling says so."""

    within: float
    """mean(s^2): the sessions' own squared standard errors, averaged."""
    tau_session2: float
    tau_process2: float


def moments(logs: Sequence[Sequence[float]], errors: Sequence[Sequence[float]]) -> Moments:
    """The estimates from `logs[p][j]` (ln speedup of process p's session j) and their standard errors."""
    processes, sessions = len(logs), len(logs[0])
    if processes < 2 or sessions < 2 or any(len(row) != sessions for row in [*logs, *errors]):
        raise ValueError(f"need a balanced design of at least 2 processes x 2 sessions, got {processes} x {sessions}")
    means = [statistics.fmean(row) for row in logs]
    grand = statistics.fmean(means)
    squares = sum((y - m) ** 2 for row, m in zip(logs, means, strict=True) for y in row)
    within_ms = squares / (processes * (sessions - 1))
    between_ms = sessions * sum((m - grand) ** 2 for m in means) / (processes - 1)
    within = statistics.fmean(s * s for row in errors for s in row)
    return Moments(within, within_ms - within, (between_ms - within_ms) / sessions)


@dataclass(frozen=True)
class Allocation:
    rounds: int
    """Timed rounds per process."""
    processes: int
    seconds: float
    """What the case's timing then costs: processes x (process cost + rounds x round cost)."""


@dataclass(frozen=True)
class Components:
    """One case's variance components on the log scale and its costs (module docstring)."""

    case: str
    processes: int
    sessions: int
    rounds: int
    """Timed rounds per session."""
    moments: Moments
    round_s: float
    process_s: float

    @property
    def tau_session(self) -> float:
        return math.sqrt(max(0.0, self.moments.tau_session2))

    @property
    def tau_process(self) -> float:
        return math.sqrt(max(0.0, self.moments.tau_process2))

    @property
    def round_variance(self) -> float:
        """sigma^2: one round's variance of ln(speedup), from the sessions' errors."""
        return self.rounds * self.moments.within

    @classmethod
    def of(cls, case: str, records: Sequence[Record]) -> Components | None:
        """From the records of one case, one per process, each with its sessions (`--sessions S`); None where
        fewer than two processes timed it in at least two sessions each."""
        timed = [
            (r.sessions, r.timing.plan.rounds, r)
            for r in records
            if r.sessions and len(r.sessions) >= 2 and r.timing and r.timing.plan
        ]
        if len(timed) < 2:
            return None
        sessions = min(len(intervals) for intervals, _, _ in timed)
        logs = [[math.log(s.point) for s in intervals[:sessions]] for intervals, _, _ in timed]
        errors = [[s.standard_error for s in intervals[:sessions]] for intervals, _, _ in timed]
        # Each process planned its own rounds from its pilot: a round's cost is its own phases over its own rounds.
        round_s = statistics.fmean(_phases(r, ROUND_PHASES) / (len(intervals) * n) for intervals, n, r in timed)
        process_s = statistics.fmean(_phases(r, PROCESS_PHASES) for _, _, r in timed)
        rounds = round(statistics.median(n for _, n, _ in timed))
        return cls(case, len(timed), sessions, rounds, moments(logs, errors), round_s, process_s)

    def allocation(self, half_width: float) -> Allocation:
        """Rounds per process and processes for an interval of +-half_width at least cost (module docstring)."""
        tau2 = self.tau_process**2 + self.tau_session**2
        if tau2 > 0 and self.round_s > 0:
            best = math.sqrt(self.process_s / self.round_s * self.round_variance / tau2)
            rounds = min(MOST_ROUNDS, max(MIN_ROUNDS_FLOOR, round(best)))
        else:
            rounds = MOST_ROUNDS
        variance = tau2 + self.round_variance / rounds
        target = math.log1p(half_width)
        processes = 2
        while t_quantile(0.975, processes - 1) * math.sqrt(variance / processes) > target and processes < 1000:
            processes += 1
        return Allocation(rounds, processes, processes * (self.process_s + rounds * self.round_s))


def _phases(record: Record, names: Sequence[str]) -> float:
    return sum((record.phases_s or {}).get(name, 0.0) for name in names)


def measure(
    root: Path, tests: str, expression: str | None, processes: int, sessions: int, options: Sequence[str], work: Path
) -> list[Components]:
    """Each selected case in `processes` pytest runs, each case of a run in a fresh process of its own with
    `sessions` sessions of timed rounds; the runs' case order shuffled (seeded), so that an order effect or a
    drift over the minutes of the study lands in the between-process spread, where it belongs."""
    nodes = collect(root, tests, expression, options)
    shuffle = random.Random(0)
    by_case: dict[str, list[Record]] = {}
    for index in range(processes):
        order = shuffle.sample(nodes, len(nodes))
        records = timed_records(root, order, work / f"process-{index}", ["--sessions", str(sessions), *options])
        for case, record in records.items():
            by_case.setdefault(case, []).append(record)
    found = (Components.of(case, records) for case, records in by_case.items())
    return [components for components in found if components is not None]


def components_markdown(found: Sequence[Components], half_width: float) -> str:
    headers = [
        "case", "processes x sessions x rounds", "within (session se)", "tau session", "tau process",
        "round s", "process s", f"for +-{half_width:.0%}: rounds x processes", "its timing s",
    ]  # fmt: skip
    rows = []
    for c in found:
        allocation = c.allocation(half_width)
        rows.append(
            [
                case_label(c.case),
                f"{c.processes} x {c.sessions} x {c.rounds}",
                f"{math.sqrt(c.moments.within):.1%}",
                f"{c.tau_session:.1%}",
                f"{c.tau_process:.1%}",
                f"{c.round_s:.3f}",
                f"{c.process_s:.1f}",
                f"{allocation.rounds} x {allocation.processes}",
                f"{allocation.seconds:.0f}",
            ]
        )
    lines = [markdown_table(rows, headers)]
    if found:
        median = statistics.median
        lines.append(
            f"\nmedian over {len(found)} cases: session se {median(math.sqrt(c.moments.within) for c in found):.1%}, "
            f"tau session {median(c.tau_session for c in found):.1%}, "
            f"tau process {median(c.tau_process for c in found):.1%}"
        )
    return "\n".join(lines)
