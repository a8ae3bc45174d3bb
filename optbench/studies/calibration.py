"""The gate's error rates, measured the way users meet them.

Every repetition is a separate `pytest` process on real catalogue cases with
default options. First `recordings` processes with `--update-baselines` build
the cases' history through the real baseline store; then each planted
slowdown level (`--plant-slowdown`, inside the optimized variant's timed
call) runs `repetitions` times, the levels shuffled over time so the
machine's drift hits all of them alike. The verdict is read from the records
the plugin wrote: there is no second implementation of the gate here.
pytest-benchmark's `--benchmark-compare-fail=median:10%` is judged on the
same runs, against the last recording run, from the stats it saved.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scipy import stats

from ..reporting.report import case_label, markdown_table
from ..storage.record import read_records

COMPARE_FAIL = 0.10
"""pytest-benchmark's --benchmark-compare-fail=median:10%."""


@dataclass(frozen=True)
class RunResult:
    """One process's outcome per case: verdict status, minimum detectable slowdown, optimized median per call."""

    statuses: dict[str, str]
    detectable: dict[str, float]
    medians: dict[str, float]


def _pytest(
    root: Path, tests: str, expression: str | None, results: Path, *options: str, slowdown: float = 0.0
) -> RunResult:
    command = [sys.executable, "-m", "pytest", tests, "-q", "-p", "no:cacheprovider", "--results-dir", str(results)]
    command += ["--benchmark-json", str(results / "benchmark.json"), "--plant-slowdown", str(slowdown), *options]
    command += ["-k", expression] if expression else []
    subprocess.run(command, cwd=root, capture_output=True, check=False)
    records = read_records(results)
    if not records:
        raise RuntimeError(f"calibration run in {results} recorded nothing; run `{' '.join(command)}` to see why")
    medians: dict[str, float] = {}
    benchmark_json = results / "benchmark.json"
    if benchmark_json.exists():
        for bench in json.loads(benchmark_json.read_text())["benchmarks"]:
            medians[bench["fullname"]] = bench["stats"]["median"]
    timed = [r for r in records if r.speedup]
    return RunResult(
        statuses={r.case: r.verdict.status for r in timed},
        detectable={r.case: r.gate.decision.minimum_detectable_slowdown for r in timed if r.gate and r.gate.decision},
        medians=medians,
    )


@dataclass
class Level:
    """All runs at one planted slowdown."""

    slowdown: float
    runs: list[RunResult] = field(default_factory=list)

    def failing_runs(self) -> int:
        return sum(any(status == "fail" for status in run.statuses.values()) for run in self.runs)

    def case_failures(self) -> tuple[int, int]:
        outcomes = [status == "fail" for run in self.runs for status in run.statuses.values()]
        return sum(outcomes), len(outcomes)

    def compare_fail(self, saved: dict[str, float]) -> tuple[int, int]:
        """Case-runs pytest-benchmark's compare-fail=median:10% fails, against the saved run's medians."""
        outcomes = [
            median > (1 + COMPARE_FAIL) * saved[name]
            for run in self.runs
            for name, median in run.medians.items()
            if name in saved
        ]
        return sum(outcomes), len(outcomes)


def interval_text(successes: int, trials: int) -> str:
    if trials == 0:
        return "-"
    low, high = stats.binomtest(successes, trials).proportion_ci(confidence_level=0.95, method="exact")
    return f"{successes}/{trials} ({successes / trials:.0%}, 95% CI {low:.0%}-{high:.0%})"


@dataclass
class Calibration:
    levels: list[Level]
    saved: dict[str, float]
    per_case: dict[tuple[str, float], list[str]]
    detectable: dict[str, list[float]]
    wall_s: float


def calibrate(
    root: Path,
    workdir: Path,
    expression: str | None,
    recordings: int,
    repetitions: int,
    slowdowns: Sequence[float],
    tests: str = "benchmarks",
    seed: int = 0,
    options: Sequence[str] = (),
) -> Calibration:
    """Recordings, then the shuffled levels (module docstring); `options` go to every pytest run, e.g.
    `--processes 3` to calibrate the gate on intervals across processes."""
    started = time.monotonic()
    baselines = ("--baselines-dir", str(workdir / "baselines"))
    last = None
    for index in range(recordings):
        recording = workdir / f"recording-{index}"
        last = _pytest(root, tests, expression, recording, "--update-baselines", *baselines, *options)
    schedule = [level for level in slowdowns for _ in range(repetitions)]
    random.Random(seed).shuffle(schedule)
    levels = {slowdown: Level(slowdown) for slowdown in slowdowns}
    per_case: dict[tuple[str, float], list[str]] = {}
    detectable: dict[str, list[float]] = {}
    for index, slowdown in enumerate(schedule):
        run = _pytest(root, tests, expression, workdir / f"run-{index}", *baselines, *options, slowdown=slowdown)
        levels[slowdown].runs.append(run)
        for case, status in run.statuses.items():
            per_case.setdefault((case, slowdown), []).append(status)
        for case, smallest in run.detectable.items():
            detectable.setdefault(case, []).append(smallest)
    saved = last.medians if last else {}
    return Calibration(list(levels.values()), saved, per_case, detectable, time.monotonic() - started)


def calibration_markdown(calibration: Calibration) -> str:
    headers = ["planted slowdown", "runs", "runs with a failing case", "case-runs failing", "compare-fail=median:10%"]
    rows = [
        [
            "none (false alarms)" if level.slowdown == 0 else f"{level.slowdown:.0%}",
            str(len(level.runs)),
            interval_text(level.failing_runs(), len(level.runs)),
            interval_text(*level.case_failures()),
            interval_text(*level.compare_fail(calibration.saved)),
        ]
        for level in calibration.levels
    ]
    slowdowns = [level.slowdown for level in calibration.levels]
    cases = sorted({case for case, _ in calibration.per_case})
    case_rows = [
        [
            case_label(case),
            *(
                f"{statuses.count('fail')}/{len(statuses)}"
                if (statuses := calibration.per_case.get((case, s)))
                else "-"
                for s in slowdowns
            ),
            f"{statistics.median(smallest):.0%}" if (smallest := calibration.detectable.get(case)) else "-",
        ]
        for case in cases
    ]
    case_headers = [
        "case",
        *("unchanged" if s == 0 else f"{s:.0%} slower" for s in slowdowns),
        "min detectable (median)",
    ]
    return (
        markdown_table(rows, headers)
        + "\n\nFailing verdicts per case:\n\n"
        + markdown_table(case_rows, case_headers)
        + f"\n\nwall time {calibration.wall_s / 60:.1f} min"
    )
