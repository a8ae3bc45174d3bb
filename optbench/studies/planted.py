"""Planted slowdowns, for measuring the gate's detection power on real catalogue cases.

`--plant-slowdown F` makes every timed call of a case's optimized variant F
times its own duration longer, by spinning inside the call: the slowdown is
in the timed interval, proportional to the work, and leaves outputs alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..measuring.clock import DeviceClock


def planted(optimized: Callable[[], Any], fraction: float, clock: DeviceClock) -> Callable[[], Any]:
    """`optimized`, made `fraction` slower: after each call, spin for `fraction` of the time it took."""

    def slowed() -> Any:
        start = time.perf_counter()
        result = optimized()
        clock.sync()
        until = time.perf_counter() + fraction * (time.perf_counter() - start)
        while time.perf_counter() < until:
            pass
        return result

    return slowed
