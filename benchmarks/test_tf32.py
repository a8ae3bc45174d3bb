"""Seed 004, section 4: float32 matmuls and convolutions computed in fewer mantissa bits.

On CUDA (compute capability >= 8.0): `highest` -> `high` float32 matmul
precision (TF32 in cuBLAS) on the matmul-bound ViT, and cuDNN convolutions in
IEEE fp32 -> TF32 on the ResNet. On a CPU the analogue is oneDNN computing
fp32 matmuls and convolutions in bf16 (`medium`), which needs native bf16
(AVX512-BF16 or AMX): without it oneDNN silently keeps fp32, so the case skips.
"""

from __future__ import annotations

import pytest

from optbench.techniques.tf32 import TECHNIQUE, conv_precision, fp32_precision, matmul_precision

pytestmark = pytest.mark.technique(TECHNIQUE)

# Smoke-sized models are launch-bound on a GPU: fewer mantissa bits cannot help them there.
FLOORS = {"smoke": 0.9, "standard": 1.3}


@pytest.mark.workloads("vit")
@pytest.mark.parametrize("level", ["high", "medium"])
def test_matmul_precision(optbench, workload, level, device, profile):
    floor = workload.floor(lambda: FLOORS[profile.name])
    optbench.run(fp32_precision(workload, matmul_precision(level, device), floor))


@pytest.mark.workloads("resnet")
def test_conv_precision(optbench, workload, device, profile):
    optbench.run(fp32_precision(workload, conv_precision(device), workload.floor(lambda: FLOORS[profile.name])))
