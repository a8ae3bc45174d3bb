"""PyTorch's "Compiling the optimizer" recipe: torch.compile on the optimizer step vs the eager foreach step.

Inductor fuses the step's per-parameter arithmetic into a few kernels; the
harness reports the compile time (the first calls) apart from the steady
state. Fusion may reorder floating-point work: the trained parameters are held
within three times how far fp32's own rounding moves the eager reference's.
"""

from __future__ import annotations

import pytest

from optbench.measuring.hardware import VOLTA
from optbench.measuring.training import OPTIMIZER_ROUNDING, Tricks
from optbench.techniques.compiled_optimizer import TECHNIQUE

pytestmark = pytest.mark.technique(TECHNIQUE)

# Not measured on a GPU yet: the first CUDA baseline replaces this guess of "at least as fast".
GPU_FLOOR = 1.0


# Smoke: AdamW, the step with the most arithmetic to fuse; SGD runs in standard.
@pytest.mark.smoke("many-tensors-adamw")
@pytest.mark.trainings("many-tensors", "many-tensors-adamw")
def test_compiled_optimizer(optbench, training):
    optbench.run(
        training.case(
            Tricks(optimizer_impl="foreach", compile_optimizer=True),
            reference=Tricks(optimizer_impl="foreach"),
            accuracy=OPTIMIZER_ROUNDING,
            floor=training.floor(lambda: GPU_FLOOR),
            floor_applies_on=(VOLTA,),
            names=("eager foreach step", "compiled step"),
            variant="compiled-step",
        )
    )
