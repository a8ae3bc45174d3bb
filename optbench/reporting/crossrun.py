"""The cross-run report: cases x runs (machines, PyTorch versions) as a markdown table and a plot, and what
changed from the first run to each later one.

A change of payoff is the gate's own two-run test (optbench.verdict.significance).
An accuracy figure has *moved toward its limit* when its headroom (how far it
is from failing, in its own units) shrank by more than ACCURACY_MOVE of what
it was, or it now fails. Compilation has changed when the graphs or graph
breaks differ, or the first call's time moved by more than COMPILE_TIME_MOVE
either way (first calls are noisy: a smaller move says little).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..measuring.accuracy import Check
from ..storage.record import Record
from ..storage.runs import Run
from ..verdict.regression import Change
from ..verdict.significance import ComparisonSettings, compare_records
from ..verdict.stats import speedup_text
from .report import case_label, markdown_table

ACCURACY_MOVE = 0.1
COMPILE_TIME_MOVE = 1.5


def _headroom(check: Check) -> float:
    """How far a figure is from failing, in its own units; negative when it fails."""
    return check.limit - check.value if check.lower_is_better else check.value - check.limit


def accuracy_move(before: Record, after: Record) -> str | None:
    """`metric a -> b (limit L)` when the headline figure moved toward its limit (module docstring), else None."""
    if before.accuracy is None or after.accuracy is None:
        return None
    old, new = before.accuracy.headline, after.accuracy.headline
    if old.metric != new.metric:
        return None
    was, now = _headroom(old), _headroom(new)
    if not (now < was - ACCURACY_MOVE * abs(was) or (old.passed and not new.passed)):
        return None
    sign = "<=" if new.lower_is_better else ">="
    return f"{new.metric} {old.value:.3g} -> {new.value:.3g} (limit {sign} {new.limit:.3g})" + (
        ", now fails" if not new.passed else ""
    )


def compile_move(before: Record, after: Record) -> str | None:
    """`compile 2.1 s -> 4.4 s, graph breaks 0 -> 3` when compilation changed (module docstring), else None."""
    old, new = before.compile, after.compile
    if old is None and new is None:
        return None
    if old is None or new is None:
        return f"compiled in {'the later run only' if old is None else 'the first run only'}"
    parts = []
    ratio = new.first_call_s / old.first_call_s if old.first_call_s > 0 else 1.0
    if not 1 / COMPILE_TIME_MOVE <= ratio <= COMPILE_TIME_MOVE:
        parts.append(f"first call {old.first_call_s:.1f} s -> {new.first_call_s:.1f} s")
    if (old.graphs, old.graph_breaks) != (new.graphs, new.graph_breaks):
        parts.append(f"graphs {old.graphs} -> {new.graphs}, graph breaks {old.graph_breaks} -> {new.graph_breaks}")
    return "; ".join(parts) or None


@dataclass(frozen=True)
class CaseChange:
    """One case in two runs: its payoff change by the gate's test, and what moved besides."""

    case: str
    speedup: Change | None
    accuracy: str | None
    compile: str | None


def what_changed(before: Run, after: Run, settings: ComparisonSettings) -> list[CaseChange]:
    """Every case both runs recorded, in case order."""
    return [
        CaseChange(
            case,
            compare_records(before.records[case], after.records[case], settings),
            accuracy_move(before.records[case], after.records[case]),
            compile_move(before.records[case], after.records[case]),
        )
        for case in sorted(before.records.keys() & after.records.keys())
    ]


def _changes_section(index: int, before: Run, after: Run, settings: ComparisonSettings) -> list[str]:
    changes = what_changed(before, after, settings)
    significant = [c for c in changes if c.speedup is not None and c.speedup.significant]
    lines = [f"## What changed: run {index + 1} against run 1", ""]
    for change in sorted(significant, key=lambda c: -c.speedup.relative):
        direction = "pays more" if change.speedup.relative > 0 else "pays less"
        lines.append(f"- {direction}: {case_label(change.case)}: {change.speedup.text()}")
    if not significant:
        lines.append(f"- no case's payoff changed beyond its margin ({len(changes)} cases in both runs)")
    lines += [f"- accuracy toward its limit: {case_label(c.case)}: {c.accuracy}" for c in changes if c.accuracy]
    lines += [f"- compilation: {case_label(c.case)}: {c.compile}" for c in changes if c.compile]
    for run, other, name in ((before, after, "1"), (after, before, str(index + 1))):
        only = sorted(run.records.keys() - other.records.keys())
        if only:
            lines.append(f"- only in run {name}: {', '.join(case_label(case) for case in only)}")
    return [*lines, ""]


def _cell(record: Record | None, first: Record | None, settings: ComparisonSettings) -> str:
    if record is None:
        return "-"
    measured = speedup_text(record.speedup)
    if record.accuracy:
        headline = record.accuracy.headline
        measured += f", {headline.metric} {headline.value:.3g}"
    if record.compile:
        measured += f", compile {record.compile.first_call_s:.1f} s/{record.compile.graph_breaks} breaks"
    measured += f", {record.verdict.status}"
    change = compare_records(first, record, settings) if first is not None and first is not record else None
    if change:
        marker = "**" if change.significant else ""
        measured += f"; {marker}{change.relative:+.1%}{marker} (margin +-{change.margin:.0%})"
    return measured


def environment_warning(runs: Sequence[Run]) -> str | None:
    keys = sorted({run.environment_key for run in runs})
    if len(keys) < 2:
        return None
    return (
        f"**Warning: these runs come from {len(keys)} different environments ({', '.join(keys)}).** "
        "A speedup is a ratio within one run; across environments the change shows how the optimization's "
        "payoff differs (e.g. between PyTorch versions), not a regression of one machine."
    )


def crossrun_markdown(runs: Sequence[Run], missing: Sequence[Path] = ()) -> str:
    """What changed from the first run to each later one, then one row per case and one column per run;
    `missing`: runs asked for whose files do not exist, named at the top."""
    case_ids = sorted({case for run in runs for case in run.records})
    settings = ComparisonSettings(cases=len(case_ids))
    headers = ["case", *(f"run {index + 1}" for index in range(len(runs)))]
    rows = [
        [case_label(case), *(_cell(run.records.get(case), runs[0].records.get(case), settings) for run in runs)]
        for case in case_ids
    ]
    lines = ["# optbench: speedup across runs", ""]
    warning = environment_warning(runs)
    if warning:
        lines += [warning, ""]
    lines += [f"- run {index + 1}: {run.label}, {run.datetime}" for index, run in enumerate(runs)]
    lines += [f"- not in this report (no file): {path}" for path in missing]
    lines.append("")
    for index, run in enumerate(runs[1:], start=1):
        lines += _changes_section(index, runs[0], run, settings)
    lines += [
        "## Every case",
        "",
        "Each cell: speedup [95% CI], headline accuracy figure, compile time and graph breaks where compiled, "
        "verdict; from run 2 on, the change vs run 1 and "
        "its margin: the gate's own test (optbench.verdict.regression), both runs' intervals plus the prior "
        "between-run spread, at a 2% false-alarm budget over the cases (**bold** = beyond the margin and over 5%).",
        "",
        markdown_table(rows, headers),
    ]
    return "\n".join(lines) + "\n"


def plot_speedups(runs: Sequence[Run], path: Path) -> None:  # pragma: no mutate block
    """Speedup with its interval per case, one marker series per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    case_ids = sorted({case for run in runs for case in run.records})
    figure, axes = plt.subplots(figsize=(10, 0.45 * len(case_ids) + 1.8))
    offsets = [(index - (len(runs) - 1) / 2) * 0.8 / max(len(runs), 1) for index in range(len(runs))]
    for index, run in enumerate(runs):
        positions, points, errors = [], [], [[], []]
        for row, case in enumerate(case_ids):
            record = run.records.get(case)
            speedup = record.speedup if record else None
            if speedup is None:
                continue
            positions.append(row + offsets[index])
            points.append(speedup.point)
            errors[0].append(speedup.point - speedup.low)
            errors[1].append(speedup.high - speedup.point)
        axes.errorbar(points, positions, xerr=errors, fmt="o", capsize=3, label=f"run {index + 1}: {run.label}")
    axes.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    axes.set_yticks(range(len(case_ids)), [case_label(case) for case in case_ids], fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("speedup (reference / optimized), 95% CI")
    axes.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
