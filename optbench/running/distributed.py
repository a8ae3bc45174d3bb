"""A program on N ranks of real torch.distributed, driven call by call from this process, which is rank 0.

A distributed case is timed like every other case: the harness times
`Ranks.call(k)` in this process, pairing and interleaving the reference (k=0)
and the optimized variant (k=1) round by round. So the caller itself is rank 0
and the other ranks are peers that do whatever rank 0 does: `call(k)`
broadcasts k from rank 0 (a one-element int64 tensor), then every rank runs
`program.run(k)`, whose collectives keep the ranks in step; rank 0's result is
returned. The broadcast's cost is in both variants' times alike.

Peers are forked (multiprocessing's "fork" context) by default, so `build`, the
factory of each rank's program, may be a closure over anything this process has
built (a model, data, a recipe): nothing is pickled, and each peer inherits it
as it was. With `start_method="spawn"` each peer is a new interpreter instead,
and `build` must be picklable (a module-level function, or a partial of one
over picklable arguments) and rebuild what it needs: the way to CUDA ranks
from a process that has used CUDA already. A peer never garbage-collects what it inherited (frozen at the fork): freeing
a copy of this process's objects there, an earlier process group above all, can
crash it. Each rank builds its program only after its process group is up, so a
program may hold communicators or buffers tied to the group. A fork cannot
carry CUDA over: with device_type "cuda" (one GPU per rank, NCCL by default),
forked Ranks must be entered before this process touches CUDA, and refuse when
CUDA is already initialized; spawned ones have no such limit.

Failures are one-line RankErrors naming the rank. A peer whose `build` or
`run` raises sends its error's summary to rank 0 over a pipe, then exits; its
exit closes its connections, so rank 0's pending collective fails at once, and
rank 0 reports the peer's message rather than gloo's. A peer that hangs makes
rank 0's collective time out after `timeout_s`, the process group's timeout,
which gloo honours for every collective (a send to a peer that never receives
fails too); rank 0 then names the peers that did not answer. An exception of
rank 0's own program that no peer explains propagates unchanged.

Teardown never hangs and leaves nothing behind. After a clean last call the
peers are told to stop (a broadcast of -1, itself bounded by a short timeout)
and joined; after any failure they are stuck in a collective, so they are
terminated at once, and killed if they do not go. Then rank 0's process group
is destroyed, its temporary store removed and its thread count restored,
whether the `with` body passed or raised. A peer outlives a dead rank 0 by a
moment only: rank 0's exit closes the connections its pending broadcast waits
on, and a watchdog thread ends it once rank 0 is no longer its parent (in case
another process still holds rank 0's sockets). A rank 0 that is alive but never
calls again is waited for at most IDLE_TIMEOUT_S.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import torch
import torch.distributed as dist

STOP_TIMEOUT_S = 5.0
"""Longest wait for the stop broadcast, and for the peers to exit after it or after a terminate."""
ERROR_POLL_S = 1.0
"""How long rank 0 waits for a peer's report once a collective failed: a failing peer reports before it exits, and
its exit is what fails the collective, so the report is usually there already."""
IDLE_TIMEOUT_S = 3600.0
"""Longest a peer waits for rank 0's next command: a harness may do other work between calls, far longer than a
collective's timeout_s."""
WATCH_INTERVAL_S = 1.0


class RankProgram(Protocol):
    def run(self, command: int) -> Any:
        """Runs `command` (>= 0), the same on every rank; may do collectives. Rank 0's result is `Ranks.call`'s."""


ProgramFactory = Callable[[int], RankProgram]
"""rank -> that rank's program, called on each rank after its process group is initialized."""


class RankError(Exception):
    """A rank raised, died, or did not answer within the timeout; the message is one line naming the rank."""


def world_size_misfit(device_type: str, world_size: int) -> str | None:
    """Why `world_size` ranks of `device_type` cannot run on this machine, or None when they can."""
    if not dist.is_available():
        return "this torch is built without torch.distributed"
    if device_type == "cuda":
        if not dist.is_nccl_available():
            return "this torch is built without NCCL"
        # NVML's count where NVML works: it leaves CUDA uninitialized, so the peers can still be forked.
        gpus = torch.cuda.device_count()
        if world_size > gpus:
            return f"{world_size} ranks need a GPU each; {gpus} visible"
        return None
    if device_type == "cpu":
        if not dist.is_gloo_available():
            return "this torch is built without gloo"
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        if world_size > cores:
            return f"{world_size} ranks need a core each; {cores} available"
        return None
    return f"no ranks on device type {device_type!r}; use cpu or cuda"


@dataclass(frozen=True)
class _Setup:
    world_size: int
    backend: str
    device_type: str
    timeout_s: float
    threads: int
    init_method: str


def _init(rank: int, setup: _Setup) -> torch.Tensor:
    """Joins the process group as `rank`; returns the tensor that carries the commands, on the rank's device."""
    if setup.device_type == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        setup.backend,
        init_method=setup.init_method,
        rank=rank,
        world_size=setup.world_size,
        timeout=timedelta(seconds=setup.timeout_s),
    )
    device = torch.device("cuda", rank) if setup.device_type == "cuda" else torch.device("cpu")
    return torch.zeros(1, dtype=torch.int64, device=device)


def _summary(error: BaseException) -> str:
    first = str(error).strip().splitlines()
    return f"{type(error).__name__}: {first[0] if first else ''}"


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """Processes forked inside never collect the parent's objects: gc.freeze, undone in the parent afterwards."""
    caller_froze = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        yield
    finally:
        if not caller_froze:  # unfreeze would undo the caller's own freeze as well
            gc.unfreeze()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_INTERVAL_S)
    os._exit(1)


def _serve(rank: int, setup: _Setup, build: ProgramFactory, errors: Connection, parent: int) -> None:
    """A peer: builds its program, then runs each command rank 0 broadcasts until -1."""
    # Ctrl-C reaches the whole process group; rank 0 alone handles it, and stops the peers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A Python handler inherited from the caller would run only after gloo's wait returns; terminate must end a peer.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    torch.set_num_threads(setup.threads)
    try:
        command = _init(rank, setup)
        program = build(rank)
        dist.all_reduce(command)  # ready: rank 0's __enter__ returns once every rank has built its program
        while True:
            dist.group.WORLD.broadcast(command, 0, timeout=timedelta(seconds=IDLE_TIMEOUT_S)).wait()
            value = int(command.item())
            if value < 0:
                break
            program.run(value)
    except Exception as error:
        # Reported before exiting: the exit is what fails rank 0's collective, which then reads this.
        with contextlib.suppress(OSError):
            errors.send((time.monotonic(), rank, _summary(error)))
        raise SystemExit(1) from None
    dist.destroy_process_group()


class Ranks:
    """`build`'s program on `world_size` ranks, this process being rank 0 (see module docstring).

    `backend` defaults to "nccl" for device_type "cuda" and "gloo" otherwise.
    `timeout_s` bounds startup and every collective. Each rank runs with
    `threads_per_rank` intra-op threads.
    """

    def __init__(
        self,
        build: ProgramFactory,
        world_size: int = 2,
        *,
        backend: str | None = None,
        device_type: str = "cpu",
        timeout_s: float = 60.0,
        threads_per_rank: int = 1,
        start_method: str = "fork",
    ) -> None:
        if world_size < 1:
            raise ValueError(f"world_size must be at least 1, not {world_size}")
        self.build = build
        self.world_size = world_size
        self.backend = backend or ("nccl" if device_type == "cuda" else "gloo")
        self.device_type = device_type
        self.timeout_s = timeout_s
        self.threads_per_rank = threads_per_rank
        self.start_method = start_method
        self._peers: list[BaseProcess] = []
        self._errors: list[Connection] = []
        self._program: RankProgram | None = None
        self._command: torch.Tensor | None = None
        # Why the ranks can no longer be called: a failure leaves the peers inside a collective.
        self._broken: str | None = None
        self._directory: str | None = None
        self._threads: int | None = None

    def __enter__(self) -> Ranks:
        if self._directory is not None:
            raise RuntimeError("Ranks is already entered")
        if not dist.is_available():
            raise RankError("this torch is built without torch.distributed")
        if dist.is_initialized():
            raise RankError("this process already has a default process group; Ranks makes its own")
        if self.device_type == "cuda" and self.start_method == "fork" and torch.cuda.is_initialized():
            raise RankError(
                "CUDA is already initialized in this process, and forked ranks cannot use it: "
                "enter Ranks(device_type='cuda') before anything touches CUDA, or use start_method='spawn'"
            )
        self._threads = torch.get_num_threads()
        torch.set_num_threads(self.threads_per_rank)
        self._directory = tempfile.mkdtemp(prefix="optbench-ranks-")
        setup = _Setup(
            world_size=self.world_size,
            backend=self.backend,
            device_type=self.device_type,
            timeout_s=self.timeout_s,
            threads=self.threads_per_rank,
            # A file store in a private directory: no port to race for, and os.environ is left alone.
            init_method=Path(self._directory, "store").as_uri(),
        )
        context = multiprocessing.get_context(self.start_method)
        started = time.monotonic()
        try:
            with _frozen_heap():
                for rank in range(1, self.world_size):
                    reader, writer = context.Pipe(duplex=False)
                    peer = context.Process(
                        target=_serve, args=(rank, setup, self.build, writer, os.getpid()), name=f"optbench rank {rank}"
                    )
                    self._peers.append(peer)
                    self._errors.append(reader)
                    peer.start()
                    writer.close()
            self._command = _init(0, setup)
            self._program = self.build(0)
            dist.all_reduce(self._command)
        except BaseException as error:
            failure = self._failure(error, started, "startup")
            self._close()
            if failure is None:
                raise
            raise failure from error
        return self

    @property
    def program(self) -> RankProgram:
        """Rank 0's program, as `build(0)` made it in this process."""
        if self._program is None:
            raise RuntimeError("Ranks.program outside its `with`")
        return self._program

    def call(self, command: int) -> Any:
        """Runs `command` (>= 0) on every rank; returns rank 0's result. Raises RankError when a peer fails."""
        if command < 0:
            raise ValueError(f"commands are >= 0, not {command}: negative ones stop the peers")
        if self._program is None or self._command is None:
            raise RuntimeError("Ranks.call outside its `with`")
        if self._broken is not None:
            raise RankError(f"ranks unusable after {self._broken}")
        started = time.monotonic()
        try:
            self._command.fill_(command)
            dist.group.WORLD.broadcast(self._command, 0).wait()
            return self._program.run(command)
        except BaseException as error:
            failure = self._failure(error, started, f"call({command})")
            if failure is None:
                raise
            raise failure from error

    def _failure(self, error: BaseException, started: float, during: str) -> RankError | None:
        """The peers' part in `error`, raised on rank 0 during `during`, as a RankError; None if they had none."""
        self._broken = f"a failure during {during}"
        if not isinstance(error, Exception):
            return None
        ready = wait([*self._errors, *(peer.sentinel for peer in self._peers)], timeout=ERROR_POLL_S)
        reports = []
        for reader in self._errors:
            with contextlib.suppress(EOFError, OSError):
                while reader.poll():
                    reports.append(reader.recv())
        if reports:
            _, rank, summary = min(reports)  # the earliest: the others are the collectives it broke
            return RankError(f"rank {rank} failed during {during}: {summary}")
        for rank, peer in enumerate(self._peers, start=1):
            if peer.sentinel in ready:
                peer.join(ERROR_POLL_S)  # its sentinel closes a moment before it can be reaped
            if peer.exitcode is not None:
                return RankError(f"rank {rank} died during {during} ({_exit_text(peer.exitcode)})")
        # gloo's timeout is a RuntimeError (NCCL's a subclass); one that took the whole timeout_s is a collective's.
        if isinstance(error, RuntimeError) and time.monotonic() - started >= self.timeout_s:
            silent = ", ".join(str(rank) for rank in range(1, self.world_size))
            plural = "s" if self.world_size > 2 else ""
            return RankError(f"rank{plural} {silent} did not answer during {during} within {self.timeout_s:g} s")
        return None

    def _close(self) -> None:
        """Stops the peers (killed if they do not stop), destroys the group, removes the store, restores threads."""
        try:
            if self._broken is None and self._command is not None and self._peers:
                self._command.fill_(-1)
                with contextlib.suppress(RuntimeError):
                    dist.group.WORLD.broadcast(self._command, 0, timeout=timedelta(seconds=STOP_TIMEOUT_S)).wait()
                deadline = time.monotonic() + STOP_TIMEOUT_S
                for peer in self._peers:
                    peer.join(max(0.0, deadline - time.monotonic()))
            for peer in self._peers:
                if peer.is_alive():
                    peer.terminate()
            deadline = time.monotonic() + STOP_TIMEOUT_S
            for peer in self._peers:
                peer.join(max(0.0, deadline - time.monotonic()))
                if peer.is_alive():
                    peer.kill()
                    peer.join()
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
            for reader in self._errors:
                reader.close()
            if self._directory is not None:
                shutil.rmtree(self._directory, ignore_errors=True)
            if self._threads is not None:
                torch.set_num_threads(self._threads)
            self._peers, self._errors = [], []
            self._program = self._command = self._directory = self._threads = None
            self._broken = None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._close()
