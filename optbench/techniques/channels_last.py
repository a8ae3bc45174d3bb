"""Seed 004 (tensor-core paths): the model and its 4-d inputs in channels_last (NHWC) vs NCHW."""

from __future__ import annotations

from dataclasses import replace

import torch

from ..advise.recipe import Recipe
from ..measuring.accuracy import REORDERED
from ..measuring.case import Case
from ..measuring.hardware import Requires, dtype_name
from ..measuring.in_effect import ChannelsLast
from ..measuring.workload import InferenceWorkload, channels_last_misfit, not_applicable
from . import Technique, Used


def channels_last(workload: InferenceWorkload, dtype: torch.dtype, floor: float) -> Case:
    """Seed 004 (tensor-core paths): model and 4-d inputs in channels_last (NHWC) vs NCHW, both in `dtype`."""
    if misfit := channels_last_misfit(workload.operations, workload.inputs):
        not_applicable(workload.name, "channels_last", misfit)
    nchw, nhwc = workload.model(dtype), workload.model(dtype, torch.channels_last)
    return workload.case(
        workload.call(nchw, workload.inputs_as(dtype)),
        workload.call(nhwc, workload.inputs_as(dtype, torch.channels_last)),
        accuracy=REORDERED,
        floor=floor,
        requires=Requires(dtype=dtype),
        names=(f"{dtype_name(dtype)} NCHW", f"{dtype_name(dtype)} channels_last"),
        variant=f"channels_last:{dtype_name(dtype)}",
        in_effect=(ChannelsLast(),),
    )


def choose_channels_last(recipe: Recipe, used: Used) -> Recipe:
    """channels_last where it paid in the dtype the recipe chose (fp32 without one)."""
    return replace(recipe, channels_last=f"channels_last:{recipe.dtype or 'fp32'}" in used)


TECHNIQUE = Technique(
    "channels_last",
    "the model and its 4-d inputs in channels_last (NHWC) vs NCHW, in one dtype",
    "seed 004 (tensor-core paths)",
    order=60,
    recommended=True,
    recipe=choose_channels_last,
)
