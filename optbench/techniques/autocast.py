"""torch.autocast for inference: the fp32 model and inputs, its matmuls and convolutions run in bf16 or fp16.

PyTorch's AMP recipe and tuning guide: unlike converting the model (`reduced_precision`), autocast keeps the
weights in fp32 and casts each op's inputs as it runs, so numerically sensitive ops (softmax, norms, losses)
stay in fp32, at the price of casting the weights again on every call. Where both pay, the recipe converts
(`reduced_precision`), the cheaper of the two once cast, so this one enters no recipe.
"""

from __future__ import annotations

from typing import Any

import torch

from ..measuring.accuracy import ReducedPrecision
from ..measuring.case import Case
from ..measuring.hardware import HardwareClass, Requires, dtype_name
from ..measuring.in_effect import Autocast, ChangesNumbers
from ..measuring.workload import InferenceWorkload, not_applicable
from . import Technique


def autocast(workload: InferenceWorkload, dtype: torch.dtype, floor: float, pays_on: tuple[HardwareClass, ...]) -> Case:
    """fp32 vs the same fp32 model and inputs called under `torch.autocast(device, dtype)`."""
    if not workload.operations:
        not_applicable(workload.name, "autocast", "it runs no matmul or convolution, the ops autocast casts")
    model = workload.model()
    fp32_forward = workload.call(model)
    label = f"autocast:{dtype_name(dtype)}"

    def under_autocast() -> Any:
        with torch.autocast(workload.device.type, dtype=dtype):
            return fp32_forward()

    return workload.case(
        fp32_forward,
        under_autocast,
        # Autocast rounds op inputs only: within what storing every intermediate in `dtype` costs.
        accuracy=ReducedPrecision(format_output=workload.format_output(dtype)),
        floor=floor,
        floor_applies_on=pays_on,
        requires=Requires(dtype=dtype),
        names=("fp32", label),
        variant=label,
        in_effect=(Autocast(dtype), ChangesNumbers(label)),
    )


TECHNIQUE = Technique(
    "autocast",
    "fp32 vs the same fp32 model called under torch.autocast in bf16 or fp16",
    "PyTorch's AMP recipe and tuning guide",
    order=25,
)
