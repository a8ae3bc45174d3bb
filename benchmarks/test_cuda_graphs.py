"""CUDA graphs: eager launches -> the forward replayed from a graph captured by hand (`torch.cuda.CUDAGraph`, static
inputs, `replay()`) or by `torch.cuda.make_graphed_callables`, on tiny-mlp at batch 1, where launches are the cost
(see `optbench.techniques.cuda_graphs`; compile's `reduce-overhead`, which captures the same way, is in
`test_compile.py`). CUDA only: elsewhere each case skips with the reason.
"""

from __future__ import annotations

import pytest

from optbench.techniques.cuda_graphs import TECHNIQUE, graphed

pytestmark = pytest.mark.technique(TECHNIQUE)

# Not measured on a GPU yet: launch-bound at batch 1, 20 layers of 64; the first CUDA baseline replaces this guess.
GPU_FLOOR = 1.5


@pytest.mark.workloads("tiny-mlp")
@pytest.mark.parametrize("how", ["by-hand", "make_graphed_callables"])
def test_cuda_graphs(optbench, workload, profile, how):
    optbench.run(graphed(workload, how, workload.floor(lambda: GPU_FLOOR), profile.name))
