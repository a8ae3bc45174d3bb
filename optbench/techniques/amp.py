"""Seed 000, section 3: torch.autocast mixed precision in training, with a GradScaler for fp16 (`Tricks.autocast`)."""

from __future__ import annotations

import torch

from ..advise.recipe import Recipe
from ..measuring.hardware import dtype_name
from ..measuring.in_effect import Autocast, ChangesNumbers, Observer
from ..measuring.training import ForwardLoss, Trainer, TrainingTrick, Tricks
from ..measuring.workload import Batch
from . import Technique, Used


def choose_autocast(recipe: Recipe, used: Used) -> Recipe:
    """The faster autocast dtype that paid."""
    fastest = used.fastest("autocast:bf16", "autocast:fp16")
    return recipe.with_training(autocast=fastest.removeprefix("autocast:") if fastest else None)


class Autocasting(TrainingTrick):
    """The step's forward and loss under `torch.autocast` in `Tricks.autocast`, with a GradScaler for fp16."""

    def on(self, tricks: Tricks) -> bool:
        return tricks.autocast is not None

    def grad_scaler(self, trainer: Trainer) -> torch.amp.GradScaler | None:
        # fp16 gradients underflow without loss scaling; bf16 has fp32's exponent range and needs none.
        return torch.amp.GradScaler(trainer.workload.device.type) if trainer.tricks.autocast == torch.float16 else None

    def forward_loss(self, forward_loss: ForwardLoss, trainer: Trainer) -> ForwardLoss:
        device_type, dtype = trainer.workload.device.type, trainer.tricks.autocast

        def autocast_forward_loss(batch: Batch) -> torch.Tensor:
            with torch.autocast(device_type, dtype=dtype):
                return forward_loss(batch)

        return autocast_forward_loss

    def observers(self, reference: Trainer, optimized: Trainer) -> tuple[Observer, ...]:
        dtype = optimized.tricks.autocast
        if dtype is None or self.on(reference.tricks):
            return ()
        return (Autocast(dtype), ChangesNumbers(f"autocast:{dtype_name(dtype)}"))


TECHNIQUE = Technique(
    "amp",
    "fp32 training vs torch.autocast in bf16 or fp16",
    "seed 000, section 3",
    order=310,
    training=True,
    trick=Autocasting(),
    recipe=choose_autocast,
)
