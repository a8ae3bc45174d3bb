"""PyTorch's tuning guide: the optimizer's implementation, foreach or fused vs a for-loop (`Tricks.optimizer_impl`)."""

from __future__ import annotations

import copy
import inspect

import torch

from ..advise.recipe import Recipe
from ..internals import fused_optimizer_devices
from ..measuring.in_effect import Observer, OptimizerKernels
from ..measuring.training import Trainer, TrainingTrick, TrainingWorkload, Tricks
from . import Technique, Used


def choose_implementation(recipe: Recipe, used: Used) -> Recipe:
    return recipe.with_training(optimizer_impl=used.fastest("foreach", "fused"))


OPTIMIZER_IMPLEMENTATIONS = {
    "for-loop": {"foreach": False, "fused": False},
    "foreach": {"foreach": True, "fused": False},
    "fused": {"foreach": False, "fused": True},
}


def with_implementation(optimizer: torch.optim.Optimizer, implementation: str) -> torch.optim.Optimizer:
    """A new optimizer of `optimizer`'s class, over its parameter groups and options, as `implementation`."""
    flags = OPTIMIZER_IMPLEMENTATIONS[implementation]
    groups = [{**group, **flags} for group in optimizer.param_groups]
    # defaults may hold options its constructor does not take (AdamW's decoupled_weight_decay, from Adam's).
    accepted = inspect.signature(type(optimizer)).parameters
    defaults = {name: value for name, value in optimizer.defaults.items() if name in accepted}
    return type(optimizer)(groups, **{**defaults, **flags})


def implementation_misfit(optimizer: torch.optim.Optimizer, implementation: str, device: torch.device) -> str | None:
    """Why `optimizer` cannot run as `implementation` on `device`; None where it can."""
    missing = [flag for flag in OPTIMIZER_IMPLEMENTATIONS[implementation] if flag not in optimizer.defaults]
    if missing:
        return f"its optimizer {type(optimizer).__name__} takes no {'/'.join(missing)} option"
    if implementation == "fused" and device.type not in fused_optimizer_devices():
        return f"torch has no fused optimizer kernels for {device.type}"
    return None


class Implementation(TrainingTrick):
    """The setup's optimizer rebuilt as `Tricks.optimizer_impl` (for-loop, foreach or fused)."""

    def on(self, tricks: Tricks) -> bool:
        return tricks.optimizer_impl is not None

    def misfit(self, workload: TrainingWorkload, tricks: Tricks) -> str | None:
        optimizer = workload.setup.optimizer(copy.deepcopy(workload.setup.model).parameters())
        return implementation_misfit(optimizer, tricks.optimizer_impl or "", workload.device)

    def optimizer(self, optimizer: torch.optim.Optimizer, trainer: Trainer) -> torch.optim.Optimizer:
        return with_implementation(optimizer, trainer.tricks.optimizer_impl or "")

    def observers(self, reference: Trainer, optimized: Trainer) -> tuple[Observer, ...]:
        on, off = optimized.tricks.optimizer_impl, reference.tricks.optimizer_impl
        if on == off:
            return ()
        sides = ((on, "optimized"), (off, "reference"))
        return tuple(OptimizerKernels(implementation, side) for implementation, side in sides if implementation)


TECHNIQUE = Technique(
    "optimizer_impl",
    "the optimizer's for-loop implementation vs foreach or fused",
    "PyTorch's tuning guide",
    order=350,
    training=True,
    trick=Implementation(),
    recipe=choose_implementation,
)
