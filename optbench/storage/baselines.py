"""Stored history per environment: one plain JSON file per environment key, the last recordings of each case.

Writes merge under a file lock and replace the file atomically, so workers
recording at once lose nothing and a crash mid-write leaves the old file.
Schema 1 files were measured by alternating single calls, before block
rounds: their speedups are not comparable with today's and are refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..verdict.stats import Interval

SCHEMA = 2
KEEP = 20
"""Recordings kept per case: enough to estimate its between-run spread, recent enough to be today's machine."""


class BaselineError(Exception):
    """A baseline file that cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class ProcessSpread:
    """How far a run's fresh processes of a case read apart: the sample variance of their ln(speedup)s, on
    `processes` - 1 degrees of freedom. Later runs with as many processes pool it (optbench.running.processes)."""

    variance: float
    processes: int


@dataclass(frozen=True)
class Recording:
    """One run's measurement of a case, as the gate's history keeps it."""

    speedup: float
    interval: tuple[float, float] | None
    """The run's own 95% interval; None where it was not recorded (the gate then counts it as exact)."""
    rounds: int | None = None
    recorded: str | None = None
    """ISO date or date-time."""
    torch: str | None = None
    commit: str | None = None
    memory_ratio: float | None = None
    """Reference / optimized peak memory, for cases whose payoff is memory (`optbench.measuring.memory_payoff`)."""
    process_spread: ProcessSpread | None = None
    """Where the run timed the case in several processes (--processes): how far they read apart."""
    degrees_of_freedom: float | None = None
    """The interval's (stats.Interval.degrees_of_freedom); None for a normal one, or one recorded before it was kept."""

    @property
    def standard_error(self) -> float:
        """Of ln(speedup), read back from the interval; 0 without one (which errs toward a larger between-run
        spread)."""
        if self.interval is None:
            return 0.0
        return Interval(self.speedup, *self.interval, degrees_of_freedom=self.degrees_of_freedom).standard_error

    def as_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["interval"] = list(self.interval) if self.interval else None
        return document


@dataclass(frozen=True)
class Baseline:
    """A case's history on one environment: its recordings (oldest first) and its latest accuracy and compile."""

    recordings: tuple[Recording, ...]
    accuracy: dict[str, Any] | None = None
    """The headline check of the latest recording (metric, value, limit, lower_is_better)."""
    graph_breaks: int | None = None
    cuda: str | None = None

    @property
    def latest(self) -> Recording:
        return self.recordings[-1]

    def with_recording(
        self, recording: Recording, accuracy: dict[str, Any] | None, graph_breaks: int | None
    ) -> Baseline:
        return replace(
            self, recordings=(*self.recordings, recording)[-KEEP:], accuracy=accuracy, graph_breaks=graph_breaks
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "recordings": [recording.as_dict() for recording in self.recordings],
            "accuracy": self.accuracy,
            "graph_breaks": self.graph_breaks,
            "cuda": self.cuda,
        }


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fix(where: str, what: str) -> BaselineError:
    return BaselineError(f"{where} {what}; fix it, or delete the entry and re-record it with --update-baselines")


def _interval(where: str, value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 2 and all(_is_number(v) and v > 0 for v in value)):
        raise _fix(where, "needs 'interval' as [low, high] of positive numbers")
    return (float(value[0]), float(value[1]))


def _recording(where: str, document: Any) -> Recording:
    if not isinstance(document, dict):
        raise _fix(where, "has a recording that is not an object")
    speedup = document.get("speedup")
    if not _is_number(speedup) or speedup <= 0:
        raise _fix(where, "has a recording without a positive number 'speedup'")
    return Recording(
        speedup=float(speedup),
        interval=_interval(where, document.get("interval")),
        rounds=document.get("rounds"),
        recorded=document.get("recorded"),
        torch=document.get("torch"),
        commit=document.get("commit"),
        memory_ratio=_memory_ratio(where, document.get("memory_ratio")),
        process_spread=_process_spread(where, document.get("process_spread")),
        degrees_of_freedom=_degrees_of_freedom(where, document.get("degrees_of_freedom")),
    )


def _degrees_of_freedom(where: str, value: Any) -> float | None:
    if value is None:
        return None
    if not (_is_number(value) and value > 0):
        raise _fix(where, "has a 'degrees_of_freedom' that is not a positive number")
    return float(value)


def _process_spread(where: str, value: Any) -> ProcessSpread | None:
    if value is None:
        return None
    variance, processes = (value.get(key) for key in ("variance", "processes")) if isinstance(value, dict) else (0, 0)
    if not (_is_number(variance) and variance >= 0 and isinstance(processes, int) and processes >= 2):
        raise _fix(where, "has a 'process_spread' that is not {variance >= 0, processes >= 2}")
    return ProcessSpread(float(variance), processes)


def _memory_ratio(where: str, value: Any) -> float | None:
    if value is not None and not (_is_number(value) and value > 0):
        raise _fix(where, "has a 'memory_ratio' that is not a positive number")
    return None if value is None else float(value)


def _accuracy(where: str, accuracy: Any) -> dict[str, Any] | None:
    if accuracy is not None and not (isinstance(accuracy, dict) and _is_number(accuracy.get("value"))):
        raise _fix(where, "has an 'accuracy' without a numeric 'value'")
    return accuracy


def parse_entry(path: Path, case_id: str, entry: Any) -> Baseline:
    """One case's entry as a Baseline; BaselineError with a one-line reason otherwise."""
    where = f"{path}: case {case_id!r}"
    if not isinstance(entry, dict):
        raise _fix(where, "is not an object")
    documents = entry.get("recordings")
    if not isinstance(documents, list) or not documents:
        raise _fix(where, "needs a non-empty list 'recordings'")
    return Baseline(
        recordings=tuple(_recording(where, document) for document in documents),
        accuracy=_accuracy(where, entry.get("accuracy")),
        graph_breaks=entry.get("graph_breaks"),
        cuda=entry.get("cuda"),
    )


def read_baseline_file(path: Path) -> tuple[dict[str, Any], dict[str, Baseline]]:
    """The file's environment and its cases; BaselineError with a one-line reason otherwise."""
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise BaselineError(
            f"{path}: not valid JSON ({error.msg} at line {error.lineno} column {error.colno}); "
            "restore it from git or delete it and run with --update-baselines"
        ) from None
    except OSError as error:
        raise BaselineError(f"{path}: cannot be read ({error.strerror})") from None
    schema = document.get("schema") if isinstance(document, dict) else None
    if schema == 1:
        raise BaselineError(
            f"{path}: schema 1 was measured with alternating single calls, not comparable with block rounds; "
            "delete it and re-record this machine's history with --update-baselines"
        )
    if schema != SCHEMA:
        found = schema if isinstance(document, dict) else type(document).__name__
        raise BaselineError(f"{path}: expected schema {SCHEMA}, found {found!r}; this optbench cannot read it")
    cases = document.get("cases")
    if not isinstance(cases, dict):
        raise BaselineError(f"{path}: 'cases' must be an object mapping case ids to entries")
    environment = document.get("environment") if isinstance(document.get("environment"), dict) else {}
    return environment, {case_id: parse_entry(path, case_id, entry) for case_id, entry in cases.items()}


@contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def write_json_atomically(path: Path, document: dict[str, Any]) -> None:
    write_text_atomically(path, json.dumps(document, indent=2, sort_keys=True) + "\n")


def write_text_atomically(path: Path, text: str) -> None:
    """`path` holds either its old text or `text`, never a part: a temporary file, fsynced, then renamed."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
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
        self._cases: dict[str, Baseline] = {}
        if self.path.exists():
            environment, self._cases = read_baseline_file(self.path)
            recorded_key = environment.get("environment_key")
            if recorded_key not in (None, environment_key):
                raise BaselineError(
                    f"{self.path}: recorded for environment {recorded_key!r}, not {environment_key!r}; "
                    "rename it to its own key or delete it"
                )

    def get(self, case_id: str) -> Baseline | None:
        return self._cases.get(case_id)

    def histories(self) -> dict[str, Baseline]:
        """Every case of this environment: the pool the gate shrinks short histories toward."""
        return dict(self._cases)

    def unknown_cases(self, profile: str, collected_node_ids: set[str]) -> list[str]:
        """Entries of `profile` in the collected files whose case no longer exists (renamed or removed)."""
        files = {node_id.split("::", 1)[0] for node_id in collected_node_ids}
        stale = []
        for case_id in self._cases:
            case_profile, _, node_id = case_id.partition(":")
            if case_profile == profile and node_id.split("::", 1)[0] in files and node_id not in collected_node_ids:
                stale.append(case_id)
        return sorted(stale)

    def record(
        self,
        case_id: str,
        recording: Recording,
        accuracy: dict[str, Any] | None,
        graph_breaks: int | None,
        environment: dict[str, Any],
        cuda: str | None = None,
    ) -> Baseline:
        """Append one recording to the case's history (the last KEEP are kept), leaving every other entry as it is."""
        with locked(self.path):
            if self.path.exists():
                _, cases = read_baseline_file(self.path)
            else:
                cases = {}
            previous = cases.get(case_id) or Baseline(recordings=(), cuda=cuda)
            cases[case_id] = previous.with_recording(recording, accuracy, graph_breaks)
            document = {
                "schema": SCHEMA,
                "environment": environment,
                "cases": {key: baseline.as_dict() for key, baseline in cases.items()},
            }
            write_json_atomically(self.path, document)
        self._cases[case_id] = cases[case_id]
        return cases[case_id]
