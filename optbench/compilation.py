"""What torch.compile did during a call: graphs captured and graph breaks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .internals import compile_counts


@dataclass
class CompileActivity:
    graphs: int = 0
    graph_breaks: int = 0
    break_reasons: list[str] = field(default_factory=list)

    @property
    def compiled(self) -> bool:
        return self.graphs > 0


@contextmanager
def watch_compilation() -> Iterator[CompileActivity]:
    """Counts dynamo graphs and graph breaks that appear inside the block."""
    activity = CompileActivity()
    graphs_before, breaks_before = compile_counts()
    try:
        yield activity
    finally:
        graphs_after, breaks_after = compile_counts()
        activity.graphs = graphs_after - graphs_before
        new_breaks = {reason: n - breaks_before.get(reason, 0) for reason, n in breaks_after.items()}
        activity.break_reasons = [reason for reason, n in new_breaks.items() if n > 0]
        activity.graph_breaks = sum(n for n in new_breaks.values() if n > 0)
