"""Seeds 000 and 004: torch.compile in one of its modes vs eager."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from ..advise.recipe import Recipe
from ..measuring.accuracy import REORDERED, tensors
from ..measuring.case import Case
from ..measuring.hardware import Requires
from ..measuring.workload import InferenceWorkload
from . import Technique, Used


def compiled_call(workload: InferenceWorkload, model: nn.Module, mode: str) -> Callable[[], Any]:
    """One call of `torch.compile(model, mode=mode)` on the workload's inputs."""
    compiled_forward = workload.call(torch.compile(model, mode=mode))
    if mode != "reduce-overhead":
        return compiled_forward

    def call() -> Any:
        # CUDA-graph outputs are overwritten by the next replay; each call is a new step.
        torch.compiler.cudagraph_mark_step_begin()
        return compiled_forward()

    return call


def compiled(workload: InferenceWorkload, mode: str, floor: float, requires: Requires) -> Case:
    """Seeds 000 and 004: torch.compile in `mode` vs eager."""
    optimized = compiled_call(workload, workload.model(), mode)
    return workload.case(
        workload.call(workload.model()),
        optimized,
        # Copies: a CUDA-graph replay overwrites its outputs.
        optimized_output=lambda: [tensor.clone() for tensor in tensors(optimized())],
        accuracy=REORDERED,
        floor=floor,
        requires=requires,
        names=("eager", f"compile:{mode}"),
        variant=f"compile:{mode}",
        expect_compiled=True,
    )


MODES = ("default", "reduce-overhead", "max-autotune")


def choose_mode(recipe: Recipe, used: Used) -> Recipe:
    """The fastest compile mode that paid."""
    fastest = used.fastest(*(f"compile:{mode}" for mode in MODES))
    return replace(recipe, compile_mode=fastest.removeprefix("compile:") if fastest else None)


TECHNIQUE = Technique(
    "compile",
    "torch.compile in one of its modes vs eager",
    "seeds 000 and 004",
    order=30,
    recommended=True,
    recipe=choose_mode,
)
