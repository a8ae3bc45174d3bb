"""Peak memory of one call: device allocator on CUDA, process high-water mark on CPU."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_cpu_high_water_mark() -> bool:
    # Writing 5 resets VmHWM to the current RSS (Linux >= 4.0).
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def peak_memory_bytes(fn: Callable[[], Any], device: torch.device) -> int | None:
    """Bytes the call needed above what was in use when it started; None where unmeasurable."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - start
    if not _STATUS.exists() or not _reset_cpu_high_water_mark():
        return None
    start = _status_kib("VmRSS")
    fn()
    return max(0, _status_kib("VmHWM") - start) * 1024
