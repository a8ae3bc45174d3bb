"""Measuring a case again in a fresh process: pytest on its node id with the run's measurement options.

A fresh process is what makes a confirmation worth having: it draws its own
memory layout, page-fault costs and compiled code, the between-run effects a
second measurement in the same process would share with the first.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from .record import read_records
from .runner import Confirmation

# Options a confirmation repeats: how the case is measured, never what the run writes or selects.
_VALUE_OPTIONS = (
    "profile",
    "device",
    "ci_target",
    "case_budget",
    "block_target",
    "case_timeout",
    "plant_slowdown",
    "baselines_dir",
    "cifar10_root",
    "hf_model",
)
_FLAG_OPTIONS = ("compile_fallback", "benchmark_disable_gc")


def confirmation_command(config: pytest.Config, node_id: str, results_dir: Path) -> list[str]:
    command = [sys.executable, "-m", "pytest", node_id, "-q", "-p", "no:cacheprovider", "--optbench-confirming"]
    command += ["--results-dir", str(results_dir)]
    for name in _VALUE_OPTIONS:
        value = config.getoption(name, None)
        if value is not None and value != "":
            command += [f"--{name.replace('_', '-')}", str(value)]
    command += [f"--{name.replace('_', '-')}" for name in _FLAG_OPTIONS if config.getoption(name, False)]
    return command


def confirm_in_fresh_process(config: pytest.Config, node_id: str) -> Confirmation:
    """Runs the case once more in a new interpreter; its speedup is read from the record it wrote."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="optbench-confirm-") as results:
        # `python -m pytest` in the rootdir imports the project's conftest and fixtures as the run did.
        subprocess.run(
            confirmation_command(config, node_id, Path(results)), cwd=config.rootpath, capture_output=True, check=False
        )
        records = read_records(Path(results))
    return Confirmation(speedup=records[-1].speedup if records else None, wall_s=time.monotonic() - started)
