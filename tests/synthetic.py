"""A synthetic benchmark module for end-to-end runs: the optimized variant does a third of the reference's work."""

import subprocess
import sys
from pathlib import Path

HALF_THE_WORK = """
import torch
from optbench import Case, Exact, Requires


def count(n):
    total = 0
    for i in range(n):
        total += i
    return total


def test_half_the_work(optbench):
    optbench.run(
        Case(
            reference=lambda: torch.tensor([float(count(40_000) + count(40_000) - count(40_000))]),
            optimized=lambda: torch.tensor([float(count(40_000))]),
            accuracy=Exact(),
            floor=1.2,
            names=("3x work", "1x work"),
        )
    )
"""


def run_study(project: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`python -m optbench ARGUMENTS` (a study such as components or aa) in the synthetic project at `project`."""
    command = [sys.executable, "-m", "optbench", *arguments]
    return subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
