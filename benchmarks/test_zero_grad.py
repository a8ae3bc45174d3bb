"""Seed 000, section 2: zero_grad(set_to_none=False) vs zero_grad(set_to_none=True).

PyTorch 2.0 made True the default, so the seed's "normal" run was already the
optimized one; the reference passes False explicitly. Assigning gradients
instead of zero-filling and adding into them must not change a number, so
losses and parameters after the run are compared bitwise. The wide MLP (many
parameters, little arithmetic each) is where the saved memory traffic can
show; the ResNet is the seed's model.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from optbench.measuring.accuracy import TrainingAgreement
from optbench.measuring.training import OFF
from optbench.techniques.zero_grad import TECHNIQUE

pytestmark = pytest.mark.technique(TECHNIQUE)

FLOORS = {"wide-mlp": 1.05, "resnet": 0.9}


# Smoke: the wide MLP, where the saved memory traffic shows; the seed's ResNet (50 s of a CI run) in standard.
@pytest.mark.smoke("wide-mlp")
@pytest.mark.trainings(*FLOORS)
def test_zero_grad(optbench, training):
    optbench.run(
        training.case(
            replace(OFF, set_to_none=True),
            accuracy=TrainingAgreement(loss_tolerance=0),
            floor=training.floor(lambda: FLOORS[training.name]),
            names=("set_to_none=False", "set_to_none=True"),
            variant="set_to_none",
        )
    )
