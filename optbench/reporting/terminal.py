"""What a run prints at its end: the summary of its cases, the recommendation, and each speedup's change against a
saved run (--benchmark-compare), fitted to the terminal, with pytest-benchmark's own table trimmed to match."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..internals import benchmark_session_of
from ..options import option
from ..profiles import Profile
from ..storage.record import Record, RecordError
from ..storage.runs import saved_records
from ..verdict.gate import GateSettings
from ..verdict.significance import ComparisonSettings
from .compact import benchmark_columns, compact_summary, fitted_table, prose, summary_width
from .recommendation import recommendation_markdown
from .report import CHANGE_HEADERS, changes_rows, summary

ONE_PROCESS_NOTICE = (
    "One process per case: each interval describes that process, and the next run draws other ones "
    '(docs/methodology.md, "Several processes per case"); --processes 3 gives intervals that hold for the next run.'
)


@dataclass(frozen=True)
class SummarizedRun:
    """What the summary is of: the run's records, how it measured, and where its files are."""

    records: list[Record]
    profile: Profile
    device: str
    results_dir: Path
    gate: GateSettings


def write_summary(reporter: Any, config: pytest.Config, run: SummarizedRun) -> None:
    """The run's summary on pytest's terminal reporter (-v: every column and note; else the compact table)."""
    fit_benchmark_table(config, reporter)
    key = run.records[0].environment_key
    width = summary_width(reporter)
    per_case = f", each case in {run.profile.processes} processes" if run.profile.processes > 1 else ""
    reporter.write_sep("=", f"optbench: profile {run.profile.name} on {run.device}{per_case}")
    verbose = config.get_verbosity() > 0
    if verbose:
        reporter.write_line(f"environment {key}")
        reporter.write_line(summary(run.records))
    else:
        notice = f"Environment {key}. Every column and note: {run.results_dir / 'summary.md'}, or -v."
        notice = textwrap.fill(notice, width, break_on_hyphens=False)
        reporter.write_line(compact_summary(run.records, width) + "\n\n" + notice)
    if run.profile.processes == 1 and any(record.speedup for record in run.records):
        reporter.write_line(textwrap.fill(ONE_PROCESS_NOTICE, width, break_on_hyphens=False))
    if all(record.speedup is None for record in run.records):
        disabled = "timing disabled (--benchmark-disable, or xdist without --gpu-per-worker): accuracy checked"
        disabled += ", speed not gated"
        reporter.write_line(textwrap.fill(disabled, width))
    recommendation = recommendation_markdown(run.records)
    if recommendation:
        reporter.write_sep("-", "optbench: what to use on this device (seed 004)")
        if verbose:
            reporter.write_line(recommendation)
        else:
            reporter.write_line(prose(recommendation, width))
            reporter.write_line(textwrap.fill(f"Its tables: {run.results_dir / 'recommendation.md'}, or -v.", width))
    benchmark_session = benchmark_session_of(config)
    saved_runs = benchmark_session.compared_mapping if benchmark_session else None
    for path, saved_benchmarks in (saved_runs or {}).items():
        reporter.write_sep("-", f"optbench: change of each speedup vs {path}")
        settings = run.gate
        comparison = ComparisonSettings(
            settings.pooled_variance, settings.false_alarm_rate, settings.min_effect, len(run.records)
        )
        try:
            saved = {record.node_id: record for record in saved_records(saved_benchmarks.values(), str(path))}
        except RecordError as error:
            reporter.write_line(f"not compared: {error}")
            continue
        rows = changes_rows(run.records, saved, comparison)
        squeeze = CHANGE_HEADERS.index("change")
        reporter.write_line(fitted_table(rows, CHANGE_HEADERS, width, squeeze))


def fit_benchmark_table(config: pytest.Config, reporter: Any) -> None:
    """pytest-benchmark's table of times, printed after this summary: left out unless asked for (-v,
    --benchmark-compare, --benchmark-columns or --benchmark-histogram: the times are in summary.md), and where
    --benchmark-compare asks for it, in as many of its columns as fit the summary's width."""
    benchmark_session = benchmark_session_of(config)
    if benchmark_session is None or config.get_verbosity() > 0:
        return
    if option(config, "benchmark_columns", None) or option(config, "benchmark_histogram", None):
        return
    if not option(config, "benchmark_compare", None):
        benchmark_session.groups = []
        return
    names = [benchmark.name for benchmark in benchmark_session.benchmarks]
    benchmark_session.columns = benchmark_columns(names, summary_width(reporter), compared=True)
