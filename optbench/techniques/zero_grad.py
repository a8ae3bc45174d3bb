"""Seed 000, section 2: zero_grad(set_to_none=True) vs zero-filled gradients (`Tricks.set_to_none`)."""

from __future__ import annotations

from ..advise.recipe import Recipe
from ..measuring.in_effect import GradsCleared, Observer
from ..measuring.training import Trainer, TrainingTrick, Tricks
from . import Technique, Used


def choose_set_to_none(recipe: Recipe, used: Used) -> Recipe:
    return recipe.with_training(set_to_none="set_to_none" in used)


class SetToNone(TrainingTrick):
    """The step passes `Tricks.set_to_none` to `zero_grad`; what this trick adds is the proof, on both sides."""

    def on(self, tricks: Tricks) -> bool:
        return tricks.set_to_none

    def observers(self, reference: Trainer, optimized: Trainer) -> tuple[Observer, ...]:
        if not self.on(optimized.tricks) or self.on(reference.tricks):
            return ()
        # Also on the reference, whose zero-filled gradients are the other half of the comparison.
        return (
            GradsCleared(lambda: optimized.optimizer, set_to_none=True),
            GradsCleared(lambda: reference.optimizer, set_to_none=False, side="reference"),
        )


TECHNIQUE = Technique(
    "zero_grad",
    "zero_grad(set_to_none=True) vs zero_grad(set_to_none=False)",
    "seed 000, section 2",
    order=300,
    training=True,
    trick=SetToNone(),
    recipe=choose_set_to_none,
)
