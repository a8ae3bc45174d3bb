"""The terminal summary of a real recorded run (the smoke catalogue on the 2-core EPYC, commit b78738c) fits 80 and
120 columns, puts a failing case first and says each note once; and a run in an 80- and a 120-column terminal
prints no line wider than the terminal."""

import dataclasses
import fcntl
import gzip
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from synthetic import HALF_THE_WORK

from optbench.reporting.compact import benchmark_columns, compact_summary, fitted_table, note_kind, prose, shortened
from optbench.reporting.recommendation import recommendation_markdown
from optbench.reporting.report import CHANGE_HEADERS, changes_rows
from optbench.storage.record import Record, VerdictSummary
from optbench.verdict.regression import Decision
from optbench.verdict.significance import ComparisonSettings
from optbench.verdict.stats import Interval

RUN = Path(__file__).parent / "data" / "smoke-run-b78738c.jsonl.gz"
ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@pytest.fixture(scope="module")
def records():
    with gzip.open(RUN, "rt") as lines:
        return [Record.from_json(json.loads(line), f"{RUN}:{number}") for number, line in enumerate(lines, 1)]


def regressed(record):
    """`record` as a gate that found it 25% slower than its history would have written it."""
    decision = Decision("regression", 0.25, 0.05, 0.05, 2.0, 0.02, 1, 10)
    verdict = VerdictSummary("fail", ["speed: regression, " + decision.text()], [], [])
    return dataclasses.replace(record, gate=dataclasses.replace(record.gate, decision=decision), verdict=verdict)


@pytest.mark.parametrize("width", [80, 120, 200])
def test_no_line_of_a_real_runs_summary_is_wider_than_the_terminal(records, width):
    text = compact_summary(records, width)
    assert max(len(line) for line in text.splitlines()) <= width
    for record in records:  # every case is in it, its id whole or cut in the middle, its parameters kept
        label = record.case.rsplit("::", 1)[-1]
        assert label in text or shortened(label, width)[-8:] in text


@pytest.mark.parametrize("width", [80, 120])
def test_the_change_of_each_speedup_against_a_saved_run_fits_the_terminal(records, width):
    """--benchmark-compare's table of the real run against itself, one case 30% slower and one case missing."""
    slower = records[5]
    speedup = slower.speedup
    now = [
        dataclasses.replace(slower, speedup=Interval(speedup.point / 1.3, speedup.low / 1.3, speedup.high / 1.3))
        if record is slower else record
        for record in records
    ]  # fmt: skip
    saved = {record.node_id: record for record in records[1:]}
    rows = changes_rows(now, saved, ComparisonSettings(cases=len(records)))
    table = fitted_table(rows, CHANGE_HEADERS, width, squeeze=CHANGE_HEADERS.index("change"))
    assert max(len(line) for line in table.splitlines()) <= width, table
    changed = [line for line in table.splitlines() if "  -23.1%  " in line]
    assert len(changed) == 1 and changed[0].rstrip().endswith("yes"), table
    assert "not in the saved run" in table


@pytest.mark.parametrize("width", [80, 120])
def test_a_regression_is_on_the_first_line_under_the_header(records, width):
    planted = [*records[:40], regressed(records[40]), *records[41:]]
    lines = compact_summary(planted, width).splitlines()
    label = records[40].case.rsplit("::", 1)[-1]
    first = lines[3] if width == 80 else lines[2]  # 80 columns: each case's id on a line above its figures
    assert first.startswith(shortened(label, width)[:10]), lines[:4]
    figures = lines[4] if width == 80 else lines[2]
    assert "2.00x -20.0%" in figures and "fail 1" in figures
    assert any(line.startswith("1. speed: regression, +25.0% slower than its history's 2.00x") for line in lines)


def test_each_note_is_said_once_with_the_cases_it_concerns(records):
    text = compact_summary(records, 120)
    # Every case of this run had no history: said once, not once per case.
    assert text.count("no history on this machine") == 1
    assert "Every case: no history on this machine: speed reported, not gated." in text
    busy = [r for r in records if any(n.startswith("machine busy") for n in r.verdict.notes)]
    assert len(busy) > 1 and text.count("machine busy") == 1
    footnote = text[text.index("machine busy") :]
    assert all(record.case.rsplit("::", 1)[-1] in footnote.replace("\n    ", " ") for record in busy)


def test_a_long_id_is_cut_in_the_middle_and_keeps_its_parameters():
    case = "test_dataloader_workers[workers+persistent+prefetch:4-jpeg-mlp]"
    assert shortened(case, 40) == "test_dataloader...t+prefetch:4-jpeg-mlp]"
    assert len(shortened(case, 40)) == 40 and shortened(case, 80) == case
    assert note_kind("interval +-3.1% misses its target +-3% after 24 rounds") == "interval"
    assert note_kind("machine busy: load 2.1 on 2 CPUs, timings perturbed") == "machine busy"


def test_pytest_benchmarks_table_keeps_the_columns_that_fit():
    names = ["test_dataloader_workers[workers+persistent+prefetch:4-jpeg-mlp]", "test_sdpa[long-fp32-auto]"]
    assert benchmark_columns(names, 80) == ["median"]
    assert benchmark_columns(names, 120) == ["median", "iqr"]
    assert benchmark_columns(["test_a"], 120)[:4] == ["median", "iqr", "min", "max"]


LONG_NAMED = """

def test_a_case_whose_name_and_parameters_run_well_past_an_eighty_column_terminal(optbench):
    test_half_the_work(optbench)
"""


def in_terminal(command, columns, cwd):
    """`command`'s output in a pseudo-terminal `columns` wide, as a terminal (or tmux) shows pytest."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    environment = {name: value for name, value in os.environ.items() if name not in ("COLUMNS", "LINES")}
    process = subprocess.Popen(command, cwd=cwd, stdin=follower, stdout=follower, stderr=follower, env=environment)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's last writer has gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=600)
    os.close(leader)
    return ESCAPES.sub("", b"".join(chunks).decode(errors="replace")).replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 120])
def test_a_run_in_a_terminal_prints_no_line_wider_than_it(pytester, columns):
    pytester.makeconftest('pytest_plugins = ["optbench.plugin"]\n')
    pytester.makepyfile(test_synthetic=HALF_THE_WORK + LONG_NAMED)
    command = [sys.executable, "-m", "pytest", "--case-budget", "1", "--block-target", "0.01", "-p", "no:cacheprovider"]
    output = in_terminal([*command, "--progress", "off"], columns, pytester.path)
    assert "2 passed" in output, output[-2000:]
    summary = output[output.index("optbench: profile") :]
    wide = [line for line in summary.split("\n") if len(line.rstrip("\r")) > columns]
    assert not wide, summary


def test_the_recommendation_in_a_terminal_keeps_its_prose_and_drops_its_tables(records):
    text = prose(recommendation_markdown(records), 80)
    assert max(len(line) for line in text.splitlines()) <= 80 and "|" not in text
    assert "Recommended here:" in text and "### Best measured stack" in text
    assert "### Per technique" not in text  # a heading over a table alone goes with it
