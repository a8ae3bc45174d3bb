"""Whether a test left processes or a process group behind."""

import multiprocessing
import os
from pathlib import Path

import torch.distributed as dist


def child_pids() -> set[int]:
    """This process's children, zombies included (they are not reaped yet), except multiprocessing's resource
    tracker: the first spawned process starts it, and it lives as long as this process."""
    me = str(os.getpid())
    children = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited while we looked
            continue
        if fields[1] == me and b"resource_tracker" not in (stat.parent / "cmdline").read_bytes():
            children.add(int(stat.parent.name))
    return children


def assert_cleaned_up(children_before: set[int]) -> None:
    """No child process but those there before (an earlier test's DataLoader workers live until collected) and no
    process group."""
    multiprocessing.active_children()  # reaps children that have ended
    assert child_pids() <= children_before
    assert not dist.is_initialized()
