"""optbench: gated pytest-benchmark measurements of PyTorch speed optimizations."""

from .accuracy import Close, Exact, ReducedPrecision
from .case import Case
from .hardware import Requires

__all__ = ["Case", "Close", "Exact", "ReducedPrecision", "Requires"]
