"""A stream of input sizes through torch.compile: dynamic=True, mark_dynamic, and padding to power-of-two buckets,
each against compile's default (static, then automatic dynamic), over 8 sizes arriving in turn.

ln-mlp varies its sequence length (its blocks act per position, so padding
changes no real position's output), tiny-mlp its batch, the user's model
(--model) its batch. Every timed call runs the whole stream on compiled code;
each side's first pass, compiles included, is reported in the case's details,
and a side that compiled at more sizes than its policy declares (2 for the
default, 1 for dynamic=True and mark_dynamic, one per bucket met) fails the
case: recompiling for every new size is the compile regression user code meets
most (see `optbench.techniques.dynamic_shapes`).
"""

from __future__ import annotations

import pytest

from optbench.measuring.workload import not_applicable
from optbench.techniques.dynamic_shapes import TECHNIQUE, ShapePolicy, SizeStream, batch_stream, dynamic_shapes

pytestmark = pytest.mark.technique(TECHNIQUE)

VARYING_DIM = {"ln-mlp": 1, "tiny-mlp": 0}
LARGEST = {"smoke": 64, "standard": 512}
# Symbolic kernels may cost a little against the default's (whose graph is symbolic after its first size too);
# padding does about 30% more work on this stream, which static kernels win back on GPUs (and CUDA graphs need
# static shapes), not on the 2-core CPU: dynamic 0.98x, mark_dynamic 0.99-1.00x, buckets 0.81-0.89x there.
FLOORS = {"dynamic": 0.95, "mark_dynamic": 0.95, "buckets": 0.9}


# Smoke: each policy once, on each workload at least once (the varying dim is the sequence on ln-mlp, the batch on
# tiny-mlp); the other three in standard.
@pytest.mark.smoke("mark_dynamic-ln-mlp", "dynamic-tiny-mlp", "buckets-tiny-mlp")
@pytest.mark.workloads(*VARYING_DIM)
@pytest.mark.parametrize("policy", list(FLOORS))
def test_dynamic_shapes(optbench, workload, profile, policy):
    if workload.own_model:
        stream = batch_stream(workload.inputs)
    else:
        stream = SizeStream.up_to(VARYING_DIM[workload.name], LARGEST[profile.name])
    if why := stream.misfit(workload.inputs):
        not_applicable(workload.name, "a stream of sizes", why)
    optbench.run(dynamic_shapes(workload, stream, ShapePolicy(policy), workload.floor(lambda: FLOORS[policy])))
