"""PyTorch's Performance Tuning Guide: the optimizer step as a for-loop (one op per parameter tensor) vs foreach
(multi-tensor ops over all of them) vs fused (one kernel per parameter group).

Over a model of many small parameter tensors, where per-tensor overhead is the
step's cost, with SGD (momentum) and AdamW. Batching the same arithmetic
reorders floating-point work at most: the trained parameters are held within
three times how far fp32's own rounding moves the for-loop reference's. On a
GPU the guide's claim is that foreach and fused pay; on a CPU each op is cheap
to launch, and the record says what they are worth there.
"""

from __future__ import annotations

import pytest

from optbench.measuring.hardware import VOLTA
from optbench.measuring.training import OPTIMIZER_ROUNDING, Tricks
from optbench.techniques.optimizer_impl import TECHNIQUE

pytestmark = pytest.mark.technique(TECHNIQUE)

IMPLEMENTATIONS = ("foreach", "fused")
# Not measured on a GPU yet: the first CUDA baseline replaces this guess of "at least as fast".
GPU_FLOOR = 1.0


# Smoke: each implementation once, on each optimizer once; the other two pairs run in standard.
@pytest.mark.smoke("foreach-many-tensors", "fused-many-tensors-adamw")
@pytest.mark.trainings("many-tensors", "many-tensors-adamw")
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_optimizer_impl(optbench, training, implementation):
    optbench.run(
        training.case(
            Tricks(optimizer_impl=implementation),
            reference=Tricks(optimizer_impl="for-loop"),
            accuracy=OPTIMIZER_ROUNDING,
            floor=training.floor(lambda: GPU_FLOOR),
            floor_applies_on=(VOLTA,),
            names=("for-loop", implementation),
            variant=implementation,
        )
    )
