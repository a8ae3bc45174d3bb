"""Values the processes of one run share: what is the same for every case of a workload, computed once per run.

Each case runs in a process of its own (optbench.running.isolation), so a session-scoped
dict no longer spans the run: the fp32 reference training that every training
case of a workload is compared with, and its natural spread (six more trainings),
would be trained again in each case's process (about 75 s more per smoke run
on a 2-core CPU). `RunShared` keeps such values as files in a folder the run
makes for its case processes (named by $OPTBENCH_SHARED), written atomically,
and in memory where no folder is set (--isolation none, a process of its own).
The values must be deterministic, as a session cache's had to be.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

import torch

SHARED_ENV = "OPTBENCH_SHARED"

T = TypeVar("T")


class RunShared:
    """`get(key, compute)`: the value computed once in this run, by whichever of its processes needed it first."""

    def __init__(self, folder: Path | str | None = None) -> None:
        self.folder = Path(folder) if folder else None
        self._memory: dict[Hashable, Any] = {}

    @classmethod
    def of_run(cls) -> RunShared:
        return cls(os.environ.get(SHARED_ENV))

    def __len__(self) -> int:
        """Values this process holds (computed or read)."""
        return len(self._memory)

    def _path(self, key: Hashable) -> Path:
        assert self.folder is not None
        # repr names every field of the keys used here (workload, data, Tricks with its dtype), stably across processes.
        return self.folder / f"{hashlib.sha256(repr(key).encode()).hexdigest()[:32]}.pt"

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        if key in self._memory:
            return self._memory[key]
        path = self._path(key) if self.folder is not None else None
        if path is not None and path.exists():
            value = torch.load(path, weights_only=False)
        else:
            value = compute()
            if path is not None:
                self._write(path, value)
        self._memory[key] = value
        return value

    def _write(self, path: Path, value: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".part")
        os.close(handle)
        torch.save(value, temporary)
        os.replace(temporary, path)  # a reader sees the whole file or none
