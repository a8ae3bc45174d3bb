"""Seed 000, section 4: torch.compile on the training step's forward and loss (`Tricks.compile_mode`)."""

from __future__ import annotations

import torch

from ..advise.recipe import Recipe
from ..internals import mode_uses_cuda_graphs
from ..measuring.training import ForwardLoss, Trainer, TrainingTrick, Tricks
from . import Technique, Used


def choose_compile_mode(recipe: Recipe, used: Used) -> Recipe:
    """The faster compile mode of the training step that paid (none replays CUDA graphs: see training.py)."""
    fastest = used.fastest("compile:default", "compile:max-autotune-no-cudagraphs")
    return recipe.with_training(compile_mode=fastest.removeprefix("compile:") if fastest else None)


def refuse_cuda_graphs(compile_mode: str | None) -> None:
    """Raise for a compile mode that replays CUDA graphs: a training step's outputs do not survive them.

    Each replay overwrites the previous step's outputs, and a Trainer keeps some: the losses it stacks at the
    end and the gradients zero_grad(set_to_none=False) keeps and accumulates into. Reading them fails with
    "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run". Not run on a GPU
    yet: docs/ci.md, "Check first on a new GPU runner".
    """
    if compile_mode and mode_uses_cuda_graphs(compile_mode):
        raise ValueError(
            f"compile mode {compile_mode!r} replays CUDA graphs, which overwrite the losses and gradients a "
            "training step keeps; use one without them (default, max-autotune-no-cudagraphs)"
        )


class CompiledStep(TrainingTrick):
    """torch.compile on the step's forward and loss, in `Tricks.compile_mode`; proven by the case's
    `expect_compiled`. With an activation memory budget, `activation_checkpointing` compiles it instead."""

    def on(self, tricks: Tricks) -> bool:
        return tricks.compile_mode is not None

    def forward_loss(self, forward_loss: ForwardLoss, trainer: Trainer) -> ForwardLoss:
        mode = trainer.tricks.compile_mode
        refuse_cuda_graphs(mode)
        return forward_loss if trainer.tricks.memory_budget is not None else torch.compile(forward_loss, mode=mode)


TECHNIQUE = Technique(
    "compile_training",
    "the training step's forward and loss compiled vs eager",
    "seed 000, section 4",
    order=320,
    training=True,
    trick=CompiledStep(),
    recipe=choose_compile_mode,
)
