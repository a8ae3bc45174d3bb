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


@contextmanager
def quiet_interpreter(disable_gc: bool) -> Iterator[None]:
    """What pytest-benchmark does around its timed calls: no tracer (coverage, debuggers), gc off if asked.

    The reference is timed by optbench, the optimized variant by pytest-benchmark;
    both must run under the same interpreter conditions or a tracer inflates one side only.
    """
    tracer = sys.gettrace()
    sys.settrace(None)
    gc_was_enabled = gc.isenabled()
    if disable_gc:
        gc.disable()
    try:
        yield
    finally:
        if disable_gc and gc_was_enabled:
            gc.enable()
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
        self.device_times: list[float] = []
        """Device time per call of every block run through `block`, in order."""

    @property
    def has_events(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _run_block(self, fn: Callable[[], Any], calls: int) -> Callable[[], float | None]:
        """Runs `fn` `calls` times, synchronized; returns a reader of the device time per call, if any."""
        if not self.has_events:
            for _ in range(calls):
                fn()
            self.sync()
            return lambda: None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        self.sync()
        return lambda: start.elapsed_time(end) / 1e3 / calls

    def block(self, fn: Callable[[], Any], calls: int) -> Callable[[], None]:
        """A target for a timer that wraps the call itself (pytest-benchmark): `calls` calls of `fn`, synchronized.

        Its device time per call is appended to `device_times`.
        """

        def run_block() -> None:
            device_time = self._run_block(fn, calls)()
            if device_time is not None:
                self.device_times.append(device_time)

        return run_block

    def time_block(self, fn: Callable[[], Any], calls: int = 1) -> BlockTime:
        """Time per call of `calls` back-to-back calls of `fn`, timed as one interval."""
        self.sync()
        with quiet_interpreter(self.disable_gc):
            start = self.timer()
            device_time = self._run_block(fn, calls)
            host = self.timer() - start
        return BlockTime(host / calls, device_time())

    def time(self, fn: Callable[[], Any]) -> float:
        """Host seconds of one synchronized call (first calls, where compilation lands)."""
        self.sync()
        start = self.timer()
        fn()
        self.sync()
        return self.timer() - start
