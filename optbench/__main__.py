"""Commands: `report RUN.json [...]` (cross-run report and plot) and `calibrate` (the gate's error rates)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .calibration import calibrate, rows_markdown
from .crossrun import crossrun_markdown, plot_speedups
from .runs import RunFileError, load_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m optbench")
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser("report", help="compare saved runs (pytest-benchmark JSON with optbench records)")
    report.add_argument("runs", nargs="+", type=Path, help="JSON files from --benchmark-json or --benchmark-autosave")
    report.add_argument("--output", type=Path, default=Path("optbench-report"), help="folder for report.md/speedup.png")
    calibrate = commands.add_parser("calibrate", help="measure the gate's false-alarm rate and detection power")
    calibrate.add_argument("--repetitions", type=int, default=50)
    calibrate.add_argument("--slowdowns", default="0,0.05,0.1,0.2", help="planted slowdowns, comma-separated")
    calibrate.add_argument("--tolerances", default="0.1,0.05", help="speed tolerances to judge, comma-separated")
    calibrate.add_argument("--case-budget", type=float, default=8.0, help="seconds of timed rounds per case")
    calibrate.add_argument("--output", type=Path, default=Path("calibration.md"))
    arguments = parser.parse_args(argv)
    if arguments.command == "calibrate":
        return _calibrate(arguments)
    try:
        runs = [load_run(path) for path in arguments.runs]
    except RunFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    arguments.output.mkdir(parents=True, exist_ok=True)
    markdown = crossrun_markdown(runs)
    (arguments.output / "report.md").write_text(markdown)
    plot_speedups(runs, arguments.output / "speedup.png")
    print(markdown)
    print(f"wrote {arguments.output / 'report.md'} and {arguments.output / 'speedup.png'}")
    return 0


def _calibrate(arguments: argparse.Namespace) -> int:
    slowdowns = [float(value) for value in arguments.slowdowns.split(",")]
    tolerances = [float(value) for value in arguments.tolerances.split(",")]
    with tempfile.TemporaryDirectory() as workdir:
        rows = calibrate(Path(workdir), arguments.repetitions, slowdowns, tolerances, arguments.case_budget)
    table = rows_markdown(rows, tolerances)
    arguments.output.write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
