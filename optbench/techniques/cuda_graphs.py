"""CUDA graphs by hand: a forward captured once on static buffers and replayed, against eager launches.

A small model at batch 1 is launch-bound: each of its kernels takes a few
microseconds on the GPU and about as long to launch from Python. A CUDA graph
records the kernels once and replays them with one launch. By hand
(`torch.cuda.CUDAGraph`, as PyTorch's CUDA semantics notes show it):

1. warm up on a side stream (lazy initialisation, cuBLAS workspaces and the
   caching allocator's blocks must exist before capture);
2. capture one forward on *static* inputs: the graph reads and writes fixed
   addresses;
3. per call, copy the new inputs into the static ones, `replay()`, and read the
   static output, which the next replay overwrites.

`torch.cuda.make_graphed_callables` does the same for a module (forward and
backward); compile's `reduce-overhead` mode captures inductor's kernels the same
way (`test_compile.py` measures it against eager). The cases here run on CUDA
only; their proof of effect is the profiler's `cudaGraphLaunch` calls.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import pytest
import torch
from torch import nn

from ..internals import tree_leaves, tree_map
from ..measuring.accuracy import REORDERED
from ..measuring.case import Case
from ..measuring.hardware import Requires
from ..measuring.in_effect import InEffect, Sides
from ..measuring.workload import Batch, InferenceWorkload, forward
from . import Technique

WARMUP_CALLS = 3
REQUIRES = Requires(cuda=True, why="CUDA graphs replay recorded GPU kernels")


class GraphApi(Protocol):
    """What capturing needs of `torch.cuda`: streams, a graph, and the capture context (a fake in the tests)."""

    def Stream(self) -> Any: ...
    def stream(self, stream: Any) -> AbstractContextManager[Any]: ...
    def current_stream(self) -> Any: ...
    def CUDAGraph(self) -> Any: ...
    def graph(self, graph: Any) -> AbstractContextManager[Any]: ...


class GraphedForward:
    """`model`'s forward captured on static copies of `batch`; each call copies its batch in and replays."""

    def __init__(self, model: nn.Module, batch: Batch, api: GraphApi = torch.cuda) -> None:
        self.static_inputs = tree_map(lambda leaf: leaf.clone() if isinstance(leaf, torch.Tensor) else leaf, batch)
        side = api.Stream()
        side.wait_stream(api.current_stream())
        with api.stream(side), torch.inference_mode():
            for _ in range(WARMUP_CALLS):
                forward(model, self.static_inputs)
        api.current_stream().wait_stream(side)
        self.graph = api.CUDAGraph()
        with api.graph(self.graph), torch.inference_mode():
            self.static_output = forward(model, self.static_inputs)

    def __call__(self, batch: Batch) -> Any:
        for static, new in zip(tree_leaves(self.static_inputs), tree_leaves(batch), strict=True):
            if isinstance(static, torch.Tensor) and static.data_ptr() != new.data_ptr():
                static.copy_(new)
        self.graph.replay()
        return self.static_output


@dataclass(frozen=True)
class GraphLaunches:
    """In effect: one optimized call launches CUDA graphs (the profiler's `cudaGraphLaunch` runtime calls)."""

    def __call__(self, case: Sides) -> InEffect:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as recorded:
            case.optimized()
            torch.cuda.synchronize()
        launches = sum(event.name == "cudaGraphLaunch" for event in recorded.events())
        return InEffect("CUDA graph", launches > 0, f"launched {launches} graph(s) in one call")


def _copied(call: Callable[[], Any]) -> Callable[[], list[torch.Tensor]]:
    """The output of `call` cloned: a replay overwrites the static output the comparison would otherwise hold."""
    return lambda: [leaf.clone() for leaf in tree_leaves(call()) if isinstance(leaf, torch.Tensor)]


def graphed(workload: InferenceWorkload, how: str, floor: float, profile: str) -> Case:
    """Eager forward vs the same forward replayed from a CUDA graph, captured by hand ("by-hand") or by
    `make_graphed_callables` ("make_graphed_callables")."""
    # Before capturing: there is nothing to capture without CUDA.
    if why := REQUIRES.unmet(workload.device, profile):
        pytest.skip(why)
    eager = workload.call(workload.model())
    model, batch = workload.model(), workload.inputs
    if how == "by-hand":
        optimized = partial(GraphedForward(model, batch), batch)
    else:
        inputs = tuple(leaf for leaf in tree_leaves(batch) if isinstance(leaf, torch.Tensor))
        optimized = workload.call(torch.cuda.make_graphed_callables(model, inputs))
    return workload.case(
        eager,
        optimized,
        optimized_output=_copied(optimized),
        accuracy=REORDERED,
        floor=floor,
        requires=REQUIRES,
        names=("eager", f"CUDA graph {how}"),
        variant=how,
        in_effect=(GraphLaunches(),),
    )


TECHNIQUE = Technique(
    "cuda_graphs",
    "eager launches vs the forward replayed from a CUDA graph",
    "PyTorch's CUDA graphs docs",
    order=210,
)
