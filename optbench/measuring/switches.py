"""Process-wide torch settings: flipped for a block or a call, snapshotted per case, restored whatever happens.

Only the `fp32_precision` attribute family is touched: recent PyTorch raises
when the legacy `allow_tf32`/`set_float32_matmul_precision` API is read after
the new one was set, so the two must never be mixed. That is why
`torch.backends.mkldnn.allow_tf32` is not snapshotted either: it is the legacy
view of the mkldnn `fp32_precision` family restored here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch

from ..internals import use_deterministic_algorithms

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
        (torch.backends.mkldnn, "enabled"): torch.backends.mkldnn.enabled,
        (torch.backends.mkldnn, "deterministic"): torch.backends.mkldnn.deterministic,
    }
    for path in _FP32_PRECISION_OWNERS:
        owner = _resolve(path)
        if owner is not None and hasattr(owner, "fp32_precision"):
            found[(owner, "fp32_precision")] = owner.fp32_precision
    return found


@contextmanager
def preserved_global_state() -> Iterator[None]:
    """Restores cuDNN and oneDNN flags, fp32 precisions, default dtype, threads and determinism on exit."""
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
            use_deterministic_algorithms(deterministic, warn_only=warn_only)


@contextmanager
def setting(owner: Any, name: str, value: Any) -> Iterator[None]:
    """One attribute set for the duration of a block, e.g. `setting(torch.backends.cudnn, "benchmark", True)`."""
    previous = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, previous)


Change = tuple[Any, str, Any]
"""(owner, attribute, value), e.g. `(torch.backends.cudnn, "benchmark", True)`."""


@contextmanager
def settings(*changes: Change) -> Iterator[None]:
    """Several process-wide torch settings for the duration of a block, each restored whatever happens."""
    with ExitStack() as stack:
        for owner, name, value in changes:
            stack.enter_context(setting(owner, name, value))
        yield


def under(changes: tuple[Change, ...], call: Callable[[], Any]) -> Callable[[], Any]:
    """`call` with `changes` applied around each call only, so the other variant of a case keeps its own."""

    def call_under() -> Any:
        with settings(*changes):
            return call()

    return call_under


@contextmanager
def deterministic_settings() -> Iterator[None]:
    """Deterministic kernels where torch has them, restored on exit."""
    deterministic, warn_only = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    cudnn_deterministic = torch.backends.cudnn.deterministic
    use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    try:
        yield
    finally:
        use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.backends.cudnn.deterministic = cudnn_deterministic


@contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op thread count for the block (None: leave it); set before compiling, as inductor's
    CPU kernels fix their OpenMP team size when they are generated."""
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
