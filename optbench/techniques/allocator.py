"""PyTorch's CPU tuning guide: jemalloc or tcmalloc preloaded vs glibc malloc (`optbench.running.allocator` starts the
process with it)."""

from __future__ import annotations

from . import Technique

TECHNIQUE = Technique(
    "allocator",
    "glibc malloc vs jemalloc or tcmalloc, each side in a fresh process started with it",
    "PyTorch's CPU tuning guide",
    # Not the seed's; a CPU's speed depends on it, a GPU's not (its tensors come from the caching allocator).
    order=80,
    recommended=True,
)
