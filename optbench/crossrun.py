"""The cross-run report: cases x runs (machines, PyTorch versions) as a markdown table and a plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .record import Record
from .report import case_label, markdown_table
from .runs import Run
from .significance import ComparisonSettings, compare_records
from .stats import speedup_text


def _cell(record: Record | None, first: Record | None, settings: ComparisonSettings) -> str:
    if record is None:
        return "-"
    measured = speedup_text(record.speedup)
    if record.accuracy:
        headline = record.accuracy.headline
        measured += f", {headline.metric} {headline.value:.3g}"
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


def crossrun_markdown(runs: Sequence[Run]) -> str:
    """One row per case, one column per run; later runs show their change vs the first and its p-value."""
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
    lines += [
        "",
        "Each cell: speedup [95% CI], headline accuracy figure, verdict; from run 2 on, the change vs run 1 and "
        "its margin: the gate's own test (optbench.regression), both runs' intervals plus the prior between-run "
        "spread, at a 2% false-alarm budget over the cases (**bold** = beyond the margin and over 5%).",
        "",
        markdown_table(rows, headers),
    ]
    return "\n".join(lines) + "\n"


def plot_speedups(runs: Sequence[Run], path: Path) -> None:
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
