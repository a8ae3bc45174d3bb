"""Seed 000, section 4: eager vs torch.compile of the training step's forward and loss.

The backward is compiled by AOTAutograd with the forward; the optimizer step
stays eager. Compile time and graph breaks are recorded by the harness. The
LayerNorm/GELU classifier is where fusion gains a little on a CPU; the ResNet is
recorded as it is (0.86x to 1.0x for a CIFAR ResNet18 step on a 2-core CPU).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from optbench import Requires
from optbench.measuring.training import OFF, REORDERED_FP32
from optbench.techniques.compile_training import TECHNIQUE

pytestmark = pytest.mark.technique(TECHNIQUE)

# max-autotune without the CUDA graphs it otherwise adds: their replays overwrite the losses and gradients a
# training step keeps (optbench.techniques.compile_training.refuse_cuda_graphs).
MODES = {
    "default": Requires(),
    "max-autotune-no-cudagraphs": Requires(
        cuda=True, profiles=("standard",), why="autotunes GPU kernels (Triton templates)"
    ),
}
# Fusion measured 1.03-1.10x on the smoke LayerNorm/GELU step (2-core CPU): real but too small for a floor above 1.
FLOORS = {"ln-mlp": 1.0, "resnet": 0.7}


# Smoke: the LayerNorm/GELU step; the ResNet step (the same compiled-step path, 84 s of a CI run) in standard.
@pytest.mark.smoke(*(f"{mode}-ln-mlp" for mode in MODES))
@pytest.mark.trainings(*FLOORS)
@pytest.mark.parametrize("mode", list(MODES))
def test_compile_training(optbench, training, mode):
    optbench.run(
        training.case(
            replace(OFF, compile_mode=mode),
            accuracy=REORDERED_FP32,
            floor=training.floor(lambda: FLOORS[training.name]),
            requires=MODES[mode],
            names=("eager", f"compile:{mode}"),
            variant=f"compile:{mode}",
        )
    )
