"""Stored expectations per environment: one plain JSON file per environment key.

Writes merge under a file lock and replace the file atomically, so workers
recording at once lose nothing and a crash mid-write leaves the old file.
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SCHEMA = 1
HISTORY = 5
"""Recorded speedups kept per case; the baseline is their median, so one unlucky recording does not set the bar."""


class BaselineError(Exception):
    """A baseline file that cannot be used; the message is one line naming the file."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _validate_entry(path: Path, case_id: str, entry: Any) -> None:
    where = f"{path}: case {case_id!r}"
    if not isinstance(entry, dict):
        raise BaselineError(f"{where} is not an object; fix the entry or re-record it with --update-baselines")
    speedup = entry.get("speedup")
    interval = entry.get("interval")
    if not _is_number(speedup) or speedup <= 0:
        raise BaselineError(f"{where} has no positive number 'speedup'; fix it or re-record with --update-baselines")
    if not (isinstance(interval, list) and len(interval) == 2 and all(_is_number(v) for v in interval)):
        raise BaselineError(f"{where} needs 'interval' as [low, high]; fix it or re-record with --update-baselines")
    accuracy = entry.get("accuracy")
    if accuracy is not None and not (isinstance(accuracy, dict) and _is_number(accuracy.get("value"))):
        raise BaselineError(f"{where} has an 'accuracy' without a numeric 'value'; fix it or re-record it")


def read_baseline_file(path: Path) -> dict[str, Any]:
    """The parsed, validated file; BaselineError with a one-line reason otherwise."""
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise BaselineError(
            f"{path}: not valid JSON ({error.msg} at line {error.lineno} column {error.colno}); "
            "restore it from git or delete it and run with --update-baselines"
        ) from None
    except OSError as error:
        raise BaselineError(f"{path}: cannot be read ({error.strerror})") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        found = document.get("schema") if isinstance(document, dict) else type(document).__name__
        raise BaselineError(f"{path}: expected schema {SCHEMA}, found {found!r}; this optbench cannot read it")
    cases = document.get("cases")
    if not isinstance(cases, dict):
        raise BaselineError(f"{path}: 'cases' must be an object mapping case ids to entries")
    for case_id, entry in cases.items():
        _validate_entry(path, case_id, entry)
    return document


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def write_json_atomically(path: Path, document: dict[str, Any]) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            json.dump(document, stream, indent=2, sort_keys=True)
            stream.write("\n")
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class BaselineStore:
    """The baselines of one environment key, in `<directory>/<key>.json`."""

    def __init__(self, directory: Path, environment_key: str) -> None:
        self.environment_key = environment_key
        self.path = Path(directory) / f"{environment_key}.json"
        self._cases: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            document = read_baseline_file(self.path)
            recorded_key = document.get("environment", {}).get("environment_key")
            if recorded_key not in (None, environment_key):
                raise BaselineError(
                    f"{self.path}: recorded for environment {recorded_key!r}, not {environment_key!r}; "
                    "rename it to its own key or delete it"
                )
            self._cases = document["cases"]

    def get(self, case_id: str) -> dict[str, Any] | None:
        return self._cases.get(case_id)

    def unknown_cases(self, profile: str, collected_node_ids: set[str]) -> list[str]:
        """Entries of `profile` in the collected files whose case no longer exists (renamed or removed)."""
        files = {node_id.split("::", 1)[0] for node_id in collected_node_ids}
        stale = []
        for case_id in self._cases:
            case_profile, _, node_id = case_id.partition(":")
            if case_profile == profile and node_id.split("::", 1)[0] in files and node_id not in collected_node_ids:
                stale.append(case_id)
        return sorted(stale)

    def record(self, case_id: str, entry: dict[str, Any], environment: dict[str, Any]) -> None:
        """Merge one case's entry into the file, leaving every other entry as it is.

        The case's speedup joins the history of its earlier recordings; the
        stored speedup is the median of the last HISTORY of them.
        """
        _validate_entry(self.path, case_id, entry)
        with _locked(self.path):
            document = read_baseline_file(self.path) if self.path.exists() else {"schema": SCHEMA, "cases": {}}
            previous = document["cases"].get(case_id)
            earlier = (previous.get("history") or [previous["speedup"]]) if previous else []
            history = [*earlier, entry["speedup"]][-HISTORY:]
            merged = {**entry, "speedup": statistics.median(history), "history": history}
            document["environment"] = environment
            document["cases"][case_id] = merged
            write_json_atomically(self.path, document)
        self._cases[case_id] = merged
