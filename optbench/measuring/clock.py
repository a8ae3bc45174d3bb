"""Device-synchronized timing of a block of back-to-back calls: host clock always, CUDA events on a GPU."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class BlockTime:
    """Time per call of one block, by the host clock and (on CUDA) by events on the device's stream."""

    host_s: float
    device_s: float | None = None


class Events:
    """A start and an end CUDA event with timing enabled."""

    def __init__(self) -> None:
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def seconds_per_call(self, calls: int) -> float:
        return self.start.elapsed_time(self.end) / 1e3 / calls


@contextmanager
def quiet_interpreter(disable_gc: bool) -> Iterator[None]:
    """What pytest-benchmark does around its timed calls: no tracer (coverage, debuggers), no profile hook
    (sys.setprofile), gc off if asked; as its PauseInstrumentation and runner do.

    The reference is timed by optbench, the optimized variant by pytest-benchmark;
    both must run under the same interpreter conditions or a tracer inflates one side only.
    """
    tracer, profiler = sys.gettrace(), sys.getprofile()
    sys.settrace(None)
    sys.setprofile(None)
    gc_was_enabled = gc.isenabled()
    if disable_gc:
        gc.disable()
    try:
        yield
    finally:
        if disable_gc and gc_was_enabled:
            gc.enable()
        sys.setprofile(profiler)
        sys.settrace(tracer)


class DeviceClock:
    """Times calls so that queued device work is inside the measured interval.

    CUDA kernels run asynchronously; without a synchronize after the call the
    timer would stop when the launch returns, not when the work is done. On
    CUDA each block is also timed by events recorded on the current stream,
    which count device time only (no launch latency or host jitter before the
    first kernel): both are recorded, the host time is the one gated, as it is
    what pytest-benchmark measures and what a user waits for.
    """

    def __init__(
        self, device: torch.device, timer: Callable[[], float] = time.perf_counter, disable_gc: bool = False
    ) -> None:
        self.device = device
        self.timer = timer
        self.disable_gc = disable_gc

    @property
    def has_events(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def events(self) -> Events | None:
        """A fresh pair of timing events on CUDA, None elsewhere. Made before a block, read after it: never
        inside the timed interval."""
        return Events() if self.has_events else None

    def _run_block(self, fn: Callable[[], Any], calls: int, events: Events | None) -> None:
        """`calls` calls of `fn` between the events' records, then one synchronize."""
        if events is not None:
            events.start.record()
        for _ in range(calls):
            fn()
        if events is not None:
            events.end.record()
        self.sync()

    def block(self, fn: Callable[[], Any], calls: int, events: Iterator[Events | None]) -> Callable[[], None]:
        """A target for a timer that wraps the call itself (pytest-benchmark): `calls` calls of `fn`, synchronized,
        each block between the next pair of `events` (made beforehand; read by the caller after timing)."""

        def run_block() -> None:
            self._run_block(fn, calls, next(events))

        return run_block

    def time_block(self, fn: Callable[[], Any], calls: int = 1) -> BlockTime:
        """Time per call of `calls` back-to-back calls of `fn`, timed as one interval."""
        events = self.events()
        self.sync()
        with quiet_interpreter(self.disable_gc):
            start = self.timer()
            self._run_block(fn, calls, events)
            host = self.timer() - start
        return BlockTime(host / calls, events.seconds_per_call(calls) if events else None)

    def time(self, fn: Callable[[], Any]) -> float:
        """Host seconds of one synchronized call (first calls, where compilation lands)."""
        self.sync()
        start = self.timer()
        fn()
        self.sync()
        return self.timer() - start
