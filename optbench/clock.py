"""Device-synchronized wall-clock timing of one call."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch


class DeviceClock:
    """Times calls so that queued device work is inside the measured interval.

    CUDA kernels run asynchronously; without a synchronize after the call the
    timer would stop when the launch returns, not when the work is done.
    """

    def __init__(self, device: torch.device, timer: Callable[[], float] = time.perf_counter) -> None:
        self.device = device
        self.timer = timer

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def synchronized(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """`fn` followed by a device synchronize, for timers that wrap the call themselves."""

        def call() -> Any:
            result = fn()
            self.sync()
            return result

        return call

    def time(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        self.sync()
        start = self.timer()
        result = fn()
        self.sync()
        return self.timer() - start, result
