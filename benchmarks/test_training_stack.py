"""Seed 000's closing question: every trick this device has, at once, vs all of them off.

On a GPU that is set_to_none, compile, autocast (bf16 on 8.0+, else fp16 with
a GradScaler), channels_last and pinned non-blocking copies, so the timed call
goes through a DataLoader. On a CPU without native bf16 only set_to_none and
compile apply: the ResNet then shows compile's loss, the LayerNorm/GELU
classifier its gain.
"""

from __future__ import annotations

import pytest

from optbench.measuring.training import MIXED_PRECISION, OFF, REORDERED_FP32, stack
from optbench.techniques.training_stack import TECHNIQUE

pytestmark = pytest.mark.technique(TECHNIQUE)

# The seed's GPU effects (AMP ~1.7x, compile ~1.05x) compound past 1.3x; a CPU gets compile's effect alone.
CPU_FLOORS = {"ln-mlp": 1.0, "resnet": 0.7}
GPU_FLOOR = 1.3


# Smoke: the LayerNorm/GELU classifier; the seed's ResNet (the same stack on the same trainer, 46 s of a CI run,
# and on a CPU compile's loss, which compile_training records) in standard.
@pytest.mark.smoke("ln-mlp")
@pytest.mark.trainings(*CPU_FLOORS)
def test_training_stack(optbench, training, device):
    tricks = stack(training)
    optbench.run(
        training.case(
            tricks,
            accuracy=MIXED_PRECISION if tricks.autocast else REORDERED_FP32,
            floor=training.floor(lambda: GPU_FLOOR if device.type == "cuda" else CPU_FLOORS[training.name]),
            names=(OFF.label, tricks.label),
            variant=tricks.label,
        )
    )
