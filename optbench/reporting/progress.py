"""Live progress: which case is running, what it is doing, and about how much of the run is left.

One case of the standard profile runs for minutes (compile, warm-up, rounds,
confirmation runs in fresh processes), so pytest's one character per test
cannot tell a slow case from a hung one. The runner reports each phase
(`faults.Phase`) and each timed round; a case measured in a process of its own
(`optbench.running.isolation`) writes them to a small file (`PhaseFile`) that its
parent reads every second while it waits.

How it is shown depends on where pytest writes (`--progress`, default auto):

- a terminal (`tty`): one status after pytest's own progress characters on
  the current line, redrawn in place (clear to the end of the line, write,
  move the cursor back) and cleared before pytest writes again, so pytest's
  line and its `[ 42%]` are what stays; cut to the room left on the line.
- a log (`lines`): a line per phase of a case, once that case has run
  LINE_AFTER_S seconds (at most one line per phase: `timed rounds 3 of 24` and
  `timed rounds 20 of 24` are one phase), and a line when a case passes
  LINE_AFTER_S still in a phase.
- `off`, and in xdist workers, whose output is not the terminal. Each worker
  leaves its running case and phase in a file of a folder its controller names
  (`WorkerPhase`, `WORKER_PHASES` in the worker's input); the controller reads
  them every second from a thread of its own and shows every running case.
  That thread draws only under the lock that pytest's own writes about a case
  (its logstart, logreport and logfinish hooks) are wrapped in here.

The estimate of what is left is the run's own (`Profile.estimate_s`): the
cases not yet finished at the profile's per-case estimate, divided among the
workers, less what the running case has used of its own. Only cases start and
finish here: pytest reports every test, and a run with plain tests before its
cases (`pytest tests benchmarks`) would have finished its count of cases by
the first case and read `run ~0 s left` from then on. An xdist controller
collects nothing itself and hears only node ids, which do not say which tests
are cases: each worker leaves the ids of its cases beside its phase file
(`WorkerCases`), and the controller counts those (once read as every test:
"estimated 183 min for 758 cases" for the harness's 758 tests, none a case).

Written as plain text and terminal escapes to the stream pytest's terminal
reporter writes to, with pytest's output capture suspended around each write
(as pytest's live logging does); xdist and rich/tqdm were weighed: a progress
bar library owns the line it draws on, which here belongs to pytest.
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

PHASE_FILE = "phase"
WORKER_PHASES = "optbench_phases"
"""The key of an xdist worker's input that names the folder where it leaves its running case's phase."""
LINE_AFTER_S = 30.0
REDRAW_S = 1.0
MODES = ("auto", "tty", "lines", "off")
CLEAR_TO_END = "\x1b[K"


def phase_kind(phase: str) -> str:
    """A phase without its counts: `timed rounds 3 of 24` -> `timed rounds`."""
    return re.split(r"\s\d", phase, maxsplit=1)[0]


class PhaseFile:
    """A case's own process's phases, for its parent: each written whole (a new file renamed over the old)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, phase: str) -> None:
        partial = self.path.with_name(self.path.name + ".new")
        partial.write_text(phase)
        os.replace(partial, self.path)


class WorkerPhase:
    """An xdist worker's running case and its phase, for its controller: one file per worker, the case's node id
    and the phase on two lines."""

    def __init__(self, folder: Path, worker: str, node_id: str) -> None:
        self.file = PhaseFile(folder / f"{worker}.phase")
        self.node_id = node_id

    def __call__(self, phase: str) -> None:
        self.file(f"{self.node_id}\n{phase}")


class WorkerCases:
    """The node ids of the cases an xdist worker collected, for its controller (which hears only node ids): one
    file per worker, an id a line, written before the worker reports its collection."""

    def __init__(self, folder: Path, worker: str) -> None:
        self.file = PhaseFile(folder / f"{worker}.cases")

    def write(self, node_ids: Iterable[str]) -> None:
        self.file("".join(f"{node_id}\n" for node_id in node_ids))

    def read(self) -> frozenset[str]:
        """No case where the worker left no list."""
        try:
            return frozenset(self.file.path.read_text().splitlines())
        except FileNotFoundError:
            return frozenset()


def read_worker_phases(folder: Path) -> dict[str, str]:
    """Node id -> phase of what each worker last said it was running."""
    phases = {}
    for path in folder.glob("*.phase"):
        node_id, _, phase = (read_phase(path) or "").partition("\n")
        if phase:
            phases[node_id] = phase
    return phases


def at_most_every(
    seconds: float, report: Callable[[str], None], clock: Callable[[], float] = time.monotonic
) -> Callable[[str], None]:
    """`report`, passing a phase on at once when its kind changes and otherwise at most once per `seconds`: what
    the timed rounds tell (a round can take milliseconds) costs a write a second, not one per round."""
    last = {"kind": "", "at": -math.inf}

    def throttled(phase: str) -> None:
        now, kind = clock(), phase_kind(phase)
        if kind != last["kind"] or now - last["at"] >= seconds:
            last["kind"], last["at"] = kind, now
            report(phase)

    return throttled


def read_phase(path: Path) -> str | None:
    try:
        return path.read_text() or None
    except OSError:
        return None


def is_case(item: pytest.Item) -> bool:
    """Whether a collected test is a case: one that uses the `optbench` fixture."""
    return "optbench" in getattr(item, "fixturenames", ())


def _label(node_id: str) -> str:
    return node_id.rsplit("::", 1)[-1]


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


class Progress:
    """The running case's status on pytest's terminal (see the module docstring for the modes)."""

    def __init__(
        self,
        config: pytest.Config,
        mode: str,
        per_case_s: float,
        cases: int,
        workers: int = 1,
        clock: Callable[[], float] = time.monotonic,
        worker_phases: Path | None = None,
        case_ids: frozenset[str] | None = None,
    ) -> None:
        self.config = config
        self.mode = mode
        self.per_case_s = per_case_s
        self.workers = workers
        self.clock = clock
        self.cases = cases
        self.case_ids = case_ids
        """What counts toward `cases` (on an xdist controller, what its workers said they collected); None where
        every test does."""
        self.finished = 0
        self.finished_s = 0.0
        """Seconds the finished cases took, all together."""
        self.running: dict[str, float] = {}
        """Case -> when it started (several on an xdist controller)."""
        self.phase = ""
        """The running case's phase, where this process runs it (no xdist)."""
        self.worker_phases = worker_phases
        """On an xdist controller: the folder where its workers leave their cases' phases (WorkerPhase)."""
        self._lines_written: set[tuple[str, str]] = set()
        self._drawn = 0
        """Characters of status on the terminal's current line, after pytest's."""
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._redrawing: threading.Thread | None = None

    # What the runner and the plugin's hooks call.

    def start(self, case: str) -> None:
        if self.case_ids is not None and case not in self.case_ids:
            return
        self.running[case] = self.clock()
        self.phase = "setup"

    def show(self, phase: str) -> None:
        """`phase` of the running case: redrawn on a terminal, a line in a log where it is due."""
        with self._lock:
            self.phase = phase
            self.tick()

    def tick(self) -> None:
        """Redraw on a terminal; in a log, a line for each case past LINE_AFTER_S in a phase it has not told yet."""
        if self.mode == "tty":
            self.draw()
        elif self.mode == "lines":
            phases = self.phases()
            for case, started in self.running.items():
                told = (case, phase_kind(phases.get(case, "")))
                if told[1] and self.clock() - started >= LINE_AFTER_S and told not in self._lines_written:
                    self._lines_written.add(told)
                    self._write_line(f"optbench: {self.status(phases)}")

    def phases(self) -> dict[str, str]:
        """Each running case's phase, as far as this process knows it."""
        if self.worker_phases is not None:
            return read_worker_phases(self.worker_phases)
        return dict.fromkeys(self.running, self.phase)

    def finish(self, case: str) -> None:
        self.clear()
        started = self.running.pop(case, None)
        if started is not None:
            self.finished += 1
            self.finished_s += self.clock() - started

    # Drawing.

    def case_s(self) -> float:
        """What a case is expected to take: the mean of the finished cases' times with the profile's per-case
        estimate counted as one more. The profile's figure alone charges every case its full budget, but on a CPU
        a third of the catalogue skips in under a second (CUDA-only cases): a fresh clone's CI log read twice its
        real length from start to end. The finished cases are a sample of the rest, in collection order."""
        return (self.finished_s + self.per_case_s) / (self.finished + 1)

    def left_s(self) -> float:
        """The run's estimate of what is left: unfinished cases at the per-case estimate, among the workers,
        less what the running cases have used of theirs."""
        now, case_s = self.clock(), self.case_s()
        used = sum(min(now - started, case_s) for started in self.running.values())
        return max(0.0, (self.cases - self.finished) * case_s - used) / self.workers

    def status(self, phases: dict[str, str] | None = None) -> str:
        """`case: phase, N s` for each running case (` | ` between them), then what is left of the run."""
        now, phases = self.clock(), self.phases() if phases is None else phases
        running = [
            f"{_label(case)}: {phases[case]}, {now - started:.0f} s" if phases.get(case) else
            f"{_label(case)}: {now - started:.0f} s"
            for case, started in self.running.items()
        ]  # fmt: skip
        return "; ".join([" | ".join(running), f"run ~{_minutes(self.left_s())} left"] if running else [])

    def redraw_every_second(self) -> None:
        """From a thread of its own: the phases a controller's workers leave change with no event to redraw on."""
        if self._redrawing is None and self.mode != "off":
            self._redrawing = threading.Thread(target=self._redraw, name="optbench-progress", daemon=True)
            self._redrawing.start()

    def _redraw(self) -> None:
        while not self._stop.wait(REDRAW_S):
            with self._lock:
                if self.running:
                    self.tick()

    def stop(self) -> None:
        self._stop.set()
        if self._redrawing is not None:
            self._redrawing.join()
        with self._lock:
            self.clear()

    def draw(self) -> None:
        if self.mode != "tty" or not self.running:
            return
        writer = self.config.get_terminal_writer()
        room = writer.fullwidth - writer.width_of_current_line - 2
        text = self.status()[: max(room, 0)] if room >= 12 else ""
        back = f"\x1b[{len(text) + 1}D" if text else ""
        self._raw(CLEAR_TO_END + (f" {text}{back}" if text else ""))
        self._drawn = len(text)

    def clear(self) -> None:
        if self._drawn:
            self._raw(CLEAR_TO_END)
            self._drawn = 0

    def _suspended_capture(self) -> Any:
        capture = self.config.pluginmanager.getplugin("capturemanager")
        return capture.global_and_fixture_disabled() if capture is not None else nullcontext()

    def _raw(self, text: str) -> None:
        """`text` straight to the terminal: pytest's writer would count escapes as columns of its line."""
        with self._suspended_capture():
            sys.stdout.write(text)
            sys.stdout.flush()

    def _write_line(self, line: str) -> None:
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            with self._suspended_capture():
                reporter.write_line(line)

    # pytest's hooks: a case starts and ends with its report; pytest writes only with our status cleared, and
    # never while the redrawing thread draws.

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logstart(self, nodeid: str) -> Generator[None, Any, Any]:
        return (yield from self._locked_then(self.start, nodeid))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self) -> Generator[None, Any, Any]:
        with self._lock:
            self.clear()
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logfinish(self, nodeid: str) -> Generator[None, Any, Any]:
        return (yield from self._locked_then(self.finish, nodeid))

    def _locked_then(self, step: Callable[[str], None], nodeid: str) -> Generator[None, Any, Any]:
        """pytest's own writes for the hook, then `step` and a redraw, all under the lock."""
        with self._lock:
            result = yield
            step(nodeid)
            self.draw()
            return result


def progress_mode(requested: str, isatty: bool, quiet: bool) -> str:
    """`--progress` resolved: auto is tty on a terminal and lines elsewhere; off in a `quiet` process (an xdist
    worker, or a case's own process: neither writes to the user's terminal)."""
    if quiet:
        return "off"
    if requested == "auto":
        return "tty" if isatty else "lines"
    return requested
