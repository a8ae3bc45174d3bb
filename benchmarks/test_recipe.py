"""The recipe `python -m optbench advise` wrote for the user's model, measured end to end against the plain model.

Runs only with `--model` and `--recipe PATH`: the effects of a recipe's parts
do not multiply, so its headline number is this measurement, never a product.
"""

from __future__ import annotations

import pytest

from optbench.techniques import recipe


@pytest.mark.workloads()
def test_recipe(optbench, workload, own_recipe):
    optbench.run(recipe(workload, own_recipe))
