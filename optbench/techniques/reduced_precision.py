"""Seed 004, section 2: fp32 vs the model and its floating inputs in bf16 or fp16."""

from __future__ import annotations

from dataclasses import replace

import torch

from ..advise.recipe import Recipe
from ..measuring.accuracy import ReducedPrecision
from ..measuring.case import Case
from ..measuring.hardware import HardwareClass, Requires, dtype_name
from ..measuring.in_effect import ChangesNumbers, Converted
from ..measuring.workload import InferenceWorkload
from . import Technique, Used


def reduced_precision(
    workload: InferenceWorkload, dtype: torch.dtype, floor: float, pays_on: tuple[HardwareClass, ...]
) -> Case:
    """Seed 004, section 2: fp32 vs the model and its floating inputs converted to `dtype`."""
    fp32, reduced = workload.model(), workload.model(dtype)
    return workload.case(
        workload.call(fp32),
        workload.call(reduced, workload.inputs_as(dtype)),
        accuracy=ReducedPrecision(format_output=workload.format_output(dtype)),
        floor=floor,
        floor_applies_on=pays_on,
        requires=Requires(dtype=dtype),
        names=("fp32", dtype_name(dtype)),
        variant=dtype_name(dtype),
        in_effect=(Converted(dtype, reduced), ChangesNumbers(dtype_name(dtype))),
    )


def choose_dtype(recipe: Recipe, used: Used) -> Recipe:
    """The faster of bf16 and fp16 where either paid."""
    return replace(recipe, dtype=used.fastest("bf16", "fp16"))


TECHNIQUE = Technique(
    "reduced_precision",
    "fp32 vs the model and its floating inputs converted to bf16 or fp16",
    "seed 004, section 2",
    order=20,
    recommended=True,
    recipe=choose_dtype,
)
