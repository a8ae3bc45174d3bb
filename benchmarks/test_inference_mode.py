"""Seed 004, section 1: torch.inference_mode vs no_grad vs autograd left on.

Outputs must be bitwise equal: disabling autograd bookkeeping may not change a
number. The tiny MLP is where the bookkeeping is a real share of the time;
the ResNet is the honest "no effect at this size" record.
"""

from __future__ import annotations

import pytest

from optbench.techniques.inference_mode import TECHNIQUE, autograd_mode

pytestmark = pytest.mark.technique(TECHNIQUE)

# (reference, optimized, declared floor per workload)
PAIRS = [
    ("grad", "no_grad", {"tiny-mlp": 1.05, "resnet": 0.9}),
    ("grad", "inference_mode", {"tiny-mlp": 1.05, "resnet": 0.9}),
    ("no_grad", "inference_mode", {"tiny-mlp": 0.95, "resnet": 0.9}),
]


# Smoke: every pair where the bookkeeping shows, and the seed's own pair on the ResNet; the rest in standard.
@pytest.mark.smoke(*(f"{r}-vs-{o}-tiny-mlp" for r, o, _ in PAIRS), "grad-vs-inference_mode-resnet")
@pytest.mark.workloads("tiny-mlp", "resnet")
@pytest.mark.parametrize(("reference", "optimized", "floors"), PAIRS, ids=[f"{r}-vs-{o}" for r, o, _ in PAIRS])
def test_inference_mode(optbench, workload, reference, optimized, floors):
    optbench.run(autograd_mode(workload, reference, optimized, workload.floor(lambda: floors[workload.name])))
