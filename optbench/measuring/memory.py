"""Peak memory of one call: bytes its tensors needed above what was alive when it started.

CUDA: the caching allocator's peak, `max_memory_allocated` minus the bytes allocated at the start.

CPU: the peak of live bytes in the allocation and free events that torch's profiler
records with `profile_memory=True`, summed in order. The process high-water mark
(VmHWM) measured nothing useful: the allocator reuses pages already mapped, so it
read 0 for nearly every case. A live-tensor tracker built on TorchDispatchMode was
the other candidate, but inductor's compiled CPU code allocates its buffers with
`empty_strided_cpu`, below the dispatcher, where such a mode sees nothing; the
profiler's events come from the CPU allocator itself, so they count eager,
inference-mode and compiled calls alike. Recording every op costs a slower call,
paid once per variant outside the timed rounds. Blocks freed during the call
that were allocated before it have no recorded size and are not subtracted, so a
call that replaces a tensor it holds reads its new tensor in full: an upper bound.

CUDA graphs: `torch.compile(mode="reduce-overhead")` (and "max-autotune") replay
graphs whose memory comes from a pool taken when the graph was recorded, so a
replay allocates nothing and its peak would read 0. Such variants are reported as
not measured (see `cuda_graphs_note`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import torch

from ..internals import allocator_events, recorded_cuda_graphs

MEMORY_EVENT = "[memory]"
"""The name torch's profiler gives allocation (positive bytes) and free (negative bytes) events."""

CUDA_GRAPHS_NOTE = "not measured: CUDA graph replays reuse memory taken when the graph was recorded"


class MemoryEvent(Protocol):
    def name(self) -> str: ...
    def nbytes(self) -> int: ...
    def start_ns(self) -> int: ...


def peak_live_bytes(events: Iterable[MemoryEvent]) -> int:
    """The most bytes alive at once, counting allocations and frees from zero in time order."""
    live = peak = 0
    for event in sorted((e for e in events if e.name() == MEMORY_EVENT), key=lambda e: e.start_ns()):
        live += event.nbytes()
        peak = max(peak, live)
    return peak


def peak_memory_bytes(fn: Callable[[], Any], device: torch.device) -> int | None:
    """Bytes one call of `fn` needed above what was in use when it started; None where unmeasurable."""
    gc.collect()
    if device.type != "cuda":
        events = allocator_events(fn)
        return None if events is None else peak_live_bytes(events)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - start


def cuda_graphs_note(device: torch.device) -> str | None:
    """Why a compiled variant's peak memory is not measured on `device`; None where it is.

    The signal is inductor's CUDA graph tree manager having recorded a graph since
    the case began (`torch.compiler.reset()`, which the runner calls per case, also
    resets the trees). The compile mode is not visible to the harness, and
    `torch._inductor.config.triton.cudagraphs` is patched only while a
    "reduce-overhead" function compiles, so the global setting reads False; a
    recorded graph is what actually makes the replays allocate nothing, and graphs
    that inductor skipped (CPU inputs, mutated inputs) leave the memory measurable.
    """
    if device.type != "cuda":
        return None
    return CUDA_GRAPHS_NOTE if recorded_cuda_graphs(device.index) else None
