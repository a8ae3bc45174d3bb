"""Seed 004, section 2: fp32 vs a model and inputs converted to bf16 or fp16.

A large win where the hardware has the format natively (GPUs with tensor
cores; CPUs with AVX512-BF16 or AMX), a skip with the reason elsewhere.
"""

from __future__ import annotations

import pytest
import torch

from optbench import Case, ReducedPrecision, Requires
from optbench.hardware import dtype_name


@pytest.mark.parametrize("workload", ["resnet"], indirect=True)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=dtype_name)
def test_reduced_precision(optbench, workload, dtype):
    fp32, inputs = workload.model(), workload.inputs
    reduced, reduced_inputs = workload.model(dtype), workload.inputs_as(dtype)
    with torch.inference_mode():
        optbench.run(
            Case(
                reference=lambda: fp32(inputs),
                optimized=lambda: reduced(reduced_inputs),
                fp64_output=lambda: workload.model(torch.float64)(inputs.double()),
                accuracy=ReducedPrecision(),
                floor=1.2,
                requires=Requires(dtype=dtype),
                names=("fp32", dtype_name(dtype)),
            )
        )
