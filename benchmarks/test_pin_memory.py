"""Seed 000, section 1: DataLoader(pin_memory=True), with and without non_blocking copies.

A slice of a training epoch through a DataLoader with worker processes,
host-to-device copies included. Pinning alone only skips the driver's staging
copy; the copy overlaps compute only with `.to(device, non_blocking=True)`,
so both are measured. Pinning and the copy change no number: bitwise check.
"""

from __future__ import annotations

import pytest

from optbench import Requires
from optbench.measuring.accuracy import TrainingAgreement
from optbench.measuring.training import Tricks
from optbench.techniques.pin_memory import TECHNIQUE

pytestmark = pytest.mark.technique(TECHNIQUE)

CUDA = Requires(cuda=True, why="pinned host memory only speeds host-to-GPU copies (PyTorch ignores it on CPU)")
# (optimized tricks, floor): pinning without asynchronous copies is expected to give little.
VARIANTS = {
    "pinned": (Tricks(pin_memory=True), 0.9),
    "pinned+non_blocking": (Tricks(pin_memory=True, non_blocking=True), 1.0),
}


@pytest.mark.trainings("resnet")
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_pin_memory(optbench, training, variant):
    tricks, floor = VARIANTS[variant]
    optbench.run(
        training.case(
            tricks,
            accuracy=TrainingAgreement(loss_tolerance=0),
            floor=training.floor(lambda: floor),
            requires=CUDA,
            names=("pageable", variant),
            variant=variant,
        )
    )
