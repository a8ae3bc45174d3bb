"""Where a run or a command writes: each folder made and checked before anything is measured, never after."""

from __future__ import annotations

import os
from pathlib import Path


class OutputError(Exception):
    """An output folder that cannot be made or written; the message is one line naming the option and path."""


def writable_folder(path: Path, option: str) -> None:
    """Create `path` (a folder an output goes to) or raise OutputError."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"{option}: cannot create {path} ({error.strerror}); choose a writable path") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutputError(f"{option}: {path} is not writable; choose a writable path")
