"""Saved runs: pytest-benchmark JSON files whose benchmarks carry optbench records in extra_info."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .record import RECORD_KEY, Record, RecordError


class RunFileError(Exception):
    """A run file that cannot be read; the message is one line naming the file."""


@dataclass(frozen=True)
class Run:
    path: Path
    environment_key: str
    torch: str
    datetime: str
    commit: str | None
    records: dict[str, Record]
    """Records by case id."""

    @property
    def label(self) -> str:
        return f"torch {self.torch} / {self.environment_key} ({self.path.name})"


def load_run(path: Path) -> Run:
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise RunFileError(f"{path}: cannot read a pytest-benchmark JSON file ({error})") from None
    if not isinstance(document, dict) or "benchmarks" not in document:
        raise RunFileError(f"{path}: no 'benchmarks' list; is it a --benchmark-json/--benchmark-autosave file?")
    try:
        records = {record.case: record for record in saved_records(document["benchmarks"], str(path))}
    except RecordError as error:
        raise RunFileError(str(error)) from None
    if not records:
        raise RunFileError(f"{path}: holds no optbench records; was it written by `pytest benchmarks`?")
    machine = document.get("machine_info", {}).get(RECORD_KEY, {})
    return Run(
        path=Path(path),
        environment_key=machine.get("environment_key", "unknown environment"),
        torch=machine.get("torch", "unknown"),
        datetime=document.get("datetime", ""),
        commit=(document.get("commit_info") or {}).get("id"),
        records=records,
    )


def saved_records(benchmarks: Iterable[dict[str, Any]], where: str) -> list[Record]:
    """The optbench records among a pytest-benchmark file's benchmarks (each in its extra_info)."""
    return [
        Record.from_json(bench["extra_info"][RECORD_KEY], f"{where}: {bench.get('fullname', 'a benchmark')}")
        for bench in benchmarks
        if RECORD_KEY in bench.get("extra_info", {})
    ]


def run_environment(run: Run) -> dict[str, str]:
    """What a run page says about the run's environment, from its file."""
    return {
        "environment key": run.environment_key,
        "torch": run.torch,
        "run": str(run.path),
        "started": run.datetime,
        "commit": run.commit or "unknown",
    }
