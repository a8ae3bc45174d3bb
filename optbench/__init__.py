"""optbench: gated pytest-benchmark measurements of PyTorch speed optimizations.

The public API is what this module exports (`__all__`): what a benchmark file, a user's own test or a training
setup imports. The subpackages are the harness's own and may change: `measuring` (a case and how one is
observed), `verdict` (its statistics and the gate), `storage` (records, baselines, histories), `running` (the
case runner and its processes), `reporting`, `advise`, `studies` (agree, aa, order, drift, calibrate) and
`techniques` (the registry of the catalogue's techniques).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .measuring.accuracy import Check, Close, Exact, ReducedPrecision
    from .measuring.case import Case, Observed
    from .measuring.hardware import AMPERE, AMX, VOLTA, Requires
    from .measuring.in_effect import Autocast, AutogradMode, ChangesNumbers, ChannelsLast, Converted, InEffect
    from .measuring.memory_payoff import MemoryPayoff
    from .measuring.training import TrainingSetup, Tricks
    from .measuring.workload import InferenceWorkload
    from .techniques import Technique

_HOMES = {
    ".measuring.accuracy": ("Check", "Close", "Exact", "ReducedPrecision"),
    ".measuring.case": ("Case", "Observed"),
    ".measuring.hardware": ("AMPERE", "AMX", "VOLTA", "Requires"),
    ".measuring.in_effect": ("AutogradMode", "Autocast", "ChangesNumbers", "ChannelsLast", "Converted", "InEffect"),
    ".measuring.memory_payoff": ("MemoryPayoff",),
    ".measuring.training": ("TrainingSetup", "Tricks"),
    ".measuring.workload": ("InferenceWorkload",),
    ".techniques": ("Technique",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}
__all__ = [
    "AMPERE",
    "AMX",
    "VOLTA",
    "Autocast",
    "AutogradMode",
    "Case",
    "ChangesNumbers",
    "ChannelsLast",
    "Check",
    "Close",
    "Converted",
    "Exact",
    "InEffect",
    "InferenceWorkload",
    "MemoryPayoff",
    "Observed",
    "ReducedPrecision",
    "Requires",
    "Technique",
    "TrainingSetup",
    "Tricks",
]


def __getattr__(name: str) -> Any:
    # Lazy, so that pytest loading the entry point (optbench.entry) in any project does not import torch.
    if name not in _HOME_OF:
        raise AttributeError(f"module 'optbench' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME_OF[name], __name__), name)
