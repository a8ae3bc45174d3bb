"""Cases whose payoff is memory, not speed: activation checkpointing trades compute for activations.

Such a case declares `Case(memory_payoff=MemoryPayoff(floor, max_slowdown))`.
Its claim is that the optimized call needs at most 1/floor of the reference's
peak memory, at a cost of at most `max_slowdown` times its time.

Memory. The peak of one call (`optbench.measuring.memory.peak_memory_bytes`: bytes above
what was alive when the call began) is measured `REPETITIONS` times per side,
the sides alternating, after the timed rounds. With the paired log ratios

    m_i = ln(peak_reference_i / peak_optimized_i),  i = 1..n,

the ratio is exp(mean m) and its interval exp(mean m +- t_{n-1} s / sqrt(n)),
s the standard deviation of the m_i and t Student's 97.5% quantile: the
repetitions are independent calls of the same deterministic work, whose only
variation is the allocator's (a CUDA caching allocator that splits or reuses a
block differently; on CPUs the allocation events usually repeat exactly, s = 0
and the interval is the point).

Verdict. The memory interval is judged against the floor as a speedup is
against its floor: entirely below it, the case fails where it has history on
this environment and is reported as "does not pay here" elsewhere (activation
memory is a property of the model and the code, not of the machine's class, so
no hardware class restricts it). With history, a ratio more than `min_effect`
below the history's median fails too: the technique stopped saving what it
saved. Speed is held to the slowdown bound instead of a floor: a speedup
interval entirely below 1/max_slowdown fails under the same rule; the history
regression test on speed runs as for any case. A memory case is never judged
"does not pay" for being slower than its reference.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..verdict.stats import CONFIDENCE, Interval, t_quantile
from .memory import peak_memory_bytes

REPETITIONS = 3


@dataclass(frozen=True)
class MemoryPayoff:
    """What a memory case promises: peak memory at least `floor` times lower, time at most `max_slowdown` higher."""

    floor: float
    max_slowdown: float = 1.5


@dataclass(frozen=True)
class MemoryResult:
    """A memory case's measurement as recorded: its promise and the peak-memory ratio's interval."""

    floor: float
    max_slowdown: float
    ratio: Interval | None
    """reference / optimized peak memory; None where either side's peak could not be measured."""
    does_not_pay: bool = False


def ratio_interval(log_ratios: list[float]) -> Interval:
    """exp of the mean log ratio, with its Student-t interval (see the module docstring)."""
    if len(log_ratios) < 2:
        # One repetition has no spread to make an interval of (Student's t on 0 degrees of freedom is NaN).
        raise ValueError(f"a memory ratio's interval needs at least 2 repetitions, got {len(log_ratios)}")
    mean = statistics.fmean(log_ratios)
    spread = statistics.stdev(log_ratios)
    half = t_quantile((1 + CONFIDENCE) / 2, len(log_ratios) - 1) * spread / math.sqrt(len(log_ratios))
    degrees_of_freedom = float(len(log_ratios) - 1)
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), CONFIDENCE, degrees_of_freedom)


def memory_ratio(
    reference: Callable[[], Any], optimized: Callable[[], Any], device: torch.device, repetitions: int = REPETITIONS
) -> Interval | None:
    """The reference's peak memory over the optimized side's, from `repetitions` alternating pairs of calls."""
    logs = []
    for _ in range(repetitions):
        peaks = peak_memory_bytes(reference, device), peak_memory_bytes(optimized, device)
        if None in peaks or 0 in peaks:
            return None
        logs.append(math.log(peaks[0] / peaks[1]))
    return ratio_interval(logs)


def judge_memory(
    ratio: Interval | None,
    speed: Interval | None,
    payoff: MemoryPayoff,
    history: list[float],
    min_effect: float,
) -> tuple[list[str], list[str], bool]:
    """(failures, notes, does_not_pay) for a memory case: its ratio against the floor and its history (the
    memory ratios recorded on this environment; empty where there is none), its speed against the bound."""
    failures: list[str] = []
    notes: list[str] = []
    gated = bool(history)
    if ratio is None:
        return [], ["peak memory not measured on this device, so the memory payoff is not judged"], False
    does_not_pay = ratio.high < payoff.floor
    if does_not_pay and gated:
        failures.append(f"memory: peak ratio {ratio.text()} lies entirely below the floor {payoff.floor:.2f}x")
    elif does_not_pay:
        notes.append(f"does not pay here: peak memory ratio {ratio.text()} below its floor {payoff.floor:.2f}x")
    else:
        notes.append(f"memory payoff: peak {ratio.text()} lower (floor {payoff.floor:.2f}x)")
    if gated and ratio.high < (1 - min_effect) * statistics.median(history):
        failures.append(
            f"memory: peak ratio {ratio.text()} fell below its history's {statistics.median(history):.2f}x "
            f"by more than {min_effect:.0%}"
        )
    bound = 1 / payoff.max_slowdown
    if speed is not None and speed.high < bound:
        slower = f"costs {1 / speed.point:.2f}x the reference's time, more than its bound {payoff.max_slowdown:.2f}x"
        (failures if gated else notes).append(f"speed: {slower}" if gated else f"over its time bound here: {slower}")
    return failures, notes, does_not_pay
