"""optbench: gated pytest-benchmark measurements of PyTorch speed optimizations."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .accuracy import Close, Exact, ReducedPrecision
    from .case import Case
    from .hardware import Requires
    from .training import TrainingSetup

__all__ = ["Case", "Close", "Exact", "ReducedPrecision", "Requires", "TrainingSetup"]
_HOMES = {"Case": ".case", "Close": ".accuracy", "Exact": ".accuracy", "ReducedPrecision": ".accuracy"}
_HOMES["Requires"] = ".hardware"
_HOMES["TrainingSetup"] = ".training"


def __getattr__(name: str) -> Any:
    # Lazy, so that pytest loading the entry point (optbench.entry) in any project does not import torch.
    if name not in _HOMES:
        raise AttributeError(f"module 'optbench' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)
