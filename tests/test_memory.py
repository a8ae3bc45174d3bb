"""Peak memory of one call on CPU (profiler allocation events), and CUDA-graphed variants reported as not measured."""

import types
from dataclasses import replace

import pytest
import torch

from optbench.measuring.memory import (
    CUDA_GRAPHS_NOTE,
    MEMORY_EVENT,
    cuda_graphs_note,
    peak_live_bytes,
    peak_memory_bytes,
)
from optbench.reporting.report import HEADERS, summary_row
from optbench.storage.record import Memory, Record, read_records
from tests.records import make_record

CPU = torch.device("cpu")
MIB = 2**20
SIXTY_FOUR_MIB_OF_FLOAT32 = (4096, 4096)


@pytest.fixture(scope="module")
def x():
    return torch.randn(SIXTY_FOUR_MIB_OF_FLOAT32)


def test_a_64_mib_temporary_reads_at_least_64_mib(x):
    assert peak_memory_bytes(lambda: (x * 2).sum(), CPU) >= 64 * MIB


def test_a_temporary_under_inference_mode_is_counted(x):
    def doubled_sum():
        with torch.inference_mode():
            return (x * 2).sum()

    assert peak_memory_bytes(doubled_sum, CPU) >= 64 * MIB


def test_an_in_place_op_on_a_preallocated_tensor_reads_about_zero(x):
    out = torch.empty_like(x)
    assert peak_memory_bytes(lambda: torch.mul(x, 2, out=out), CPU) < MIB


def test_compiled_code_allocating_below_the_dispatcher_is_counted(x):
    # Inductor's CPU code allocates its output with empty_strided_cpu, not through a dispatched op.
    doubled = torch.compile(lambda t: t * 2)
    doubled(x)
    assert peak_memory_bytes(lambda: doubled(x), CPU) >= 64 * MIB


def _event(nbytes, at_ns, name=MEMORY_EVENT):
    return types.SimpleNamespace(name=lambda: name, nbytes=lambda: nbytes, start_ns=lambda: at_ns)


def test_the_peak_counts_frees_in_time_order_and_ignores_other_events():
    # Alloc 10 at t=1, free it at t=2, alloc 10 at t=3: never 20 bytes alive, though summed in the order listed
    # (both allocations before the free) they would be.
    events = [_event(10, 1), _event(10, 3), _event(-10, 2), _event(99, 0, name="aten::mul")]
    assert peak_live_bytes(events) == 10


class FakeTreeManager:
    def __init__(self, recorded):
        self.roots = {"function 0": ["node"] if recorded else []}


@pytest.mark.parametrize(
    ("device", "manager", "note"),
    [
        ("cuda:0", FakeTreeManager(recorded=True), CUDA_GRAPHS_NOTE),
        ("cuda:0", FakeTreeManager(recorded=False), None),
        ("cuda:0", None, None),
        ("cpu", FakeTreeManager(recorded=True), None),
    ],
)
def test_a_recorded_cuda_graph_tree_marks_the_memory_not_measured(monkeypatch, device, manager, note):
    from torch._inductor import cudagraph_trees

    asked = []

    def get_manager(device_index=None, create_if_none_exists=True):
        asked.append((device_index, create_if_none_exists))
        return manager

    monkeypatch.setattr(cudagraph_trees, "get_manager", get_manager)
    assert cuda_graphs_note(torch.device(device)) == note
    assert all(not create for _, create in asked), "looking must not create a tree manager"


def _record(memory: Memory) -> Record:
    return replace(make_record(speedup=None), memory=memory)


@pytest.mark.parametrize(
    ("optimized_bytes", "note", "text"),
    [(None, CUDA_GRAPHS_NOTE, "96.0/n/a MiB"), (32 * MIB, None, "96.0/32.0 MiB")],
)
def test_the_summary_says_n_a_for_a_variant_whose_memory_is_not_measured(optimized_bytes, note, text):
    memory = Memory(96 * MIB, optimized_bytes, optimized_note=note)
    assert summary_row(_record(memory))[HEADERS.index("peak mem ref/opt")] == text


GRAPHED = """
import optbench.running.runner
import torch
from optbench import Case, Exact

# Stands in for a CUDA graph tree that recorded the optimized variant's graph.
optbench.running.runner.cuda_graphs_note = lambda device: "graphed"


def test_graphed(optbench):
    optbench.run(Case(reference=lambda: torch.ones(1024), optimized=lambda: torch.ones(1024), accuracy=Exact(),
                      floor=0.1, expect_compiled=True))
"""


def test_a_graphed_compiled_variant_is_recorded_as_not_measured(pytester):
    pytester.makeconftest('pytest_plugins = ["optbench.plugin"]\n')
    pytester.makepyfile(test_graphed=GRAPHED)
    result = pytester.runpytest_subprocess("--benchmark-disable", "--compile-fallback", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_graphed*/n/a MiB*"])  # -v: the full table, with peak memory
    (record,) = read_records(pytester.path / ".optbench")
    assert record.memory.reference_bytes >= 4096 and record.memory.optimized_bytes is None
    assert record.memory.optimized_note == "graphed"
