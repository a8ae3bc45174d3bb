"""Seed 004, section 1: torch.inference_mode vs no_grad vs autograd left on.

Outputs must be bitwise equal: disabling autograd bookkeeping may not change a
number. The tiny MLP is where the bookkeeping is a real share of the time;
the ResNet is the honest "no effect at this size" record.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from optbench import Case, Exact
from optbench.in_effect import AutogradMode

CONTEXTS = {
    "grad": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}

# (reference, optimized, declared floor per workload)
PAIRS = [
    ("grad", "no_grad", {"tiny-mlp": 1.05, "resnet": 0.9}),
    ("grad", "inference_mode", {"tiny-mlp": 1.05, "resnet": 0.9}),
    ("no_grad", "inference_mode", {"tiny-mlp": 0.95, "resnet": 0.9}),
]


@pytest.mark.parametrize("workload", ["tiny-mlp", "resnet"], indirect=True)
@pytest.mark.parametrize(("reference", "optimized", "floors"), PAIRS, ids=[f"{r}-vs-{o}" for r, o, _ in PAIRS])
def test_inference_mode(optbench, workload, reference, optimized, floors):
    model, inputs = workload.model(), workload.inputs

    def run_under(context):
        def call():
            with CONTEXTS[context]():
                return model(inputs)

        return call

    optbench.run(
        Case(
            reference=run_under(reference),
            optimized=run_under(optimized),
            accuracy=Exact(),
            floor=floors[workload.name],
            names=(reference, optimized),
            variant=f"{reference}->{optimized}",
            # Bitwise-equal outputs are the point here, so the outputs' autograd marks show each side's mode.
            in_effect=(AutogradMode(reference, side="reference"), AutogradMode(optimized)),
        )
    )
