"""Seed 004, section 4: fp32 matmuls or convolutions computed in TF32 (cuBLAS, cuDNN) or bf16 (oneDNN)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
import torch
from torch import nn

from ..advise.recipe import BACKENDS, Recipe
from ..measuring.accuracy import TF32_MAX_RELATIVE_RMSE, ReducedPrecision
from ..measuring.case import Case
from ..measuring.hardware import AMPERE, AMX, HardwareClass, Requires
from ..measuring.in_effect import SettingInside, Side
from ..measuring.switches import Change, under
from ..measuring.workload import InferenceWorkload, not_applicable
from ..storage.record import Record
from . import Technique, Used

TENSOR_CORES = Requires(min_capability=(8, 0), why="TF32 runs on tensor cores (Ampere and later)")
BF16_MAX_RELATIVE_RMSE = ReducedPrecision().max_relative_rmse


@dataclass(frozen=True)
class Fp32Precision:
    """One backend's `fp32_precision` switched from IEEE fp32 to `value` for the optimized calls.

    Only the `fp32_precision` attributes are used: recent PyTorch raises when the legacy
    `set_float32_matmul_precision`/`allow_tf32` API is read after they were set."""

    backend: str
    owner: Any
    value: str
    requires: Requires
    max_relative_rmse: float
    pays_on: tuple[HardwareClass, ...]
    kernels: str
    """What the switch changes: "matmul" or "convolution"."""

    def change(self, value: str) -> Change:
        return (self.owner, "fp32_precision", value)

    def read_inside(self, model: nn.Module, value: str, side: Side) -> SettingInside:
        """`value` is the precision `model`'s forward runs under on `side`."""
        return SettingInside(*self.change(value), f"{self.backend} fp32_precision", model, side)


def _tf32(backend: str, owner: Any, kernels: str) -> Fp32Precision:
    return Fp32Precision(backend, owner, "tf32", TENSOR_CORES, TF32_MAX_RELATIVE_RMSE, (AMPERE,), kernels)


def _onednn_bf16(owner: Any, kernels: str) -> Fp32Precision:
    """oneDNN computing fp32 in bf16, which needs native bf16: without it oneDNN silently keeps fp32."""
    return Fp32Precision(
        "oneDNN", owner, "bf16", Requires(dtype=torch.bfloat16), BF16_MAX_RELATIVE_RMSE, (AMX,), kernels
    )


def matmul_precision(level: str, device: torch.device) -> Fp32Precision:
    """What `set_float32_matmul_precision(level)` changes for fp32 matmuls on `device`: highest = ieee
    everywhere, high = tf32 in cuBLAS and oneDNN, medium = tf32 in cuBLAS and bf16 in oneDNN."""
    if device.type == "cuda":
        if level == "medium":
            pytest.skip("on CUDA 'medium' sets the same cuBLAS TF32 mode as 'high': cuBLAS has no bf16 mode for fp32")
        return _tf32("cuBLAS", torch.backends.cuda.matmul, "matmul")
    if level == "high":
        return _tf32("oneDNN", torch.backends.mkldnn.matmul, "matmul")
    return _onednn_bf16(torch.backends.mkldnn.matmul, "matmul")


def conv_precision(device: torch.device) -> Fp32Precision:
    """fp32 convolutions in TF32 (cuDNN) or bf16 (oneDNN)."""
    if device.type == "cuda":
        return _tf32("cuDNN", torch.backends.cudnn.conv, "convolution")
    return _onednn_bf16(torch.backends.mkldnn.conv, "convolution")


def fp32_precision(workload: InferenceWorkload, precision: Fp32Precision, floor: float) -> Case:
    """Seed 004, section 4: float32 matmuls or convolutions computed in fewer mantissa bits."""
    runs_them = workload.convolves() if precision.kernels == "convolution" else workload.multiplies_matrices()
    if not runs_them:
        not_applicable(workload.name, f"{precision.backend} {precision.value}", f"it runs no {precision.kernels}")
    model = workload.model()
    return workload.case(
        under((precision.change("ieee"),), workload.call(model)),
        under((precision.change(precision.value),), workload.call(model)),
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


def switched(record: Record) -> tuple[str, str]:
    """("mkldnn.matmul", "bf16") from a record of this technique: its backend's `torch.backends` path and the value
    it switched to."""
    backend, value = record.variants.optimized.split()
    kernels = "conv" if "conv_precision" in record.case else "matmul"
    return f"{BACKENDS[backend]}.{kernels}", value


def choose_precision(recipe: Recipe, used: Used) -> Recipe:
    """Every fp32 precision switch that paid, where the recipe stays in fp32: a reduced dtype has no fp32 left."""
    if recipe.dtype:
        return recipe
    return replace(recipe, fp32_precision=tuple(sorted(switched(record) for record in used.records)))


TECHNIQUE = Technique(
    "tf32",
    "fp32 matmuls or convolutions in TF32 (cuBLAS, cuDNN) or bf16 (oneDNN) vs IEEE fp32",
    "seed 004, section 4",
    order=40,
    recommended=True,
    recipe=choose_precision,
)
