"""The gate's measured error rates: false alarms on unchanged code, detection of planted slowdowns.

Runs calibration/test_gate_calibration.py through the same plugin and gate as
the catalogue: once to record a baseline, then many repetitions with and
without a planted slowdown, all held against that baseline. pytest-benchmark's
`--benchmark-compare-fail=mean:5%` is judged on the same measurements (mean
optimized time vs the baseline run's), as it would compare two saved runs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .baselines import SCHEMA, write_json_atomically
from .record import baseline_entry
from .report import markdown_table

ROOT = Path(__file__).resolve().parents[1]
MODULE = "calibration/test_gate_calibration.py"


def _run_pytest(workdir: Path, name: str, repetitions: int, slowdowns: Sequence[float], *options: str) -> list[dict]:
    results = workdir / name
    environment = {
        **os.environ,
        "OPTBENCH_CALIBRATION_REPETITIONS": str(repetitions),
        "OPTBENCH_CALIBRATION_SLOWDOWNS": ",".join(str(s) for s in slowdowns),
    }
    command = [sys.executable, "-m", "pytest", MODULE, "-q", "-p", "no:cacheprovider", "--benchmark-disable-gc"]
    command += ["--baselines-dir", str(workdir / "baselines"), "--results-dir", str(results), *options]
    subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False)
    path = results / "records.jsonl"
    if not path.exists():
        raise RuntimeError(f"calibration run {name!r} recorded nothing; run `pytest {MODULE}` to see why")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _slowdown(record: dict[str, Any]) -> float:
    return float(record["case"].split("[", 1)[1].split("-", 1)[0])


@dataclass(frozen=True)
class Row:
    slowdown: float
    repetitions: int
    gate_failures: dict[float, int]
    """Failures of optbench's gate, by speedup tolerance."""
    compare_fail_failures: int
    """Failures of pytest-benchmark's --benchmark-compare-fail=mean:5%."""


def calibrate(
    workdir: Path, repetitions: int, slowdowns: Sequence[float], tolerances: Sequence[float], case_budget: float
) -> list[Row]:
    budget = ("--case-budget", str(case_budget))
    (baseline,) = _run_pytest(workdir, "baseline-run", 1, [0.0], "--update-baselines", *budget)
    entry = baseline_entry(baseline)
    reference_mean = statistics.fmean(baseline["timing"]["optimized_s"]["data"])
    case_ids = [
        baseline["case"].replace("[0.0-0]", f"[{slowdown}-{repetition}]")
        for slowdown in slowdowns
        for repetition in range(repetitions)
    ]
    write_json_atomically(
        workdir / "baselines" / f"{baseline['environment_key']}.json",
        {"schema": SCHEMA, "cases": dict.fromkeys(case_ids, entry)},
    )
    records = _run_pytest(workdir, "gate-run", repetitions, slowdowns, *budget)
    rows = []
    for slowdown in slowdowns:
        measured = [r for r in records if _slowdown(r) == slowdown and r["speedup"]]
        gate = {
            tolerance: sum(
                r["speedup"]["high"] < max(r["gate"]["floor"], entry["speedup"] * (1 - tolerance)) for r in measured
            )
            for tolerance in tolerances
        }
        compare_fail = sum(
            statistics.fmean(r["timing"]["optimized_s"]["data"]) > 1.05 * reference_mean for r in measured
        )
        rows.append(Row(slowdown, len(measured), gate, compare_fail))
    return rows


def rows_markdown(rows: Sequence[Row], tolerances: Sequence[float]) -> str:
    headers = [
        "planted slowdown",
        "repetitions",
        *(f"optbench gate fails (tolerance {t:.0%})" for t in tolerances),
        "pytest-benchmark compare-fail=mean:5% fails",
    ]
    body = [
        [
            "none (false alarms)" if row.slowdown == 0 else f"{row.slowdown:.0%}",
            str(row.repetitions),
            *(f"{row.gate_failures[t]}/{row.repetitions}" for t in tolerances),
            f"{row.compare_fail_failures}/{row.repetitions}",
        ]
        for row in rows
    ]
    return markdown_table(body, headers)
