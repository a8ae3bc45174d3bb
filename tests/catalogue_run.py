"""`pytest benchmarks` in a process of its own, as a user runs the catalogue on their model."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def catalogue(*arguments: str, results: Path, select: str | None = None) -> subprocess.CompletedProcess[str]:
    """The catalogue run with `arguments`; with `select`, only the cases `-k select` names, each timed in the
    fewest rounds the harness allows (what these runs check is which cases run and what they record, not how
    precisely: 24 rounds of a training step took 9-30 s of a case here, 4 rounds a sixth of that)."""
    command = [sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "-rs", "-q"]
    command += ["--results-dir", str(results), *arguments]
    command += ["-k", select, "--case-budget", "1", "--min-rounds", "4"] if select else []
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
