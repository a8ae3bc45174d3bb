"""Measurement profiles: how long and how precisely each case is measured."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest


@dataclass(frozen=True)
class Profile:
    """How a run measures; workload sizes per profile live with the fixtures."""

    name: str
    ci_half_width: float
    """Target relative half-width of the speedup's 95% interval."""
    case_budget_s: float
    """Most seconds of timed rounds per case."""
    warmup_budget_s: float
    """Most seconds of warm-up per case, compilation excluded."""
    min_rounds: int
    max_rounds: int
    case_timeout_s: float
    """A case still running after this long fails, naming the phase it was in."""
    warmup_window: int = 5
    """Rounds per window of the warm-up's settle test; the last two windows are the round planner's pilot."""
    settle_tolerance: float = 0.05
    block_target_s: float = 0.05
    """A block of back-to-back calls lasts at least this long (see measurement.block_calls)."""
    first_calls_estimate_s: float = 15.0
    """Seconds a case's first calls (torch.compile) and accuracy and memory checks are assumed to take when
    estimating a run's length; not a limit."""
    processes: int = 1
    """Fresh processes each case is timed in, its rounds and timed budget divided among them
    (optbench.running.processes),
    and interleaved across the run (optbench.running.interleave). 1 in both profiles: on the 2-core Xeon three processes
    made intervals that hold for the next run (an A/A of the catalogue: 4 of 50 cases differed, against 18 of 48
    with one), but each process past the first adds its fork, first calls and warm-up, 1.45x a case's time
    (docs/methodology.md, "Several processes per case"), past the 1.25x issue 34 allows smoke; a nightly's cost on a
    GPU is not measured yet. `--processes 3` buys them."""

    @property
    def case_estimate_s(self) -> float:
        """A case's expected length: per process its first calls and warm-up, then timed rounds up to the budget."""
        return self.processes * (self.first_calls_estimate_s + self.warmup_budget_s) + self.case_budget_s

    def estimate_s(self, cases: int, workers: int = 1) -> float:
        """Expected seconds for `cases` cases shared by `workers` processes, confirmation runs not included."""
        return -(-cases // max(1, workers)) * self.case_estimate_s

    def describe_estimate(self, cases: int, workers: int = 1) -> str:
        return (
            f"estimated {self.estimate_s(cases, workers) / 60:.0f} min for {cases} cases on {workers} worker(s) "
            f"(profile {self.name}: budget per case {self.case_estimate_s:.0f} s = {self._per_process_text} + timed "
            f"rounds {self.case_budget_s:.0f}; timeout per case {self.case_timeout_s:.0f} s; confirmation runs not "
            "included)"
        )

    @property
    def _per_process_text(self) -> str:
        each = f"first calls {self.first_calls_estimate_s:.0f} + warm-up {self.warmup_budget_s:.0f}"
        return f"{self.processes} processes x ({each})" if self.processes > 1 else each

    def with_overrides(self, **overrides: float | int | None) -> Profile:
        """This profile with the given fields replaced, ignoring those passed as None."""
        return replace(self, **{name: value for name, value in overrides.items() if value is not None})


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        "smoke",
        ci_half_width=0.03,
        case_budget_s=8.0,
        warmup_budget_s=6.0,
        min_rounds=24,
        max_rounds=400,
        case_timeout_s=300.0,
    ),
    "standard": Profile(
        "standard",
        ci_half_width=0.02,
        case_budget_s=60.0,
        warmup_budget_s=30.0,
        min_rounds=24,
        max_rounds=2000,
        case_timeout_s=1800.0,
        first_calls_estimate_s=60.0,  # torch.compile of a resnet or a small causal LM, and the accuracy runs
    ),
}


MIN_ROUNDS_FLOOR = 4
"""The fewest timed rounds `--min-rounds` or an allocation may ask for: two ABBA pairs."""
MOST_ROUNDS = max(profile.max_rounds for profile in PROFILES.values())

SMOKE_MARKER = "smoke"
SMOKE_MARKER_HELP = (
    "smoke(*ids): under the smoke profile only these cases of the test run (each the id in its brackets, e.g. "
    "'no_sync-ddp-mlp'); the others skip there and run in profile standard. Not applied to --model or --train"
)


def outside_smoke_subset(item: pytest.Item, profile: str) -> str | None:
    """Why `item` skips under `profile`: it is a case of a test marked `smoke(*ids)` whose id is not among them.

    The smoke profile is CI's: every technique and every code path of the harness runs, but not every variant of
    each. Where a technique's variants differ in a setting and not in what the harness does with them (DDP's
    bucket sizes, three loader settings, SGD and AdamW for a step-level change), smoke runs the ones that cover
    the rest, and a fresh clone's CI stays within its budget (issue 32: 52 min with every variant, 78 cases).
    """
    marker = item.get_closest_marker(SMOKE_MARKER)
    callspec = getattr(item, "callspec", None)
    if profile != "smoke" or marker is None or callspec is None or callspec.id in marker.args:
        return None
    return f"runs only in profile standard (this run: smoke runs {', '.join(marker.args)} of this test)"
