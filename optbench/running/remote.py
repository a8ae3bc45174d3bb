"""One side of a case in its own fresh process, with a chosen allocator, served over a pipe.

The allocator is fixed when a process starts (optbench.running.allocator), so a case
that compares allocators runs each side in a new `python -m optbench.running.remote`
started with that allocator's environment; cuDNN's plan for a shape is fixed
the first time a process meets it, so cudnn.benchmark on the user's model
(which has no transposed twin to give each side shapes of its own) does the
same. The worker builds the inference workload its spec names (the
catalogue's `fixtures.models:inference_workload`, or the user's
`--model`/`--inputs`), and its variant (eager, or `torch.compile`
default), then answers requests: `call()` runs one forward and replies when it
is done, so the parent's block timer times the round trip, whose overhead (a few
tens of microseconds of pipe traffic) is the same on both sides; `output()`
returns a forward's output for the accuracy check; `describe()` says which
allocator the worker really runs and what it compiled.

Requests and replies are plain pickles on the worker's stdin and a private copy
of its stdout (its fd 1 goes to stderr, so a library that prints cannot corrupt
the stream). Every reply has a time limit; a worker that dies or does not answer
is killed and reported in one line with the last line it wrote to stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from ..errors import WorkerError
from .allocator import Allocator, allocator_environment, detect_allocator

VARIANTS = ("eager", "compile:default")
REPLY_TIMEOUT_S = 300.0
"""Longest wait for one reply. The first request imports torch, builds the model and, compiled, compiles it: seconds
to a minute on 2 cores. A case's own --case-timeout still interrupts the wait earlier."""
STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker builds: `builder(workload, profile, device)`, or the user's `model` and `inputs`, run as
    `variant`."""

    workload: str
    profile: str
    device: str
    variant: str
    """One of VARIANTS."""
    threads: int
    """Intra-op threads: the parent's, so that both sides and in-process cases use the same."""
    model: str | None = None
    inputs: str | None = None
    """The user's --model and --inputs SPECs (absolute): the worker builds that model instead of `workload`."""
    cudnn_benchmark: bool | None = None
    """torch.backends.cudnn.benchmark, set before the worker meets any shape (cuDNN keeps the plan chosen then)."""
    builder: str | None = None
    """`package.module:function` returning an InferenceWorkload for (workload, profile, device), where `model` is
    None: the catalogue passes `fixtures.models:inference_workload`. A spec, not a function, so that optbench
    never imports the catalogue's fixtures, and the worker imports only what its parent named."""

    def __post_init__(self) -> None:
        if (self.model is None) == (self.builder is None):
            raise ValueError("a WorkerSpec names either the user's model (model and inputs) or a builder, not both")
        if self.builder is not None and not re.fullmatch(r"[\w.]+:\w+", self.builder):
            raise ValueError(f"builder {self.builder!r} is not package.module:function")


@dataclass(frozen=True)
class WorkerReport:
    """What a worker says about itself: the allocator it detected and what torch.compile captured in it."""

    allocator: Allocator
    graphs: int
    graph_breaks: int
    threads: int
    cudnn_benchmark: bool | None = None
    """torch.backends.cudnn.benchmark as the model's forward last read it."""


@dataclass(frozen=True)
class _Reply:
    value: Any = None
    error: str | None = None


def _import_roots(spec: WorkerSpec) -> list[str]:
    """The directories the worker imports optbench and the spec's builder from: the parent's own."""
    roots = []
    builder_package = spec.builder.split(".")[0].split(":")[0] if spec.builder else None
    for package in filter(None, ("optbench", builder_package)):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            roots.append(str(Path(spec.origin).resolve().parents[1]))
    return list(dict.fromkeys(roots))


def _exit_text(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


class RemoteWorkload:
    """One side of a case in a fresh worker process running allocator `allocator` (see module docstring).

    The worker starts on the first request, so a case that is skipped starts
    nothing; the allocator's library is looked up at once (AllocatorNotFound).
    Use as a context manager, or call `close()`: the worker is stopped, and
    killed if it does not stop.
    """

    def __init__(self, spec: WorkerSpec, allocator: str, reply_timeout_s: float = REPLY_TIMEOUT_S) -> None:
        if spec.variant not in VARIANTS:
            raise ValueError(f"unknown variant {spec.variant!r}; choose from {', '.join(VARIANTS)}")
        self.spec = spec
        self.allocator = allocator
        self.reply_timeout_s = reply_timeout_s
        environment = allocator_environment(allocator)
        roots = _import_roots(spec)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [*roots, environment.get("PYTHONPATH")]))
        self._environment = environment
        # `python -m` puts its working directory first on sys.path: start it where this optbench lives.
        self._cwd = roots[0] if roots else None
        self._process: subprocess.Popen[bytes] | None = None
        self._requests: Connection | None = None
        self._replies: Connection | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The worker's process id once started (to watch or signal it), None before."""
        return self._process.pid if self._process is not None else None

    @property
    def name(self) -> str:
        return f"{self.spec.workload} {self.spec.variant} worker ({self.allocator})"

    def start(self) -> None:
        if self._process is not None:
            return
        self._stderr = tempfile.TemporaryFile(prefix="optbench-worker-")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "optbench.running.remote", json.dumps(asdict(self.spec))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=self._environment,
            cwd=self._cwd,
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        # Connections own duplicates of the pipe ends; the Popen's own are closed now so that EOF reaches each side.
        self._requests = Connection(os.dup(self._process.stdin.fileno()), readable=False)
        self._replies = Connection(os.dup(self._process.stdout.fileno()), writable=False)
        self._process.stdin.close()
        self._process.stdout.close()

    def _request(self, request: str) -> Any:
        self.start()
        assert self._requests is not None and self._replies is not None
        try:
            self._requests.send_bytes(pickle.dumps(request))
            if not self._replies.poll(self.reply_timeout_s):
                self._kill()
                raise WorkerError(f"{self.name} gave no reply to {request} within {self.reply_timeout_s:g} s; killed")
            reply: _Reply = pickle.loads(self._replies.recv_bytes())
        except (EOFError, OSError):
            raise WorkerError(self._death(request)) from None
        if reply.error is not None:
            raise WorkerError(f"{self.name} failed {request}: {reply.error}")
        return reply.value

    def _death(self, request: str) -> str:
        assert self._process is not None
        try:
            code = self._process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill()
            return f"{self.name} closed its pipe during {request} but did not exit; killed"
        return f"{self.name} died during {request} ({_exit_text(code)}): {self._last_stderr_line()}"

    def _last_stderr_line(self) -> str:
        if self._stderr is None:
            return "no stderr"
        self._stderr.seek(0)
        lines = [line.strip() for line in self._stderr.read().decode(errors="replace").splitlines() if line.strip()]
        return lines[-1] if lines else "no stderr"

    def call(self) -> None:
        """One forward in the worker, returned when it is done (timed by the caller as a round trip)."""
        self._request("call")

    def output(self) -> Any:
        """The output of one forward in the worker, as a tensor of this process."""
        return self._request("output")

    def describe(self) -> WorkerReport:
        return self._request("describe")

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def close(self) -> None:
        """Stops the worker (killed after STOP_TIMEOUT_S); closing twice, or a never-started worker, is fine."""
        if self._process is None:
            return
        assert self._requests is not None and self._replies is not None and self._stderr is not None
        try:
            self._requests.send_bytes(pickle.dumps("stop"))
            self._process.wait(STOP_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            self._kill()
        for stream in (self._requests, self._replies, self._stderr):
            stream.close()
        self._process = None

    def __enter__(self) -> RemoteWorkload:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


class _Served:
    """The worker's side: the workload and its variant, built in the worker's own process."""

    def __init__(self, spec: WorkerSpec) -> None:
        import torch

        torch.set_num_threads(spec.threads)
        if spec.cudnn_benchmark is not None:
            torch.backends.cudnn.benchmark = spec.cudnn_benchmark
        self.torch = torch
        self.device = torch.device(spec.device)
        if spec.model is not None:
            from ..advise.own_model import load_workload

            workload = load_workload(spec.model, spec.inputs, spec.workload, self.device)
        else:
            from ..advise.own_model import load_function

            build = load_function(str(spec.builder), "WorkerSpec.builder")
            workload = build(spec.workload, spec.profile, self.device)
        model = workload.model()
        self.cudnn_benchmark: bool | None = None
        if spec.cudnn_benchmark is not None:  # only where it is asked: a hook is work in every timed call
            model.register_forward_pre_hook(lambda *_: setattr(self, "cudnn_benchmark", torch.backends.cudnn.benchmark))
        self.call = workload.call(torch.compile(model) if spec.variant == "compile:default" else model)

    def forward(self) -> Any:
        with self.torch.inference_mode():
            output = self.call()
        if self.device.type == "cuda":
            # The reply is the end of the timed round trip; queued kernels must be done by then.
            self.torch.cuda.synchronize(self.device)
        return output

    def answer(self, request: str) -> Any:
        if request == "call":
            self.forward()
            return None
        if request == "output":
            from ..internals import tree_map

            return tree_map(lambda leaf: leaf.cpu() if isinstance(leaf, self.torch.Tensor) else leaf, self.forward())
        if request == "describe":
            from ..internals import compile_counts

            graphs, breaks = compile_counts()
            threads = self.torch.get_num_threads()
            return WorkerReport(detect_allocator(), graphs, sum(breaks.values()), threads, self.cudnn_benchmark)
        raise ValueError(f"unknown request {request!r}")


def serve(spec: WorkerSpec, requests: Connection, replies: Connection) -> None:
    """Answers requests until "stop" or the parent's end of the pipe closes; a failed request is replied to."""
    served: _Served | None = None
    while True:
        try:
            request = pickle.loads(requests.recv_bytes())
        except EOFError:
            return
        if request == "stop":
            return
        try:
            served = served or _Served(spec)
            reply = _Reply(value=served.answer(request))
        except Exception as error:
            first = str(error).strip().splitlines()
            reply = _Reply(error=f"{type(error).__name__}: {first[0] if first else ''}")
        replies.send_bytes(pickle.dumps(reply))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m optbench.running.remote", description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="WorkerSpec as JSON")
    spec = WorkerSpec(**json.loads(parser.parse_args(argv).spec))
    # The replies get a private copy of stdout; fd 1 then points at stderr, so stray prints land there.
    replies = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    serve(spec, Connection(os.dup(0), writable=False), replies)


if __name__ == "__main__":
    # Run as the imported module, not as __main__: the replies' classes must unpickle as optbench.running.remote's.
    from optbench.running.remote import main as worker_main

    worker_main()
