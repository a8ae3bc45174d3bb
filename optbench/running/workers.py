"""pytest-xdist workers: how they share the CPU, which GPU each one owns, and how their benchmark JSON is merged."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import torch

from ..internals import benchmark_session_of
from ..storage.record import RECORD_KEY


def xdist_worker() -> str | None:
    """This process's xdist worker id ("gw0", ...), or None in a controller or a plain run."""
    return os.environ.get("PYTEST_XDIST_WORKER")


def threads_per_worker(threads: int, workers: int) -> int:
    """Intra-op threads each worker may use so that workers do not fight over cores."""
    return max(1, threads // max(1, workers))


def worker_device(worker_id: str, gpu_count: int) -> torch.device:
    """The GPU owned by `worker_id`: gw0 -> cuda:0, gw1 -> cuda:1, ...; one worker per GPU."""
    match = re.fullmatch(r"gw(\d+)", worker_id)
    if not match:
        raise ValueError(f"not an xdist worker id: {worker_id!r}")
    index = int(match.group(1))
    if index >= gpu_count:
        raise ValueError(
            f"worker {worker_id} has no GPU of its own ({gpu_count} visible); run with -n {gpu_count} or fewer"
        )
    return torch.device("cuda", index)


WORKER_RUN_KEY = "optbench_benchmark_json"
"""The key of a --gpu-per-worker worker's benchmark JSON path in the output xdist hands its controller."""


def worker_run_path(results_dir: Path, worker_id: str) -> Path:
    """Where worker `worker_id` writes its pytest-benchmark JSON for the controller to merge."""
    results_dir.mkdir(parents=True, exist_ok=True)
    return results_dir.resolve() / f"benchmark-{worker_id}.json"


def merge_benchmark_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The workers' pytest-benchmark JSON documents as one, as a single process would have written it.

    Machine and commit info come from the first run: all workers of a run
    measure on one machine, on GPUs of one kind (checked by environment key).
    """
    if not runs:
        raise ValueError("no worker wrote benchmark JSON")
    keys = {run["machine_info"].get(RECORD_KEY, {}).get("environment_key") for run in runs}
    if len(keys) > 1:
        raise ValueError(f"the workers measured different environments ({', '.join(sorted(map(str, keys)))})")
    benchmarks = [benchmark for run in runs for benchmark in run["benchmarks"]]
    return {
        **runs[0],
        "benchmarks": sorted(benchmarks, key=lambda benchmark: benchmark["fullname"]),
        "datetime": max(run["datetime"] for run in runs),
    }


def without_timing_data(run: dict[str, Any]) -> dict[str, Any]:
    """`run` without each benchmark's round times, as --benchmark-save writes it without --benchmark-save-data."""
    return {
        **run,
        "benchmarks": [
            {**benchmark, "stats": {name: value for name, value in benchmark["stats"].items() if name != "data"}}
            for benchmark in run["benchmarks"]
        ],
    }


def time_on_own_gpu(config: Any, results_dir: Path, gpu_per_worker: bool) -> None:
    """pytest-benchmark turns timing off under xdist; a worker that owns its GPU (`gpu_per_worker`) turns it back on.

    Each such worker writes its benchmarks to a file of its own in `results_dir`,
    which the controller merges into --benchmark-json and --benchmark-autosave/save
    (`merge_worker_runs`): workers writing those themselves would overwrite each other.
    """
    benchmark_session = benchmark_session_of(config)
    worker = xdist_worker()
    if worker is None or not gpu_per_worker or benchmark_session is None:
        return
    benchmark_session.disabled = False
    if benchmark_session.json or benchmark_session.save or benchmark_session.autosave:
        benchmark_session.json = worker_run_path(results_dir, worker)
        benchmark_session.save = benchmark_session.autosave = None
        config.workeroutput[WORKER_RUN_KEY] = str(benchmark_session.json)


def merge_worker_runs(config: Any, worker_runs: list[Path]) -> None:
    """Write the workers' benchmarks (`worker_runs`, as their workers reported them) as this run's
    --benchmark-json and saved run, as one process would."""
    benchmark_session = benchmark_session_of(config)
    runs = [path for path in worker_runs if path.exists()]
    if not runs or benchmark_session is None:
        return
    try:
        merged = merge_benchmark_runs([json.loads(path.read_text()) for path in runs])
    except ValueError as error:
        config.get_terminal_writer().line(f"optbench: the workers' benchmark JSON was not merged: {error}")
        return
    if benchmark_session.json:
        Path(benchmark_session.json).write_text(json.dumps(merged, indent=4))
    name = benchmark_session.save or benchmark_session.autosave
    if name:
        saved = merged if benchmark_session.save_data else without_timing_data(merged)
        benchmark_session.storage.save(saved, name)
    for path in runs:
        path.unlink()
