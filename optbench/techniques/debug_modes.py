"""PyTorch's tuning guide: debug modes off for training (`Tricks.debug`): anomaly detection, the profiler, fp64."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn

from ..internals import profiler_recording
from ..measuring.in_effect import Observer, ReadInside, Side
from ..measuring.training import Trainer, TrainingTrick, Tricks
from ..measuring.workload import Batch, batch_as
from . import Technique


def debug_read(mode: str, trainer: Trainer, on: bool) -> ReadInside:
    """What shows debug `mode` on (the reference) or off (the optimized side) inside the model's forward."""
    side: Side = "reference" if on else "optimized"
    if mode == "fp64":
        dtype = torch.float64 if on else next(trainer.setup.model.parameters()).dtype

        def parameters_dtype() -> torch.dtype:
            return next(trainer.model.parameters()).dtype

        return ReadInside(parameters_dtype, dtype, "parameters' dtype", trainer.model, side)
    if mode == "profiler":
        return ReadInside(profiler_recording, on, "the profiler recording", trainer.model, side)
    return ReadInside(torch.is_anomaly_enabled, on, "autograd anomaly detection", trainer.model, side)


def profiler_activities(device: torch.device) -> list[torch.profiler.ProfilerActivity]:
    """What torch.profiler records on `device`: the CPU's ops, and the GPU's kernels too on CUDA."""
    cpu = torch.profiler.ProfilerActivity.CPU
    return [cpu, torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [cpu]


class DebugMode(TrainingTrick):
    """A debug mode left on (`Tricks.debug`): the reference of these cases, never a trick to switch on."""

    def on(self, tricks: Tricks) -> bool:
        return tricks.debug is not None

    def model(self, model: nn.Module, trainer: Trainer) -> nn.Module:
        return model.to(torch.float64) if trainer.tricks.debug == "fp64" else model

    def batch(self, batch: Batch, trainer: Trainer) -> Batch:
        return batch_as(batch, torch.float64) if trainer.tricks.debug == "fp64" else batch

    def around_step(self, trainer: Trainer) -> contextlib.AbstractContextManager[Any]:
        if trainer.tricks.debug == "anomaly_detection":
            return torch.autograd.set_detect_anomaly(True)
        if trainer.tricks.debug == "profiler":
            # Entered around each step, as a `with profile()` inside the loop is (see DEBUG_MODES).
            return torch.profiler.profile(activities=profiler_activities(trainer.workload.device))
        return contextlib.nullcontext()

    def observers(self, reference: Trainer, optimized: Trainer) -> tuple[Observer, ...]:
        mode = reference.tricks.debug
        if mode is None or optimized.tricks.debug is not None:
            return ()
        return tuple(debug_read(mode, trainer, on) for trainer, on in ((reference, True), (optimized, False)))


TECHNIQUE = Technique(
    "debug_modes",
    "a debug mode left on vs training with it off",
    "PyTorch's tuning guide",
    order=390,
    training=True,
    trick=DebugMode(),
)
