"""Does a case's speedup depend on what ran before it? The same cases forward, in reverse, and each alone.

Each arrangement is a separate `pytest` process, as a user runs one: the
selection in collection order, the same node ids in reverse order, and every
case by itself (`pytest NODE`). A case reads the same when its reversed and
alone speedups are within the gate's own between-run margin of the forward
one (optbench.verdict.significance: both intervals plus the between-run spread, at a
2% false-alarm budget over the cases): the test a nightly comparison applies
to a change, so whatever a case ran after must not show up as one. Without
isolation (`--isolation none`) a case that changes the allocator's state
moves the cases after it (tests/test_isolation.py plants one).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..reporting.report import case_label, markdown_table
from ..storage.record import Record, read_records
from ..verdict.significance import ComparisonSettings, compare_records
from ..verdict.stats import speedup_text


class OrderCheckError(RuntimeError):
    """The selection could not be collected or a run recorded nothing."""


def _pytest(root: Path, arguments: Sequence[str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *arguments]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)


def collect(root: Path, tests: str, expression: str | None, options: Sequence[str]) -> list[str]:
    """The node ids `pytest tests -k expression` would run, in its order."""
    finished = _pytest(root, [tests, "--collect-only", "-q", *(["-k", expression] if expression else []), *options])
    nodes = [line.strip() for line in finished.stdout.splitlines() if "::" in line and " " not in line.strip()]
    if not nodes:
        raise OrderCheckError(f"nothing collected from {tests} (pytest exit {finished.returncode}); check -k")
    return nodes


def timed_records(root: Path, nodes: Sequence[str], results: Path, options: Sequence[str]) -> dict[str, Record]:
    """Run `nodes` in this order in one pytest process; its timed records by case id."""
    finished = _pytest(root, [*nodes, "-q", "--results-dir", str(results), *options])
    records = {record.case: record for record in read_records(results) if record.speedup is not None}
    if not records:
        last_words = (finished.stdout + finished.stderr).strip().splitlines()[-1:] or ["no output"]
        raise OrderCheckError(
            f"a run of {len(nodes)} case(s) timed nothing (pytest exit {finished.returncode}): {last_words[0]}"
        )
    return records


@dataclass(frozen=True)
class OrderCheck:
    """Each arrangement's timed records by case id."""

    forward: dict[str, Record]
    reversed: dict[str, Record]
    alone: dict[str, Record]
    wall_s: float

    @property
    def cases(self) -> list[str]:
        return list(self.forward)


def check_order(
    root: Path, workdir: Path, tests: str = "benchmarks", expression: str | None = None, options: Sequence[str] = ()
) -> OrderCheck:
    started = time.monotonic()
    nodes = collect(root, tests, expression, options)
    forward = timed_records(root, nodes, workdir / "forward", options)
    backward = timed_records(root, nodes[::-1], workdir / "reversed", options)
    # A node the forward run timed nothing for (a plain test, a case that skips here: most of the catalogue on a
    # CPU) is not run alone: each such run was a pytest start, 5-10 s, with nothing to compare.
    timed = {record.node_id for record in forward.values()}
    alone: dict[str, Record] = {}
    for index, node in enumerate(nodes):
        if node not in timed:
            continue
        try:
            alone.update(timed_records(root, [node], workdir / f"alone-{index}", options))
        except OrderCheckError:
            continue  # timed forward, untimed alone: the table says so by its absence
    return OrderCheck(forward, backward, alone, time.monotonic() - started)


@dataclass(frozen=True)
class Reading:
    """One arrangement's reading of a case against the forward one."""

    text: str
    overlaps: bool
    """Both 95% intervals share a value."""
    within_margin: bool
    """No change beyond the gate's between-run margin."""


def _reading(before: Record, after: Record | None, settings: ComparisonSettings) -> Reading:
    change = compare_records(before, after, settings) if after is not None else None
    if after is None or after.speedup is None or before.speedup is None or change is None:
        return Reading("-", False, False)
    overlaps = after.speedup.low <= before.speedup.high and before.speedup.low <= after.speedup.high
    text = f"{speedup_text(after.speedup)}; {change.relative:+.1%} (margin +-{change.margin:.0%})"
    return Reading(text, overlaps, not change.significant)


def order_markdown(check: OrderCheck) -> str:
    settings = ComparisonSettings(cases=len(check.cases))
    headers = ["case", "forward", "reversed", "alone", "intervals overlap", "within margin"]
    rows = []
    overlapping = within = 0
    for case in check.cases:
        forward = check.forward[case]
        readings = [_reading(forward, arrangement.get(case), settings) for arrangement in (check.reversed, check.alone)]
        overlaps = all(reading.overlaps for reading in readings)
        same = all(reading.within_margin for reading in readings)
        overlapping += overlaps
        within += same
        rows.append(
            [
                case_label(case),
                speedup_text(forward.speedup),
                *(reading.text for reading in readings),
                "yes" if overlaps else "NO",
                "yes" if same else "NO",
            ]
        )
    total = len(check.cases)
    return (
        markdown_table(rows, headers)
        + f"\n\nintervals overlap in all three arrangements: {overlapping}/{total}; "
        + f"within the gate's between-run margin in all three: {within}/{total} ({check.wall_s / 60:.0f} min)"
    )
