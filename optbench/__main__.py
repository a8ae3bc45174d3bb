"""`python -m optbench report RUN.json [RUN.json ...]`: the cross-run markdown report and plot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .crossrun import crossrun_markdown, plot_speedups
from .runs import RunFileError, load_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m optbench")
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser("report", help="compare saved runs (pytest-benchmark JSON with optbench records)")
    report.add_argument("runs", nargs="+", type=Path, help="JSON files from --benchmark-json or --benchmark-autosave")
    report.add_argument("--output", type=Path, default=Path("optbench-report"), help="folder for report.md/speedup.png")
    arguments = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
