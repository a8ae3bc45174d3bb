"""Seed 004, section 1: the forward under no_grad or inference_mode vs with autograd on."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from ..advise.recipe import Recipe
from ..measuring.accuracy import Exact
from ..measuring.case import Case
from ..measuring.in_effect import AutogradMode
from ..measuring.workload import InferenceWorkload
from . import Technique, Used

AUTOGRAD_CONTEXTS: dict[str, Callable[[], Any]] = {
    "grad": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}


def autograd_mode(workload: InferenceWorkload, reference: str, optimized: str, floor: float) -> Case:
    """Seed 004, section 1: the forward under `optimized` (no_grad, inference_mode) vs under `reference`;
    disabling autograd bookkeeping may not change a single number."""
    model = workload.model()
    forward_pass = workload.call(model)

    def run_under(context: str) -> Callable[[], Any]:
        def call() -> Any:
            with AUTOGRAD_CONTEXTS[context]():
                return forward_pass()

        return call

    return workload.case(
        run_under(reference),
        run_under(optimized),
        inference_mode=False,
        fp64_output=None,
        accuracy=Exact(),
        floor=floor,
        names=(reference, optimized),
        variant=f"{reference}->{optimized}",
        # Bitwise-equal outputs are the point here, so the outputs' autograd marks show each side's mode.
        in_effect=(AutogradMode(reference, side="reference"), AutogradMode(optimized)),
    )


def choose_autograd(recipe: Recipe, used: Used) -> Recipe:
    """inference_mode where it paid, else no_grad where that did."""
    modes = [mode for mode in ("inference_mode", "no_grad") if f"grad->{mode}" in used]
    return replace(recipe, autograd=modes[0] if modes else None)


TECHNIQUE = Technique(
    "inference_mode",
    "the forward under no_grad or inference_mode vs with autograd on",
    "seed 004, section 1",
    order=10,
    recommended=True,
    recipe=choose_autograd,
)
