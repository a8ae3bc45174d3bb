"""The run's summary as a terminal shows it: one short row per case, worst first, the notes as footnotes.

The full table (`optbench.reporting.report.summary`: both sides' times, the minimum
detectable slowdown, peak memory, compile time, every note in full) is
about 330 characters wide; in a terminal each of its rows wraps into three or
four lines. This one keeps what a reader looks for first:

    case                      speedup [95% CI]    vs history          accuracy  verdict
    test_compile[default-vit] 0.81x [0.80, 0.82]  1.02x, 20.6% slower  ok        fail [1]
    test_sdpa[long-fp32-auto] 1.93x [1.92, 1.94]  new                 ok        pass [2]

    [1] speed: regression, +20.6% slower than its history's 1.02x (...)
    [2] no history on this machine: speed reported, not gated: test_sdpa[long-fp32-auto]

Rows are sorted failures first (regressions by how much slower), then
inconclusive, then passes. A note shared by several cases is one footnote
listing them; notes of the same kind with different figures ("machine busy:
other processes used 0.6 of 2 CPUs ...") are one footnote with each case's
figure. Every line fits `width` (`fitted_table`, which also fits the change of
each speedup against a saved run): the case column gives way first, shortened
in the middle so that the parameters at its end stay, then the accuracy text.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..storage.record import Record
from .report import case_label, text_table

HEADERS = ("case", "speedup [95% CI]", "vs history", "accuracy", "verdict")
WIDTH = 120
"""The summary's width where the terminal's is unknown (a CI log) or narrower would waste a wide one."""
STACK_BELOW = 32
"""Fewer characters than this left for the case id (or its whole length, if shorter): the stacked layout."""
INDENT = 4
ELLIPSIS = "..."


def shortened(text: str, width: int) -> str:
    """`text` in at most `width` characters, cut in the middle: a case id's parameters are at its end."""
    if len(text) <= width:
        return text
    if width <= len(ELLIPSIS):
        return text[-width:]
    tail = (width - len(ELLIPSIS) + 1) * 3 // 5
    head = width - len(ELLIPSIS) - tail
    return text[:head] + ELLIPSIS + text[len(text) - tail :]


def rank(record: Record) -> tuple[int, float, str]:
    """Failures first (the most slowed first), then inconclusive, then passes; by case within each."""
    order = {"fail": 0, "inconclusive": 1}.get(record.verdict.status, 2)
    decision = record.gate.decision if record.gate else None
    return order, -(decision.slowdown if decision else 0.0), record.case


def history_cell(record: Record) -> str:
    """The history's center and this run's difference from it (`1.02x -20.6%`), `new` without history, `-` when
    the case was not gated."""
    if record.gate is None:
        return "-"
    decision = record.gate.decision
    if decision is None:
        return "new"
    return f"{decision.center:.2f}x {1 / (1 + decision.slowdown) - 1:+.1%}"


def accuracy_cell(record: Record) -> str:
    """`ok`, or the first failing check's figure against its limit."""
    accuracy = record.accuracy
    if accuracy is None:
        return "not checked"
    if not accuracy.reference_deterministic:
        return "reference varies"
    failing = [check for check in accuracy.checks if not check.passed]
    if not failing:
        return "ok"
    check = failing[0]
    return f"{check.metric} {check.value:.3g} {'>' if check.lower_is_better else '<'} {check.limit:.3g}"


def note_kind(note: str) -> str:
    """What a note is about, without its figures: the text before its first colon, digit or parenthesis
    (`interval +-3.1% misses ...` -> `interval`, `machine busy: load 2.1 ...` -> `machine busy`)."""
    return re.split(r"[:\d(]", note, maxsplit=1)[0].strip(" +-") or note


@dataclass
class Footnotes:
    """Notes numbered in the order rows meet them, one per kind (`note_kind`), each listing its cases; a note
    every case has is said once above them, unnumbered."""

    cases: Sequence[str]
    notes: Sequence[Sequence[str]]
    """Each case's notes, in the order of `cases`."""

    def __post_init__(self) -> None:
        shared = set.intersection(*(set(notes) for notes in self.notes)) if len(self.cases) > 1 else set()
        self.shared = [note for note in self.notes[0] if note in shared] if shared else []
        self.kinds: dict[str, list[tuple[str, str]]] = {}
        for case, notes in zip(self.cases, self.notes, strict=True):
            for note in notes:
                if note not in shared:
                    self.kinds.setdefault(note_kind(note), []).append((case, note))

    def marks(self, notes: Sequence[str]) -> str:
        """The numbers of the footnotes a case's `notes` are in, e.g. ` 1,3`."""
        kinds = list(self.kinds)
        numbers = sorted({kinds.index(note_kind(note)) + 1 for note in notes if note not in self.shared})
        return f" {','.join(map(str, numbers))}" if numbers else ""

    def lines(self, width: int) -> list[str]:
        lines = [line for note in self.shared for line in textwrap.wrap(f"Every case: {note}.", width)]
        for number, (kind, met) in enumerate(self.kinds.items(), start=1):
            if len({note for _, note in met}) == 1:
                text = f"{met[0][1]} ({_which(list(dict.fromkeys(case for case, _ in met)), self.cases)})"
            else:
                text = f"{kind}: " + "; ".join(f"{case} ({note.removeprefix(kind).strip(' :')})" for case, note in met)
            prefix = f"{number}. "
            lines += textwrap.wrap(text, width, initial_indent=prefix, subsequent_indent=" " * len(prefix))
        return lines


def _which(concerned: list[str], cases: Sequence[str]) -> str:
    """The cases a footnote concerns, or the few it does not when it concerns most of the run."""
    if len(concerned) == len(cases) and len(cases) > 1:
        return f"all {len(cases)} cases"
    others = [case for case in cases if case not in concerned]
    if len(concerned) > 3 * len(others) and len(cases) > 4:
        return f"all {len(cases)} cases but {', '.join(others)}"
    return ", ".join(concerned)


def compact_summary(records: Sequence[Record], width: int = WIDTH) -> str:
    """The run's records as lines no wider than `width`, worst first, with footnotes under them."""
    ordered = sorted(records, key=rank)
    cases = [case_label(record.case) for record in ordered]
    notes = [[*r.verdict.failures, *r.verdict.inconclusive, *r.verdict.notes] for r in ordered]
    footnotes = Footnotes(cases, notes)
    rows = [
        [
            case,
            record.speedup.text() if record.speedup else "not timed",
            history_cell(record),
            accuracy_cell(record),
            record.verdict.status + footnotes.marks(case_notes),
        ]
        for case, record, case_notes in zip(cases, ordered, notes, strict=True)
    ]
    legend = "vs history: its center speedup and this run's difference from it; numbers after a verdict: notes below"
    table = fitted_table(rows, HEADERS, width, squeeze=HEADERS.index("accuracy"))
    return "\n".join([table, *textwrap.wrap(legend, width), "", *footnotes.lines(width)]).rstrip()


def fitted_table(rows: Sequence[Sequence[str]], headers: Sequence[str], width: int, squeeze: int) -> str:
    """`rows` (a case id, then its figures) under `headers` in `width`: one line per case, the case id shortened
    in the middle where needed; where the id would keep fewer than STACK_BELOW characters, each case's id on a
    line of its own with its figures indented under it, the `squeeze` column's text shortened if they still do
    not fit."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    figures_width = sum(widths[1:]) + 2 * (len(headers) - 1)
    if width - figures_width >= min(widths[0], STACK_BELOW):
        case_width = width - figures_width
        return text_table([[shortened(row[0], case_width), *row[1:]] for row in rows], headers)
    # The figures' line: indented, without the case column and the two spaces after it.
    overflow = INDENT + figures_width - 2 - width
    squeezed_width = max(len(headers[squeeze]), widths[squeeze] - max(0, overflow))
    figures = [
        [shortened(cell, squeezed_width) if column == squeeze else cell for column, cell in enumerate(row)][1:]
        for row in rows
    ]
    table = text_table(figures, headers[1:]).splitlines()
    lines = [headers[0], " " * INDENT + table[0], " " * INDENT + table[1]]
    for row, figure_line in zip(rows, table[2:], strict=True):
        lines += [shortened(row[0], width), " " * INDENT + figure_line]
    return "\n".join(lines)


def summary_width(terminal: Any) -> int:
    """The terminal's width where pytest writes to one (wider or narrower than WIDTH), else WIDTH."""
    return terminal.config.get_terminal_writer().fullwidth if terminal.isatty else WIDTH


def prose(markdown: str, width: int) -> str:
    """`markdown` without its tables (and the headings right above one), each paragraph wrapped to `width`: what
    of it a terminal can show."""
    written = [line for line in markdown.splitlines() if line.strip()]
    over_a_table = {i for i, line in enumerate(written[:-1]) if line.startswith("#") and written[i + 1].startswith("|")}
    kept = [line for i, line in enumerate(written) if not line.startswith("|") and i not in over_a_table]
    return "\n\n".join(textwrap.fill(line, width) for line in kept)


BENCHMARK_COLUMNS = ("median", "iqr", "min", "max", "mean", "stddev", "rounds", "ops", "outliers", "iterations")
"""pytest-benchmark's columns, in the order they are kept when its table must fit a width."""
COMPARED_NAME = 18
"""What --benchmark-compare adds to a name in pytest-benchmark's table: ` (0001_<commit>)` or ` (NOW)`."""


def benchmark_columns(names: Sequence[str], width: int, compared: bool = False) -> list[str]:
    """pytest-benchmark's columns for a table of `names` that fits `width` (its default has all ten, about 130
    characters with a short name): its widths are 3 + the longest name, 12 per figure (16 for ops) and 10 more
    per time figure where a group has several benchmarks (the relative scale after each)."""
    scale = 0 if len(names) == 1 else 10
    column_width = {"rounds": 12, "outliers": 12, "iterations": 12, "ops": 16 + scale}
    used = 3 + max((len(name) for name in names), default=0) + (COMPARED_NAME if compared else 0)
    columns = []
    for column in BENCHMARK_COLUMNS:
        needed = column_width.get(column, 12 + scale)
        if used + needed > width and columns:
            break
        columns.append(column)
        used += needed
    return columns
