"""A recipe written by `advise`, measured end to end on the model it was chosen for."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ..measuring.accuracy import REORDERED, Close, ReducedPrecision, tensors
from ..measuring.case import Case
from ..measuring.hardware import Requires, dtype_name
from ..measuring.in_effect import AutogradMode, ChangesNumbers, ChannelsLast, Converted, SettingInside
from ..measuring.workload import InferenceWorkload
from . import Technique
from .tf32 import BF16_MAX_RELATIVE_RMSE


def recipe(workload: InferenceWorkload, recipe: ModuleType) -> Case:
    """A recipe written by `advise` (optbench.advise.recipe), end to end, vs the plain fp32 model called with
    autograd on:
    the measured headline, since the effects of its parts do not multiply."""
    plain, model = workload.model(), recipe.apply(workload.model())
    batch = recipe.prepare(workload.inputs)
    dtype = recipe.DTYPE
    plain_forward = workload.call(plain)

    def optimized() -> Any:
        return recipe.run(model, batch)

    if dtype is not None:
        accuracy: Close | ReducedPrecision = ReducedPrecision(format_output=workload.format_output(dtype))
    elif recipe.FP32_PRECISION:
        accuracy = ReducedPrecision(max_relative_rmse=BF16_MAX_RELATIVE_RMSE)
    else:
        accuracy = REORDERED
    converted = (Converted(dtype, model), ChangesNumbers(dtype_name(dtype))) if dtype is not None else ()
    autograd = (AutogradMode("grad", side="reference"), AutogradMode(recipe.AUTOGRAD)) if recipe.AUTOGRAD else ()
    # Read where the kernels read them; a compiled forward evaluates its hooks once, at tracing, so only eager.
    switches = tuple(
        SettingInside(recipe.backend(path), "fp32_precision", value, f"{path} fp32_precision", model)
        for path, value in recipe.FP32_PRECISION.items()
        if recipe.COMPILE_MODE is None
    )
    return workload.case(
        plain_forward,
        optimized,
        inference_mode=False,
        reference_output=lambda: tensors(plain_forward()),
        optimized_output=lambda: [tensor.clone() for tensor in tensors(optimized())],
        accuracy=accuracy,
        floor=workload.floor(lambda: 1.0),
        requires=Requires(dtype=dtype),
        names=("plain fp32", "recipe"),
        variant="recipe",
        expect_compiled=recipe.COMPILE_MODE is not None,
        in_effect=(*converted, *((ChannelsLast(),) if recipe.CHANNELS_LAST else ()), *autograd, *switches),
    )


TECHNIQUE = Technique(
    "recipe",
    "the recipe advise wrote, end to end, vs the plain fp32 model",
    "optbench advise",
    order=900,
)
