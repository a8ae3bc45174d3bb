"""A run's process manager: each timed case in forks of the run's zygote, K of them with --processes K.

The session hands a case here (`CaseForks.run`). With K processes, the first
K - 1 forks only time the case, interleaved across the run where this process
knows the run's cases (optbench.running.interleave), and the last times it too, then
checks and judges it with all K intervals (optbench.running.processes). Every fork
runs the case as this run measures it: its node id with this run's options,
the device, the threads and the gate's count of cases, in a results folder of
its own, reporting its phases to the run's progress (optbench.running.isolation holds
the zygote and what a fork leaves behind).
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch

from ..measuring.shared import SHARED_ENV
from ..profiles import Profile
from ..reporting.progress import PHASE_FILE, read_phase
from ..reporting.report import case_label
from ..verdict.gate import GateSettings
from ..verdict.stats import Interval
from .confirmation import case_arguments
from .interleave import EarlierProcesses
from .isolation import Finished, Zygote, preloaded_modules, scratch_dir
from .processes import per_process_arguments, write_earlier


class CaseForks:
    """The forks of one run (module docstring). The zygote starts with the first fork and ends with `close`."""

    def __init__(
        self,
        config: pytest.Config,
        profile: Profile,
        device: torch.device,
        key_threads: int,
        environment: dict[str, str],
        gate: Callable[[], GateSettings],
        progress_of: Callable[[str], Callable[[str], None] | None],
        interleaved: bool,
    ) -> None:
        """`environment` starts the zygote (the allocator's); `gate` is read when a case forks, once the run has
        counted its gated cases; `progress_of(node_id)` is where a case's phases go; `interleaved`: this process
        knows the run's cases in advance (not an xdist worker)."""
        self.config = config
        self.profile = profile
        self.device = device
        self.key_threads = key_threads
        self.environment = environment
        self.gate = gate
        self.progress_of = progress_of
        self.interleaved = interleaved
        self._zygote: Zygote | None = None
        self._earlier = self._earlier_processes([])

    def schedule(self, cases: Sequence[str]) -> None:
        """The run's cases in pytest's order: their earlier processes are interleaved across them."""
        self._earlier = self._earlier_processes(cases)

    def run(self, node_id: str) -> Finished:
        """Runs the case `node_id` in fresh forks of this run's zygote: with --processes K, K - 1 forks that only
        time it (every case's, across the run), then one that times it too and checks and judges it with all K
        intervals."""
        processes = self.profile.processes
        divided = per_process_arguments(self.profile) if processes > 1 else []
        earlier = self._earlier.of(node_id) if processes > 1 else []
        if earlier:
            divided += ["--optbench-earlier", str(write_earlier(self._started_zygote().scratch, earlier))]
        # Its own confirmations and independent timer run inside it, each within the case's time limit.
        runs = 2 + self.gate().confirmations
        label = f"process {processes} of {processes}" if processes > 1 else None
        return self._fork(node_id, divided, label, timeout_s=self.profile.case_timeout_s * runs + 120)

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            shutil.rmtree(self._zygote.scratch, ignore_errors=True)
            self._zygote = None

    def _earlier_processes(self, cases: Sequence[str]) -> EarlierProcesses:
        processes = self.profile.processes
        divided = [*per_process_arguments(self.profile), "--optbench-timing-only"] if processes > 1 else []

        def time_only(node_id: str, number: int) -> Interval | None:
            label = f"process {number} of {processes}" + (f" of {case_label(node_id)}" if len(cases) > 1 else "")
            timing = self._fork(node_id, divided, label)
            return timing.record.speedup if timing.record is not None else None

        return EarlierProcesses(cases, processes, time_only, interleaved=self.interleaved, rng=random.Random())

    def _started_zygote(self) -> Zygote:
        if self._zygote is None:
            preload = preloaded_modules(self.config.pluginmanager.get_plugins())
            scratch = scratch_dir()
            environment = {**self.environment, SHARED_ENV: str(scratch / "shared")}
            self._zygote = Zygote(self.config.rootpath, preload, environment, scratch)
        return self._zygote

    def _fork(self, node_id: str, extra: list[str], label: str | None, timeout_s: float | None = None) -> Finished:
        """One fork of the zygote running the case as this run measures it, plus `extra` arguments, into a results
        folder of its own; `label` prefixes the phases it reports."""
        zygote = self._started_zygote()
        results = Path(tempfile.mkdtemp(prefix="case-", dir=zygote.scratch))
        arguments = case_arguments(self.config, node_id, results, gate=True)
        arguments += ["--optbench-isolated", "--optbench-gated-cases", str(self.gate().gated_cases)]
        threads = str(torch.get_num_threads())
        arguments += ["--optbench-threads", threads, "--optbench-key-threads", str(self.key_threads)]
        # Uncaptured: a crash's last words (a native abort, a print) reach the case's log, and its failure.
        arguments += ["--device", str(self.device), "--capture", "no", *extra]
        report = self.progress_of(node_id)
        prefix = f"{label}: " if label else ""
        watch = (lambda: report(prefix + (read_phase(results / PHASE_FILE) or "starting"))) if report else None
        limit = timeout_s or self.profile.case_timeout_s + 120
        return zygote.run(arguments, results, timeout_s=limit, watch=watch)
