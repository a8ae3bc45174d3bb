"""Nightly history: every night's per-case results for one environment, in a JSON-lines file.

One line per case per night (a `Night`), appended by `python -m optbench
history add RUN.json`. JSON lines because a night is an append, a reader
needs nothing but the standard library, and a diff of the file in review
shows exactly the nights added. An append takes the same file lock as the
baseline store and replaces the file atomically, so a killed job leaves the
history as it was. A history holds one environment key: nights measured on
another machine, GPU or torch build are not comparable and are refused.
Nothing is ever dropped; at one line of about 400 bytes per case per night a
60-case catalogue grows by about 9 MB a year, which the nightly workflow's
artifact chain carries without trimming.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from .baselines import locked, write_text_atomically
from .runs import Run


class HistoryError(Exception):
    """A history file or run that cannot be used; the message is one line naming it and what to do."""


@dataclass(frozen=True)
class Night:
    """One case's result on one night."""

    run: str
    """The run's pytest-benchmark `datetime`: what makes a night unique."""
    case: str
    environment_key: str
    torch: str
    commit: str | None
    speedup: float
    low: float
    high: float
    reference_median_s: float
    optimized_median_s: float
    accuracy_metric: str
    accuracy_value: float
    minimum_detectable: float | None
    verdict: str


def nights_of(run: Run) -> list[Night]:
    """The timed cases of a saved run, as history lines."""
    nights = []
    for case, record in sorted(run.records.items()):
        if not record.speedup or not record.timing or not record.accuracy:
            continue
        headline = record.accuracy.headline
        decision = record.gate.decision if record.gate else None
        nights.append(
            Night(
                run=run.datetime,
                case=case,
                environment_key=run.environment_key,
                torch=run.torch,
                commit=run.commit,
                speedup=record.speedup.point,
                low=record.speedup.low,
                high=record.speedup.high,
                reference_median_s=record.timing.reference_s.median,
                optimized_median_s=record.timing.optimized_s.median,
                accuracy_metric=headline.metric,
                accuracy_value=headline.value,
                minimum_detectable=decision.minimum_detectable_slowdown if decision else None,
                verdict=record.verdict.status,
            )
        )
    return nights


_FIELDS = {field.name for field in fields(Night)}


def read_history(path: Path) -> list[Night]:
    """Every night in `path`, in the order appended; none if the file does not exist yet."""
    if not path.exists():
        return []
    nights = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict) or set(entry) != _FIELDS:
                raise ValueError(f"fields {sorted(entry) if isinstance(entry, dict) else type(entry).__name__}")
            nights.append(Night(**entry))
        except ValueError as error:
            raise HistoryError(
                f"{path}:{number}: not a history line ({error}); restore the file from the previous night's artifact"
            ) from None
    return nights


def add_run(path: Path, run: Run) -> tuple[int, str | None]:
    """Appends `run`'s nights to the history at `path`; returns how many, and a warning if none were new."""
    new = nights_of(run)
    if not new:
        raise HistoryError(f"{run.path}: no timed cases to add (was it run with --benchmark-disable?)")
    with locked(path):
        known = read_history(path)
        keys = {night.environment_key for night in known}
        if keys and run.environment_key not in keys:
            raise HistoryError(
                f"{run.path}: environment {run.environment_key} but {path} holds {sorted(keys)[0]}; "
                "keep one history per environment key (--history FILE)"
            )
        if any(night.run == run.datetime for night in known):
            return 0, f"{run.path}: run {run.datetime} is already in {path}; nothing added"
        text = path.read_text() if path.exists() else ""
        text += "".join(json.dumps(asdict(night), sort_keys=True) + "\n" for night in new)
        write_text_atomically(path, text)
    return len(new), None


def series(nights: Iterable[Night], expression: str | None = None) -> dict[str, list[Night]]:
    """Nights by case, in order; `expression` keeps the cases whose id contains every word of it."""
    words = re.findall(r"[^\s]+", expression or "")
    by_case: dict[str, list[Night]] = {}
    for night in nights:
        if all(word in night.case for word in words):
            by_case.setdefault(night.case, []).append(night)
    return by_case


def history_table(nights: list[Night], expression: str | None = None) -> str:
    rows = []
    for case, case_nights in series(nights, expression).items():
        last = case_nights[-1]
        rows.append(
            f"{case}: {len(case_nights)} nights, last {last.run} {last.speedup:.2f}x "
            f"[{last.low:.2f}, {last.high:.2f}] {last.verdict} (torch {last.torch}, commit {(last.commit or '?')[:8]})"
        )
    return "\n".join(rows) if rows else "no nights recorded"
