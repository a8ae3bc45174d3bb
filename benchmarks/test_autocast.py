"""torch.autocast for inference (PyTorch's AMP recipe): fp32 weights, matmuls and convolutions in bf16 or fp16.

Beside `test_reduced_precision.py`, which converts the model: autocast also casts the weights on every call, so
it is held to a gain only where the format is native (tensor cores, AMX), and to "not slower" in smoke.
"""

from __future__ import annotations

import pytest
import torch

from optbench.measuring.hardware import AMPERE, AMX, VOLTA, dtype_name
from optbench.techniques.autocast import TECHNIQUE, autocast

pytestmark = pytest.mark.technique(TECHNIQUE)

FLOORS = {"smoke": 0.9, "standard": 1.2}
PAYS_ON = {torch.bfloat16: (AMPERE, AMX), torch.float16: (VOLTA,)}


# Smoke: bf16 on the transformer, where the matmuls are the time; the rest in standard.
@pytest.mark.smoke("bf16-vit")
@pytest.mark.workloads("resnet", "vit")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=dtype_name)
def test_autocast(optbench, workload, dtype, profile):
    optbench.run(autocast(workload, dtype, workload.floor(lambda: FLOORS[profile.name]), PAYS_ON[dtype]))
