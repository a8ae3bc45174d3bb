"""Seed 004, section 5: cudnn.benchmark off vs on, each side in a process of its own."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import asdict

import pytest
import torch

from ..measuring.accuracy import REORDERED, Check
from ..measuring.case import Case, Observed
from ..measuring.hardware import Requires
from ..measuring.workload import InferenceWorkload, not_applicable
from ..running.remote import RemoteWorkload, WorkerSpec
from . import Technique

CUDNN_PLANS = Requires(cuda=True, why="cudnn.benchmark chooses among cuDNN convolution algorithms")


def benchmark_read_by(side: str, expected: bool) -> Callable[[Observed], Check]:
    """The check that `side`'s worker ran its model's forward with cudnn.benchmark at `expected`."""

    def check(observed: Observed) -> Check:
        seen = observed.details[side]["cudnn_benchmark"] if observed.details else None
        label = f"cudnn.benchmark read in the {side}'s forward: {seen} (expected {expected})"
        return Check(label if seen == expected else f"not in effect: {label}", int(seen == expected), 1, False)

    return check


@contextlib.contextmanager
def cudnn_benchmark_apart(workload: InferenceWorkload, profile: str, floor: float) -> Iterator[Case]:
    """Seed 004, section 5, on the user's model: cudnn.benchmark off vs on with fixed shapes, each side in a fresh
    process of its own (optbench.running.remote) that sets the flag before meeting a shape, since cuDNN keeps the
    plan it
    chose for a shape for the rest of the process whatever the flag says later; the harness times each call's
    round trip, whose pipe overhead is the same on both sides. The workers are stopped when the block ends."""
    device = workload.device
    if unmet := CUDNN_PLANS.unmet(device, profile):
        pytest.skip(unmet)
    if not workload.convolves():
        not_applicable(workload.name, "cudnn.benchmark", "it runs no convolution, and only cuDNN convolutions plan")
    assert workload.specs is not None, "only the user's model is rebuilt from its SPECs"
    model, inputs = workload.specs

    def side(benchmark: bool) -> RemoteWorkload:
        spec = WorkerSpec(
            workload.name, profile, str(device), "eager", torch.get_num_threads(), model, inputs, benchmark
        )
        return RemoteWorkload(spec, "system")

    with side(False) as reference, side(True) as optimized:
        yield workload.case(
            reference.call,
            optimized.call,
            reference_output=reference.output,
            optimized_output=optimized.output,
            accuracy=REORDERED,
            floor=floor,
            requires=CUDNN_PLANS,
            names=("benchmark off", "benchmark on"),
            variant="benchmark",
            details=lambda: {"reference": asdict(reference.describe()), "optimized": asdict(optimized.describe())},
            checks=(benchmark_read_by("reference", False), benchmark_read_by("optimized", True)),
        )


TECHNIQUE = Technique(
    "cudnn_benchmark",
    "cudnn.benchmark off vs on: fixed shapes, a control, and shapes that vary",
    "seed 004, section 5",
    order=50,
    recommended=True,
)
