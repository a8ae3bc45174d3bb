"""Seed 000, section 1: DataLoader(pin_memory=True), with and without non_blocking copies (`Tricks.pin_memory`)."""

from __future__ import annotations

from torch.utils.data import DataLoader

from ..advise.recipe import Recipe
from ..measuring.in_effect import Observer, PinnedCopies
from ..measuring.training import Trainer, TrainingTrick, TrainingWorkload, Tricks
from . import Technique, Used


def choose_pinned(recipe: Recipe, used: Used) -> Recipe:
    """Pinned memory where it paid, with non_blocking copies where those were the faster."""
    fastest = used.fastest("pinned", "pinned+non_blocking")
    return recipe.with_training(pin_memory=fastest is not None, non_blocking=fastest == "pinned+non_blocking")


class Pinned(TrainingTrick):
    """Batches from the setup's DataLoader with `pin_memory=True` (the trainer's data path), copied with
    `non_blocking` where `Tricks.non_blocking` says."""

    def on(self, tricks: Tricks) -> bool:
        return tricks.pin_memory

    def misfit(self, workload: TrainingWorkload, tricks: Tricks) -> str | None:
        if not isinstance(workload.setup.data, DataLoader):
            return "its data is not a DataLoader, and pinned memory is what a DataLoader's pin_memory gives"
        return None

    def observers(self, reference: Trainer, optimized: Trainer) -> tuple[Observer, ...]:
        if not self.on(optimized.tricks) or self.on(reference.tricks):
            return ()
        return (PinnedCopies(non_blocking=optimized.tricks.non_blocking),)


TECHNIQUE = Technique(
    "pin_memory",
    "pageable vs pinned host batches, with and without non_blocking copies",
    "seed 000, section 1",
    order=340,
    training=True,
    trick=Pinned(),
    recipe=choose_pinned,
)
