"""Whether anything besides the case used the CPUs while it was timed.

A case's timed rounds share the machine with whatever else runs on it. The
load average cannot tell the two apart: it counts the case's own threads (2 on
a 2-CPU machine for torch's intra-op pool alone), its DataLoader workers and
its DDP ranks, so it read 2.0-2.3 "on 2 CPUs" for 12 of 74 cases of an
otherwise idle run here. What perturbs a timing is CPU time spent by *other*
processes, and time the hypervisor gave to other guests (steal), over the
timed window itself:

    others = machine_busy(t1) - machine_busy(t0) - (own(t1) - own(t0))

where machine_busy sums every CPU's user, nice, system, irq and softirq time
(`/proc/stat`), and own is the CPU time of this process and all its
descendants, live ones read from their `/proc/PID/stat` and finished ones
from the `cutime`/`cstime` their parents collected when they waited for them.
Divided by the window's wall time, both are in CPUs: 0.5 means another
process kept half a CPU busy throughout.

Linux only (`/proc`); elsewhere nothing is measured and no note is made.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
BUSY_CPUS = 0.25
"""Others' (or steal's) average use, in CPUs, from which a timing is called perturbed: a quarter of a CPU taken
from a 2-thread case on a 2-CPU machine is a fifth of its second thread's time."""
_TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


@dataclass(frozen=True)
class CpuTimes:
    """One reading of the machine's and this process tree's CPU seconds."""

    at_s: float
    """time.monotonic() when read."""
    machine_busy_s: float
    steal_s: float
    own_s: float

    @classmethod
    def now(cls, proc: Path = PROC) -> CpuTimes | None:
        """Read now; None where /proc cannot be read (not Linux)."""
        try:
            busy_s, steal_s = _machine(proc)
            own_s = _tree_s(proc, os.getpid())
        except (OSError, ValueError, IndexError):
            return None
        return cls(time.monotonic(), busy_s, steal_s, own_s)


@dataclass(frozen=True)
class Contention:
    """What other processes and other guests used of the CPUs over a window, on average, in CPUs."""

    others_cpus: float
    steal_cpus: float
    cpus: int

    @classmethod
    def between(cls, start: CpuTimes | None, end: CpuTimes | None) -> Contention | None:
        if start is None or end is None or end.at_s <= start.at_s:
            return None
        wall_s = end.at_s - start.at_s
        own_s = end.own_s - start.own_s
        others_s = max(0.0, end.machine_busy_s - start.machine_busy_s - own_s)
        return cls(others_s / wall_s, (end.steal_s - start.steal_s) / wall_s, os.cpu_count() or 1)

    @property
    def note(self) -> str | None:
        """The record's note when the timings shared the machine, else None."""
        parts = []
        if self.others_cpus >= BUSY_CPUS:
            parts.append(f"other processes used {self.others_cpus:.1f} of {self.cpus} CPUs")
        if self.steal_cpus >= BUSY_CPUS:
            parts.append(f"the hypervisor took {self.steal_cpus:.1f} CPUs (steal)")
        return f"machine busy: {' and '.join(parts)} while timed, timings perturbed" if parts else None


def _machine(proc: Path) -> tuple[float, float]:
    """All CPUs' busy and steal seconds since boot, from /proc/stat's first line."""
    fields = (proc / "stat").read_text().split("\n", 1)[0].split()
    if fields[0] != "cpu":
        raise ValueError(f"{proc / 'stat'} does not start with the all-CPU line")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields[1:9])
    return (user + nice + system + irq + softirq) * _TICK_S, steal * _TICK_S


def _stat(proc: Path, pid: str) -> tuple[int, float] | None:
    """A process's parent and CPU seconds (its own and its waited-for children's); None if it is gone."""
    try:
        text = (proc / pid / "stat").read_text()
    except OSError:
        return None
    # The command name, in parentheses, may hold spaces: the fields that follow it are counted from its end.
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return int(fields[1]), (utime + stime + cutime + cstime) * _TICK_S


def _tree_s(proc: Path, root: int) -> float:
    """CPU seconds of `root` and every live descendant (each one's waited-for children included)."""
    children: dict[int, list[int]] = {}
    seconds: dict[int, float] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit() and (stat := _stat(proc, entry.name)) is not None:
            parent, seconds[int(entry.name)] = stat
            children.setdefault(parent, []).append(int(entry.name))
    total, pending = 0.0, [root]
    while pending:
        pid = pending.pop()
        total += seconds.get(pid, 0.0)
        pending += children.get(pid, [])
    return total
