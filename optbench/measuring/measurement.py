"""Timing a reference and an optimized callable in the steady state: blocks of calls in ABBA order.

A round is a block of back-to-back calls of one variant beside a block of the
other. A call that follows the other variant's call finds the caches full of
the other model's weights and buffers; users run one model in a loop, so each
block starts with one untimed call (its primer) and then times `calls` calls
as one interval. The block length rule:

    calls = max(MIN_BLOCK_CALLS, ceil(profile.block_target_s / t_call)),

t_call being the faster variant's time per call after its first calls: long
enough for the host clock to resolve (a block lasts at least block_target_s)
and for the interval to keep its coverage under autocorrelated timings (see
tests/test_interval_coverage.py for why at least MIN_BLOCK_CALLS). A Case
with `cold_cache=True` is the exception: single calls, each after a buffer
the size of the last-level cache was written (outside the timed interval).
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..profiles import Profile
from ..verdict.stats import rounds_for_precision
from .cache_flush import CacheFlush
from .clock import BlockTime, DeviceClock
from .compilation import CompileActivity, watch_compilation

MIN_BLOCK_CALLS = 4


@dataclass
class FirstCalls:
    reference_s: float
    optimized_s: float
    """Wall time of the first optimized call: compilation and autotuning land here."""
    compile: CompileActivity


def first_calls(reference: Callable[[], Any], optimized: Callable[[], Any], clock: DeviceClock) -> FirstCalls:
    reference_s = clock.time(reference)
    with watch_compilation() as activity:
        optimized_s = clock.time(optimized)
    return FirstCalls(reference_s, optimized_s, activity)


class Blocks:
    """Runs one variant's block as every timed round does: primer (or cache flush), then `calls` timed calls."""

    def __init__(self, clock: DeviceClock, calls: int, flush: CacheFlush | None = None) -> None:
        self.clock = clock
        self.calls = calls
        self.flush = flush

    def prime(self, fn: Callable[[], Any]) -> None:
        """Untimed: one call of the variant about to be timed (steady state), or the caches emptied (cold)."""
        if self.flush is not None:
            self.flush()
            self.clock.sync()
        else:
            fn()

    def time(self, fn: Callable[[], Any]) -> BlockTime:
        self.prime(fn)
        return self.clock.time_block(fn, self.calls)


def block_calls(call_s: float, profile: Profile, cold_cache: bool) -> int:
    """Calls per block (module docstring): 1 for cold-cache cases."""
    if cold_cache:
        return 1
    if call_s <= 0:
        return MIN_BLOCK_CALLS
    return max(MIN_BLOCK_CALLS, math.ceil(profile.block_target_s / call_s))


@dataclass
class WarmUp:
    first: FirstCalls
    block_calls: int
    pairs: int
    """Warm-up rounds (pairs of blocks) run after the first calls."""
    settled: bool
    pilot_reference: list[float]
    pilot_optimized: list[float]

    @classmethod
    def skipped(cls, first: FirstCalls) -> WarmUp:
        """No warm-up: an untimed run (accuracy lane) needs only the first calls."""
        return cls(first=first, block_calls=0, pairs=0, settled=False, pilot_reference=[], pilot_optimized=[])


def _settled(times: list[float], window: int, tolerance: float) -> bool:
    if len(times) < 2 * window:
        return False
    recent = statistics.median(times[-window:])
    before = statistics.median(times[-2 * window : -window])
    return abs(recent / before - 1) <= tolerance


def _abba() -> Iterator[bool]:
    """Whether the reference goes first, round by round: True, False, True, False, ..."""
    return itertools.cycle([True, False])


def abba_rounds(
    reference: Callable[[], Any], optimized: Callable[[], Any], blocks: Blocks
) -> Iterator[tuple[float, float]]:
    """Block rounds in ABBA order without end: each round's (reference, optimized) time per call."""
    for reference_first in _abba():
        if reference_first:
            reference_s = blocks.time(reference).host_s
            optimized_s = blocks.time(optimized).host_s
        else:
            optimized_s = blocks.time(optimized).host_s
            reference_s = blocks.time(reference).host_s
        yield reference_s, optimized_s


def session_rounds(
    reference: Callable[[], Any], optimized: Callable[[], Any], blocks: Blocks, rounds: int
) -> tuple[list[float], list[float]]:
    """`rounds` more block rounds timed as the timed rounds are, outside pytest-benchmark (which times once per
    test): another session of the same case in the same process, to see how its speedup drifts with time."""
    pairs = list(itertools.islice(abba_rounds(reference, optimized, blocks), rounds))
    return [reference_s for reference_s, _ in pairs], [optimized_s for _, optimized_s in pairs]


class BeyondTimeLimit(Exception):
    """The fewest rounds that give a case an interval cannot finish within its time limit; the message says what
    to rerun with."""


def time_limit_problem(rounds: str, needed_s: float, elapsed_s: float, spent_on: str, limit_s: float) -> str | None:
    """Why `rounds`, needing `needed_s`, cannot finish within `limit_s` after `elapsed_s` spent on `spent_on`;
    None where they can. The limit to rerun with allows twice the time, rounded up to a minute: the accuracy
    runs come after the rounds."""
    if elapsed_s + needed_s <= limit_s:
        return None
    enough = 60 * math.ceil(2 * (elapsed_s + needed_s) / 60)
    return (
        f"cannot be timed within its time limit here: {rounds} ({needed_s:.0f} s, the fewest that give an "
        f"interval) after {elapsed_s:.0f} s of {spent_on} exceed --case-timeout {limit_s:.0f}; "
        f"rerun with --case-timeout {enough}"
    )


def warm_up(
    reference: Callable[[], Any],
    optimized: Callable[[], Any],
    clock: DeviceClock,
    profile: Profile,
    first: FirstCalls,
    flush: CacheFlush | None = None,
    elapsed_s: float = 0.0,
    limit_s: float = math.inf,
) -> WarmUp:
    """Chooses the block length, then runs ABBA block rounds until both variants' last two windows agree.

    A fixed handful of calls is not enough: oneDNN and cuDNN pick and cache
    kernels over the first calls, and allocators grow their pools. The last
    two windows of rounds are the pilot the round planner learns the spread from.

    A warm-up takes at least a window of rounds past its deadline, and the timed rounds at least the profile's
    minimum: where even those, at the faster side's probed call time, cannot finish within `limit_s` of the
    case's `elapsed_s`, this raises BeyondTimeLimit before any round runs. dynamic=True on MobileNetV3-Small's
    stream of sizes (2-core AVX2 EPYC, beside other work) was still warming up when the 300 s limit stopped it.
    """
    started = time.monotonic()
    probe = min(clock.time_block(reference, 2).host_s, clock.time_block(optimized, 2).host_s)
    blocks = Blocks(clock, block_calls(probe, profile, cold_cache=flush is not None), flush)
    window = profile.warmup_window
    round_s = 2 * probe * (blocks.calls + 1)  # a primer call besides the timed ones in each of the two blocks
    problem = time_limit_problem(
        f"{window} warm-up and {profile.min_rounds} timed rounds of at least {round_s:.1f} s",
        (window + profile.min_rounds) * round_s,
        elapsed_s + time.monotonic() - started,
        "first calls",
        limit_s,
    )
    if problem:
        raise BeyondTimeLimit(problem)
    reference_times: list[float] = []
    optimized_times: list[float] = []
    # Never longer than the timed rounds may take: a short --case-budget shortens the warm-up too.
    deadline = time.monotonic() + min(profile.warmup_budget_s, profile.case_budget_s)
    settled = False
    for reference_s, optimized_s in abba_rounds(reference, optimized, blocks):
        reference_times.append(reference_s)
        optimized_times.append(optimized_s)
        settled = _settled(reference_times, window, profile.settle_tolerance) and _settled(
            optimized_times, window, profile.settle_tolerance
        )
        if settled or (time.monotonic() > deadline and len(reference_times) >= window):
            break
    return WarmUp(
        first=first,
        block_calls=blocks.calls,
        pairs=len(reference_times),
        settled=settled,
        pilot_reference=reference_times[-2 * window :],
        pilot_optimized=optimized_times[-2 * window :],
    )


@dataclass(frozen=True)
class RoundPlan:
    rounds: int
    needed_for_target: int
    affordable_in_budget: int
    round_s: float = 0.0
    """Expected seconds per round, both blocks and their primers, from the pilot."""

    @property
    def budget_limited(self) -> bool:
        return self.rounds < self.needed_for_target

    def beyond_time_limit(self, elapsed_s: float, limit_s: float, sessions: int = 1) -> str | None:
        """Why the planned rounds, `sessions` times over (--sessions), cannot finish within the case's time limit
        after `elapsed_s` of first calls and warm-up; None where they can. The plan never goes below the profile's
        minimum rounds (an interval needs them), so a case whose calls are long (a stream of sizes through a
        segmentation model, compiled with dynamic=True: 10 s a round on a 2-core CPU) can need more than its
        limit; said before the rounds start, it skips with what to raise, rather than timing out minutes later."""
        rounds = f"{self.rounds} rounds of {self.round_s:.1f} s"
        rounds = f"{sessions} sessions of {rounds}" if sessions > 1 else rounds
        needed_s = sessions * self.rounds * self.round_s
        return time_limit_problem(rounds, needed_s, elapsed_s, "first calls and warm-up", limit_s)


def plan_rounds(warmup: WarmUp, profile: Profile) -> RoundPlan:
    """Enough block rounds for the target interval width, learnt from the pilot rounds, within the time budget."""
    needed = rounds_for_precision(warmup.pilot_reference, warmup.pilot_optimized, profile.ci_half_width)
    # Each block runs one untimed primer call besides its timed calls.
    per_round = (statistics.median(warmup.pilot_reference) + statistics.median(warmup.pilot_optimized)) * (
        warmup.block_calls + 1
    )
    affordable = max(1, math.floor(profile.case_budget_s / per_round)) if per_round > 0 else profile.max_rounds
    rounds = min(max(needed, profile.min_rounds), max(affordable, profile.min_rounds), profile.max_rounds)
    rounds += rounds % 2  # whole ABBA pairs, so each order occurs equally often
    return RoundPlan(rounds=rounds, needed_for_target=needed, affordable_in_budget=affordable, round_s=per_round)


@dataclass(frozen=True)
class Rounds:
    """The timed rounds: time per call of each block, paired by index."""

    block_calls: int
    reference_s: list[float]
    optimized_s: list[float]
    reference_device_s: list[float] | None = None
    """Per call by CUDA events, on a GPU; None elsewhere."""
    optimized_device_s: list[float] | None = None


def paired_rounds(
    benchmark: Any,
    reference: Callable[[], Any],
    optimized: Callable[[], Any],
    blocks: Blocks,
    rounds: int,
    on_round: Callable[[int, int], None] | None = None,
) -> Rounds:
    """Times `rounds` pairs of blocks in ABBA order; the optimized blocks go through pytest-benchmark.

    pytest-benchmark's setup hook times the reference block before the
    optimized one on even rounds and its teardown hook after it on odd rounds,
    so both variants see the same drift of the machine and the same order
    effects. pytest-benchmark forbids `iterations > 1` together with a setup
    hook, so its target is the whole block and its times are divided by the
    block's calls afterwards: its stats, JSON and --benchmark-compare then
    mean time per call, as they do for its own `iterations`. `on_round(done, rounds)` is told after each
    round, once both of its blocks are timed, so what it does falls before neither side's block in particular.
    """
    clock = blocks.clock
    reference_blocks: list[BlockTime] = []
    order = _abba()
    reference_first = [True]

    def time_reference() -> None:
        reference_blocks.append(blocks.time(reference))

    def setup() -> None:
        reference_first[0] = next(order)
        if reference_first[0]:
            time_reference()
        blocks.prime(optimized)
        clock.sync()

    def teardown(*_: Any, **__: Any) -> None:
        if not reference_first[0]:
            time_reference()
        if on_round is not None:
            on_round(len(reference_blocks), rounds)

    # Made before timing and read after it, so the optimized blocks time no event bookkeeping.
    events = [clock.events() for _ in range(rounds)]
    benchmark.pedantic(
        clock.block(optimized, blocks.calls, iter(events)), setup=setup, teardown=teardown, rounds=rounds
    )
    optimized_s = _per_call(benchmark, blocks.calls)
    return Rounds(
        block_calls=blocks.calls,
        reference_s=[block.host_s for block in reference_blocks],
        optimized_s=optimized_s,
        reference_device_s=[b.device_s for b in reference_blocks] if clock.has_events else None,
        optimized_device_s=[e.seconds_per_call(blocks.calls) for e in events if e] if clock.has_events else None,
    )


def replay_rounds(benchmark: Any, per_call_s: list[float], calls: int) -> None:
    """Gives pytest-benchmark the optimized blocks another process timed (optbench.running.isolation), as paired_rounds
    would have: one round per block, its stats in time per call."""
    benchmark.pedantic(lambda: None, rounds=len(per_call_s))
    _store_per_call(benchmark, per_call_s, calls)


def _per_call(benchmark: Any, calls: int) -> list[float]:
    """pytest-benchmark's block times divided by the block's calls, in its own stats (see paired_rounds)."""
    per_call_s = [duration / calls for duration in benchmark.stats.stats.data]
    _store_per_call(benchmark, per_call_s, calls)
    return per_call_s


def _store_per_call(benchmark: Any, per_call_s: list[float], calls: int) -> None:
    metadata = benchmark.stats
    metadata.stats.data[:] = per_call_s
    metadata.iterations = calls
