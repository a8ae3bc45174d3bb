"""Live progress: which case is running, what it is doing, and about how much of the run is left.

One case of the standard profile runs for minutes (compile, warm-up, rounds,
confirmation runs in fresh processes), so pytest's one character per test
cannot tell a slow case from a hung one. The runner reports each phase
(`faults.Phase`) and each timed round; a case measured in a process of its own
(`optbench.isolation`) writes them to a small file (`PhaseFile`) that its
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
- `off`, and in xdist workers, whose output is not the terminal. An xdist
  controller shows the cases its workers are running (from pytest's logstart
  events) instead of their phases.

The estimate of what is left is the run's own (`Profile.estimate_s`): the
cases not yet finished at the profile's per-case estimate, divided among the
workers, less what the running case has used of its own.

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
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

PHASE_FILE = "phase"
LINE_AFTER_S = 30.0
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
    ) -> None:
        self.config = config
        self.mode = mode
        self.per_case_s = per_case_s
        self.workers = workers
        self.clock = clock
        self.cases = cases
        self.finished = 0
        self.running: dict[str, float] = {}
        """Case -> when it started (several on an xdist controller)."""
        self.phase = ""
        self._lines_written: set[str] = set()
        self._drawn = 0
        """Characters of status on the terminal's current line, after pytest's."""

    # What the runner and the plugin's hooks call.

    def start(self, case: str) -> None:
        self.running[case] = self.clock()
        self.phase, self._lines_written = "setup", set()

    def show(self, phase: str) -> None:
        """`phase` of the running case: redrawn on a terminal, a line in a log where it is due."""
        self.phase = phase
        if self.mode == "tty":
            self.draw()
        elif self.mode == "lines" and self.running:
            started = next(iter(self.running.values()))
            kind = phase_kind(phase)
            if self.clock() - started >= LINE_AFTER_S and kind not in self._lines_written:
                self._lines_written.add(kind)
                self._write_line(f"optbench: {self.status()}")

    def finish(self, case: str) -> None:
        self.clear()
        if self.running.pop(case, None) is not None:
            self.finished += 1

    # Drawing.

    def left_s(self) -> float:
        """The run's estimate of what is left: unfinished cases at the per-case estimate, among the workers,
        less what the running cases have used of theirs."""
        now = self.clock()
        used = sum(min(now - started, self.per_case_s) for started in self.running.values())
        return max(0.0, (self.cases - self.finished) * self.per_case_s - used) / self.workers

    def status(self) -> str:
        now = self.clock()
        left = f"run ~{_minutes(self.left_s())} left"
        if len(self.running) == 1 and self.phase:
            ((case, started),) = self.running.items()
            return f"{_label(case)}: {self.phase}, {now - started:.0f} s; {left}"
        running = ", ".join(
            f"{case.rsplit('::', 1)[-1]} {now - started:.0f} s" for case, started in self.running.items()
        )
        return f"running {running}; {left}" if running else left

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

    # pytest's hooks: a case starts and ends with its report; pytest writes only with our status cleared.

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.start(nodeid)
        self.draw()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self) -> None:
        self.clear()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.finish(nodeid)
        self.draw()


def progress_mode(requested: str, isatty: bool, quiet: bool) -> str:
    """`--progress` resolved: auto is tty on a terminal and lines elsewhere; off in a `quiet` process (an xdist
    worker, or a case's own process: neither writes to the user's terminal)."""
    if quiet:
        return "off"
    if requested == "auto":
        return "tty" if isatty else "lines"
    return requested
