"""Emptying the caches between calls, for cases whose realistic use is one cold call.

As `triton.testing.do_bench` does on CUDA: write a buffer the size of the
last-level cache (the GPU's L2; on a CPU its L3) so that the next call finds
none of its own weights or activations cached. The write is outside the timed
interval.
"""

from __future__ import annotations

from pathlib import Path

import torch

_FALLBACK_BYTES = 256 * 2**20
"""When the cache size cannot be read: larger than any current last-level cache."""
_SIZE_SUFFIXES = {"K": 2**10, "M": 2**20, "G": 2**30}


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    if text and text[-1] in _SIZE_SUFFIXES:
        return int(text[:-1]) * _SIZE_SUFFIXES[text[-1]]
    return int(text)


def last_level_cache_bytes(device: torch.device, sysfs: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int:
    """The device's last-level cache: the GPU's L2, or the largest cache level sysfs lists for CPU 0."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).L2_cache_size) or _FALLBACK_BYTES
    sizes = []
    for index in sysfs.glob("index*"):
        try:
            sizes.append(_parse_size((index / "size").read_text()))
        except (OSError, ValueError):
            continue
    return max(sizes, default=_FALLBACK_BYTES)


class CacheFlush:
    """Writes a buffer twice the last-level cache's size on the device (twice: caches are not strictly LRU)."""

    def __init__(self, device: torch.device, cache_bytes: int | None = None) -> None:
        size = 2 * (cache_bytes or last_level_cache_bytes(device))
        self.buffer = torch.empty(size // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()
