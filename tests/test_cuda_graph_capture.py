"""CUDA graphs by hand, on the CPU with a fake `torch.cuda`: warm-up on a side stream, one capture on static
inputs, and each call copying its batch into them before a replay; the cases skip without CUDA."""

import contextlib

import pytest
import torch
from torch import nn

from optbench.measuring.workload import InferenceWorkload
from optbench.techniques.cuda_graphs import WARMUP_CALLS, GraphedForward, graphed


class FakeStream:
    def wait_stream(self, other):
        pass


class FakeGraph:
    """Replays what was captured: here, the model on the graph's static inputs into its static output."""

    def __init__(self):
        self.replays = 0
        self.recompute = None

    def replay(self):
        self.replays += 1
        self.recompute()


class FakeCuda:
    def __init__(self, model):
        self.model = model
        self.capturing = False
        self.events = []

    def Stream(self):
        return FakeStream()

    @contextlib.contextmanager
    def stream(self, stream):
        self.events.append("side stream")
        yield

    def current_stream(self):
        return FakeStream()

    def CUDAGraph(self):
        return FakeGraph()

    @contextlib.contextmanager
    def graph(self, graph):
        self.events.append("capture")
        yield


class Counted(nn.Linear):
    calls = 0

    def forward(self, x):
        Counted.calls += 1
        return super().forward(x)


def test_a_graph_is_captured_once_after_warm_up_and_each_call_copies_its_batch_in_before_replaying():
    torch.manual_seed(0)
    model = Counted(4, 3)
    fake = FakeCuda(model)
    first = torch.randn(2, 4)
    Counted.calls = 0
    graphed_forward = GraphedForward(model, first, api=fake)
    assert fake.events == ["side stream", "capture"] and Counted.calls == WARMUP_CALLS + 1
    static_output = graphed_forward.static_output
    graphed_forward.graph.recompute = lambda: static_output.copy_(model(graphed_forward.static_inputs))

    new = torch.randn(2, 4)
    with torch.inference_mode():  # as every case calls its sides
        output = graphed_forward(new)
        assert output is static_output and torch.equal(output, model(new))
        assert torch.equal(graphed_forward.static_inputs, new) and graphed_forward.static_inputs is not new
    assert graphed_forward.graph.replays == 1


@pytest.mark.parametrize("how", ["by-hand", "make_graphed_callables"])
def test_without_cuda_the_case_skips_before_capturing(how):
    workload = InferenceWorkload("tiny", lambda: nn.Linear(4, 3), torch.randn(1, 4))
    with pytest.raises(pytest.skip.Exception, match="needs a CUDA device: CUDA graphs replay recorded GPU kernels"):
        graphed(workload, how, floor=1.5, profile="smoke")
