"""PyTorch's 'Compiling the optimizer' recipe: torch.compile on the optimizer step (`Tricks.compile_optimizer`)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..advise.recipe import Recipe
from ..measuring.training import Trainer, TrainingTrick, TrainingWorkload, Tricks
from . import Technique, Used


def choose_compiled_step(recipe: Recipe, used: Used) -> Recipe:
    return recipe.with_training(compile_optimizer="compiled-step" in used)


class CompiledOptimizerStep(TrainingTrick):
    """torch.compile on the optimizer step; proven by the case's `expect_compiled`."""

    def on(self, tricks: Tricks) -> bool:
        return tricks.compile_optimizer

    def misfit(self, workload: TrainingWorkload, tricks: Tricks) -> str | None:
        if tricks.autocast == torch.float16:
            return "a GradScaler steps the optimizer itself, so a compiled step is not what runs under fp16 autocast"
        return None

    def optimizer_step(self, step: Callable[[], None], trainer: Trainer) -> Callable[[], None]:
        return torch.compile(step)


TECHNIQUE = Technique(
    "compiled_optimizer",
    "the eager foreach optimizer step vs the same step compiled",
    "PyTorch's compiled optimizer recipe",
    order=360,
    training=True,
    trick=CompiledOptimizerStep(),
    recipe=choose_compiled_step,
)
