"""Seeds 000 and 004: torch.compile vs eager inference, with compile time and graph breaks recorded.

The LayerNorm/GELU stack is where kernel fusion pays on a CPU, the pointwise
chain where it pays on a GPU; the ResNet is recorded as it is (about 1.0x on a 2-core CPU). The
ViT is the seed's static-structure model, at its batch and at one image per
call, where per-op overhead is the larger share and fusion saves the most.
"""

from __future__ import annotations

import pytest

from optbench import Requires
from optbench.techniques.compile import TECHNIQUE, compiled

pytestmark = pytest.mark.technique(TECHNIQUE)

MODES = {
    "default": Requires(),
    "reduce-overhead": Requires(cuda=True, why="CUDA graphs; on CPU this mode has nothing extra to do"),
    "max-autotune": Requires(cuda=True, profiles=("standard",), why="autotunes GPU kernels (Triton templates)"),
}
# ln-mlp measured 1.21x-1.59x over six runs on the 2-core CPU: fusion pays, by an amount the host moves.
FLOORS = {"pointwise": 1.5, "ln-mlp": 1.1, "resnet": 0.8, "vit": 0.9, "vit-b1": 1.05}
# On a CPU, eager's 8 MB intermediates come from fresh pages on every op, so its time follows the host's
# page-fault cost: fusion measured 1.3x to 3.2x in runs an hour apart here, too unsteady to gate. GPUs
# (caching allocator, memory-bound kernels) are where this classic fusion win is held to a baseline.
UNSTEADY_ON_CPU = {"pointwise": "eager time follows the host's page-fault cost on CPU (1.3x-3.2x an hour apart)"}


def requirement(mode, workload):
    if workload in UNSTEADY_ON_CPU:
        return Requires(cuda=True, profiles=MODES[mode].profiles, why=UNSTEADY_ON_CPU[workload])
    return MODES[mode]


# Smoke: where fusion pays on a CPU (ln-mlp), the seed's ResNet and the per-op-bound batch-1 ViT
# (tests/test_agreement.py's catalogue case), with the GPU-only modes and the pointwise chain; the batched ViT
# (the same compile path as batch 1, 23 s of a CI run) in standard.
SMOKE_WORKLOADS = ("ln-mlp", "resnet", "vit-b1", "pointwise")


@pytest.mark.smoke(*(f"{mode}-{workload}" for mode in MODES for workload in SMOKE_WORKLOADS))
@pytest.mark.workloads(*FLOORS)
@pytest.mark.parametrize("mode", list(MODES))
def test_compile(optbench, workload, mode):
    floor = workload.floor(lambda: FLOORS[workload.name])
    optbench.run(compiled(workload, mode, floor, requirement(mode, workload.name)))
