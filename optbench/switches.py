"""Process-wide torch settings that cases flip, snapshotted and restored whatever happens.

Only the `fp32_precision` attribute family is touched: recent PyTorch raises
when the legacy `allow_tf32`/`set_float32_matmul_precision` API is read after
the new one was set, so the two must never be mixed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

_FP32_PRECISION_OWNERS = (
    "backends",
    "backends.cuda.matmul",
    "backends.cudnn",
    "backends.cudnn.conv",
    "backends.cudnn.rnn",
    "backends.mkldnn",
    "backends.mkldnn.matmul",
    "backends.mkldnn.conv",
    "backends.mkldnn.rnn",
)


def _resolve(path: str) -> Any:
    owner: Any = torch
    for part in path.split("."):
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    return owner


def _settings() -> dict[tuple[Any, str], Any]:
    found: dict[tuple[Any, str], Any] = {
        (torch.backends.cudnn, "benchmark"): torch.backends.cudnn.benchmark,
        (torch.backends.cudnn, "deterministic"): torch.backends.cudnn.deterministic,
    }
    for path in _FP32_PRECISION_OWNERS:
        owner = _resolve(path)
        if owner is not None and hasattr(owner, "fp32_precision"):
            found[(owner, "fp32_precision")] = owner.fp32_precision
    return found


@contextmanager
def preserved_global_state() -> Iterator[None]:
    """Restores cuDNN flags, fp32 precisions, default dtype, threads and determinism on exit."""
    settings = _settings()
    default_dtype = torch.get_default_dtype()
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        yield
    finally:
        for (owner, name), value in settings.items():
            # Writing an unchanged precision would still mark the new API as used.
            if getattr(owner, name) != value:
                setattr(owner, name, value)
        torch.set_default_dtype(default_dtype)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        if torch.are_deterministic_algorithms_enabled() != deterministic:
            torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


@contextmanager
def setting(owner: Any, name: str, value: Any) -> Iterator[None]:
    """One attribute set for the duration of a block, e.g. `setting(torch.backends.cudnn, "benchmark", True)`."""
    previous = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, previous)
