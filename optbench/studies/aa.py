"""Do a case's intervals hold for the next run? An A/A check: the same cases in two separate invocations.

Each invocation is a `pytest` process as a user runs one, on the same commit,
one after the other. If a case's interval describes what the next run reads,
its two intervals differ significantly at the nominal 5% for about 1 case in
20: the difference of the two ln(speedup)s has standard error
sqrt(s_1^2 + s_2^2), each s read back from its interval with the quantile it
was made with (stats.Interval.standard_error). Where an s comes from few
degrees of freedom (nu = K - 1 for an interval across K processes) the ratio
is Welch's t, on Satterthwaite's

    nu = (s_1^2 + s_2^2)^2 / (s_1^4 / nu_1 + s_2^4 / nu_2)

degrees of freedom (a normal interval's nu is infinite), and |t| > t_0.975,nu
is a significant difference: with z in its place, two runs of three processes
would differ for about 1 case in 8, not 1 in 20.
Issue 34 found 3 of 15 cases so on the EPYC VMs with one process per case,
whose interval leaves out the between-process spread; an interval across fresh
processes (`--processes K`, optbench.running.processes) carries it.

Beside it, the gate's own two-run test (optbench.verdict.significance: both intervals
plus the between-run spread, the minimum effect, the false-alarm budget split
over the cases): what a nightly comparison would have called a change.

Where both runs timed each case in K >= 2 processes, the check also gives the
levels its data hold, per case on the log scale, with y_rp run r's process p,
s_rp that process's own standard error, S_r^2 the sample variance of run r's
K processes and d the difference of the two runs' means:

    within^2 = mean(s_rp^2),
    tau_p^2  = max(0, mean_r(S_r^2) - within^2)      (between fresh processes),
    tau_run^2 = max(0, d^2 / 2 - mean_r(S_r^2) / K)  (between runs, beyond them),

each unbiased before the truncation at 0 (E d^2 = 2 (tau_run^2 + sigma^2 / K),
sigma^2 = tau_p^2 + within^2). From them, the half-width each case would have
with k processes, its rounds divided among them as `--processes` divides them
(a process's within^2 grows as k / K):

    h(k) = t_{0.975, nu} sqrt(tau_p^2 / k + within^2 / K),   nu = k - 1 alone,
                                                               (k - 1)(1 + H) pooled with H earlier runs,

the medians over the cases: what K a profile needs, from measured levels
(Kalibera and Jones's allocation, with the rounds' total fixed by the profile).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..reporting.report import case_label, markdown_table
from ..storage.record import Record
from ..verdict.significance import ComparisonSettings, compare_records
from ..verdict.stats import CONFIDENCE, Interval, speedup_text, t_quantile
from .calibration import interval_text
from .order import collect, timed_records


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


@dataclass(frozen=True)
class Difference:
    """The second run's ln(speedup) minus the first's, in standard errors of that difference, and the degrees of
    freedom of those errors (module docstring)."""

    statistic: float
    degrees_of_freedom: float
    """Welch-Satterthwaite's; infinite where both intervals were normal ones."""

    @property
    def significant(self) -> bool:
        """At the nominal 5%, two-sided: beyond t on the degrees of freedom (z where they are infinite)."""
        return abs(self.statistic) > t_quantile(0.5 + CONFIDENCE / 2, self.degrees_of_freedom)

    def text(self) -> str:
        freedom = "" if math.isinf(self.degrees_of_freedom) else f" ({self.degrees_of_freedom:.0f} df)"
        return f"{self.statistic:+.1f}{freedom}"


def difference(first: Interval, second: Interval) -> Difference:
    """How far apart two runs' intervals of a case are (module docstring)."""
    errors = first.standard_error, second.standard_error
    error = math.hypot(*errors)
    change = math.log(second.point) - math.log(first.point)
    if error == 0:
        return Difference(0.0 if change == 0 else math.copysign(math.inf, change), math.inf)
    spent = sum(
        s**4 / interval.degrees_of_freedom
        for s, interval in zip(errors, (first, second), strict=True)
        if interval.degrees_of_freedom is not None
    )
    return Difference(change / error, error**4 / spent if spent else math.inf)


def aa_markdown(check: AaCheck) -> str:
    cases = check.cases
    settings = ComparisonSettings(cases=len(cases))
    headers = ["case", "first run", "second run", "difference", "t", "differ at 5%", "gate calls it a change"]
    rows = []
    differing = changed = 0
    for case in cases:
        first, second = check.first[case], check.second[case]
        assert first.speedup is not None and second.speedup is not None  # timed_records keeps timed ones only
        apart = difference(first.speedup, second.speedup)
        change = compare_records(first, second, settings)
        differs = apart.significant
        calls_change = change is not None and change.significant
        differing += differs
        changed += calls_change
        rows.append(
            [
                case_label(case),
                speedup_text(first.speedup),
                speedup_text(second.speedup),
                f"{second.speedup.point / first.speedup.point - 1:+.1%}",
                apart.text(),
                "YES" if differs else "no",
                "YES" if calls_change else "no",
            ]
        )
    processes = {len(record.processes or [None]) for record in (*check.first.values(), *check.second.values())}
    found = levels(check)
    return (
        markdown_table(rows, headers)
        + f"\n\nintervals that differ at the nominal 5%: {interval_text(differing, len(cases))}"
        + f" (about 5% if they hold for the next run); the gate calls a change: {changed}/{len(cases)}"
        + f"\nprocesses per case: {', '.join(map(str, sorted(processes)))}; {check.wall_s / 60:.0f} min"
        + (f"\n\n{found.text()}" if found else "")
    )


@dataclass(frozen=True)
class CaseLevels:
    """One case's levels, on the log scale (module docstring)."""

    within: float
    between_processes: float
    between_runs: float
    processes: int

    def half_width(self, processes: int, earlier_runs: int = 0) -> float:
        """h(k) of the module docstring, as a relative half-width."""
        freedom = (processes - 1) * (1 + earlier_runs)
        spread = self.between_processes**2 / processes + self.within**2 / self.processes
        return math.expm1(t_quantile(0.5 + CONFIDENCE / 2, freedom) * math.sqrt(spread))


POOLED_RUNS = 4
"""Earlier runs a history pools in the levels' predictions: docs/methodology.md's example of a nightly after four
nights."""


@dataclass(frozen=True)
class Levels:
    """Every case's levels, where both runs timed it in the same K >= 2 processes."""

    cases: tuple[CaseLevels, ...]

    def text(self) -> str:
        def median(values: Sequence[float]) -> str:
            return f"{statistics.median(values):.1%}"

        cases = self.cases
        header = (
            f"levels over {len(cases)} cases (medians; optbench.studies.aa): within a process "
            f"{median([c.within for c in cases])}, between processes {median([c.between_processes for c in cases])}, "
            f"between runs beyond them {median([c.between_runs for c in cases])}\n\n"
        )
        rows = [
            [str(k), median([c.half_width(k) for c in cases]), median([c.half_width(k, POOLED_RUNS) for c in cases])]
            for k in range(2, 7)
        ]
        return header + markdown_table(rows, ["processes", "median half-width", f"with {POOLED_RUNS} earlier runs"])


def case_levels(first: Sequence[Interval], second: Sequence[Interval]) -> CaseLevels:
    """A case's levels from its two runs' processes (module docstring)."""
    logs = [[math.log(p.point) for p in run] for run in (first, second)]
    processes = len(first)
    within2 = statistics.fmean(p.standard_error**2 for p in (*first, *second))
    spread2 = statistics.fmean(statistics.variance(run) for run in logs)
    apart = statistics.fmean(logs[1]) - statistics.fmean(logs[0])
    return CaseLevels(
        math.sqrt(within2),
        math.sqrt(max(0.0, spread2 - within2)),
        math.sqrt(max(0.0, apart**2 / 2 - spread2 / processes)),
        processes,
    )


def levels(check: AaCheck) -> Levels | None:
    """The levels of the cases both runs timed in as many processes (at least 2); None where there are none."""
    found = []
    for case in check.cases:
        first, second = check.first[case].processes, check.second[case].processes
        if first and second and len(first) == len(second) >= 2:
            found.append(case_levels(first, second))
    return Levels(tuple(found)) if found else None
