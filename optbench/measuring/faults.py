"""Faults a case can end in, each turned into one readable sentence: time-outs, OOM, compiler errors."""

from __future__ import annotations

import gc
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from ..errors import WorkerError, first_lines
from ..internals import MissingInternal, is_compiler_error


class Phase:
    """Where a case is, so that a fault can say what it interrupted, and how long each phase took."""

    def __init__(self, on_enter: Callable[[str], None] | None = None) -> None:
        self.current = "setup"
        self.durations_s: dict[str, float] = {}
        self._started = self._created = time.monotonic()
        self.on_enter = on_enter
        """Told each phase as it starts (optbench.reporting.progress)."""

    @property
    def elapsed_s(self) -> float:
        """Seconds since the case started (its first phase)."""
        return time.monotonic() - self._created

    def enter(self, name: str) -> None:
        now = time.monotonic()
        self.durations_s[self.current] = self.durations_s.get(self.current, 0.0) + now - self._started
        self.current, self._started = name, now
        if self.on_enter is not None:
            self.on_enter(name)


class CaseTimeout(Exception):
    def __init__(self, limit_s: float, phase: str) -> None:
        super().__init__(f"timed out after {limit_s:.0f} s during {phase}")
        self.phase = phase


@contextmanager
def time_limit(seconds: float | None, phase: Phase) -> Iterator[None]:
    """Raises CaseTimeout in the block after `seconds` (main thread only; signals need it).

    Python code is interrupted at once; a single long native call is
    interrupted when it returns.
    """
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise CaseTimeout(seconds, phase.current)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def explain(error: BaseException, phase: str, workload: str) -> str | None:
    """The one-sentence cause of a known fault, or None for an unexpected error."""
    size = f" ({workload})" if workload else ""
    if isinstance(error, MissingInternal):
        return str(error)
    if isinstance(error, WorkerError):
        return f"{error} (during {phase})"
    if isinstance(error, CaseTimeout):
        return f"{error}; raise --case-timeout if the case is just slow{size}"
    if isinstance(error, torch.OutOfMemoryError):
        return f"out of memory during {phase}{size}; run a smaller batch or profile: {first_lines(error, 1)}"
    if is_compiler_error(error):
        return (
            f"torch.compile failed during {phase}: {first_lines(error)}; "
            "--compile-fallback measures eager instead and says so"
        )
    return None


def forget_frames(error: BaseException) -> None:
    """Drops the locals of the finished frames in `error`'s tracebacks (its chain included).

    A traceback keeps every frame it passed through alive, and with them the
    failed case's models and activations; the error's message and line
    numbers stay.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        entry = current.__traceback__
        while entry is not None:
            try:
                entry.tb_frame.clear()
            except RuntimeError:  # still executing: a caller of the code that failed
                pass
            else:
                # Before Python 3.13 a frame keeps the dict its f_locals last returned; reading it again empties it.
                _ = entry.tb_frame.f_locals
            entry = entry.tb_next
        current = current.__cause__ or current.__context__


def release_memory(device: torch.device) -> str | None:
    """Frees what a failed case left cached, so the next case starts clean; None, or why it could not.

    Only what nothing refers to any more is freed: call it after `forget_frames`.
    The CUDA part is unit-tested with fakes only: docs/ci.md, "Parallel runs with
    pytest-xdist", lists it among the checks to run first on a GPU runner.
    """
    gc.collect()
    if device.type != "cuda":
        return None
    try:
        torch.cuda.synchronize(device)
    except RuntimeError as error:
        # A sticky error (illegal address, ECC, device-side assert) leaves the context unusable; the caller
        # still reports the fault that caused it.
        return f"the CUDA context is unusable ({first_lines(error, 1)}): later CUDA cases in this process fail too"
    torch.cuda.empty_cache()
    return None
