"""What torch.compile did during a call: graphs captured and graph breaks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..internals import compile_counts, guard_failure_marks, guard_failures_since


@dataclass
class CompileActivity:
    graphs: int = 0
    graph_breaks: int = 0
    break_reasons: list[str] = field(default_factory=list)
    guard_failures: list[str] = field(default_factory=list)
    """Why cached graphs rejected a call in the block, one line each (`optbench.internals.guard_failures_since`)."""

    @property
    def compiled(self) -> bool:
        return self.graphs > 0


@contextmanager
def watch_compilation() -> Iterator[CompileActivity]:
    """Counts dynamo graphs and graph breaks that appear inside the block, and notes its guard failures."""
    activity = CompileActivity()
    graphs_before, breaks_before = compile_counts()
    marks = guard_failure_marks()
    try:
        yield activity
    finally:
        graphs_after, breaks_after = compile_counts()
        activity.guard_failures = guard_failures_since(marks)
        activity.graphs = graphs_after - graphs_before
        new_breaks = {reason: n - breaks_before.get(reason, 0) for reason, n in breaks_after.items()}
        activity.break_reasons = [reason for reason, n in new_breaks.items() if n > 0]
        activity.graph_breaks = sum(n for n in new_breaks.values() if n > 0)
