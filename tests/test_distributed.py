import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from optbench.running.distributed import RankError, Ranks, world_size_misfit
from tests.processes import assert_cleaned_up, child_pids

IDENTIFY = 100
"""The command on which each rank reports (rank, pid, threads) to rank 0 instead of summing."""
FAILURE_TIMEOUT_S = 5.0


class Program:
    """run(k) sums (rank + 1) * k over the ranks; run(IDENTIFY) gathers every rank's (rank, pid, threads)."""

    def __init__(self, rank):
        self.rank = rank

    def run(self, command):
        if command == IDENTIFY:
            mine = torch.tensor([self.rank, os.getpid(), torch.get_num_threads()])
            every = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
            dist.all_gather(every, mine)
            return [tuple(row.tolist()) for row in every]
        total = torch.tensor([(self.rank + 1) * command])
        dist.all_reduce(total)
        return int(total)


class FailsOn(Program):
    """Program, except that `rank` meets `fault` on command 1 instead of taking part."""

    def __init__(self, rank, faulty_rank, fault):
        super().__init__(rank)
        self.faulty_rank = faulty_rank
        self.fault = fault

    def run(self, command):
        if command == 1 and self.rank == self.faulty_rank:
            self.fault()
        return super().run(command)


def raise_value_error():
    raise ValueError("cannot run command 1 here")


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def hang():
    time.sleep(1e6)


def test_two_real_ranks_sum_and_gather():
    children = child_pids()
    environment = dict(os.environ)
    with Ranks(Program, world_size=2) as ranks:
        assert [ranks.call(k) for k in (0, 1, 2, 5)] == [0, 3, 6, 15]
        identities = ranks.call(IDENTIFY)
        assert ranks.call(1) == 3
    assert [identity[0] for identity in identities] == [0, 1]
    assert identities[0][1] == os.getpid() and identities[1][1] != os.getpid()
    assert dict(os.environ) == environment
    assert_cleaned_up(children)


def test_a_peer_raising_in_run_is_reported_with_its_own_error():
    children = child_pids()
    with Ranks(lambda rank: FailsOn(rank, 1, raise_value_error), timeout_s=FAILURE_TIMEOUT_S) as ranks:
        assert ranks.call(2) == 6
        started = time.monotonic()
        with pytest.raises(RankError, match=r"^rank 1 failed during call\(1\): ValueError: cannot run command 1 here$"):
            ranks.call(1)
        assert time.monotonic() - started < FAILURE_TIMEOUT_S / 2  # rank 1's exit failed the collective at once
        with pytest.raises(RankError, match="unusable"):
            ranks.call(0)
    assert_cleaned_up(children)


def failing_build(rank):
    if rank == 1:
        raise OSError("no data on rank 1")
    return Program(rank)


def test_a_peer_raising_in_build_fails_the_start():
    children = child_pids()
    with (
        pytest.raises(RankError, match=r"^rank 1 failed during startup: OSError: no data on rank 1$"),
        Ranks(failing_build, timeout_s=FAILURE_TIMEOUT_S),
    ):
        pytest.fail("entered although rank 1 could not build its program")
    assert_cleaned_up(children)


@pytest.mark.parametrize(
    ("fault", "message", "seconds"),
    [
        (die, r"^rank 1 died during call\(1\) \(killed by SIGKILL\)$", (0, FAILURE_TIMEOUT_S / 2)),
        (hang, r"^rank 1 did not answer during call\(1\) within 5 s$", (FAILURE_TIMEOUT_S, FAILURE_TIMEOUT_S + 3)),
    ],
    ids=["killed", "hanging"],
)
def test_a_dead_or_hanging_peer_is_reported_and_its_ranks_torn_down_at_once(fault, message, seconds):
    children = child_pids()
    with Ranks(lambda rank: FailsOn(rank, 1, fault), timeout_s=FAILURE_TIMEOUT_S) as ranks:
        started = time.monotonic()
        with pytest.raises(RankError, match=message):
            ranks.call(1)
        assert seconds[0] <= time.monotonic() - started < seconds[1]
        started = time.monotonic()
    assert time.monotonic() - started < 3  # terminated, not waited for
    assert_cleaned_up(children)


def test_rank_0s_own_error_propagates_unchanged_and_the_peers_are_stopped_in_seconds():
    children = child_pids()
    started = time.monotonic()
    with (
        pytest.raises(ValueError, match=r"^cannot run command 1 here$") as raised,
        Ranks(lambda rank: FailsOn(rank, 0, raise_value_error), timeout_s=60) as ranks,
    ):
        ranks.call(1)
    assert type(raised.value) is ValueError and raised.value.__cause__ is None
    assert time.monotonic() - started < 10  # far less than the 60 s rank 1 would wait in its collective
    assert_cleaned_up(children)


def test_every_rank_runs_on_the_threads_asked_and_rank_0_gets_its_own_back():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with Ranks(Program, threads_per_rank=1) as ranks:
            assert torch.get_num_threads() == 1
            assert [identity[2] for identity in ranks.call(IDENTIFY)] == [1, 1]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


def test_cuda_ranks_are_refused_once_cuda_is_initialized(monkeypatch):
    children = child_pids()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RankError, match="before anything touches CUDA"), Ranks(Program, device_type="cuda"):
        pytest.fail("entered with CUDA initialized")
    assert_cleaned_up(children)


def test_world_size_misfits(monkeypatch):
    assert world_size_misfit("cpu", 1) is None
    assert "core each" in world_size_misfit("cpu", 10_000)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert world_size_misfit("cuda", 1) is None
    assert world_size_misfit("cuda", 2) == "2 ranks need a GPU each; 1 visible"
    assert "device type 'mps'" in world_size_misfit("mps", 1)
    monkeypatch.setattr(dist, "is_available", lambda: False)
    assert "without torch.distributed" in world_size_misfit("cpu", 1)


def test_a_second_group_after_the_first():
    for _ in range(2):
        with Ranks(Program) as ranks:
            assert ranks.call(1) == 3
    assert not dist.is_initialized()


KILLED_RANK_0 = """
import os, signal, sys, time
import torch, torch.distributed as dist
from optbench.running.distributed import Ranks

class Pids:
    def __init__(self, rank):
        pass

    def run(self, command):
        pids = [torch.zeros(1, dtype=torch.int64) for _ in range(2)]
        dist.all_gather(pids, torch.tensor([os.getpid()]))
        return int(pids[1])

with Ranks(Pids, timeout_s=60) as ranks:
    print(ranks.call(0), flush=True)
    if sys.argv[1] == "held":
        holder = os.fork()  # inherits rank 0's sockets: rank 1 sees no connection close
        if holder == 0:
            time.sleep(60)
            os._exit(0)
        print(holder, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def exited(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.mark.parametrize("sockets", ["closed", "held"])
def test_a_peer_does_not_outlive_a_killed_rank_0(sockets, tmp_path):
    """Closed: rank 1's broadcast fails on the closed connection. Held by a survivor: its watchdog ends it."""
    root = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-c", KILLED_RANK_0, sockets]
    environment = {**os.environ, "TMPDIR": str(tmp_path)}  # where the killed rank 0 leaves its store
    rank_0 = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=root, env=environment)
    holder = None
    try:
        peer = int(rank_0.stdout.readline())
        if sockets == "held":
            holder = int(rank_0.stdout.readline())
        rank_0.wait(60)
        deadline = time.monotonic() + 10  # much less than the 60 s timeout of rank 1's collectives
        while not exited(peer) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert exited(peer)
    finally:
        if holder is not None:
            os.kill(holder, signal.SIGKILL)
