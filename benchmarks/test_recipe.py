"""The recipe `python -m optbench advise` wrote for the user's model, measured end to end against the plain model.

Runs only with `--recipe PATH` (and `--model` or `--train`): the effects of a
recipe's parts do not multiply, so its headline number is this measurement,
never a product. Its training part is measured as the catalogue's trainer
applies the same tricks (`training_step` in the recipe is held to the same
numbers by tests/test_advise.py).
"""

from __future__ import annotations

import pytest

from optbench.measuring.training import MIXED_PRECISION, OFF, REORDERED_FP32, recipe_tricks
from optbench.techniques.recipe import TECHNIQUE, recipe

pytestmark = pytest.mark.technique(TECHNIQUE)


@pytest.mark.workloads()
def test_recipe(optbench, workload, own_recipe):
    optbench.run(recipe(workload, own_recipe))


@pytest.mark.trainings()
def test_training_recipe(optbench, training, own_recipe):
    tricks = recipe_tricks(getattr(own_recipe, "TRAINING", None))
    if tricks == OFF:
        pytest.skip("the recipe has no training part: no training technique was measured to pay")
    optbench.run(
        training.case(
            tricks,
            accuracy=MIXED_PRECISION if tricks.autocast else REORDERED_FP32,
            floor=training.floor(lambda: 1.0),
            names=(OFF.label, "recipe"),
            variant="recipe",
        )
    )
