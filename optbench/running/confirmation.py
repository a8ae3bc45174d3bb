"""Measuring a case again in a fresh process: pytest on its node id with the run's measurement options.

A fresh process is what makes a confirmation worth having: it draws its own
memory layout, page-fault costs and compiled code, the between-run effects a
second measurement in the same process would share with the first. The same
arguments start a case's own isolated process (optbench.running.isolation), which
also repeats the gate's options, and the independent timer's (optbench.studies.agreement).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ..advise.own_model import absolute_spec
from ..storage.record import Record, read_records
from .runner import Confirmation

# Options every process of a case repeats: how the case is measured, never what the run writes or selects.
_VALUE_OPTIONS = (
    "profile",
    "device",
    "ci_target",
    "case_budget",
    "block_target",
    "min_rounds",
    "case_timeout",
    "plant_slowdown",
    "baselines_dir",
    "cifar10_root",
    "hf_model",
    "sessions",
    "model",
    "inputs",
    "train",
    "model_name",
    "recipe",
)
_SPEC_OPTIONS = ("model", "inputs", "train", "recipe")
"""SPECs that may name a file relative to where the run started; a case's process starts in the rootdir."""
_FLAG_OPTIONS = ("compile_fallback", "benchmark_disable_gc")
# What a case's own process also needs to judge and record it as the run would.
_GATE_VALUE_OPTIONS = ("false_alarm_rate", "min_effect", "confirm", "accuracy_drift")
_GATE_FLAG_OPTIONS = ("update_baselines", "agree")
# Plugins and ini overrides given on the command line: a planted fault (-p) must hold in every process.
_PASSED_ON = ("-p", "-o")


def _options(config: pytest.Config, values: tuple[str, ...], flags: tuple[str, ...]) -> list[str]:
    arguments = []
    for name in values:
        value = config.getoption(name, None)
        if name in _SPEC_OPTIONS and value is not None:
            value = absolute_spec(value)
        if value is not None and value != "":
            arguments += [f"--{name.replace('_', '-')}", str(value)]
    return arguments + [f"--{name.replace('_', '-')}" for name in flags if config.getoption(name, False)]


def _passed_on(config: pytest.Config) -> list[str]:
    given = [str(argument) for argument in config.invocation_params.args]
    arguments = []
    for index, argument in enumerate(given):
        if argument in _PASSED_ON and index + 1 < len(given):
            arguments += [argument, given[index + 1]]
        elif any(argument.startswith(flag) and argument != flag for flag in _PASSED_ON):
            arguments.append(argument)
    return arguments


def case_arguments(config: pytest.Config, node_id: str, results_dir: Path, *, gate: bool = False) -> list[str]:
    """pytest's arguments that run `node_id` alone, measured as this run measures, recording into `results_dir`;
    with `gate`, also judged and recorded as this run would (a case's own isolated process)."""
    arguments = [node_id, "-q", "-p", "no:cacheprovider", "--rootdir", str(config.rootpath)]
    arguments += ["--results-dir", str(results_dir), *_passed_on(config)]
    arguments += _options(config, _VALUE_OPTIONS, _FLAG_OPTIONS)
    if gate:
        arguments += _options(config, _GATE_VALUE_OPTIONS, _GATE_FLAG_OPTIONS)
    return arguments


def fresh_process(config: pytest.Config, node_id: str, role: str) -> tuple[Record | None, float]:
    """Runs the case in a new interpreter with the hidden `role` flag; its record (if it wrote one) and the wall time.

    `python -m pytest` in the rootdir imports the project's conftest and fixtures as the run did.
    """
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="optbench-fresh-") as results:
        command = [sys.executable, "-m", "pytest", *case_arguments(config, node_id, Path(results)), role]
        subprocess.run(command, cwd=config.rootpath, capture_output=True, check=False)
        records = read_records(Path(results))
    return (records[-1] if records else None), time.monotonic() - started


def confirm_in_fresh_process(config: pytest.Config, node_id: str) -> Confirmation:
    """Runs the case once more in a new interpreter; its speedup is read from the record it wrote."""
    record, wall_s = fresh_process(config, node_id, "--optbench-confirming")
    return Confirmation(speedup=record.speedup if record else None, wall_s=wall_s)


def independent_in_fresh_process(config: pytest.Config, node_id: str) -> list[float] | None:
    """The case timed by torch.utils.benchmark.Timer alone in a new interpreter (optbench.studies.agreement)."""
    record, _ = fresh_process(config, node_id, "--optbench-independent")
    return record.independent_ratios if record else None
