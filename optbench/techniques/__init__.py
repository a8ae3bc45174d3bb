"""The registry: every technique of the catalogue, one registered unit each.

A technique is a module of this package that defines `TECHNIQUE`, a `Technique`:
its registered name, where it comes from, its place in seed 004's order,
whether it is a row of the seed's recommendation, and the rule that puts it
into `advise`'s recipe. The same module holds how it is applied (for an
inference technique, a function from any `InferenceWorkload` to its `Case`).
The benchmark file that measures it declares it with
`pytestmark = pytest.mark.technique(TECHNIQUE)`; records keep the registered
name, so `advise`, the recipe and the recommendation find a technique by what it
is, never by a file's name (renaming `benchmarks/test_x.py` changes nothing).

Adding a technique is one module here and one benchmark file
(docs/contributing.md). This module imports nothing of optbench, so that any
module may register a technique without an import cycle.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class Measured(Protocol):
    """What a recipe rule reads of a record (`optbench.storage.record.Record`), named here without importing it."""

    @property
    def variant(self) -> str: ...

    @property
    def speedup(self) -> Any: ...


@dataclass(frozen=True)
class Used:
    """The records of one technique that `advise` marked *use* on the user's model."""

    records: tuple[Measured, ...] = ()

    def __contains__(self, variant: object) -> bool:
        return any(record.variant == variant for record in self.records)

    def fastest(self, *variants: str) -> str | None:
        """The fastest of `variants` marked *use*, by its speedup's point estimate; None where none was."""
        candidates = [
            (record.speedup.point, record.variant)
            for record in self.records
            if record.variant in variants and record.speedup is not None
        ]
        return max(candidates)[1] if candidates else None


RecipeRule = Callable[[Any, Used], Any]
"""How a technique enters the recipe: the recipe so far (an `optbench.advise.recipe.Recipe`, which imports the trainer,
which imports this module) and the technique's records marked *use* -> the recipe with it."""


@dataclass(frozen=True)
class Technique:
    name: str
    """The registered name: what records, `advise`, the recipe and the recommendation key on."""
    summary: str
    """One line: what the optimized side does, against what."""
    source: str
    """Where the catalogue took it from: seed 000, seed 004, PyTorch's tuning guide, a tutorial."""
    order: int
    """Its place in seed 004's order (precision before memory format before compile): the recommendation lists
    techniques in it, and the recipe takes them in it, since a rule may read what an earlier one chose."""
    training: bool = False
    """A training technique: its recipe rule acts on the recipe's training part, chosen only under `--train`."""
    recommended: bool = False
    """A row of seed 004's per-device recommendation."""
    recipe: RecipeRule | None = None
    """None: the technique never enters the recipe (a check, an alternative of the process, a kernel choice)."""
    trick: object | None = None
    """A training technique's part in the trainer, an `optbench.measuring.training.TrainingTrick` (typed loosely
    here: this
    module imports nothing of optbench, and training imports this one to find the tricks)."""


@functools.cache
def registered() -> tuple[Technique, ...]:
    """Every registered technique, in `order` (then by name): each module of this package with a `TECHNIQUE`."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        technique = getattr(importlib.import_module(f"{__name__}.{module.name}"), "TECHNIQUE", None)
        if isinstance(technique, Technique):
            found.append(technique)
    names = [technique.name for technique in found]
    if duplicated := sorted({name for name in names if names.count(name) > 1}):
        raise ValueError(f"techniques registered twice: {', '.join(duplicated)}; each name is one module's")
    return tuple(sorted(found, key=lambda technique: (technique.order, technique.name)))


def named(name: str) -> Technique | None:
    """The registered technique called `name`; None for a name no module registers (a user's own test)."""
    return next((technique for technique in registered() if technique.name == name), None)
