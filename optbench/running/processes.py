"""A case's speedup over k fresh processes: the process, not the round, as the unit of replication.

Each fresh process draws its own speedup and keeps it (issue 34: mixed-precision
ViT read 1.44x in the suite's process and 1.68x in an independent one; bf16
ResNet18 1.53-1.68x in one process and 1.82-1.87x in another). An interval from
one process's rounds describes that process, and the next run draws another.
With k processes of one case, process p's ln(speedup) (the trimmed mean of its
rounds' log ratios, optbench.verdict.stats) is

    y_p = mu + a_p + e_p,   var a_p = tau^2,   var e_p = s_p^2,

mu the speedup a fresh process has on average, tau the between-process spread,
s_p the standard error p's own rounds give it (read back from its interval:
Interval.standard_error). The y_p are independent with variance
tau^2 + s_p^2, so the unweighted mean and its sample variance

    ybar = mean(y_p),   SE^2 = sum_p (y_p - ybar)^2 / (k (k - 1)),

give ybar +- t_{k-1} SE, an interval for mu that holds whatever tau and the s_p
are (Kalibera & Jones, "Rigorous Benchmarking in Reasonable Time", ISMM 2013,
section 3: the top level's repetitions are the unit; Cochran's two-stage
sampling). Equal weights need no estimate of tau, and where tau is the larger
part they are what inverse-variance weights would be anyway. The spread itself,
for the record and the warning, is the moment estimate

    tau^2 = max(0, S^2 - mean(s_p^2)),   S^2 = k SE^2.

The price of few processes is t: 12.7 at k = 2, 4.30 at 3, 2.78 at 5, 2.26 at
10, against 1.96 for an oracle that knew the variances; with the mean of S
below sigma by c4(k), the interval is on average 1.25x the oracle's at k = 6
and 1.12x at 10 (tests/test_processes.py holds both, and its coverage,
by simulation). At k = 3 it is 1.94x.

History pays that price instead. A case's process variance sigma^2 =
tau^2 + s^2 on one machine is a property of the case and the machine, not of
the run, so the S_h^2 that earlier runs with as many processes recorded (each
on k - 1 degrees of freedom: baselines.ProcessSpread) pool with this run's:

    S_pool^2 = ((k - 1) S^2 + sum_h (k - 1) S_h^2) / nu,   nu = (k - 1)(1 + H),

and ybar +- t_nu S_pool / sqrt(k) keeps the coverage while t falls: with four
earlier runs of k = 3, nu = 10 and t = 2.23, 1.11x the oracle's width. Only
runs of the same k pool: a process's rounds are 1/k of the profile's, so its
s^2, and with it sigma^2, depends on k.

How the k processes run (optbench.plugin, `--processes K`): each is a fresh
fork of the run's zygote (optbench.running.isolation), with first calls and warm-up of
its own and 1/k of the profile's fewest rounds and timed budget; the first k - 1
only time the case (`TIMING_ONLY` records), and the last times it too, then
checks accuracy and memory once and judges it with all k intervals, which reach
it in a file (`write_earlier`).
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ..profiles import MIN_ROUNDS_FLOOR, Profile
from ..storage.baselines import ProcessSpread
from ..verdict.stats import CONFIDENCE, Interval, t_quantile

UNSTABLE_TAU = 0.10
"""A between-process spread at least this large is said in the verdict's notes (pyperf warns at a 10% spread)."""


@dataclass(frozen=True)
class AcrossProcesses:
    """One case's speedup from its processes (module docstring)."""

    speedup: Interval
    """exp(ybar +- t_{k-1} SE): what a fresh process reads on average."""
    tau: float
    """The between-process spread of ln(speedup), the moment estimate; 0 where the rounds explain it all."""
    spread: ProcessSpread
    """This run's own S^2, for the history."""
    pooled_runs: int
    """Earlier runs whose spread the interval pooled (module docstring)."""

    @property
    def unstable(self) -> str | None:
        """The note for a case whose processes differ by UNSTABLE_TAU or more; None below it."""
        if self.tau < UNSTABLE_TAU:
            return None
        return f"unstable here: its processes differ by {math.expm1(self.tau):.0%} (tau between fresh processes)"


def across_processes(
    processes: Sequence[Interval], history: Sequence[ProcessSpread] = (), confidence: float = CONFIDENCE
) -> AcrossProcesses:
    """The speedup of a case timed in `processes` (each one's own interval), at `confidence`, its spread pooled
    with the `history` runs that had as many processes (module docstring)."""
    if len(processes) < 2:
        raise ValueError(f"an interval across processes needs at least 2 of them, got {len(processes)}")
    logs = [math.log(p.point) for p in processes]
    k = len(logs)
    mean = statistics.fmean(logs)
    own = ProcessSpread(statistics.variance(logs), k)
    pooled = [run for run in history if run.processes == k]
    degrees_of_freedom = (k - 1) * (1 + len(pooled))
    variance = (k - 1) * sum(run.variance for run in [own, *pooled]) / degrees_of_freedom
    within2 = statistics.fmean(p.standard_error**2 for p in processes)
    margin = t_quantile(0.5 + confidence / 2, degrees_of_freedom) * math.sqrt(variance / k)
    bounds = math.exp(mean - margin), math.exp(mean + margin)
    interval = Interval(math.exp(mean), *bounds, confidence, float(degrees_of_freedom))
    return AcrossProcesses(interval, math.sqrt(max(0.0, variance - within2)), own, len(pooled))


def per_process_arguments(profile: Profile) -> list[str]:
    """The options that give each of the profile's k processes its share: 1/k of the fewest rounds (at least
    MIN_ROUNDS_FLOOR) and of the timed budget, so that k processes time about as many rounds as one would."""
    rounds = max(MIN_ROUNDS_FLOOR, math.ceil(profile.min_rounds / profile.processes))
    return ["--min-rounds", str(rounds), "--case-budget", repr(profile.case_budget_s / profile.processes)]


def write_earlier(folder: Path, processes: Sequence[Interval]) -> Path:
    """The intervals of a case's earlier processes, in a new file in `folder` for its last process to read."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="earlier-", dir=folder, delete=False) as stream:
        json.dump([asdict(p) for p in processes], stream)
    return Path(stream.name)


def read_earlier(path: Path | None) -> tuple[Interval, ...]:
    """What `write_earlier` wrote; none without a file (a case timed in one process, or this is not its last)."""
    if path is None:
        return ()
    return tuple(Interval(**fields) for fields in json.loads(path.read_text()))
