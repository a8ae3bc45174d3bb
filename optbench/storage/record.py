"""The record of one case: typed values, plain JSON at the edges (pytest-benchmark's extra_info, records.jsonl).

A `Record` is built once, by the runner, from the typed values of the
measurement and the verdict; every reader (summary, recommendation, cross-run
report, history, agreement, calibration, confirmation) gets it back as the same
types through `Record.from_json`. The JSON layout is `dataclasses.asdict` of
these classes with `schema` set to `SCHEMA`. Records written before the layout
had a version carry no `schema`; their fields are the same, so they load with
the fields added since at their defaults.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dacite

from ..measuring.accuracy import Accuracy, Check
from ..measuring.compilation import CompileActivity
from ..measuring.gpu_clocks import GpuState
from ..measuring.in_effect import InEffect
from ..measuring.measurement import RoundPlan, Rounds, WarmUp
from ..measuring.memory_payoff import MemoryResult
from ..running.allocator import Allocator
from ..verdict.gate import Verdict
from ..verdict.regression import Decision
from ..verdict.stats import Interval
from .baselines import Baseline

RECORD_KEY = "optbench"
RECORDS_FILE = "records.jsonl"
"""One JSON record per line, appended as each case finishes, in the run's --results-dir."""
SCHEMA = 2
"""1 is the untyped layout before this module typed it (no `schema` field); 2 added `schema`, `variant` and
`extra_checks`."""


class RecordError(Exception):
    """A record that cannot be read; the message is one line saying where and what to do."""


@dataclass(frozen=True)
class Variants:
    """Display labels of the two sides, e.g. ("eager", "compile:default"). Nothing keys on them."""

    reference: str
    optimized: str


@dataclass(frozen=True)
class TimeSummary:
    """Seconds per call over the timed blocks of one variant."""

    median: float
    min: float
    max: float
    data: list[float] = field(default_factory=list)
    """Every block's time per call; files trimmed for size may drop it."""

    @classmethod
    def of(cls, times: list[float]) -> TimeSummary:
        return cls(statistics.median(times), min(times), max(times), list(times))


@dataclass(frozen=True)
class Timing:
    plan: RoundPlan | None
    block_calls: int
    cold_cache: bool
    reference_s: TimeSummary
    optimized_s: TimeSummary
    reference_device_s: TimeSummary | None = None
    """By CUDA events, on a GPU."""
    optimized_device_s: TimeSummary | None = None

    @classmethod
    def of(cls, plan: RoundPlan | None, rounds: Rounds, cold_cache: bool) -> Timing:
        on_device = rounds.reference_device_s and rounds.optimized_device_s
        return cls(
            plan=plan,
            block_calls=rounds.block_calls,
            cold_cache=cold_cache,
            reference_s=TimeSummary.of(rounds.reference_s),
            optimized_s=TimeSummary.of(rounds.optimized_s),
            reference_device_s=TimeSummary.of(rounds.reference_device_s) if on_device else None,
            optimized_device_s=TimeSummary.of(rounds.optimized_device_s) if on_device else None,
        )


@dataclass(frozen=True)
class WarmupSummary:
    reference_first_s: float
    optimized_first_s: float
    block_calls: int
    pairs: int
    settled: bool

    @classmethod
    def of(cls, warmup: WarmUp) -> WarmupSummary:
        return cls(warmup.first.reference_s, warmup.first.optimized_s, warmup.block_calls, warmup.pairs, warmup.settled)


@dataclass(frozen=True)
class CompileSummary:
    """What torch.compile did in the optimized variant's first call, and how long that call took."""

    first_call_s: float
    graphs: int
    graph_breaks: int
    break_reasons: list[str]

    @classmethod
    def of(cls, activity: CompileActivity, first_call_s: float) -> CompileSummary | None:
        if not activity.compiled:
            return None
        return cls(first_call_s, activity.graphs, activity.graph_breaks, activity.break_reasons[:5])


@dataclass(frozen=True)
class Memory:
    """Bytes each variant's call needed above what was alive before it (optbench.measuring.memory)."""

    reference_bytes: int | None
    optimized_bytes: int | None
    optimized_note: str | None = None
    """Why the optimized side was deliberately not measured (it replays CUDA graphs); shown as n/a."""


@dataclass(frozen=True)
class AccuracySummary:
    passed: bool
    reference_deterministic: bool
    checks: list[Check]

    @property
    def headline(self) -> Check:
        return self.checks[0]

    @classmethod
    def of(cls, accuracy: Accuracy, reference_deterministic: bool) -> AccuracySummary:
        return cls(accuracy.passed, reference_deterministic, list(accuracy.checks))


@dataclass(frozen=True)
class BaselineSummary:
    """What a record says about the history it was judged against."""

    recordings: int
    latest: float
    recorded: str | None
    accuracy: dict[str, Any] | None
    graph_breaks: int | None

    @classmethod
    def of(cls, baseline: Baseline | None) -> BaselineSummary | None:
        if baseline is None:
            return None
        latest = baseline.latest
        return cls(len(baseline.recordings), latest.speedup, latest.recorded, baseline.accuracy, baseline.graph_breaks)


@dataclass(frozen=True)
class Gate:
    floor: float
    ceiling: float | None
    baseline: BaselineSummary | None
    decision: Decision | None
    does_not_pay: bool
    confirmations: list[Interval | None]
    """Speedups measured again in fresh processes (None: that run was not timed)."""


@dataclass(frozen=True)
class VerdictSummary:
    status: str
    """pass, inconclusive or fail."""
    failures: list[str]
    inconclusive: list[str]
    notes: list[str]

    @classmethod
    def of(cls, verdict: Verdict) -> VerdictSummary:
        return cls(verdict.status, list(verdict.failures), list(verdict.inconclusive), list(verdict.notes))

    @classmethod
    def fault(cls, cause: str) -> VerdictSummary:
        return cls("fail", [cause], [], [])


@dataclass(frozen=True)
class GpuStates:
    start: GpuState
    end: GpuState


@dataclass(frozen=True)
class Record:
    case: str
    """`<profile>:<node id>`."""
    technique: str
    """The registered technique (`optbench.techniques`) the case measured."""
    variant: str
    """What the optimized side turns on, as the case declares it (`Case.variant`); reports key on it."""
    variants: Variants
    profile: str
    device: str
    environment_key: str
    workload: str = ""
    allocator: Allocator | None = None
    """The allocator of the process that ran the case (optbench.running.allocator); None in records written before
    it was
    read. Optional, so readers of the same schema without the field ignore it."""
    timing: Timing | None = None
    speedup: Interval | None = None
    warmup: WarmupSummary | None = None
    compile: CompileSummary | None = None
    memory: Memory | None = None
    accuracy: AccuracySummary | None = None
    """None when the case ended in a fault before its accuracy was checked."""
    extra_checks: list[Check] = field(default_factory=list)
    """The case's own checks beyond accuracy (`Case.checks`), judged in its verdict."""
    in_effect: list[InEffect] = field(default_factory=list)
    """What showed the optimization acting (`Case.in_effect`), judged in its verdict. Older records lack it."""
    gate: Gate | None = None
    verdict: VerdictSummary = field(default_factory=lambda: VerdictSummary("fail", ["no verdict recorded"], [], []))
    details: dict[str, Any] | None = None
    """The case's own extra measurements (`Case.details`), free-form."""
    memory_payoff: MemoryResult | None = None
    """For a case whose payoff is memory: its promise and the peak-memory ratio measured."""
    phases_s: dict[str, float] | None = None
    gpu: GpuStates | None = None
    independent_ratios: list[float] | None = None
    sessions: list[Interval] | None = None
    """With --sessions N: the speedup of each of N sessions of timed rounds, back to back in this case's process
    (the first is `speedup`); how much it drifts with time alone (optbench.studies.drift)."""
    processes: list[Interval] | None = None
    """With --processes K: the speedup each of the case's K fresh processes measured, in the order they ran;
    `speedup` is then the interval across them (optbench.running.processes)."""
    schema: int = SCHEMA

    @property
    def node_id(self) -> str:
        """The pytest node id: the case across profiles and saved runs."""
        return self.case.split(":", 1)[1]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, document: Any, where: str = "record") -> Record:
        if not isinstance(document, dict):
            raise RecordError(f"{where}: not a JSON object; was it written by optbench?")
        schema = document.get("schema", 1)
        if schema > SCHEMA:
            raise RecordError(f"{where}: record schema {schema} is newer than this optbench reads ({SCHEMA}); upgrade")
        try:
            return dacite.from_dict(cls, {"variant": "", **document, "schema": schema}, _DACITE)
        except dacite.DaciteError as error:
            raise RecordError(
                f"{where}: not an optbench record ({error}); re-run the case to write a new one"
            ) from None


_DACITE = dacite.Config(cast=[tuple])


def read_records(results_dir: Path) -> list[Record]:
    """The records a run wrote to `results_dir`, in order; none if it wrote none."""
    path = Path(results_dir) / RECORDS_FILE
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            document = json.loads(line)
        except json.JSONDecodeError as error:
            raise RecordError(f"{path}:{number}: not JSON ({error.msg}); the run that wrote it was cut short") from None
        records.append(Record.from_json(document, f"{path}:{number}"))
    return records
