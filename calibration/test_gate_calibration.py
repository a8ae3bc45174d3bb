"""Workloads of known speedup for measuring the gate's error rates (driven by `python -m optbench calibrate`).

The reference does 2N matrix products and the optimized variant N, so the
true speedup is 2x; a planted slowdown makes the optimized variant do
N x (1 + slowdown) products. Not part of the benchmark catalogue.
"""

from __future__ import annotations

import os

import pytest
import torch

from optbench import Case, Close

PRODUCTS = 20
SIZE = 192
REPETITIONS = int(os.environ.get("OPTBENCH_CALIBRATION_REPETITIONS", "3"))
SLOWDOWNS = [float(value) for value in os.environ.get("OPTBENCH_CALIBRATION_SLOWDOWNS", "0").split(",")]


def products(matrix: torch.Tensor, count: int) -> torch.Tensor:
    result = matrix
    for _ in range(count):
        result = torch.tanh(result @ matrix)
    return result


@pytest.fixture(scope="module")
def matrix() -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(SIZE, SIZE, generator=generator) / SIZE**0.5


@pytest.mark.parametrize("repetition", range(REPETITIONS))
@pytest.mark.parametrize("slowdown", SLOWDOWNS)
def test_gate(optbench, matrix, slowdown, repetition):
    planted = round(PRODUCTS * (1 + slowdown))
    optbench.run(
        Case(
            reference=lambda: products(matrix, 2 * PRODUCTS),
            optimized=lambda: products(matrix, planted),
            reference_output=lambda: torch.ones(1),
            optimized_output=lambda: torch.ones(1),
            accuracy=Close(),
            floor=0.5,
            names=(f"{2 * PRODUCTS} products", f"{planted} products"),
        )
    )
