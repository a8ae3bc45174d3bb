"""A case: the one thing a benchmark declares and hands to the harness."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .accuracy import Check, Comparator
from .compilation import CompileActivity
from .hardware import HardwareClass, Requires
from .in_effect import Observer
from .memory_payoff import MemoryPayoff


@dataclass(frozen=True)
class Observed:
    """What a case's extra checks look at: its details and what its optimized variant's first call compiled."""

    details: dict[str, Any] | None
    compile: CompileActivity


ExtraCheck = Callable[[Observed], Check]


@dataclass(frozen=True)
class Case:
    """A reference and an optimized way to do the same work, and what counts as success.

    `reference` and `optimized` are the timed calls. The accuracy check compares
    one call of each, unless `reference_output`/`optimized_output` say what to
    compare instead (e.g. a short training run's losses). `fp64_output`, where
    given, is the high-precision truth for cases that change precision.
    """

    reference: Callable[[], Any]
    optimized: Callable[[], Any]
    accuracy: Comparator
    floor: float
    """The least speedup that counts as paying off. Below it the case fails on the classes in `floor_applies_on`
    (where it has history); elsewhere the run reports that the optimization does not pay here."""
    floor_applies_on: tuple[HardwareClass, ...] = ()
    ceiling: float | None = None
    """For cases that assert the absence of a speedup: fail when the whole interval is above it."""
    memory_payoff: MemoryPayoff | None = None
    """For cases whose payoff is memory (activation checkpointing): the peak-memory ratio's floor and the slowdown
    allowed for it, judged instead of `floor` (`optbench.measuring.memory_payoff`)."""
    requires: Requires = field(default_factory=Requires)
    names: tuple[str, str] = ("reference", "optimized")
    """Display labels of the two sides; nothing keys on them."""
    variant: str = ""
    """What the optimized side turns on within its technique, as a stable key (e.g. "bf16", "compile:default",
    "tf32"): the recommendation and reports find cases by it, never by `names`."""
    workload: str = ""
    """What runs and at what size (e.g. "resnet50 batch 128"): said in failures such as out-of-memory."""
    expect_compiled: bool = False
    """The optimized variant uses torch.compile: fail if it captured no graph (eager measured as compiled)."""
    reference_output: Callable[[], Any] | None = None
    reference_rerun: Callable[[], Any] | None = None
    """Computes `reference_output` afresh for the check that the reference repeats itself; needed where
    `reference_output` is cached (a training run shared by cases), or the check compares the cache with itself."""
    optimized_output: Callable[[], Any] | None = None
    fp64_output: Callable[[], Any] | None = None
    cold_cache: bool = False
    """Time single calls after emptying the last-level cache, for cases where one cold call is the realistic use.
    The default is the steady state of a loop: blocks of back-to-back calls."""
    details: Callable[[], dict[str, Any]] | None = None
    """Extra measurements reported with the case (e.g. prefill and decode latency), run after the timed rounds."""
    checks: tuple[ExtraCheck, ...] = ()
    """The case's own pass/fail checks beyond accuracy (e.g. "the eager reference entered no compiled code"), run
    after `details` and judged in the verdict like accuracy: a failing one fails the case, shows in the summary and
    keeps the case out of the baselines."""
    in_effect: tuple[Observer, ...] = ()
    """What shows the optimization acting (`optbench.measuring.in_effect`): each observer runs once after the timed
    rounds
    and says what it saw, e.g. `Autocast(torch.bfloat16)`: every matmul ran in bf16. One that does not see its
    technique act fails the case with `not in effect: ...`, as a no-op would otherwise pass at 1.00x with
    unchanged numbers. Torch.compile's own proof is `expect_compiled`."""
    model_may_break: bool = False
    """The model is the user's: an error while measuring means the technique does not work on that model, and the
    case ends skipped with "does not work on this model: <the error>" instead of failing the run."""
    notes: tuple[str, ...] = ()
    """Said in the verdict's notes: what the names promise that this case does not do (a switch set to no effect)."""
    close: Callable[[], None] | None = None
    """Frees what the case holds that the garbage collector frees late: run once the case is measured and judged
    (a training case's DataLoader workers, optbench.measuring.training.Trainer.close)."""
