"""Commands: `report RUN.json [...]` (cross-run report and plot), `agree` (suite vs an independent timer),
`order` (the same cases forward, reversed and alone), `aa` (the same cases in two runs: do their intervals hold
for the next?), `drift` (a case's speedup over sessions in one process),
`components` (the variance of each level, processes to rounds, and the allocation between them), `calibrate`
(the gate's error rates), `history add|show` (the nightly history), `changes` (its change points,
with the nightly's alert), `dashboard` (its trend page) and `torch-pair` (do the installed torch and
torchvision work together), and `advise` (every technique on your model, and the recipe that pays)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from .advise.advice import (
    ORDER_CHECK,
    advice_of,
    advice_page,
    advice_table,
    choose_recipe,
    end_to_end_text,
    order_note,
    reasons,
    recipe_header,
    run_cases,
    write_atomically,
)
from .advise.own_model import absolute_spec
from .reporting.crossrun import crossrun_markdown, plot_speedups
from .reporting.run_page import PAGE, write_run_page
from .storage.history import HistoryError, Night, add_run, history_table, read_history, series
from .storage.outputs import OutputError, writable_folder
from .storage.record import Record, read_records
from .storage.runs import RunFileError, load_run, run_environment
from .studies.aa import aa_markdown, check_aa
from .studies.agreement import Agreement, agreement_markdown
from .studies.calibration import calibrate, calibration_markdown
from .studies.components import components_markdown, measure
from .studies.drift import Drift, drift_markdown
from .studies.order import OrderCheckError, check_order, collect, order_markdown, timed_records
from .studies.torch_pair import PairError, check_pair
from .verdict.changes import RECENT_NIGHTS, alert_markdown, case_changes

DEFAULT_HISTORY = Path("optbench-history.jsonl")
TERMINAL_WIDTH = 120


def parser() -> argparse.ArgumentParser:
    """Every command and its options; `main` runs them, and tests/test_docs.py parses the docs' commands with it."""
    # The console script `optbench` and `python -m optbench` run the same commands; the usage names the one used.
    prog = "optbench" if Path(sys.argv[0]).name == "optbench" else "python -m optbench"
    command_line = argparse.ArgumentParser(prog=prog)
    commands = command_line.add_subparsers(dest="command", required=True)
    report = commands.add_parser("report", help="compare saved runs (pytest-benchmark JSON with optbench records)")
    report.add_argument("runs", nargs="+", type=Path, help="JSON files from --benchmark-json or --benchmark-autosave")
    report.add_argument("--output", type=Path, default=Path("optbench-report"), help="folder for report.md/speedup.png")
    report.add_argument(
        "--skip-missing", action="store_true", help="report the runs that exist and name the missing ones"
    )
    report.add_argument(
        "--html", action="store_true", help="also each run's page (report.html; RUN.html for several runs)"
    )
    commands.add_parser("torch-pair", help="check that the installed torch and torchvision work together")
    _study(
        commands, "agree", "measure catalogue cases through the suite and through torch.utils.benchmark.Timer",
        "agreement.md", tests=False,
    )  # fmt: skip
    _study(
        commands, "order", "the same catalogue cases run forward, in reverse and each alone: does a speedup move?",
        "order.md", workdir="keep every run's records here", example="--isolation none",
    )  # fmt: skip
    _study(
        commands, "aa",
        "the same catalogue cases in two separate invocations: do their intervals hold for the next run?",
        "aa.md", workdir="keep both runs' records here", example="--processes 3",
    )  # fmt: skip
    drift = _study(
        commands, "drift", "time catalogue cases in several sessions back to back per process: drift with time alone",
        "drift.md",
    )  # fmt: skip
    drift.add_argument("--sessions", type=int, default=6, help="sessions of timed rounds per case (default 6)")
    components = _study(
        commands, "components",
        "time catalogue cases in several fresh processes of several sessions: the variance at each level, its cost, "
        "and the rounds and processes an interval needs (Kalibera & Jones)",
        "components.md",
    )  # fmt: skip
    components.add_argument("--processes", type=int, default=5, help="fresh processes per case (default 5)")
    components.add_argument("--sessions", type=int, default=3, help="sessions of timed rounds per process (default 3)")
    components.add_argument("--half-width", type=float, default=0.03, help="interval target to allocate for")
    calibrate = _study(
        commands, "calibrate",
        "the gate's false-alarm rate and detection power, in separate processes on real cases",
        "calibration.md", workdir="keep every run's records here", example="--processes 3",
    )  # fmt: skip
    calibrate.add_argument("--recordings", type=int, default=10, help="--update-baselines runs building the history")
    calibrate.add_argument("--repetitions", type=int, default=20, help="runs per planted slowdown")
    calibrate.add_argument("--slowdowns", default="0,0.05,0.1,0.2", help="planted slowdowns, comma-separated")
    history = commands.add_parser("history", help="the nightly history: add a run, show the cases")
    history_commands = history.add_subparsers(dest="history_command", required=True)
    add = history_commands.add_parser("add", help="append a run's per-case results (pytest-benchmark JSON)")
    add.add_argument("run", type=Path)
    add.add_argument("--history", type=Path, default=DEFAULT_HISTORY)
    show = history_commands.add_parser("show", help="each case's nights and its newest result")
    show.add_argument("-k", dest="expression", default=None, help="keep cases whose id contains every word")
    show.add_argument("--history", type=Path, default=DEFAULT_HISTORY)
    changes = commands.add_parser("changes", help="change points in each case's nightly series")
    changes.add_argument("history", type=Path)
    changes.add_argument("-k", dest="expression", default=None, help="keep cases whose id contains every word")
    changes.add_argument("--recent", type=int, default=RECENT_NIGHTS, help="nights that count as news")
    changes.add_argument(
        "--summary", type=Path, default=None, help="append the alert block here (default: $GITHUB_STEP_SUMMARY)"
    )
    advise = commands.add_parser(
        "advise", help="measure every technique on your model and write the recipe of those that pay"
    )
    advise.add_argument("--model", metavar="SPEC", help="package.module:function or file.py:function")
    advise.add_argument("--inputs", metavar="SPEC", help="a function returning one batch for it")
    advise.add_argument("--train", metavar="SPEC", help="a function returning an optbench.TrainingSetup")
    advise.add_argument("--model-name", default=None, help="name in ids and files (default: the function's name)")
    advise.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if torch sees a GPU)")
    advise.add_argument("--profile", default=None, help="smoke or standard (default: smoke on CPU)")
    advise.add_argument(
        "--output", type=Path, default=Path("optbench-advice"), help="folder for NAME.md/NAME_recipe.py"
    )
    advise.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --), e.g. -- --case-budget 4")
    dashboard = commands.add_parser("dashboard", help="a static trend page over a nightly history")
    dashboard.add_argument("history", type=Path)
    dashboard.add_argument("--output", type=Path, default=Path("optbench-dashboard"))
    dashboard.add_argument("--recent", type=int, default=RECENT_NIGHTS, help="nights that count as news")
    return command_line


def main(argv: list[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    if any(arg == "--results-dir" or arg.startswith("--results-dir=") for arg in getattr(arguments, "pytest_args", [])):
        # A study reads back the records of the runs it starts from folders of its own; pointed elsewhere, it
        # found none after a 36-minute agree run and said "no case was timed".
        print(
            f"error: {arguments.command} keeps its runs' records in folders of its own and writes what it found to "
            "--output; drop --results-dir",
            file=sys.stderr,
        )
        return 2
    output = getattr(arguments, "output", None)
    if output is not None:
        # Before measuring, never after: agree, order and calibrate write their table at the end of a long run.
        folder = output if arguments.command in ("report", "dashboard", "advise") else output.parent
        try:
            writable_folder(folder, "--output")
        except OutputError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    if arguments.command == "torch-pair":
        return _torch_pair()
    if arguments.command == "calibrate":
        return _calibrate(arguments)
    if arguments.command == "agree":
        return _agree(arguments)
    if arguments.command == "order":
        return _order(arguments)
    if arguments.command == "aa":
        return _aa(arguments)
    if arguments.command == "drift":
        return _drift(arguments)
    if arguments.command == "components":
        return _components(arguments)
    if arguments.command == "advise":
        return _advise(arguments)
    if arguments.command in ("history", "changes", "dashboard"):
        handlers = {"history": _history, "changes": _changes, "dashboard": _dashboard}
        try:
            return handlers[arguments.command](arguments)
        except (HistoryError, RunFileError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    return _report(arguments)


def _report(arguments: argparse.Namespace) -> int:
    missing = [path for path in arguments.runs if not path.exists()]
    if missing and not arguments.skip_missing:
        print(f"error: {missing[0]}: no such run file; make that run first, or pass --skip-missing", file=sys.stderr)
        return 2
    if len(missing) == len(arguments.runs):
        print(f"error: none of the runs exists ({', '.join(map(str, missing))}); make them first", file=sys.stderr)
        return 2
    for path in missing:
        print(f"missing: {path} (not in the report)")
    try:
        runs = [load_run(path) for path in arguments.runs if path not in missing]
    except RunFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    markdown = crossrun_markdown(runs, missing)
    (arguments.output / "report.md").write_text(markdown)
    plot_speedups(runs, arguments.output / "speedup.png")
    print(markdown)
    print(f"wrote {arguments.output / 'report.md'} and {arguments.output / 'speedup.png'}")
    for run in runs if arguments.html else []:
        name = PAGE if len(runs) == 1 else f"{run.path.stem}.html"
        print(f"wrote {write_run_page(list(run.records.values()), arguments.output / name, run_environment(run))}")
    return 0


def _torch_pair() -> int:
    try:
        print(check_pair())
    except PairError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _history(arguments: argparse.Namespace) -> int:
    if arguments.history_command == "show":
        print(history_table(read_history(arguments.history), arguments.expression))
        return 0
    added, warning = add_run(arguments.history, load_run(arguments.run))
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    else:
        print(f"added {added} case results from {arguments.run} to {arguments.history}")
    return 0


def _existing_history(path: Path) -> list[Night]:
    if not path.exists():
        raise HistoryError(f"{path}: no such history; build one with `python -m optbench history add`")
    return read_history(path)


def _dashboard(arguments: argparse.Namespace) -> int:
    from .reporting.dashboard import write_dashboard  # draws with matplotlib, the `report` extra

    page = write_dashboard(_existing_history(arguments.history), arguments.output, arguments.recent)
    print(f"wrote {page}")
    return 0


def _changes(arguments: argparse.Namespace) -> int:
    found = [
        change
        for case, nights in series(_existing_history(arguments.history), arguments.expression).items()
        for change in case_changes(case, nights)
    ]
    for change in found:
        print(change.text())
    block, failing = alert_markdown(found, arguments.recent)
    print(block)
    summary = arguments.summary or (
        Path(os.environ["GITHUB_STEP_SUMMARY"]) if "GITHUB_STEP_SUMMARY" in os.environ else None
    )
    if summary is not None:
        with open(summary, "a") as stream:
            stream.write(block)
    return 1 if failing else 0


def _study(
    commands: argparse._SubParsersAction,
    name: str,
    description: str,
    output: str,
    *,
    tests: bool = True,
    workdir: str | None = None,
    example: str | None = "--case-budget 4",
) -> argparse.ArgumentParser:
    """A command that runs catalogue cases in pytest processes of its own, with the arguments all of them take: -k,
    --tests (unless `tests` is False), --workdir (with its help, where given), --output, and pytest's own after --
    (unless `example` is None)."""
    study = commands.add_parser(name, help=description)
    study.add_argument("-k", dest="expression", default=None, help="pytest -k expression choosing the cases")
    if tests:
        study.add_argument("--tests", default="benchmarks", help="what pytest runs (default: the catalogue)")
    if workdir:
        study.add_argument("--workdir", type=Path, default=None, help=workdir)
    study.add_argument("--output", type=Path, default=Path(output))
    if example:
        study.add_argument("pytest_args", nargs="*", help=f"more pytest arguments (after --), e.g. -- {example}")
    return study


def _agree(arguments: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as results:
        command = [sys.executable, "-m", "pytest", "benchmarks", "--agree", "--results-dir", results, "-q"]
        command += ["-p", "no:cacheprovider", *(["-k", arguments.expression] if arguments.expression else [])]
        finished = subprocess.run([*command, *arguments.pytest_args], check=False)
        records = read_records(Path(results))
    agreements = [a for a in map(Agreement.from_record, records) if a is not None]
    if not agreements:
        print(f"error: no case was timed (pytest exit {finished.returncode}); check the -k expression", file=sys.stderr)
        return 2
    return _publish(agreement_markdown(agreements), arguments.output)


def _order(arguments: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        workdir = arguments.workdir or Path(scratch)
        try:
            check = check_order(Path.cwd(), workdir, arguments.tests, arguments.expression, arguments.pytest_args)
        except OrderCheckError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    return _publish(order_markdown(check), arguments.output)


def _aa(arguments: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        try:
            check = check_aa(Path.cwd(), arguments.workdir or Path(scratch), arguments.tests, arguments.expression,
                             arguments.pytest_args)  # fmt: skip
        except OrderCheckError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    if not check.cases:
        print("error: no case was timed in both runs; check the -k expression", file=sys.stderr)
        return 2
    return _publish(aa_markdown(check), arguments.output)


def _drift(arguments: argparse.Namespace) -> int:
    if arguments.sessions < 2:
        print("error: --sessions must be at least 2 to see a drift", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as results:
        try:
            nodes = collect(Path.cwd(), arguments.tests, arguments.expression, arguments.pytest_args)
            options = ["--sessions", str(arguments.sessions), *arguments.pytest_args]
            records = timed_records(Path.cwd(), nodes, Path(results), options)
        except OrderCheckError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    drifts = [d for d in map(Drift.from_record, records.values()) if d is not None]
    return _publish(drift_markdown(drifts), arguments.output)


def _components(arguments: argparse.Namespace) -> int:
    if arguments.processes < 2 or arguments.sessions < 2:
        print("error: --processes and --sessions must each be at least 2 to tell the levels apart", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as work:
        try:
            found = measure(
                Path.cwd(), arguments.tests, arguments.expression, arguments.processes, arguments.sessions,
                arguments.pytest_args, Path(work),
            )  # fmt: skip
        except OrderCheckError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    return _publish(components_markdown(found, arguments.half_width), arguments.output)


def _calibrate(arguments: argparse.Namespace) -> int:
    slowdowns = [float(value) for value in arguments.slowdowns.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        result = calibrate(
            Path.cwd(),
            arguments.workdir or Path(scratch),
            arguments.expression,
            arguments.recordings,
            arguments.repetitions,
            slowdowns,
            tests=arguments.tests,
            options=arguments.pytest_args,
        )
    return _publish(calibration_markdown(result), arguments.output)


def _advise(arguments: argparse.Namespace) -> int:
    root = Path(__file__).resolve().parent.parent
    if not (root / "benchmarks").is_dir():
        print(
            f"error: {root / 'benchmarks'}: no catalogue there; run advise from an optbench checkout", file=sys.stderr
        )
        return 2
    if arguments.model is None and arguments.train is None:
        print("error: advise needs --model SPEC --inputs SPEC, --train SPEC, or both", file=sys.stderr)
        return 2
    name = arguments.model_name or (arguments.model or arguments.train).rpartition(":")[2]
    options = ["--model-name", name]
    for option in ("model", "inputs", "train"):
        if getattr(arguments, option):
            options += [f"--{option}", absolute_spec(getattr(arguments, option))]
    for option in ("device", "profile"):
        if getattr(arguments, option):
            options += [f"--{option}", getattr(arguments, option)]
    options += arguments.pytest_args
    with tempfile.TemporaryDirectory() as scratch:
        print("advise, phase 1 of 2: every technique on your model", flush=True)
        run = run_cases(root, options, Path(scratch) / "cases", name, "phase 1")
        if run.usage_error is not None:
            print(f"error: {run.usage_error}", file=sys.stderr)
            return 2
        measured = [record for record in run.records if record.variant != ORDER_CHECK]
        notes = [order_note(record) for record in run.records if record.variant == ORDER_CHECK]
        advice = [advice_of(record, name) for record in measured] + run.broken
        chosen = choose_recipe(advice, training=arguments.train is not None)
        advice_file, recipe_file = arguments.output / f"{name}.md", arguments.output / f"{name}_recipe.py"
        command = " ".join(["python -m optbench advise", *sys.argv[2:]])
        page = advice_page(name, advice, run.unmeasured, notes, chosen, command)
        write_atomically(recipe_file, chosen.source(recipe_header(name, chosen), page))
        ends = {  # the recipe's cases in benchmarks/test_recipe.py: what each says, and what it applies
            test: (what, techniques)
            for test, what, techniques, given in (
                ("test_recipe", "Recipe", chosen.techniques, arguments.model),
                ("test_training_recipe", "Training recipe", chosen.training_techniques, arguments.train),
            )
            if given
        }
        measured_ends: dict[str, Record] = {}
        if any(techniques for _, techniques in ends.values()):
            print("advise, phase 2 of 2: the recipe end to end", flush=True)
            recipe_options = [*options, "--recipe", str(recipe_file.resolve()), "-k", "test_recipe.py"]
            recipe_runs = run_cases(root, recipe_options, Path(scratch) / "recipe", name, "phase 2").records
            measured_ends = {record.case.rpartition("::")[2].partition("[")[0]: record for record in recipe_runs}
        headlines = [
            end_to_end_text(measured_ends.get(test), techniques, what) for test, (what, techniques) in ends.items()
        ]
    page += "\n## End to end\n\n" + "\n\n".join(headlines) + "\n"
    write_atomically(advice_file, page)
    print(advice_table(advice))
    for line in [*reasons(advice, run.unmeasured), *notes]:
        print(textwrap.fill(line, TERMINAL_WIDTH, initial_indent="  ", subsequent_indent="    "))
    print(f"\nwrote {advice_file} and {recipe_file}")
    for line in headlines:
        print(textwrap.fill(line, TERMINAL_WIDTH, subsequent_indent="  "))
    return 0


def _publish(table: str, output: Path) -> int:
    """Write a command's markdown table to its --output file and print it."""
    output.write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
