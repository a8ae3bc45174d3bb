"""Every case's earlier processes, interleaved across the run in random order, before any case is judged.

A process drifts over minutes, and the machine with it (docs/validation.md, drift: tau
0-9% within one process; `channels_last[bf16-resnet]` 1.00x, then 0.84x a
minute later). With a case's K processes back to back they share one minute,
and what that minute adds to all K is a bias of the case's interval that its
t on K - 1 degrees of freedom cannot see: the K processes agree with each other
and not with the next run. Spread over the run, a case's processes sample its
minutes as they sample fresh processes, and the drift joins the between-process
spread the interval carries (issue 34; Kalibera and Jones's repetitions at the
top level, made independent of time; packaging's asv runs, interleaved).

The schedule is K - 1 waves, each every case once in a fresh random order,
then the judging wave: each case's last process in pytest's order, which also
times it and then checks accuracy and memory once (optbench.running.processes). So a
case's processes lie about a wave apart, wherever it sits in the run. A case
whose process times nothing (it skips here, fails, or times out) is not forked
again: its last process meets the same and says so.

Only a run that knows its cases can schedule them: an xdist worker learns its
next test when the controller sends it, so under xdist each case's processes
run back to back (`interleaved=False`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from ..verdict.stats import Interval

TimeOnly = Callable[[str, int], Interval | None]
"""Fork the case `node_id` as its process `number` (1 to K - 1), which only times it: its speedup, or None."""


def waves(cases: Sequence[str], processes: int, rng: random.Random) -> list[list[str]]:
    """The earlier processes' order: K - 1 waves, each every case once, each in its own random order."""
    order = []
    for _ in range(processes - 1):
        wave = list(cases)
        rng.shuffle(wave)
        order.append(wave)
    return order


class EarlierProcesses:
    """The K - 1 timing-only processes of each case, run as the module docstring says, their intervals by case."""

    def __init__(
        self, cases: Sequence[str], processes: int, time_only: TimeOnly, interleaved: bool, rng: random.Random
    ) -> None:
        self._cases = list(cases) if interleaved else []
        self._processes = processes
        self._time_only = time_only
        self._rng = rng
        self._found: dict[str, list[Interval]] | None = None

    def of(self, node_id: str) -> list[Interval]:
        """The intervals of `node_id`'s earlier processes, in the order they ran: the first call runs every case's
        (`interleaved`); a case the run did not schedule, or one run again, has its own run back to back."""
        if self._found is None and node_id in self._cases:
            self._found = self._run({case: [] for case in self._cases}, waves(self._cases, self._processes, self._rng))
        if self._found is not None and node_id in self._found:
            return self._found.pop(node_id)
        return self._run({node_id: []}, [[node_id]] * (self._processes - 1))[node_id]

    def _run(self, found: dict[str, list[Interval]], order: list[list[str]]) -> dict[str, list[Interval]]:
        stopped: set[str] = set()
        for number, wave in enumerate(order, start=1):
            for case in wave:
                if case in stopped:
                    continue
                speedup = self._time_only(case, number)
                if speedup is None:
                    stopped.add(case)
                else:
                    found[case].append(speedup)
        return found
