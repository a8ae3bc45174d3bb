"""Measuring a case again in a fresh process: pytest on its node id with the run's measurement options.

A fresh process is what makes a confirmation worth having: it draws its own
memory layout, page-fault costs and compiled code, the between-run effects a
second measurement in the same process would share with the first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from .runner import Confirmation
from .stats import Interval

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
        command = confirmation_command(config, node_id, Path(results))
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(config.rootpath), os.environ.get("PYTHONPATH")])),
        }
        subprocess.run(command, cwd=config.rootpath, env=environment, capture_output=True, check=False)
        records = Path(results, "records.jsonl")
        lines = records.read_text().splitlines() if records.exists() else []
    speedup = json.loads(lines[-1]).get("speedup") if lines else None
    interval = Interval(speedup["point"], speedup["low"], speedup["high"]) if speedup else None
    return Confirmation(speedup=interval, wall_s=time.monotonic() - started)


def current_commit(root: Path) -> str | None:
    """The commit under test: $GITHUB_SHA in CI, else git's HEAD of the rootdir, else None."""
    if os.environ.get("GITHUB_SHA"):
        return os.environ["GITHUB_SHA"]
    try:
        finished = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=False, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return finished.stdout.strip() or None if finished.returncode == 0 else None
