"""Timing a reference and an optimized callable: warm-up until settled, then paired interleaved rounds."""

from __future__ import annotations

import gc
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from .clock import DeviceClock
from .compilation import CompileActivity, watch_compilation
from .profiles import Profile
from .stats import rounds_for_precision


@dataclass
class FirstCalls:
    reference_s: float
    optimized_s: float
    """Wall time of the first optimized call: compilation and autotuning land here."""
    compile: CompileActivity


def first_calls(reference: Callable[[], Any], optimized: Callable[[], Any], clock: DeviceClock) -> FirstCalls:
    reference_s, _ = clock.time(reference)
    with watch_compilation() as activity:
        optimized_s, _ = clock.time(optimized)
    return FirstCalls(reference_s, optimized_s, activity)


@dataclass
class WarmUp:
    first: FirstCalls
    calls: int
    settled: bool
    pilot_reference: list[float]
    pilot_optimized: list[float]

    @classmethod
    def skipped(cls, first: FirstCalls) -> WarmUp:
        """No warm-up: an untimed run (accuracy lane) needs only the first calls."""
        return cls(first=first, calls=0, settled=False, pilot_reference=[], pilot_optimized=[])

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference_first_s": self.first.reference_s,
            "optimized_first_s": self.first.optimized_s,
            "calls": self.calls,
            "settled": self.settled,
        }


def _settled(times: list[float], window: int, tolerance: float) -> bool:
    if len(times) < 2 * window:
        return False
    recent = statistics.median(times[-window:])
    before = statistics.median(times[-2 * window : -window])
    return abs(recent / before - 1) <= tolerance


def warm_up(
    reference: Callable[[], Any],
    optimized: Callable[[], Any],
    clock: DeviceClock,
    profile: Profile,
    first: FirstCalls,
) -> WarmUp:
    """Calls both variants alternately, after their first calls, until the medians of their last two windows agree.

    A fixed handful of calls is not enough: oneDNN and cuDNN pick and cache
    kernels over the first calls, and allocators grow their pools.
    """
    window = profile.warmup_window
    reference_times: list[float] = []
    optimized_times: list[float] = []
    deadline = time.monotonic() + profile.warmup_budget_s
    for call in itertools.count():
        first_time, _ = clock.time(reference if call % 2 == 0 else optimized)
        second_time, _ = clock.time(optimized if call % 2 == 0 else reference)
        reference_times.append(first_time if call % 2 == 0 else second_time)
        optimized_times.append(second_time if call % 2 == 0 else first_time)
        settled = _settled(reference_times, window, profile.settle_tolerance) and _settled(
            optimized_times, window, profile.settle_tolerance
        )
        out_of_time = time.monotonic() > deadline and call + 1 >= window
        if settled or out_of_time:
            break
    return WarmUp(
        first=first,
        calls=len(reference_times),
        settled=settled,
        pilot_reference=reference_times[-2 * window :],
        pilot_optimized=optimized_times[-2 * window :],
    )


@dataclass(frozen=True)
class RoundPlan:
    rounds: int
    needed: int
    affordable: int

    @property
    def budget_limited(self) -> bool:
        return self.rounds < self.needed

    def as_dict(self) -> dict[str, int]:
        return {"rounds": self.rounds, "needed_for_target": self.needed, "affordable_in_budget": self.affordable}


def plan_rounds(pilot_reference: list[float], pilot_optimized: list[float], profile: Profile) -> RoundPlan:
    """Enough paired rounds for the target interval width, within the case's time budget."""
    needed = rounds_for_precision(pilot_reference, pilot_optimized, profile.ci_half_width)
    per_round = statistics.median(pilot_reference) + statistics.median(pilot_optimized)
    affordable = max(1, math.floor(profile.case_budget_s / per_round)) if per_round > 0 else profile.max_rounds
    rounds = min(max(needed, profile.min_rounds), max(affordable, profile.min_rounds), profile.max_rounds)
    rounds += rounds % 2  # whole ABBA pairs, so each order occurs equally often
    return RoundPlan(rounds=rounds, needed=needed, affordable=affordable)


def paired_rounds(
    benchmark: Any, reference: Callable[[], Any], optimized: Callable[[], Any], clock: DeviceClock, rounds: int
) -> tuple[list[float], list[float]]:
    """Times `rounds` pairs in ABBA order; the optimized calls go through pytest-benchmark.

    pytest-benchmark's setup hook times the reference before the optimized
    call on even rounds and its teardown hook after it on odd rounds, so both
    variants see the same drift of the machine and the same order effects.
    """
    reference_times: list[float] = []
    reference_goes_first = itertools.cycle([True, False])
    order = {"reference_first": True}
    # Mirror --benchmark-disable-gc, which pytest-benchmark applies to the optimized calls only.
    gc_paused = _gc_disabled if getattr(benchmark, "_disable_gc", False) else nullcontext

    def time_reference() -> None:
        with gc_paused():
            duration, _ = clock.time(reference)
        reference_times.append(duration)

    def setup() -> None:
        order["reference_first"] = next(reference_goes_first)
        if order["reference_first"]:
            time_reference()
        else:
            clock.sync()

    def teardown(*_: Any, **__: Any) -> None:
        if not order["reference_first"]:
            time_reference()

    benchmark.pedantic(clock.synchronized(optimized), setup=setup, teardown=teardown, rounds=rounds, warmup_rounds=0)
    return reference_times, list(benchmark.stats.stats.data)


@contextmanager
def _gc_disabled() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
