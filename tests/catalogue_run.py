"""`pytest benchmarks` in a process of its own, as a user runs the catalogue on their model."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def catalogue(*arguments: str, results: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "-rs", "-q"]
    command += ["--results-dir", str(results), *arguments]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
