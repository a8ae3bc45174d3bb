"""Do a case's intervals hold for the next run? An A/A check: the same cases in two separate invocations.

Each invocation is a `pytest` process as a user runs one, on the same commit,
one after the other. If a case's interval describes what the next run reads,
its two intervals differ significantly at the nominal 5% for about 1 case in
20: the difference of the two ln(speedup)s has standard error
sqrt(s_1^2 + s_2^2), each s read back from its interval
(regression.within_run_error), and |z| > z_0.975 is a significant difference.
Issue 34 found 3 of 15 cases so on the EPYC VMs with one process per case,
whose interval leaves out the between-process spread; an interval across fresh
processes (`--processes K`, optbench.processes) carries it.

Beside it, the gate's own two-run test (optbench.significance: both intervals
plus the between-run spread, the minimum effect, the false-alarm budget split
over the cases): what a nightly comparison would have called a change.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from .calibration import interval_text
from .order import collect, timed_records
from .record import Record
from .regression import within_run_error
from .report import case_label, markdown_table
from .significance import ComparisonSettings, compare_records
from .stats import CONFIDENCE, Interval, speedup_text

Z = NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)


@dataclass(frozen=True)
class AaCheck:
    """The timed records of the two invocations, by case id."""

    first: dict[str, Record]
    second: dict[str, Record]
    wall_s: float

    @property
    def cases(self) -> list[str]:
        """The cases both invocations timed, in the first one's order."""
        return [case for case in self.first if case in self.second]


def check_aa(
    root: Path, workdir: Path, tests: str = "benchmarks", expression: str | None = None, options: Sequence[str] = ()
) -> AaCheck:
    """Run the selection twice, each time in a pytest process of its own, and keep what each timed."""
    started = time.monotonic()
    nodes = collect(root, tests, expression, options)
    first, second = (timed_records(root, nodes, workdir / run, options) for run in ("first", "second"))
    return AaCheck(first, second, time.monotonic() - started)


def difference_z(first: Interval, second: Interval) -> float:
    """The second's ln(speedup) minus the first's, in standard errors of that difference (module docstring)."""
    error = math.hypot(within_run_error(first.low, first.high), within_run_error(second.low, second.high))
    difference = math.log(second.point) - math.log(first.point)
    if error == 0:
        return 0.0 if difference == 0 else math.copysign(math.inf, difference)
    return difference / error


def aa_markdown(check: AaCheck) -> str:
    cases = check.cases
    settings = ComparisonSettings(cases=len(cases))
    headers = ["case", "first run", "second run", "difference", "z", "differ at 5%", "gate calls it a change"]
    rows = []
    differing = changed = 0
    for case in cases:
        first, second = check.first[case], check.second[case]
        assert first.speedup is not None and second.speedup is not None  # timed_records keeps timed ones only
        z = difference_z(first.speedup, second.speedup)
        change = compare_records(first, second, settings)
        differs = abs(z) > Z
        calls_change = change is not None and change.significant
        differing += differs
        changed += calls_change
        rows.append(
            [
                case_label(case),
                speedup_text(first.speedup),
                speedup_text(second.speedup),
                f"{second.speedup.point / first.speedup.point - 1:+.1%}",
                f"{z:+.1f}",
                "YES" if differs else "no",
                "YES" if calls_change else "no",
            ]
        )
    processes = {len(record.processes or [None]) for record in (*check.first.values(), *check.second.values())}
    return (
        markdown_table(rows, headers)
        + f"\n\nintervals that differ at the nominal 5%: {interval_text(differing, len(cases))}"
        + f" (about 5% if they hold for the next run); the gate calls a change: {changed}/{len(cases)}"
        + f"\nprocesses per case: {', '.join(map(str, sorted(processes)))}; {check.wall_s / 60:.0f} min"
    )
