"""The one entry point: run a case from skip check to verdict, record it, fail it readably."""

from __future__ import annotations

import datetime
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest
import torch

from ..errors import first_lines
from ..internals import benchmark_timing, compile_counts_problem, compile_errors_fall_back_to_eager, reset_compiler
from ..measuring.accuracy import Accuracy, Check
from ..measuring.cache_flush import CacheFlush
from ..measuring.case import Case, Observed
from ..measuring.clock import DeviceClock
from ..measuring.contention import Contention, CpuTimes
from ..measuring.faults import CaseTimeout, Phase, explain, forget_frames, release_memory, time_limit
from ..measuring.gpu_clocks import GpuClocks, GpuState, clock_note
from ..measuring.in_effect import InEffect
from ..measuring.in_effect import failures as not_in_effect
from ..measuring.measurement import (
    BeyondTimeLimit,
    Blocks,
    FirstCalls,
    RoundPlan,
    Rounds,
    WarmUp,
    first_calls,
    paired_rounds,
    plan_rounds,
    replay_rounds,
    session_rounds,
    warm_up,
)
from ..measuring.memory import cuda_graphs_note, peak_memory_bytes
from ..measuring.memory_payoff import MemoryResult, memory_ratio
from ..measuring.switches import deterministic_settings, preserved_global_state
from ..profiles import Profile
from ..reporting.progress import at_most_every
from ..storage.baselines import Baseline, BaselineStore, ProcessSpread, Recording
from ..storage.record import (
    RECORD_KEY,
    AccuracySummary,
    BaselineSummary,
    CompileSummary,
    Gate,
    GpuStates,
    Memory,
    Record,
    Timing,
    Variants,
    VerdictSummary,
    WarmupSummary,
)
from ..studies.agreement import independent_ratios
from ..studies.planted import planted
from ..verdict.gate import Floor, GateSettings, MemoryClaim, Verdict, judge
from ..verdict.stats import Interval
from ..verdict.stats import speedup as speedup_interval
from .allocator import detect_allocator
from .isolation import Finished, IsolationError
from .processes import AcrossProcesses, across_processes

ACCURACY_SEED = 0
PACKAGE = Path(__file__).resolve().parents[1]
DOES_NOT_WORK = "does not work on this model: "
"""How a case on the user's model ends when its technique raises there (`Case.model_may_break`)."""


TIMING_ONLY = "timing only: one of the case's processes (--processes) before its last, which judges it"
Measuring = TypeVar("Measuring")

ROUNDS_REPORT_S = 1.0
"""The timed rounds are reported at most this often: each report is a write, between rounds but inside the
loop."""


@dataclass(frozen=True)
class RunSettings:
    device: torch.device
    profile: Profile
    gate: GateSettings
    update_baselines: bool
    baselines: BaselineStore
    environment: dict[str, Any]
    compile_fallback: bool = False
    agree: bool = False
    """Also time each case with torch.utils.benchmark.Timer (optbench.studies.agreement)."""
    plant_slowdown: float = 0.0
    """Calibration only: make every timed optimized call this much slower (optbench.studies.planted)."""
    commit: str | None = None
    sessions: int = 1
    """Sessions of timed rounds per case, back to back in its process (--sessions; optbench.studies.drift)."""
    timing_only: bool = False
    """This process is one of a case's --processes before its last: it times the case and records only that."""
    earlier_processes: tuple[Interval, ...] = ()
    """In a case's last process: the intervals its earlier processes measured (optbench.running.processes)."""


@dataclass
class Confirmation:
    """The case measured again in a fresh process: its speedup (None if it was not timed) and the wall time spent."""

    speedup: Interval | None
    wall_s: float


def seeded(output: Callable[[], Any]) -> Any:
    random.seed(ACCURACY_SEED)
    torch.manual_seed(ACCURACY_SEED)
    return output()


def raised_by_harness(error: BaseException) -> bool:
    """The innermost frame of `error` is optbench's own code: a harness bug, never blamed on the user's model."""
    entry = error.__traceback__
    while entry is not None and entry.tb_next is not None:
        entry = entry.tb_next
    return entry is not None and Path(entry.tb_frame.f_code.co_filename).resolve().is_relative_to(PACKAGE)


class CaseRunner:
    """Runs the cases of one benchmark test; given to tests as the `optbench` fixture."""

    def __init__(
        self,
        settings: RunSettings,
        benchmark: Any,
        case_id: str,
        technique: str,
        publish: Callable[[Record], None],
        confirm: Callable[[], Confirmation] | None = None,
        isolate: Callable[[], Finished] | None = None,
        independent: Callable[[], list[float] | None] | None = None,
        independent_only: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.benchmark = benchmark
        self.case_id = case_id
        self.technique = technique
        self.publish = publish
        self.confirm = confirm
        """Measures this case again in a fresh process; None inside such a process (no confirmation of its own)."""
        self.isolate = isolate
        """Runs this whole case in a process of its own (optbench.running.isolation); None to run it here."""
        self.independent = independent
        """Times this case with torch.utils.benchmark.Timer in a fresh process (--agree); None not to."""
        self.independent_only = independent_only
        """This process is that fresh process: it only runs the independent timer."""
        self.progress = progress or (lambda phase: None)
        """Told what the case is doing: each phase, each confirmation run, and the timed rounds at most once a
        second (optbench.reporting.progress)."""

    def run(self, case: Case) -> Record:
        """Measure, check and gate `case`; returns its record, fails the test on a failing verdict. Then what the
        case holds is freed (`Case.close`), however it ended."""
        try:
            return self._run(case)
        finally:
            if case.close is not None:
                case.close()

    def _run(self, case: Case) -> Record:
        settings = self.settings
        reason = case.requires.unmet(settings.device, settings.profile.name)
        if reason:
            pytest.skip(reason)
        if self.isolate is not None:
            try:
                finished = self.isolate()
            except IsolationError as error:
                self.publish(self._fault_record(case, str(error)))
                pytest.fail(f"{self.case_id}: {error}", pytrace=False)
            return self._relay(case, finished)
        if self.independent_only:
            return self._time_independently(case)
        phase = Phase(self.progress)
        if settings.timing_only:
            return self._publish_timing(case, self._guarded(case, phase, self._time), phase)
        measured = self._guarded(case, phase, self._measure)
        baseline = None if settings.update_baselines else settings.baselines.get(self.case_id)
        confirmations: list[Confirmation] = []
        verdict = self._verdict(case, measured, baseline, confirmations)
        while verdict.wants_confirmation and self.confirm and len(confirmations) < settings.gate.confirmations:
            self.progress(f"confirmation run {len(confirmations) + 1} of at most {settings.gate.confirmations}")
            confirmations.append(self.confirm())
            verdict = self._verdict(case, measured, baseline, confirmations)
        record = measured.record(verdict, BaselineSummary.of(baseline), confirmations)
        self.benchmark.extra_info[RECORD_KEY] = record.to_json()
        self.publish(record)
        accuracy = measured.accuracy
        if settings.update_baselines and accuracy and accuracy.passed and measured.speedup and not verdict.failures:
            settings.baselines.record(
                self.case_id,
                Recording(
                    speedup=measured.speedup.point,
                    interval=(measured.speedup.low, measured.speedup.high),
                    degrees_of_freedom=measured.speedup.degrees_of_freedom,
                    rounds=measured.plan.rounds if measured.plan else None,
                    recorded=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    torch=torch.__version__,
                    commit=settings.commit,
                    memory_ratio=measured.memory_ratio.point if measured.memory_ratio else None,
                    process_spread=measured.across.spread if measured.across else None,
                ),
                accuracy=accuracy.headline.as_dict(),
                graph_breaks=measured.first.compile.graph_breaks if measured.first.compile.compiled else None,
                environment=settings.environment,
                cuda=torch.version.cuda if settings.device.type == "cuda" else None,
            )
        if verdict.failures:
            pytest.fail(f"{self.case_id}: " + "; ".join(verdict.failures), pytrace=False)
        return record

    def _guarded(self, case: Case, phase: Phase, measure: Callable[[Case, Phase], Measuring]) -> Measuring:
        """`measure(case, phase)` from a compiler reset, within the case's time limit; a fault fails the case."""
        # Each case compiles from scratch, so its compile time and graph counts are its own.
        reset_compiler()
        fault: Exception | None = None
        try:
            fallback = compile_errors_fall_back_to_eager() if self.settings.compile_fallback else nullcontext()
            with preserved_global_state(), fallback, time_limit(self.settings.profile.case_timeout_s, phase):
                return measure(case, phase)
        except Exception as error:
            fault = error  # handled outside the except block, which keeps the traceback and its tensors alive
        self._fail_on_fault(case, fault, phase.current)

    def _publish_timing(self, case: Case, timed: Timed, phase: Phase) -> Record:
        """One of the case's processes before its last (--processes): its timing is all it records."""
        record = Record(
            **self.identity(case),
            timing=Timing.of(timed.plan, timed.rounds, case.cold_cache) if timed.rounds else None,
            speedup=timed.speedup,
            warmup=WarmupSummary.of(timed.warmup),
            compile=CompileSummary.of(timed.first.compile, timed.first.optimized_s),
            phases_s=phase.durations_s,
            verdict=VerdictSummary("pass", [], [], [TIMING_ONLY]),
        )
        self.publish(record)
        return record

    def _relay(self, case: Case, finished: Finished) -> Record:
        """Reproduce here what the case's own process recorded and how its test ended."""
        if finished.problem is not None:
            self.publish(self._fault_record(case, finished.problem))
            pytest.fail(f"{self.case_id}: {finished.problem}", pytrace=False)
        assert finished.outcome is not None
        record = finished.record
        if record is not None:
            self.benchmark.extra_info[RECORD_KEY] = record.to_json()
            if record.timing is not None:
                replay_rounds(self.benchmark, record.timing.optimized_s.data, record.timing.block_calls)
            self.publish(record)
        if finished.outcome.outcome == "skipped":
            pytest.skip(finished.outcome.text)
        if finished.outcome.outcome == "failed":
            pytest.fail(finished.outcome.text, pytrace=False)
        if record is None:
            pytest.fail(f"{self.case_id}: its own process passed but wrote no record", pytrace=False)
        return record

    def _time_independently(self, case: Case) -> Record:
        """Only the independent timer, on a fresh process's first calls of the case (optbench.studies.agreement)."""
        reset_compiler()
        # As the suite times: a run with --benchmark-disable-gc passes it to this process (confirmation._FLAG_OPTIONS).
        disable_gc = benchmark_timing(self.benchmark)[1] if self.benchmark.enabled else False
        with preserved_global_state():
            ratios = independent_ratios(case.reference, case.optimized, disable_gc=disable_gc)
        record = Record(
            **self.identity(case),
            independent_ratios=ratios,
            verdict=VerdictSummary("pass", [], [], ["independent timer only"]),
        )
        self.publish(record)
        return record

    def _verdict(
        self, case: Case, measured: Measured, baseline: Baseline | None, confirmations: list[Confirmation]
    ) -> Verdict:
        settings = self.settings
        measurements = [measured.speedup] if measured.speedup else []
        measurements += [c.speedup for c in confirmations if c.speedup is not None]
        floor = Floor(
            case.floor,
            applies_here=any(c.includes(settings.device) for c in case.floor_applies_on),
            where=" or ".join(c.name for c in case.floor_applies_on),
        )
        verdict = judge(
            measurements,
            measured.accuracy,
            floor,
            case.ceiling,
            baseline,
            settings.gate,
            graph_breaks=measured.first.compile.graph_breaks if measured.first.compile.compiled else None,
            unrepeatable_reference=measured.unrepeatable,
            extra_checks=measured.extra_checks,
            in_effect=measured.in_effect,
            memory=MemoryClaim(case.memory_payoff, measured.memory_ratio) if case.memory_payoff else None,
        )
        self._note_measurement_quality(verdict, case, measured, has_history=baseline is not None)
        verdict.notes.extend([*case.notes, *measured.notes])
        if confirmations:
            spent = sum(c.wall_s for c in confirmations)
            verdict.notes.append(f"{len(confirmations)} confirmation run(s) in fresh processes, {spent:.0f} s")
        return verdict

    def identity(self, case: Case) -> dict[str, Any]:
        """The record fields that say which case ran where, as keyword arguments of `Record`."""
        return {
            "case": self.case_id,
            "technique": self.technique,
            "variant": case.variant,
            "variants": Variants(*case.names),
            "profile": self.settings.profile.name,
            "device": str(self.settings.device),
            "environment_key": self.settings.baselines.environment_key,
            "workload": case.workload,
            "allocator": detect_allocator(),
        }

    def _fail_on_fault(self, case: Case, error: Exception, phase: str) -> NoReturn:
        """Record the fault, free the failed case's memory, then fail the case (or re-raise an unexpected error)."""
        cause = explain(error, phase, case.workload)
        if case.model_may_break and not isinstance(error, CaseTimeout) and not raised_by_harness(error):
            forget_frames(error)
            release_memory(self.settings.device)
            what = cause or f"{type(error).__name__} during {phase}: {first_lines(error, 1)}"
            pytest.skip(f"{DOES_NOT_WORK}{what}")
        # Published first: releasing memory after a sticky CUDA error can fail too.
        self.publish(self._fault_record(case, cause or f"{type(error).__name__} during {phase}: {error}"))
        forget_frames(error)
        unreleased = release_memory(self.settings.device)
        if cause is None:
            raise error
        pytest.fail(f"{self.case_id}: {cause}" + (f"; {unreleased}" if unreleased else ""), pytrace=False)

    def _fault_record(self, case: Case, cause: str) -> Record:
        """The record of a case that ended in a fault (time-out, OOM, compiler error) before it was judged."""
        return Record(**self.identity(case), verdict=VerdictSummary.fault(cause))

    def _time(self, case: Case, phase: Phase) -> Timed:
        """First calls, warm-up and the timed rounds: what runs before anything else heavy in the case's process."""
        settings = self.settings
        profile = settings.profile
        # The reference is timed with the timer and gc treatment pytest-benchmark gives the optimized calls;
        # untimed (--benchmark-disable) there is nothing to match.
        timer, disable_gc = benchmark_timing(self.benchmark) if self.benchmark.enabled else (time.perf_counter, False)
        clock = DeviceClock(settings.device, timer=timer, disable_gc=disable_gc)
        gpu = GpuClocks(settings.device) if settings.device.type == "cuda" else None
        gpu_start = gpu.read() if gpu else None
        optimized = case.optimized
        if settings.plant_slowdown:
            optimized = planted(case.optimized, settings.plant_slowdown, clock)
        phase.enter("first calls (compilation)")
        first = first_calls(case.reference, optimized, clock)
        phase.enter("warm-up")
        enabled = self.benchmark.enabled
        flush = CacheFlush(settings.device) if case.cold_cache else None
        if enabled:
            try:
                warmup = warm_up(
                    case.reference, optimized, clock, profile, first, flush, phase.elapsed_s, profile.case_timeout_s
                )
            except BeyondTimeLimit as too_long:
                pytest.skip(str(too_long))
        else:
            warmup = WarmUp.skipped(first)
        # Timing first, before anything else heavy runs in this process: the fp64 truth, the profiler and the
        # accuracy runs change the allocator's state, and with it the speedup (optbench.running.isolation).
        plan = rounds = speedup = sessions = None
        phase.enter("timed rounds")
        contention = None
        if enabled:
            plan = plan_rounds(warmup, profile)
            if too_long := plan.beyond_time_limit(phase.elapsed_s, profile.case_timeout_s, settings.sessions):
                pytest.skip(too_long)
            cpu_start = CpuTimes.now()
            rounds_progress = at_most_every(ROUNDS_REPORT_S, self.progress)
            blocks = Blocks(clock, warmup.block_calls, flush)
            rounds = paired_rounds(
                self.benchmark, case.reference, optimized, blocks, plan.rounds,
                on_round=lambda done, total: rounds_progress(f"timed rounds {done} of {total}"),
            )  # fmt: skip
            speedup = speedup_interval(rounds.reference_s, rounds.optimized_s)
            sessions = [speedup] if settings.sessions > 1 else None
            for _ in range(settings.sessions - 1):
                phase.enter("more sessions (--sessions)")
                sessions.append(speedup_interval(*session_rounds(case.reference, optimized, blocks, plan.rounds)))
            contention = Contention.between(cpu_start, CpuTimes.now())
        else:
            self.benchmark.pedantic(case.optimized, rounds=1)  # pytest-benchmark expects its fixture used
        return Timed(first, warmup, plan, rounds, speedup, sessions, contention, gpu, gpu_start)

    def _measure(self, case: Case, phase: Phase) -> Measured:
        settings = self.settings
        timed = self._time(case, phase)
        first, warmup, plan, speedup, gpu = timed.first, timed.warmup, timed.plan, timed.speedup, timed.gpu
        processes = [*settings.earlier_processes, speedup] if speedup and settings.earlier_processes else None
        across = across_processes(processes, self._process_history()) if processes else None
        if across is not None:
            speedup = across.speedup
        independent = None
        if speedup is not None and self.independent is not None:
            phase.enter("independent timer (fresh process)")
            independent = self.independent()
        # Observed before accuracy: a case not in effect fails on that alone, and its accuracy runs (the fp64
        # truth, the seeded reruns, a training case's natural spread: 27 of 49 s of amp[bf16-resnet]) would only
        # compare the reference with itself.
        phase.enter("in effect")
        in_effect = [observe(case) for observe in case.in_effect]
        accuracy = unrepeatable = None
        if not not_in_effect(in_effect):
            phase.enter("accuracy")
            accuracy, unrepeatable = self._accuracy(case, compiled=case.expect_compiled or first.compile.compiled)
        phase.enter("peak memory")
        memory_note = cuda_graphs_note(settings.device) if case.expect_compiled else None
        memory = (
            peak_memory_bytes(case.reference, settings.device),
            None if memory_note else peak_memory_bytes(case.optimized, settings.device),
        )
        ratio = None
        if case.memory_payoff is not None:
            phase.enter("peak memory ratio")
            ratio = memory_ratio(case.reference, case.optimized, settings.device)
        phase.enter("details")
        details = case.details() if case.details else None
        phase.enter("extra checks")
        observed = Observed(details, first.compile)
        extra_checks = [check(observed) for check in case.checks]
        phase.enter("verdict")
        gpu_end = gpu.read() if gpu else None
        busy = timed.contention.note if timed.contention else None
        notes = [note for note in (clock_note(timed.gpu_start, gpu_end), gpu.problem if gpu else None, busy) if note]
        if across is not None and across.unstable:
            notes.append(across.unstable)
        if across is not None and across.pooled_runs:
            notes.append(f"interval across {len(processes)} processes, their spread pooled with {across.pooled_runs} "
                         "earlier runs' of as many (optbench.running.processes)")  # fmt: skip
        if settings.plant_slowdown:
            notes.append(f"calibration: optimized calls made {settings.plant_slowdown:.0%} slower on purpose")
        return Measured(
            runner=self,
            case=case,
            first=first,
            warmup=warmup,
            plan=plan,
            rounds=timed.rounds,
            speedup=speedup,
            accuracy=accuracy,
            unrepeatable=unrepeatable,
            memory=memory,
            memory_note=memory_note,
            memory_ratio=ratio,
            details=details,
            extra_checks=extra_checks,
            in_effect=in_effect,
            phases_s=phase.durations_s,
            gpu=(timed.gpu_start, gpu_end),
            independent_ratios=independent,
            sessions=timed.sessions,
            processes=processes,
            across=across,
            notes=notes,
        )

    def _process_history(self) -> list[ProcessSpread]:
        """How far this case's processes read apart in the history's runs (--processes); none without history."""
        baseline = self.settings.baselines.get(self.case_id)
        recordings = baseline.recordings if baseline else ()
        return [recording.process_spread for recording in recordings if recording.process_spread]

    def _note_measurement_quality(self, verdict: Verdict, case: Case, measured: Measured, has_history: bool) -> None:
        target = self.settings.profile.ci_half_width
        speedup, plan, warmup = measured.speedup, measured.plan, measured.warmup
        if speedup and plan and speedup.relative_half_width > target and not verdict.unstable:
            missed = (
                f"interval +-{speedup.relative_half_width:.1%} misses its target +-{target:.0%}"
                f" after {plan.rounds} rounds{' (budget-limited)' if plan.budget_limited else ''}"
                + (f" in each of {len(measured.processes)} processes" if measured.processes else "")
            )
            # With history the regression test weighs the wide interval itself; without, nothing backs a pass.
            (verdict.notes if has_history else verdict.inconclusive).append(missed)
        if warmup.pairs and not warmup.settled:
            verdict.notes.append(f"warm-up did not settle in {warmup.pairs} rounds")
        if case.expect_compiled and not warmup.first.compile.compiled:
            if self.settings.compile_fallback:
                verdict.notes.append(
                    "torch.compile fell back to eager (--compile-fallback): optimized timings are eager"
                )
            else:
                verdict.failures.append(
                    compile_counts_problem()
                    or "compile: torch.compile captured no graph, so the 'optimized' variant ran eager"
                )

    def _accuracy(self, case: Case, compiled: bool) -> tuple[Accuracy, Check | None]:
        """The comparison, after checking that the reference repeats itself under fixed seeds.

        A reference that differs from itself (nondeterministic kernels) cannot
        judge the optimization; that is reported as such, as PyTorch's dynamo
        benchmark does with `eager_two_runs_differ`. An eager optimized variant
        runs in the same deterministic mode: cuDNN keys its plans on that flag,
        so otherwise the two variants could get different kernels and a bitwise
        check would blame the optimization. A `compiled` one (declared, or seen
        compiling in its first call) runs as timed, outside that mode: dynamo
        guards on it, so compiled code would recompile and the check would
        judge another graph than the one timed.
        """
        reference_output = case.reference_output or case.reference
        with deterministic_settings():
            reference = seeded(reference_output)
            repeated = seeded(case.reference_rerun or reference_output)
            fp64 = seeded(case.fp64_output) if case.fp64_output else None
        with nullcontext() if compiled else deterministic_settings():
            optimized = seeded(case.optimized_output or case.optimized)
        unrepeatable = next(iter(case.accuracy(reference, repeated, fp64).pair_failures), None)
        return case.accuracy(reference, optimized, fp64), unrepeatable


@dataclass(frozen=True)
class Timed:
    """What timing a case gave: first calls, warm-up and timed rounds, before anything else runs in its process."""

    first: FirstCalls
    warmup: WarmUp
    plan: RoundPlan | None
    rounds: Rounds | None
    speedup: Interval | None
    """None where timing is off (--benchmark-disable)."""
    sessions: list[Interval] | None
    contention: Contention | None
    gpu: GpuClocks | None
    gpu_start: GpuState | None


@dataclass
class Measured:
    """Everything one case's measurement produced, before the verdict."""

    runner: CaseRunner
    case: Case
    first: FirstCalls
    warmup: WarmUp
    plan: RoundPlan | None
    rounds: Rounds | None
    speedup: Interval | None
    accuracy: Accuracy | None
    """None where the case is not in effect: its accuracy is not checked."""
    unrepeatable: Check | None
    memory: tuple[int | None, int | None]
    memory_note: str | None
    """Why the optimized variant's memory is not measured (CUDA graphs); None where it is."""
    memory_ratio: Interval | None
    """Reference / optimized peak memory over repeated calls, for a memory case; None otherwise."""
    details: dict[str, Any] | None
    extra_checks: list[Check]
    in_effect: list[InEffect]
    phases_s: dict[str, float]
    gpu: tuple[GpuState | None, GpuState | None]
    independent_ratios: list[float] | None
    sessions: list[Interval] | None
    processes: list[Interval] | None
    """With --processes K: each process's own interval, this one's last; `speedup` is the interval across them."""
    across: AcrossProcesses | None
    notes: list[str]

    def record(self, verdict: Verdict, baseline: BaselineSummary | None, confirmations: list[Confirmation]) -> Record:
        case = self.case
        start, end = self.gpu
        return Record(
            **self.runner.identity(case),
            timing=Timing.of(self.plan, self.rounds, case.cold_cache) if self.rounds else None,
            speedup=self.speedup,
            warmup=WarmupSummary.of(self.warmup),
            compile=CompileSummary.of(self.first.compile, self.first.optimized_s),
            memory=Memory(*self.memory, optimized_note=self.memory_note),
            accuracy=AccuracySummary.of(self.accuracy, reference_deterministic=self.unrepeatable is None)
            if self.accuracy
            else None,
            extra_checks=self.extra_checks,
            in_effect=self.in_effect,
            gate=Gate(
                floor=case.floor,
                ceiling=case.ceiling,
                baseline=baseline,
                decision=verdict.decision,
                does_not_pay=verdict.does_not_pay,
                confirmations=[c.speedup for c in confirmations],
            ),
            verdict=VerdictSummary.of(verdict),
            details=self.details,
            memory_payoff=MemoryResult(
                case.memory_payoff.floor, case.memory_payoff.max_slowdown, self.memory_ratio, verdict.does_not_pay
            )
            if case.memory_payoff
            else None,
            phases_s=self.phases_s,
            gpu=GpuStates(start, end) if start and end else None,
            independent_ratios=self.independent_ratios,
            sessions=self.sessions,
            processes=self.processes,
        )
