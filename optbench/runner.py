"""The one entry point: run a case from skip check to verdict, record it, fail it readably."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from .accuracy import Accuracy, Check
from .baselines import BaselineStore
from .case import Case
from .clock import DeviceClock
from .faults import Phase, explain, release_memory, time_limit
from .gate import Verdict, judge, speed_threshold
from .measurement import RoundPlan, WarmUp, first_calls, paired_rounds, plan_rounds, warm_up
from .memory import peak_memory_bytes
from .profiles import Profile
from .record import RECORD_KEY, baseline_entry, build_record, fault_record
from .stats import Interval
from .stats import speedup as speedup_interval
from .switches import preserved_global_state

ACCURACY_SEED = 0


@dataclass(frozen=True)
class RunSettings:
    device: torch.device
    profile: Profile
    speedup_tolerance: float
    accuracy_drift: float
    update_baselines: bool
    baselines: BaselineStore
    environment: dict[str, Any]
    compile_fallback: bool = False


@contextmanager
def deterministic_settings() -> Iterator[None]:
    """Deterministic kernels where torch has them, restored on exit."""
    deterministic, warn_only = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    cudnn_deterministic = torch.backends.cudnn.deterministic
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.backends.cudnn.deterministic = cudnn_deterministic


def seeded(output: Callable[[], Any]) -> Any:
    random.seed(ACCURACY_SEED)
    torch.manual_seed(ACCURACY_SEED)
    return output()


class CaseRunner:
    """Runs the cases of one benchmark test; given to tests as the `optbench` fixture."""

    def __init__(
        self,
        settings: RunSettings,
        benchmark: Any,
        case_id: str,
        technique: str,
        publish: Callable[[dict[str, Any]], None],
    ) -> None:
        self.settings = settings
        self.benchmark = benchmark
        self.case_id = case_id
        self.technique = technique
        self.publish = publish

    def run(self, case: Case) -> dict[str, Any]:
        """Measure, check and gate `case`; returns its record, fails the test on a failing verdict."""
        settings = self.settings
        reason = case.requires.unmet(settings.device, settings.profile.name)
        if reason:
            pytest.skip(reason)
        # Each case compiles from scratch, so its compile time and graph counts are its own.
        torch._dynamo.reset()
        phase = Phase()
        fallback = torch._dynamo.config.patch(suppress_errors=True) if settings.compile_fallback else nullcontext()
        try:
            with preserved_global_state(), fallback, time_limit(settings.profile.case_timeout_s, phase):
                record = self._measure(case, phase)
        except Exception as error:
            release_memory(settings.device)
            cause = explain(error, phase.current, case.workload)
            self.publish(self._fault_record(case, cause or f"{type(error).__name__} during {phase.current}: {error}"))
            if cause is None:
                raise
            pytest.fail(f"{self.case_id}: {cause}", pytrace=False)
        self.benchmark.extra_info[RECORD_KEY] = record
        self.publish(record)
        if settings.update_baselines and record["accuracy"]["passed"] and record["speedup"]:
            settings.baselines.record(self.case_id, baseline_entry(record), settings.environment)
        if record["verdict"]["failures"]:
            pytest.fail(f"{self.case_id}: " + "; ".join(record["verdict"]["failures"]), pytrace=False)
        return record

    def _fault_record(self, case: Case, cause: str) -> dict[str, Any]:
        return fault_record(
            case_id=self.case_id,
            technique=self.technique,
            names=case.names,
            profile=self.settings.profile.name,
            environment_key=self.settings.baselines.environment_key,
            device=str(self.settings.device),
            cause=cause,
        )

    def _measure(self, case: Case, phase: Phase) -> dict[str, Any]:
        settings = self.settings
        profile = settings.profile
        # The reference is timed with the same timer pytest-benchmark uses (--benchmark-timer).
        clock = DeviceClock(settings.device, timer=getattr(self.benchmark, "_timer", time.perf_counter))
        phase.enter("first calls (compilation)")
        first = first_calls(case.reference, case.optimized, clock)
        phase.enter("warm-up")
        timed = self.benchmark.enabled
        warmup = warm_up(case.reference, case.optimized, clock, profile, first) if timed else WarmUp.skipped(first)
        phase.enter("accuracy")
        accuracy, unrepeatable = self._accuracy(case)
        phase.enter("peak memory")
        memory = (
            peak_memory_bytes(case.reference, settings.device),
            peak_memory_bytes(case.optimized, settings.device),
        )
        plan = reference_times = optimized_times = speedup = None
        phase.enter("timed rounds")
        if timed:
            plan = plan_rounds(warmup.pilot_reference, warmup.pilot_optimized, profile)
            reference_times, optimized_times = paired_rounds(
                self.benchmark, case.reference, case.optimized, clock, plan.rounds
            )
            speedup = speedup_interval(reference_times, optimized_times)
        else:
            self.benchmark.pedantic(case.optimized, rounds=1)  # pytest-benchmark expects its fixture used
        phase.enter("details")
        details = case.details() if case.details else None
        phase.enter("verdict")
        tolerance = settings.speedup_tolerance if case.speedup_tolerance is None else case.speedup_tolerance
        baseline = None if settings.update_baselines else settings.baselines.get(self.case_id)
        threshold = speed_threshold(case.floor, baseline, tolerance)
        verdict = judge(
            speedup,
            accuracy,
            threshold,
            case.ceiling,
            baseline,
            tolerance,
            settings.accuracy_drift,
            graph_breaks=first.compile.graph_breaks if first.compile.compiled else None,
            unrepeatable_reference=unrepeatable,
        )
        self._note_measurement_quality(verdict, case, warmup, plan, speedup)
        return build_record(
            case_id=self.case_id,
            technique=self.technique,
            names=case.names,
            workload=case.workload,
            profile=profile.name,
            environment_key=settings.baselines.environment_key,
            device=str(settings.device),
            warmup=warmup,
            plan=plan,
            reference_times=reference_times,
            optimized_times=optimized_times,
            speedup=speedup,
            accuracy=accuracy,
            reference_deterministic=unrepeatable is None,
            memory=memory,
            threshold=threshold,
            floor=case.floor,
            ceiling=case.ceiling,
            tolerance=tolerance,
            baseline=baseline,
            verdict=verdict,
            details=details,
            phases_s=phase.durations_s,
        )

    def _note_measurement_quality(
        self, verdict: Verdict, case: Case, warmup: WarmUp, plan: RoundPlan | None, speedup: Interval | None
    ) -> None:
        target = self.settings.profile.ci_half_width
        if speedup and plan and speedup.relative_half_width > target:
            verdict.notes.append(
                f"noisy: interval +-{speedup.relative_half_width:.1%}, target +-{target:.0%}"
                f" ({plan.rounds} rounds{', budget-limited' if plan.budget_limited else ''})"
            )
        load = os.getloadavg()[0]
        if load > (os.cpu_count() or 1):
            verdict.notes.append(f"machine busy: load {load:.1f} on {os.cpu_count()} CPUs, timings perturbed")
        if warmup.calls and not warmup.settled:
            verdict.notes.append(f"warm-up did not settle in {warmup.calls} calls")
        if case.expect_compiled and not warmup.first.compile.compiled:
            if self.settings.compile_fallback:
                verdict.notes.append(
                    "torch.compile fell back to eager (--compile-fallback): optimized timings are eager"
                )
            else:
                verdict.failures.append(
                    "compile: torch.compile captured no graph, so the 'optimized' variant ran eager"
                )

    def _accuracy(self, case: Case) -> tuple[Accuracy, Check | None]:
        """The comparison, after checking that the reference repeats itself under fixed seeds.

        A reference that differs from itself (nondeterministic kernels) cannot
        judge the optimization; that is reported as such, as PyTorch's dynamo
        benchmark does with `eager_two_runs_differ`. The optimized variant runs
        seeded but outside deterministic mode: dynamo guards on that mode, so
        compiled code would recompile and the check would judge another graph
        than the one timed.
        """
        reference_output = case.reference_output or case.reference
        with deterministic_settings():
            reference = seeded(reference_output)
            repeated = seeded(reference_output)
            fp64 = seeded(case.fp64_output) if case.fp64_output else None
        optimized = seeded(case.optimized_output or case.optimized)
        repeat = case.accuracy(reference, repeated, fp64)
        unrepeatable = repeat.failures[0] if not repeat.passed else None
        return case.accuracy(reference, optimized, fp64), unrepeatable
