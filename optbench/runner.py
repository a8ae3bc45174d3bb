"""The one entry point: run a case from skip check to verdict, record it, fail it readably."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from .accuracy import Accuracy
from .baselines import BaselineStore
from .case import Case
from .clock import DeviceClock
from .gate import judge, speed_threshold
from .measurement import paired_rounds, plan_rounds, warm_up
from .memory import peak_memory_bytes
from .profiles import Profile
from .record import RECORD_KEY, baseline_entry, build_record
from .stats import speedup as speedup_interval
from .switches import preserved_global_state


@dataclass(frozen=True)
class RunSettings:
    device: torch.device
    profile: Profile
    speedup_tolerance: float
    accuracy_drift: float
    update_baselines: bool
    baselines: BaselineStore
    environment: dict[str, Any]


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

    @property
    def device(self) -> torch.device:
        return self.settings.device

    def run(self, case: Case) -> dict[str, Any]:
        """Measure, check and gate `case`; returns its record, fails the test on a failing verdict."""
        settings = self.settings
        reason = case.requires.unmet(settings.device, settings.profile.name)
        if reason:
            pytest.skip(reason)
        # Each case compiles from scratch, so its compile time and graph counts are its own.
        torch._dynamo.reset()
        with preserved_global_state():
            record = self._measure(case)
        self.benchmark.extra_info[RECORD_KEY] = record
        self.publish(record)
        if settings.update_baselines and record["accuracy"]["passed"] and record["speedup"]:
            settings.baselines.record(self.case_id, baseline_entry(record), settings.environment)
        if record["verdict"]["failures"]:
            pytest.fail(f"{self.case_id}: " + "; ".join(record["verdict"]["failures"]), pytrace=False)
        return record

    def _measure(self, case: Case) -> dict[str, Any]:
        settings = self.settings
        profile = settings.profile
        # The reference is timed with the same timer pytest-benchmark uses (--benchmark-timer).
        clock = DeviceClock(settings.device, timer=getattr(self.benchmark, "_timer", time.perf_counter))
        warmup = warm_up(case.reference, case.optimized, clock, profile)
        accuracy = self._accuracy(case)
        memory = (
            peak_memory_bytes(case.reference, settings.device),
            peak_memory_bytes(case.optimized, settings.device),
        )
        plan = reference_times = optimized_times = speedup = None
        if self.benchmark.enabled:
            plan = plan_rounds(warmup.pilot_reference, warmup.pilot_optimized, profile)
            reference_times, optimized_times = paired_rounds(
                self.benchmark, case.reference, case.optimized, clock, plan.rounds
            )
            speedup = speedup_interval(reference_times, optimized_times)
        else:
            self.benchmark.pedantic(case.optimized, rounds=1)  # pytest-benchmark expects its fixture used
        details = case.details() if case.details else None
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
            graph_breaks=warmup.compile.graph_breaks if warmup.compile.compiled else None,
        )
        if speedup and speedup.relative_half_width > profile.ci_half_width:
            verdict.notes.append(
                f"noisy: interval +-{speedup.relative_half_width:.1%}, target +-{profile.ci_half_width:.0%}"
                f" ({plan.rounds} rounds{', budget-limited' if plan.budget_limited else ''})"
            )
        load = os.getloadavg()[0]
        if load > (os.cpu_count() or 1):
            verdict.notes.append(f"machine busy: load {load:.1f} on {os.cpu_count()} CPUs, timings perturbed")
        if not warmup.settled:
            verdict.notes.append(f"warm-up did not settle in {warmup.calls} calls")
        return build_record(
            case_id=self.case_id,
            technique=self.technique,
            names=case.names,
            profile=profile.name,
            environment_key=settings.baselines.environment_key,
            device=str(settings.device),
            warmup=warmup,
            plan=plan,
            reference_times=reference_times,
            optimized_times=optimized_times,
            speedup=speedup,
            accuracy=accuracy,
            memory=memory,
            threshold=threshold,
            floor=case.floor,
            ceiling=case.ceiling,
            tolerance=tolerance,
            baseline=baseline,
            verdict=verdict,
            details=details,
        )

    def _accuracy(self, case: Case) -> Accuracy:
        reference = (case.reference_output or case.reference)()
        optimized = (case.optimized_output or case.optimized)()
        fp64 = case.fp64_output() if case.fp64_output else None
        return case.accuracy(reference, optimized, fp64)
