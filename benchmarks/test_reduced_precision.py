"""Seed 004, section 2: fp32 vs a model and inputs converted to bf16 (`.to(torch.bfloat16)`) or fp16 (`.half()`).

A large win where the hardware has the format natively (tensor cores: fp16 from
compute capability 7.0, bf16 from 8.0; CPUs with AVX512-BF16 or AMX), a skip
with the reason elsewhere. The seed expects little from small workloads: the
one-image ViT and the smoke sizes, launch-bound on a GPU, are held only to
"not slower", the standard sizes to a clear gain.
"""

from __future__ import annotations

import pytest
import torch

from optbench.measuring.hardware import AMPERE, AMX, VOLTA, dtype_name
from optbench.techniques.reduced_precision import TECHNIQUE, reduced_precision

pytestmark = pytest.mark.technique(TECHNIQUE)

FLOORS = {
    "resnet": {"smoke": 0.9, "standard": 1.3},
    "vit": {"smoke": 0.9, "standard": 1.5},
    "vit-b1": {"smoke": 0.9, "standard": 0.9},
}
# Where the format is native and fast, the floor is a promise; elsewhere a miss says "does not pay here".
PAYS_ON = {torch.bfloat16: (AMPERE, AMX), torch.float16: (VOLTA,)}


# Smoke: each format on the convolutional and the transformer workload, and the batch-1 latency one once.
@pytest.mark.smoke("bf16-resnet", "bf16-vit", "fp16-vit", "fp16-vit-b1")
@pytest.mark.workloads(*FLOORS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=dtype_name)
def test_reduced_precision(optbench, workload, dtype, profile):
    floor = workload.floor(lambda: FLOORS[workload.name][profile.name])
    optbench.run(reduced_precision(workload, dtype, floor, PAYS_ON[dtype]))
