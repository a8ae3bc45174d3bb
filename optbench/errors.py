"""Errors that modules on both sides of a dependency raise and catch; this module imports nothing of optbench.

`faults` explains a WorkerError that `remote` raises, and `remote` builds the
user's model through `own_model`, which words its errors with `first_lines`:
kept here, neither needs the other, and no import cycle runs through them.
"""

from __future__ import annotations


class WorkerError(Exception):
    """A worker process (optbench.running.remote) died, did not answer in time, or failed a request; the message is one
    line."""


def first_lines(error: BaseException, count: int = 3) -> str:
    """An error's first `count` non-blank lines joined into one, or its type's name."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return " | ".join(lines[:count]) or type(error).__name__
