"""Seed 000's closing question: every training trick this device has, at once (`optbench.measuring.training.stack`)."""

from __future__ import annotations

from . import Technique

TECHNIQUE = Technique(
    "training_stack",
    "every trick this device has, at once, vs all off",
    "seed 000",
    order=398,
    training=True,
)
