"""PyTorch's tuning guide: needless CPU-GPU synchronization (`Tricks.log_loss_every`, `Tricks.new_tensors`)."""

from __future__ import annotations

import torch

from ..internals import tree_flatten, tree_unflatten
from ..measuring.in_effect import HOST_READS, HOST_TO_DEVICE_COPIES, HostTraffic, Observer
from ..measuring.training import Trainer, TrainingTrick, Tricks
from ..measuring.workload import Batch
from . import Technique


def masked(batch: Batch, made_on: str) -> Batch:
    """`batch` with its first tensor multiplied by a mask of ones made in this step (no number changes), on the
    host (then copied with `.to(device)`) or on the device."""
    leaves, spec = tree_flatten(batch)
    first = next(i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor))
    inputs = leaves[first]
    if made_on == "host":
        mask = torch.ones(inputs.shape, dtype=inputs.dtype).to(inputs.device)
    else:
        mask = torch.ones(inputs.shape, dtype=inputs.dtype, device=inputs.device)
    leaves[first] = inputs * mask
    return tree_unflatten(leaves, spec)


class HostSyncHabits(TrainingTrick):
    """The loop's habits that make the host wait: the loss read every `Tricks.log_loss_every` steps, and the
    step's own tensor made where `Tricks.new_tensors` says."""

    def on(self, tricks: Tricks) -> bool:
        return tricks.log_loss_every is not None or tricks.new_tensors is not None

    def in_step(self, batch: Batch, trainer: Trainer) -> Batch:
        made_on = trainer.tricks.new_tensors
        return batch if made_on is None else masked(batch, made_on)

    def after_step(self, loss: torch.Tensor, trainer: Trainer) -> None:
        if trainer.tricks.log_loss_every is not None:
            trainer.log_loss(loss)

    def observers(self, reference: Trainer, optimized: Trainer) -> tuple[Observer, ...]:
        on, off = optimized.tricks, reference.tricks
        observers: list[Observer] = []
        if on.log_loss_every is not None and off.log_loss_every is not None and on.log_loss_every > off.log_loss_every:
            steps = optimized.setup.steps_per_call * on.log_loss_every
            observers.append(
                HostTraffic(
                    f"the loss read every {on.log_loss_every} steps", HOST_READS, on.log_loss_every,
                    fewer=steps // off.log_loss_every - steps // on.log_loss_every,
                )
            )  # fmt: skip
        if off.new_tensors == "host" and on.new_tensors == "device":
            fewer = optimized.setup.steps_per_call
            observers.append(HostTraffic("the step's mask made on the device", HOST_TO_DEVICE_COPIES, 1, fewer))
        return tuple(observers)


TECHNIQUE = Technique(
    "host_sync",
    "a training loop that syncs the host vs the same loop without the habit",
    "PyTorch's tuning guide",
    order=395,
    training=True,
    trick=HostSyncHabits(),
)
