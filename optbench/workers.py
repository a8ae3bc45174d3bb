"""pytest-xdist workers: how they share the CPU, and which GPU each one owns."""

from __future__ import annotations

import os
import re

import torch


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
