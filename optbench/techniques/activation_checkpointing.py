"""Activation checkpointing (`Tricks.checkpointing`) and compile's activation memory budget (`Tricks.memory_budget`)."""

from __future__ import annotations

import torch
from torch import nn

from ..internals import inductor_with_memory_budget
from ..measuring.checkpointing import checkpoint_blocks, repeated_blocks
from ..measuring.in_effect import LessMemory, Observer, Recomputes
from ..measuring.training import ForwardLoss, Trainer, TrainingTrick, TrainingWorkload, Tricks
from . import Technique


def memory_budget_misfit(compile_mode: str | None) -> str | None:
    """Why compile's activation memory budget cannot be set; None where it can."""
    if compile_mode != "default":
        return "an activation memory budget is set on torch.compile's default mode, and this variant does not use it"
    if inductor_with_memory_budget(1.0) is None:
        return "this torch has no activation memory budget (torch._functorch.config.activation_memory_budget)"
    return None


class Recomputation(TrainingTrick):
    """Checkpointing each of the model's repeated blocks (`Tricks.checkpointing`), or the forward and loss compiled
    with an activation memory budget (`Tricks.memory_budget`)."""

    def on(self, tricks: Tricks) -> bool:
        return tricks.checkpointing or tricks.memory_budget is not None

    def misfit(self, workload: TrainingWorkload, tricks: Tricks) -> str | None:
        if tricks.checkpointing and not repeated_blocks(workload.setup.model):
            return "its model has no stack of repeated blocks (an nn.Sequential or nn.ModuleList) to checkpoint"
        return memory_budget_misfit(tricks.compile_mode) if tricks.memory_budget is not None else None

    def model(self, model: nn.Module, trainer: Trainer) -> nn.Module:
        if trainer.tricks.checkpointing:
            checkpoint_blocks(model)
        return model

    def forward_loss(self, forward_loss: ForwardLoss, trainer: Trainer) -> ForwardLoss:
        budget = trainer.tricks.memory_budget
        if budget is None:
            return forward_loss
        return torch.compile(forward_loss, backend=inductor_with_memory_budget(budget))

    def observers(self, reference: Trainer, optimized: Trainer) -> tuple[Observer, ...]:
        on, off, device = optimized.tricks, reference.tricks, optimized.workload.device
        observers: list[Observer] = []
        if on.checkpointing and not off.checkpointing:
            observers += [Recomputes(), LessMemory("activation checkpointing", device)]
        if on.memory_budget is not None and on.memory_budget != off.memory_budget:
            observers.append(LessMemory(f"activation memory budget {on.memory_budget}", device))
        return tuple(observers)


TECHNIQUE = Technique(
    "activation_checkpointing",
    "activations kept vs recomputed in backward: peak memory at a bounded slowdown",
    "PyTorch's activation checkpointing docs",
    order=380,
    training=True,
    trick=Recomputation(),
)
