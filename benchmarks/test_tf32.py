"""Seed 004, section 4: float32 matmuls and convolutions computed in fewer mantissa bits.

On CUDA (compute capability >= 8.0): `highest` -> `high` float32 matmul
precision (TF32 in cuBLAS) on the matmul-bound ViT, and cuDNN convolutions in
IEEE fp32 -> TF32 on the ResNet. On a CPU the analogue is oneDNN computing
fp32 matmuls and convolutions in bf16 (`medium`), which needs native bf16
(AVX512-BF16 or AMX): without it oneDNN silently keeps fp32, so the case skips.

Only the `fp32_precision` attributes are used: recent PyTorch raises when the
legacy `set_float32_matmul_precision`/`allow_tf32` API is read after they were
set. `set_float32_matmul_precision(level)` itself writes them per backend:
highest = ieee everywhere, high = tf32 in cuBLAS and oneDNN, medium = tf32 in
cuBLAS and bf16 in oneDNN. The reference states IEEE fp32 explicitly, since
cuDNN convolutions default to TF32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch

from optbench import ReducedPrecision, Requires
from optbench.accuracy import TF32_MAX_RELATIVE_RMSE
from optbench.hardware import AMPERE, AMX, HardwareClass
from optbench.in_effect import SettingInside, Side
from optbench.switches import under

TENSOR_CORES = Requires(min_capability=(8, 0), why="TF32 runs on tensor cores (Ampere and later)")
BF16_MAX_RELATIVE_RMSE = ReducedPrecision().max_relative_rmse
# Smoke-sized models are launch-bound on a GPU: fewer mantissa bits cannot help them there.
FLOORS = {"smoke": 0.9, "standard": 1.3}


@dataclass(frozen=True)
class Fp32Precision:
    """One backend's `fp32_precision` switched from IEEE fp32 to `value` for the optimized calls."""

    backend: str
    owner: Any
    value: str
    requires: Requires
    max_relative_rmse: float
    pays_on: tuple[HardwareClass, ...]

    def change(self, value: str) -> tuple[Any, str, str]:
        return (self.owner, "fp32_precision", value)

    def read_inside(self, model: torch.nn.Module, value: str, side: Side) -> SettingInside:
        """`value` is the precision `model`'s forward runs under on `side`."""
        return SettingInside(*self.change(value), f"{self.backend} fp32_precision", model, side)


def matmul_precision(level: str, device: torch.device) -> Fp32Precision:
    """What `set_float32_matmul_precision(level)` changes for fp32 matmuls on `device`."""
    if device.type == "cuda":
        if level == "medium":
            pytest.skip("on CUDA 'medium' sets the same cuBLAS TF32 mode as 'high': cuBLAS has no bf16 mode for fp32")
        return Fp32Precision(
            "cuBLAS", torch.backends.cuda.matmul, "tf32", TENSOR_CORES, TF32_MAX_RELATIVE_RMSE, (AMPERE,)
        )
    if level == "high":
        return Fp32Precision(
            "oneDNN", torch.backends.mkldnn.matmul, "tf32", TENSOR_CORES, TF32_MAX_RELATIVE_RMSE, (AMPERE,)
        )
    return Fp32Precision(
        "oneDNN", torch.backends.mkldnn.matmul, "bf16", Requires(dtype=torch.bfloat16), BF16_MAX_RELATIVE_RMSE, (AMX,)
    )


def conv_precision(device: torch.device) -> Fp32Precision:
    if device.type == "cuda":
        return Fp32Precision(
            "cuDNN", torch.backends.cudnn.conv, "tf32", TENSOR_CORES, TF32_MAX_RELATIVE_RMSE, (AMPERE,)
        )
    return Fp32Precision(
        "oneDNN", torch.backends.mkldnn.conv, "bf16", Requires(dtype=torch.bfloat16), BF16_MAX_RELATIVE_RMSE, (AMX,)
    )


def run_precision_case(optbench, workload, precision: Fp32Precision, floor: float) -> None:
    model, inputs = workload.model(), workload.inputs
    optbench.run(
        workload.case(
            under((precision.change("ieee"),), lambda: model(inputs)),
            under((precision.change(precision.value),), lambda: model(inputs)),
            accuracy=ReducedPrecision(max_relative_rmse=precision.max_relative_rmse),
            floor=floor,
            floor_applies_on=precision.pays_on,
            requires=precision.requires,
            names=(f"{precision.backend} ieee", f"{precision.backend} {precision.value}"),
            variant=precision.value,
            in_effect=(
                precision.read_inside(model, "ieee", "reference"),
                precision.read_inside(model, precision.value, "optimized"),
            ),
        )
    )


@pytest.mark.parametrize("workload", ["vit"], indirect=True)
@pytest.mark.parametrize("level", ["high", "medium"])
def test_matmul_precision(optbench, workload, level, device, profile):
    run_precision_case(optbench, workload, matmul_precision(level, device), FLOORS[profile.name])


@pytest.mark.parametrize("workload", ["resnet"], indirect=True)
def test_conv_precision(optbench, workload, device, profile):
    run_precision_case(optbench, workload, conv_precision(device), FLOORS[profile.name])
