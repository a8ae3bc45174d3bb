"""Seed 000, section 3: fp32 training vs torch.autocast mixed precision.

fp16 needs a GradScaler (its gradients underflow) and tensor cores (CUDA 7.0+);
bf16 needs CUDA 8.0+ or a CPU with native bf16 (AVX512-BF16 or AMX): elsewhere
it runs emulated, far slower than fp32, and the case skips with that reason.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from optbench import Requires
from optbench.measuring.hardware import AMPERE, AMX, VOLTA, dtype_name
from optbench.measuring.training import MIXED_PRECISION, OFF
from optbench.techniques.amp import TECHNIQUE

pytestmark = pytest.mark.technique(TECHNIQUE)

DTYPES = {
    torch.float16: Requires(cuda=True, min_capability=(7, 0), why="fp16 autocast with a GradScaler on tensor cores"),
    torch.bfloat16: Requires(dtype=torch.bfloat16),
}
PAYS_ON = {torch.float16: (VOLTA,), torch.bfloat16: (AMPERE, AMX)}


@pytest.mark.trainings("resnet")
@pytest.mark.parametrize("dtype", list(DTYPES), ids=dtype_name)
def test_amp(optbench, training, dtype):
    optbench.run(
        training.case(
            replace(OFF, autocast=dtype),
            accuracy=MIXED_PRECISION,
            floor=training.floor(lambda: 1.2),
            floor_applies_on=PAYS_ON[dtype],
            requires=DTYPES[dtype],
            names=("fp32", f"autocast:{dtype_name(dtype)}"),
            variant=f"autocast:{dtype_name(dtype)}",
        )
    )
