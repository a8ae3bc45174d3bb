"""channels_last for training: the model and its 4-d batches in NHWC (`Tricks.channels_last`)."""

from __future__ import annotations

import torch
from torch import nn

from ..advise.recipe import Recipe
from ..measuring.in_effect import ChannelsLast, Observer
from ..measuring.training import Trainer, TrainingTrick, TrainingWorkload, Tricks
from ..measuring.workload import Batch, batch_as, channels_last_misfit
from . import Technique, Used


def choose_channels_last(recipe: Recipe, used: Used) -> Recipe:
    return recipe.with_training(channels_last="channels_last" in used)


class ChannelsLastTraining(TrainingTrick):
    """The model and every 4-d batch tensor in channels_last."""

    def on(self, tricks: Tricks) -> bool:
        return tricks.channels_last

    def misfit(self, workload: TrainingWorkload, tricks: Tricks) -> str | None:
        return channels_last_misfit(workload.operations, workload.first_batch())

    def model(self, model: nn.Module, trainer: Trainer) -> nn.Module:
        return model.to(memory_format=torch.channels_last)

    def batch(self, batch: Batch, trainer: Trainer) -> Batch:
        return batch_as(batch, None, torch.channels_last)

    def observers(self, reference: Trainer, optimized: Trainer) -> tuple[Observer, ...]:
        return (ChannelsLast(),) if self.on(optimized.tricks) and not self.on(reference.tricks) else ()


TECHNIQUE = Technique(
    "channels_last_training",
    "training in channels_last (NHWC) vs contiguous",
    "PyTorch's channels_last tutorial",
    order=330,
    training=True,
    trick=ChannelsLastTraining(),
    recipe=choose_channels_last,
)
