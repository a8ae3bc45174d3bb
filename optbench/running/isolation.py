"""Each case measured in a process of its own, forked from a process that has only imported the suite.

Why: on a CPU, a case's speedup depends on what its process allocated before.
glibc's malloc raises its mmap threshold each time a large block is freed, so
whether a later allocation gets fresh pages (and page faults) or reuses the
heap follows the process's history. Measured on a 2-core Xeon (issue 19),
compiled ResNet18 against eager read 0.76x in a fresh process and 0.87x inside
the suite after other cases and the case's own fp64 accuracy run; a fixed
threshold moved it to 1.14x. A user's process is the fresh one, so every
case is measured in one: the same state whichever cases ran before and in
whatever order.

How: a *zygote* process is started once per run with the run's environment
(and allocator, `--allocator`). It imports torch and the suite's plugins and
allocates nothing else, then forks one child per case. The child runs pytest
on that one node id with `--optbench-isolated`: it builds the case's fixtures,
times it first (first calls, warm-up, timed rounds), then checks accuracy,
memory and the rest, judges and records it, and writes its test outcome. Its
malloc state is the zygote's after imports, as a fresh interpreter's is after
the same imports. Forking saves the 8-10 s that a new interpreter spends
importing torch and transformers, which would add more than half to a smoke
run of short cases. The parent (the run the user started) only relays: the
record, the test's outcome and pytest-benchmark's stats.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from ..storage.record import Record, RecordError, read_records

OUTCOME_FILE = "outcome.json"
"""Written by an isolated child: its test's outcome, for the parent to reproduce."""
LOG_FILE = "case.log"
STARTUP_TIMEOUT_S = 300.0
WATCH_S = 1.0


class IsolationError(Exception):
    """The zygote could not be started or answered nothing; the message is one line."""


@dataclass(frozen=True)
class Outcome:
    """How the child's test ended: pytest's outcome of the first phase that did not pass, or of the call."""

    outcome: str
    """passed, failed or skipped."""
    when: str
    text: str
    """The failure's text, or the skip's reason."""

    @classmethod
    def of(cls, report: Any) -> Outcome:
        if report.skipped and isinstance(report.longrepr, tuple):
            return cls("skipped", report.when, str(report.longrepr[2]).removeprefix("Skipped: "))
        return cls(report.outcome, report.when, report.longreprtext if report.failed else "")

    def write(self, results_dir: Path) -> None:
        (results_dir / OUTCOME_FILE).write_text(json.dumps(asdict(self)))


@dataclass(frozen=True)
class Finished:
    """What one case's process left: its record, its outcome, how it exited and the end of its log."""

    record: Record | None
    outcome: Outcome | None
    exit_status: str
    log_tail: str
    wall_s: float

    @property
    def problem(self) -> str | None:
        """Why nothing can be relayed (the process crashed, was killed or wrote no outcome); None if it can."""
        if self.outcome is not None:
            return None
        tail = f"; its output ended: {self.log_tail}" if self.log_tail else ""
        return f"the case's own process {self.exit_status} before it finished{tail}"


def preloaded_modules(plugins: Iterable[object]) -> list[str]:
    """The modules a zygote imports: torch, every plugin module this run registered (fixtures, optbench), and
    what those modules name in `ZYGOTE_PRELOAD`: libraries their cases import when they build a model, which a
    plugin leaves out of its own import so that pytest processes with no case to run do not pay for them."""
    names = ["torch"]
    for plugin in plugins:
        name = getattr(plugin, "__name__", "") if isinstance(plugin, types.ModuleType) else ""
        # A conftest is imported by path, with pytest's own import mode: the child imports it itself.
        if name and name != "__main__" and not name.startswith("_pytest") and "conftest" not in name:
            names.append(name)
            names.extend(getattr(plugin, "ZYGOTE_PRELOAD", ()))
    return list(dict.fromkeys(names))


class Zygote:
    """Client of a zygote process (module docstring): `run(args)` runs pytest in a fresh fork of it."""

    def __init__(self, root: Path, preload: list[str], environment: dict[str, str], scratch: Path) -> None:
        self.root = root
        self.preload = preload
        self.environment = environment
        self.scratch = scratch
        self._process: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        self.scratch.mkdir(parents=True, exist_ok=True)
        # The zygote's own output (import warnings, a crash): said when it fails to start or answer.
        log = open(self.scratch / "zygote.log", "w")
        process = subprocess.Popen(
            [sys.executable, "-m", "optbench.running.isolation"],
            cwd=self.root,
            env=self.environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            bufsize=0,  # unbuffered: select() on the pipe must see every line the zygote wrote
        )
        log.close()
        assert process.stdin is not None
        _send(process, {"sys_path": sys.path, "preload": self.preload})
        ready = self._answer(process, STARTUP_TIMEOUT_S)
        if ready.get("ready") is not True:
            raise IsolationError(f"the zygote did not start: {ready.get('error') or self._log_tail()}")
        return process

    def _log_tail(self) -> str:
        path = self.scratch / "zygote.log"
        return _tail(path.read_text(errors="replace")) if path.exists() else ""

    def _answer(self, process: subprocess.Popen[bytes], timeout_s: float) -> dict[str, Any]:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], timeout_s)
        line = process.stdout.readline() if ready else ""
        if not line:
            process.kill()
            raise IsolationError(
                f"the zygote {'ended' if ready else f'answered nothing in {timeout_s:.0f} s'}: {self._log_tail()}"
            )
        return json.loads(line)

    def run(
        self, args: list[str], results_dir: Path, timeout_s: float, watch: Callable[[], None] | None = None
    ) -> Finished:
        """pytest `args` in a fresh fork, writing to `results_dir`; killed after `timeout_s`. `watch` is called
        about every WATCH_S while the fork runs (optbench.reporting.progress reads its phase)."""
        started = time.monotonic()
        if self._process is None or self._process.poll() is not None:
            self._process = self._start()
        process = self._process
        log = results_dir / LOG_FILE
        _send(process, {"args": args, "log": str(log)})
        child = self._answer(process, STARTUP_TIMEOUT_S)["pid"]
        deadline = time.monotonic() + timeout_s
        ready: list[Any] = []
        while not ready and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([process.stdout], [], [], min(left, WATCH_S) if watch else left)
            if watch is not None and not ready:
                watch()
        if not ready:
            _kill(child)
        status = self._answer(process, STARTUP_TIMEOUT_S)["status"]
        if not ready:
            status = f"was killed after running {timeout_s:.0f} s"
        text = log.read_text(errors="replace") if log.exists() else ""
        try:
            records = read_records(results_dir)
        except RecordError as error:
            records, text = [], f"{text}\n{error}"
        outcome_path = results_dir / OUTCOME_FILE
        outcome = Outcome(**json.loads(outcome_path.read_text())) if outcome_path.exists() else None
        return Finished(
            record=records[-1] if records else None,
            outcome=outcome,
            exit_status=status,
            log_tail=_tail(text),
            wall_s=time.monotonic() - started,
        )

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._process = None


def _send(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write((json.dumps(message) + "\n").encode())


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def _exit_status(wait_status: int) -> str:
    if os.WIFSIGNALED(wait_status):
        return f"was killed by {signal.Signals(os.WTERMSIG(wait_status)).name}"
    return f"exited with code {os.WEXITSTATUS(wait_status)}"


def _child(args: list[str], log_path: str) -> int:
    """In the fork: output to the case's log, then pytest on the case."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    import pytest

    try:
        return int(pytest.main(args))
    except BaseException:
        traceback.print_exc()
        return 3
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def serve(requests: IO[str], answers: IO[str]) -> None:
    """The zygote: import what it is told, then fork a child per request until its input closes."""
    setup = json.loads(requests.readline())
    sys.path[:] = setup["sys_path"]
    try:
        for name in setup["preload"]:
            __import__(name)
    except Exception as error:
        failure = f"importing {name}: {type(error).__name__}: {error}"
        answers.write(json.dumps({"ready": False, "error": failure}) + "\n")
        answers.flush()
        return
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(_child(request["args"], request["log"]))
        answers.write(json.dumps({"pid": pid}) + "\n")
        answers.flush()
        _, wait_status = os.waitpid(pid, 0)
        answers.write(json.dumps({"status": _exit_status(wait_status)}) + "\n")
        answers.flush()


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="optbench-cases-"))


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
