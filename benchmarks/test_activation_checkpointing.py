"""PyTorch's tuning guide, activation checkpointing: memory is the payoff, paid for in recomputation.

`torch.utils.checkpoint` (non-reentrant) around each block of a deep model,
against the same eager training step; and torch.compile's activation memory
budget (its partitioner saves at most that share of the activations for
backward and recomputes the rest) against the compiled step without one. Each
is a memory case (`optbench.memory_payoff`): its floor is on the ratio of peak
memory, reference over optimized, with an interval from repeated
measurements, and its speed is held only to a bound on the slowdown.
Recomputation runs the same kernels on the same inputs, so the trained
parameters and loss path must be bitwise the reference's.
"""

from __future__ import annotations

import pytest

from optbench.accuracy import TrainingAgreement
from optbench.memory_payoff import MemoryPayoff
from optbench.training import Tricks

COMPILED = Tricks(compile_mode="default")
# (optimized tricks, reference, the promise). Floors: measured 4.6x (checkpointing) and 1.8x (budget 0.5) on the
# smoke model's peak, checkpointing at 0.81-0.92x and the budget at 0.95x of the reference's speed (2-core EPYC).
VARIANTS = {
    "checkpoint": (Tricks(checkpointing=True), Tricks(), MemoryPayoff(floor=2.0, max_slowdown=1.5)),
    "memory_budget:0.5": (Tricks(compile_mode="default", memory_budget=0.5), COMPILED, MemoryPayoff(1.3, 1.5)),
}
SAME_TRAINING = TrainingAgreement(loss_tolerance=0)


@pytest.mark.trainings("deep-mlp")
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_activation_checkpointing(optbench, training, variant):
    tricks, reference, payoff = VARIANTS[variant]
    optbench.run(
        training.case(
            tricks,
            reference=reference,
            accuracy=SAME_TRAINING,
            floor=1 / payoff.max_slowdown,
            memory_payoff=payoff,
            names=(reference.label, tricks.label),
            variant=variant,
        )
    )
