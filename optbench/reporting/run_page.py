"""One page per run: `.optbench/report.html`, a static file a person can read offline.

Sections, each with one plot where it has figures:

- speedups: a forest plot, one row per case, worst first (as the terminal
  summary orders them): the speedup and its 95% interval coloured by verdict
  (fail red, inconclusive amber, pass green), the history's center (a grey
  diamond) and its between-run band, center * exp(+-1.96 tau), where the
  case has history, and the case's floor (a black bar). The x axis is
  logarithmic: 0.5x and 2x are as far from 1x.
- accuracy: each case's headline figure as the share of its limit used:
  value / limit where lower is better (0 when both are 0, as bitwise checks
  are), (1 - value) / (1 - limit) where higher is better (agreement, cosine),
  so 1 is the limit in both; red past it.
- peak memory of both sides, and the optimized side's first call where it
  compiled.
- the recommendation for this device, the environment, and every case's full
  row (the terminal's dropped columns).

The plots are matplotlib's SVG written into the page, as on the trend page
(`optbench.reporting.dashboard`); no script, nothing fetched when it is viewed. Each row
of the forest plot carries an id (`speedup-row-N-VERDICT`) so a test can find
which case is drawn where and in what colour.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..measuring.accuracy import Check
from ..storage.record import Record
from .compact import rank, shortened
from .recommendation import recommendation_markdown
from .report import HEADERS, case_label, summary_row

PAGE = "report.html"
COLOURS = {"fail": "#b00020", "inconclusive": "#e0a000", "pass": "#1a7f37"}
Z95 = 1.959964
LABEL_WIDTH = 60
SPEEDUP_TICKS = (0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20)
SHOWN_LIMIT_SHARE = 1.5
"""The accuracy plot's right edge, in shares of the limit: a figure far past its limit is drawn there."""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; max-width: 80rem; }
section { margin-top: 2rem; }
.counts span { margin-right: 1.5rem; }
.fail { color: #b00020; } .inconclusive { color: #a07000; } .pass { color: #1a7f37; }
table { border-collapse: collapse; font-size: 0.8rem; }
svg { max-width: 100%; height: auto; }
td, th { border: 1px solid #ccc; padding: 0.1rem 0.4rem; text-align: left; vertical-align: top; }
"""


def limit_share(check: Check) -> float:
    """How much of its limit a figure uses: 1 at the limit, above 1 failing (see the module docstring)."""
    if check.lower_is_better:
        if check.limit > 0:
            return check.value / check.limit
        return 0.0 if check.value <= check.limit else math.inf
    if check.limit < 1:
        return (1 - check.value) / (1 - check.limit)
    return 0.0 if check.value >= check.limit else math.inf


def _svg(figure: Any) -> str:
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    plt.close(figure)
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


def _pyplot() -> Any:
    import matplotlib  # the `report` extra, needed only by the commands that draw

    matplotlib.use("Agg")
    # Text as SVG text, not glyph outlines: a page of 70 cases is 10 times smaller, and its labels searchable.
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt

    return plt


def _rows_figure(rows: int) -> tuple[Any, Any]:
    figure, axes = _pyplot().subplots(figsize=(11, 0.9 + 0.26 * max(rows, 1)))
    axes.set_ylim(max(rows, 1) - 0.5, -0.5)  # the first row at the top; an empty plot keeps a row's height
    return figure, axes


def _labels(axes: Any, records: Sequence[Record]) -> None:
    axes.set_yticks(range(len(records)))
    axes.set_yticklabels([shortened(case_label(r.case), LABEL_WIDTH) for r in records], fontsize=7)


def forest_plot(records: Sequence[Record]) -> str:
    """Every case's speedup and interval against its history's band and its floor, worst first (SVG)."""
    figure, axes = _rows_figure(len(records))
    for row, record in enumerate(records):
        gate, speedup, status = record.gate, record.speedup, record.verdict.status
        decision = gate.decision if gate else None
        if decision is not None:
            spread = math.exp(Z95 * decision.between_run_spread)
            band = (decision.center / spread, decision.center * spread)
            axes.plot(band, (row, row), color="#bbbbbb", linewidth=6, solid_capstyle="butt", zorder=1)
            axes.plot(decision.center, row, marker="D", color="#666666", markersize=4, zorder=2)
        if gate is not None:
            axes.plot(gate.floor, row, marker="|", color="black", markersize=10, zorder=2)
        if speedup is not None:
            error = [[speedup.point - speedup.low], [speedup.high - speedup.point]]
            drawn = axes.errorbar(
                speedup.point, row, xerr=error, fmt="o", color=COLOURS.get(status, "black"), markersize=4, capsize=2
            )
            drawn.lines[0].set_gid(f"speedup-row-{row}-{status}")
    axes.axvline(1.0, color="#444444", linewidth=0.8, linestyle=":")
    axes.set_xscale("log")
    low, high = axes.get_xlim()
    axes.set_xticks([tick for tick in SPEEDUP_TICKS if low <= tick <= high])
    axes.set_xticks([], minor=True)
    axes.set_xticklabels([f"{tick:g}x" for tick in SPEEDUP_TICKS if low <= tick <= high])
    axes.tick_params(axis="x", top=True, labeltop=True)  # a long plot's scale where it starts, too
    axes.set_xlabel("speedup (optimized over reference, log scale); diamond and grey band: history; bar: floor")
    _labels(axes, records)
    axes.grid(axis="x", which="both", alpha=0.3)
    figure.tight_layout()
    return _svg(figure)


def accuracy_plot(records: Sequence[Record]) -> str:
    """Each case's headline accuracy figure as the share of its limit used (SVG)."""
    checked = [record for record in records if record.accuracy is not None]
    figure, axes = _rows_figure(len(checked))
    for row, record in enumerate(checked):
        assert record.accuracy is not None
        headline = record.accuracy.headline
        share = min(limit_share(headline), SHOWN_LIMIT_SHARE)
        colour = COLOURS["pass"] if headline.passed else COLOURS["fail"]
        axes.barh(row, share, color=colour, height=0.6)
        axes.annotate(
            f"{headline.metric} {headline.value:.3g} (limit {headline.limit:.3g})", (share, row),
            xytext=(3, 0), textcoords="offset points", va="center", fontsize=6,
        )  # fmt: skip
    axes.axvline(1.0, color=COLOURS["fail"], linewidth=1)
    axes.set_xlim(0, SHOWN_LIMIT_SHARE * 1.35)
    axes.set_xlabel("share of the accuracy limit used (1 = at the limit)")
    _labels(axes, checked)
    figure.tight_layout()
    return _svg(figure)


def resources_plot(records: Sequence[Record]) -> str:
    """Peak memory of both sides and the optimized side's compiling first call, per case (SVG)."""
    figure, (memory, compiled) = _pyplot().subplots(
        1, 2, figsize=(11, 0.9 + 0.26 * max(len(records), 1)), sharey=True, gridspec_kw={"width_ratios": [2, 1]}
    )
    mib = 2**20
    for row, record in enumerate(records):
        sides = record.memory
        if sides is not None and sides.reference_bytes is not None:
            memory.barh(row - 0.18, sides.reference_bytes / mib, height=0.34, color="#888888")
        if sides is not None and sides.optimized_bytes is not None:
            memory.barh(row + 0.18, sides.optimized_bytes / mib, height=0.34, color="#2060c0")
        if record.compile is not None:
            compiled.barh(row, record.compile.first_call_s, height=0.6, color="#7040a0")
    memory.set_ylim(len(records) - 0.5, -0.5)
    memory.set_xlabel("peak memory, MiB (grey: reference, blue: optimized)")
    compiled.set_xlabel("first call with compilation, s")
    _labels(memory, records)
    figure.tight_layout()
    return _svg(figure)


def markdown_html(markdown: str) -> str:
    """The recommendation's markdown (headings, paragraphs, pipe tables, `code`) as HTML."""
    parts: list[str] = []
    table: list[list[str]] = []

    def inline(text: str) -> str:
        return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text)).replace("&lt;br&gt;", "<br>")

    def close_table() -> None:
        if table:
            header, *body = table
            cells = "".join(f"<th>{inline(cell)}</th>" for cell in header)
            rows = "".join("<tr>" + "".join(f"<td>{inline(cell)}</td>" for cell in row) + "</tr>" for row in body)
            parts.append(f"<table><tr>{cells}</tr>{rows}</table>")
            table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            if not all(set(cell) <= {"-", " "} for cell in cells):
                table.append(cells)
            continue
        close_table()
        if heading := re.match(r"(#+) (.*)", line):
            level = min(len(heading.group(1)) + 1, 6)
            parts.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif line.strip():
            parts.append(f"<p>{inline(line)}</p>")
    close_table()
    return "".join(parts)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(header)}</th>" for header in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def run_page(records: Sequence[Record], environment: dict[str, str]) -> str:
    """The page's HTML for `records`, with `environment` (name -> value) under its own heading."""
    ordered = sorted(records, key=rank)
    counts = {status: sum(r.verdict.status == status for r in ordered) for status in COLOURS}
    first = ordered[0]
    counts_html = "".join(f'<span class="{status}">{count} {status}</span>' for status, count in counts.items())
    recommendation = recommendation_markdown(ordered)
    sections = [
        ("speedups", "Speedup against its history and floor", forest_plot(ordered)),
        ("accuracy", "Accuracy against its limit", accuracy_plot(ordered)),
        ("resources", "Peak memory and compile time", resources_plot(ordered)),
    ]
    plots = "".join(
        f'<section class="plot" id="{name}"><h2>{title}</h2>{svg}</section>' for name, title, svg in sections
    )
    advice = markdown_html(recommendation) if recommendation else "<p>No seed-004 case ran.</p>"
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>optbench run</title>'
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>optbench run: profile {html.escape(first.profile)} on {html.escape(first.device)}</h1>"
        f'<p class="counts">{len(ordered)} cases: {counts_html}</p>'
        f"{plots}"
        f'<section id="recommendation"><h2>What to use on this device</h2>{advice}</section>'
        f'<section id="environment"><h2>Environment</h2>{_table(("", ""), list(environment.items()))}</section>'
        f'<section id="cases"><h2>Every case</h2>{_table(HEADERS, [summary_row(r) for r in ordered])}</section>'
        "</body></html>\n"
    )


def write_run_page(records: Sequence[Record], path: Path, environment: dict[str, str]) -> Path:
    """Writes the run page for `records` to `path` (whole: a new file renamed over the old); returns `path`."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(run_page(records, environment))
    partial.replace(path)
    return path
