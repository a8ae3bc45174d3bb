"""Summaries built only from recorded cases: the terminal table and its markdown twin."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..storage.record import AccuracySummary, Gate, Memory, Record, TimeSummary, VerdictSummary
from ..verdict.significance import ComparisonSettings, compare_records
from ..verdict.stats import speedup_text

HEADERS = (
    "case",
    "reference",
    "optimized",
    "speedup [95% CI]",
    "history",
    "min detectable",
    "accuracy",
    "peak mem ref/opt",
    "compile",
    "verdict",
)


def case_label(case_id: str) -> str:
    """`smoke:benchmarks/test_x.py::test_x[a-b]` -> `test_x[a-b]`."""
    return case_id.rsplit("::", 1)[-1]


def _seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.2f} ms"
    return f"{value * 1e6:.1f} us"


def _mebibytes(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.1f}"


def _memory_text(memory: Memory | None) -> str:
    if memory is None:
        return "-"
    optimized = "n/a" if memory.optimized_note else _mebibytes(memory.optimized_bytes)
    return f"{_mebibytes(memory.reference_bytes)}/{optimized} MiB"


def _accuracy_text(accuracy: AccuracySummary | None) -> str:
    if accuracy is None:
        return "not checked"
    if not accuracy.reference_deterministic:
        return "reference not deterministic"
    headline = accuracy.headline
    sign = "<=" if headline.lower_is_better else ">="
    mark = "" if accuracy.passed else " FAIL"
    return f"{headline.metric} {headline.value:.3g} ({sign}{headline.limit:.3g}){mark}"


def _history_text(gate: Gate | None) -> str:
    if gate and gate.decision:
        decision = gate.decision
        return f"{decision.center:.2f}x ({decision.history} runs), now {decision.slowdown:+.1%} slower"
    return "no history" if gate else "-"


def _verdict_text(verdict: VerdictSummary) -> str:
    if verdict.failures:
        return "FAIL: " + "; ".join(verdict.failures)
    reasons = [*verdict.inconclusive, *verdict.notes]
    return verdict.status + (f" ({'; '.join(reasons)})" if reasons else "")


def _variant_text(name: str, times: TimeSummary | None) -> str:
    return f"{name} {_seconds(times.median)}" if times else name


def summary_row(record: Record) -> list[str]:
    timing = record.timing
    decision = record.gate.decision if record.gate else None
    compiled = record.compile
    return [
        case_label(record.case),
        _variant_text(record.variants.reference, timing.reference_s if timing else None),
        _variant_text(record.variants.optimized, timing.optimized_s if timing else None),
        speedup_text(record.speedup),
        _history_text(record.gate),
        f"{decision.minimum_detectable_slowdown:.0%} slower" if decision else "-",
        _accuracy_text(record.accuracy),
        _memory_text(record.memory),
        f"{compiled.first_call_s:.1f} s, {compiled.graph_breaks} breaks" if compiled else "-",
        _verdict_text(record.verdict),
    ]


def text_table(rows: Sequence[Sequence[str]], headers: Sequence[str] = HEADERS) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (headers, *rows)
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def markdown_table(rows: Sequence[Sequence[str]], headers: Sequence[str] = HEADERS) -> str:
    def line(cells: Iterable[str]) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    return "\n".join([line(headers), line("---" for _ in headers), *(line(row) for row in rows)])


def summary(records: Sequence[Record], markdown: bool = False) -> str:
    rows = [summary_row(record) for record in sorted(records, key=lambda r: r.case)]
    return markdown_table(rows) if markdown else text_table(rows)


CHANGE_HEADERS = ("case", "saved run", "this run", "change", "margin", "significant")


def changes_rows(records: Sequence[Record], saved: dict[str, Record], settings: ComparisonSettings) -> list[list[str]]:
    """Each case's speedup now vs in a saved run (`saved` by node id), with the gate's significance test: rows
    under CHANGE_HEADERS."""
    rows = []
    for record in sorted(records, key=lambda r: r.case):
        before = saved.get(record.node_id)
        change = compare_records(before, record, settings) if before else None
        if before is None or change is None:
            why = "not in the saved run" if before is None else "untimed in either run"
            rows.append([case_label(record.case), "-", "-", why, "-", "-"])
            continue
        environment = "" if before.environment_key == record.environment_key else " (OTHER ENVIRONMENT)"
        rows.append(
            [
                case_label(record.case),
                f"{change.before:.2f}x",
                f"{change.after:.2f}x",
                f"{change.relative:+.1%}{environment}",
                # The margin is symmetric in log space: a slowdown is significant from 1 - 1/(1 + margin).
                f"-{1 - 1 / (1 + change.margin):.1%}/+{change.margin:.1%}",
                "yes" if change.significant else "no",
            ]
        )
    return rows
