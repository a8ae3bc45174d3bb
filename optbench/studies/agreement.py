"""Holding the suite's speedup against an independent timer: `torch.utils.benchmark.Timer`.

With `--agree`, each case is measured again right after its timed rounds by
`Timer.blocked_autorange` (blocks of back-to-back calls, the steady state) in
ABBA order over `repetitions` short pairs, in a new interpreter that builds the same
workload from the same fixtures and does nothing else
(optbench.running.confirmation.independent_in_fresh_process): a user's fresh process,
sharing no allocator state with the suite's. The record keeps each pair's
ratio; `python -m optbench agree` runs chosen catalogue cases that way and
tabulates whether the independent median lies inside the suite's interval.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.benchmark import Timer

from ..reporting.report import case_label, markdown_table
from ..storage.record import Record
from ..verdict.stats import Interval

REPETITIONS = 25
MIN_RUN_TIME_S = 0.2
"""Many short pairs (Timer's own default `min_run_time`), not a few long ones, for the same 10 s.

A shared host's speed s(t) multiplies every block measured at t, so a pair reads the true ratio times
s(t_reference) / s(t_optimized): the further apart a pair's two blocks, the less s cancels. On the 2-core
EPYC (family 25 model 1, 2026-12-07) one thread's block of twenty 512x512 matmuls took 0.064 s (p10) to 0.090 s
(p90) over 200 blocks in a row, and `independent_ratios` of the smoke ResNet18 against an identical
copy of itself (true ratio 1), five times per design in one process, read medians of 0.934-1.075 with 5 pairs
of 1 s, 0.987-1.021 with 25 pairs of 0.2 s and 0.995-1.031 with 50 pairs of 0.1 s."""
CLOSE = 0.03
FAR = 0.05
AGREEING_SHARE = 0.9
"""The agreement target: in at least 90% of cases the independent median lies inside the suite's interval or
within 3% of its point (CLOSE), and in none is it more than 5% off (FAR)."""


def independent_ratios(
    reference: Callable[[], Any],
    optimized: Callable[[], Any],
    repetitions: int = REPETITIONS,
    min_run_time: float = MIN_RUN_TIME_S,
    disable_gc: bool = False,
) -> list[float]:
    """reference/optimized median time per call by Timer.blocked_autorange, one ratio per ABBA pair.

    With the garbage collector as the suite times (`disable_gc`: pytest-benchmark's --benchmark-disable-gc, off by
    default, as in the user's program): Timer inherits timeit's habit of switching it off for its loop, so without
    timeit's documented remedy, `gc.enable()` in the setup, the two timers would measure different programs
    wherever a side makes Python garbage. It is not what kept the suite and Timer apart where they disagree most
    (2-core Xeon family 6 model 167, 2026-12-08, `optbench agree -- --processes 3`, suite [interval] vs Timer):
    compiled decoding (single-short) read 1.54x [1.40, 1.71] vs 1.26x with gc on in both, 1.53x [1.47, 1.59] vs
    1.26x with gc off in both; the DataLoader workers case 1.01x [0.93, 1.10] vs 1.09x, and 1.02x [0.99, 1.05] vs
    1.13x (docs/validation.md)."""

    threads = torch.get_num_threads()
    setup = "pass" if disable_gc else "import gc; gc.enable()"

    def median_s(fn: Callable[[], Any]) -> float:
        # Timer runs on one thread unless told otherwise; the suite measures with the run's threads.
        timer = Timer(stmt="fn()", setup=setup, globals={"fn": fn}, num_threads=threads)
        return timer.blocked_autorange(min_run_time=min_run_time).median

    # Compilation and first-call set-up are not the steady state Timer is asked about.
    reference()
    optimized()
    ratios = []
    for repetition in range(repetitions):
        if repetition % 2 == 0:
            reference_s = median_s(reference)
            optimized_s = median_s(optimized)
        else:
            optimized_s = median_s(optimized)
            reference_s = median_s(reference)
        ratios.append(reference_s / optimized_s)
    return ratios


@dataclass(frozen=True)
class Agreement:
    case: str
    suite: Interval
    independent: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.independent)

    @property
    def quartiles(self) -> tuple[float, float]:
        """The middle half of the pairs' ratios: with 25 pairs the range would show the host's worst seconds."""
        if len(self.independent) < 2:
            return self.median, self.median
        first, _, third = statistics.quantiles(self.independent, n=4, method="inclusive")
        return first, third

    @property
    def inside(self) -> bool:
        return self.suite.low <= self.median <= self.suite.high

    @property
    def gap(self) -> float:
        """Independent median relative to the suite's point, minus 1."""
        return self.median / self.suite.point - 1

    @property
    def agrees(self) -> bool:
        return self.inside or abs(self.gap) <= CLOSE

    @classmethod
    def from_record(cls, record: Record) -> Agreement | None:
        if not record.speedup or not record.independent_ratios:
            return None
        return cls(record.case, record.speedup, tuple(record.independent_ratios))


def agreement_markdown(agreements: Sequence[Agreement]) -> str:
    headers = ["case", "suite [95% interval]", "independent median (quartiles)", "gap", "inside", f"within {CLOSE:.0%}"]
    rows = [
        [
            case_label(a.case),
            a.suite.text(digits=3),
            f"{a.median:.3f}x ({a.quartiles[0]:.3f}-{a.quartiles[1]:.3f})",
            f"{a.gap:+.1%}",
            "yes" if a.inside else "NO",
            "yes" if abs(a.gap) <= CLOSE else "NO",
        ]
        for a in agreements
    ]
    inside = sum(a.inside for a in agreements)
    close = sum(abs(a.gap) <= CLOSE for a in agreements)
    agreeing = sum(a.agrees for a in agreements)
    far = [case_label(a.case) for a in agreements if abs(a.gap) > FAR]
    total = len(agreements)
    met = agreeing >= AGREEING_SHARE * total and not far
    return (
        markdown_table(rows, headers)
        + f"\n\ninside the suite's interval: {inside}/{total}; within {CLOSE:.0%} of its point: {close}/{total}; "
        + f"either: {agreeing}/{total} (target {AGREEING_SHARE:.0%}); more than {FAR:.0%} off: "
        + (", ".join(far) if far else "none")
        + f" (target none); target {'met' if met else 'NOT met'}"
    )
