"""The trend page: one static HTML file over a nightly history, readable from the file system.

Current news on top (confirmed change points in the newest nights, and the
cases whose newest night failed), then one inline-SVG plot per case: the
speedup and its interval over nights, change points as solid lines, torch
version changes as dashed ones, and a table of the numbers under it. No
server, no script, nothing fetched at view time: the plots are matplotlib's
SVG written into the page.
"""

from __future__ import annotations

import html
import io
from pathlib import Path

from ..storage.history import Night, series
from ..verdict.changes import RECENT_NIGHTS, Change, case_changes

PAGE = "index.html"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; max-width: 70rem; }
.news { border: 2px solid #b00020; padding: 0.5rem 1rem; }
.quiet { border: 1px solid #888; padding: 0.5rem 1rem; }
section.case { margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.85rem; }
td, th { border: 1px solid #ccc; padding: 0.1rem 0.4rem; text-align: right; }
"""


def _plot(nights: list[Night], changes: list[Change]) -> str:
    import matplotlib  # the `report` extra, needed only by the commands that draw

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 2.6))
    x = list(range(len(nights)))
    axes.fill_between(x, [n.low for n in nights], [n.high for n in nights], alpha=0.25, label="95% interval")
    axes.plot(x, [n.speedup for n in nights], marker=".", label="speedup")
    for change in changes:
        style = {"color": "#b00020" if change.confirmed else "#e0a000", "linewidth": 1.5}
        axes.axvline(change.index - 0.5, **style)
    for index in range(1, len(nights)):
        if nights[index].torch != nights[index - 1].torch:
            axes.axvline(index - 0.5, color="#555", linestyle="--", linewidth=1)
            axes.annotate(f"torch {nights[index].torch}", (index, axes.get_ylim()[1]), fontsize=7, va="top")
    axes.set_xlabel("night")
    axes.set_ylabel("speedup (x)")
    axes.legend(loc="lower left", fontsize=7)
    figure.tight_layout()
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    plt.close(figure)
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


def _table(nights: list[Night]) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(n.run)}</td><td>{n.speedup:.3f}</td><td>[{n.low:.3f}, {n.high:.3f}]</td>"
        f"<td>{html.escape(n.torch)}</td><td>{html.escape((n.commit or '')[:8])}</td><td>{n.verdict}</td></tr>"
        for n in reversed(nights)
    )
    header = "<tr><th>night</th><th>speedup</th><th>interval</th><th>torch</th><th>commit</th><th>verdict</th></tr>"
    return f"<details><summary>numbers ({len(nights)} nights)</summary><table>{header}{rows}</table></details>"


def write_dashboard(nights: list[Night], output: Path, recent: int = RECENT_NIGHTS) -> Path:
    """Writes `output/index.html` for `nights`; returns its path."""
    by_case = series(nights)
    changes = {case: case_changes(case, case_nights) for case, case_nights in by_case.items()}
    news = [
        f"<li>{html.escape(change.text())}</li>"
        for case_changes_found in changes.values()
        for change in case_changes_found
        if change.confirmed and change.nights_since <= recent
    ]
    news += [
        f"<li>{html.escape(case)}: newest night {html.escape(case_nights[-1].run)} failed its gate</li>"
        for case, case_nights in by_case.items()
        if case_nights[-1].verdict == "fail"
    ]
    top = (
        f'<div class="news"><h2>Regressions now</h2><ul>{"".join(news)}</ul></div>'
        if news
        else f'<div class="quiet"><h2>Regressions now</h2><p>none in the last {recent} nights</p></div>'
    )
    sections = "".join(
        f'<section class="case"><h3>{html.escape(case)}</h3>{_plot(case_nights, changes[case])}'
        f"{_table(case_nights)}</section>"
        for case, case_nights in sorted(by_case.items())
    )
    environments = ", ".join(sorted({n.environment_key for n in nights})) or "no nights"
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>optbench trends</title>'
        f"<style>{_STYLE}</style></head><body><h1>optbench trends: {html.escape(environments)}</h1>"
        f"<p>Solid red lines: confirmed change points; amber: watch items; dashed: torch version changes.</p>"
        f"{top}{sections}</body></html>\n"
    )
    output.mkdir(parents=True, exist_ok=True)
    path = output / PAGE
    path.write_text(page)
    return path
