"""Other processes' CPU use while a case is timed: counted, and the case's own processes never counted as others."""

import dataclasses
import inspect
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from optbench.measuring.contention import BUSY_CPUS, Contention, CpuTimes

BUSY_LOOP = "import sys, time\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end:\n    pass\n"


def detached_busy_loop(seconds):
    """Starts a busy loop that is no descendant of this process (the shell that starts it exits at once and init
    adopts it); its pid."""
    code = BUSY_LOOP.replace("sys.argv[1]", str(seconds))
    started = subprocess.run(
        ["sh", "-c", f'{sys.executable} -c "{code}" >/dev/null 2>&1 & echo $!'], capture_output=True, text=True
    )
    return int(started.stdout)


def contention_while(seconds: float, busy) -> Contention:
    start = CpuTimes.now()
    busy()
    time.sleep(seconds)
    contention = Contention.between(start, CpuTimes.now())
    assert contention is not None
    return contention


def test_a_process_outside_the_case_is_others_use():
    pids = []
    try:
        contention = contention_while(1.5, lambda: pids.append(detached_busy_loop(5)))
    finally:
        os.kill(pids[0], signal.SIGKILL)
    assert contention.others_cpus > 0.6
    assert contention.note is not None and "other processes used" in contention.note


@pytest.mark.timed
def test_the_cases_own_children_live_and_finished_are_its_own_use():
    live = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, "5"])
    try:

        def busy():
            # One child that finishes (and is waited for) inside the window, one that runs throughout it.
            subprocess.run([sys.executable, "-c", BUSY_LOOP, "0.7"], check=True)

        contention = contention_while(1.0, busy)
    finally:
        live.kill()
        live.wait()
    assert contention.others_cpus < BUSY_CPUS, contention
    assert contention.note is None


def fake_proc(proc, steal=30):
    """A /proc with the machine's all-CPU line (`steal` ticks of steal) and three processes: this one, its child
    whose name holds spaces and a parenthesis, and a process of another tree."""
    proc.mkdir(exist_ok=True)
    (proc / "stat").write_text(f"cpu  100 5 20 9000 7 1 2 {steal} 0 0\ncpu0 50 2 10 4500 3 0 1 15 0 0\n")
    me = os.getpid()
    for pid, parent, name, utime in ((me, 1, "python", 40), (me + 1, me, "pt worker (1)", 7), (me + 2, 1, "sh", 3)):
        (proc / str(pid)).mkdir(exist_ok=True)
        fields = ["S", str(parent)] + ["0"] * 9 + [str(utime), "1", "2", "3"] + ["0"] * 30
        (proc / str(pid) / "stat").write_text(f"{pid} ({name}) " + " ".join(fields))
    return proc


def test_proc_files_are_read_field_by_field(tmp_path):
    """The all-CPU line's busy and steal ticks; this process's tree by parent links, a name with spaces and a
    parenthesis read right, another tree left out."""
    times = CpuTimes.now(fake_proc(tmp_path))
    assert times is not None
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert times.machine_busy_s == pytest.approx((100 + 5 + 20 + 1 + 2) * tick)
    assert times.steal_s == pytest.approx(30 * tick)
    assert times.own_s == pytest.approx(((40 + 6) + (7 + 6)) * tick)
    assert CpuTimes.now(tmp_path / "missing") is None


@pytest.mark.parametrize(("steal_cpus", "noted"), [(0.0, False), (0.1, False), (0.5, True)])
def test_the_hypervisors_steal_over_the_window_is_noted_from_a_quarter_of_a_cpu(tmp_path, steal_cpus, noted):
    """Two readings 2 s apart that differ only in steal: no process used a CPU, the hypervisor took `steal_cpus`."""
    window_s, ticks_per_s = 2.0, os.sysconf("SC_CLK_TCK")
    start = CpuTimes.now(fake_proc(tmp_path))
    end = CpuTimes.now(fake_proc(tmp_path, steal=30 + round(steal_cpus * window_s * ticks_per_s)))
    contention = Contention.between(start, dataclasses.replace(end, at_s=start.at_s + window_s))
    assert contention.steal_cpus == pytest.approx(steal_cpus)
    assert contention.others_cpus == 0.0
    told = f"machine busy: the hypervisor took {steal_cpus:.1f} CPUs (steal) while timed, timings perturbed"
    assert contention.note == (told if noted else None)


@pytest.mark.timed
def test_a_busy_machine_is_noted_in_the_record_and_the_cases_own_child_is_not(pytester):
    pytester.makeconftest('pytest_plugins = ["optbench.plugin"]\n')
    pytester.makepyfile(
        test_shared="""
import os, signal, subprocess, sys

import torch
from optbench import Case, Exact
from busy_helpers import BUSY_LOOP, detached_busy_loop


def measured_beside(start_busy_loop, optbench):
    \"\"\"The case, with a busy loop started by its first call: in the process that measures it, as a case's own
    DataLoader workers or DDP ranks are.\"\"\"
    pids = []

    def reference():
        if not pids:
            pids.append(start_busy_loop())
        return torch.tensor(float(sum(range(20_000))))

    try:
        optbench.run(Case(reference=reference, optimized=lambda: torch.tensor(float(sum(range(20_000)))),
                          accuracy=Exact(), floor=0.5))
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)


def test_with_its_own_child(optbench):
    measured_beside(lambda: subprocess.Popen([sys.executable, "-c", BUSY_LOOP, "60"]).pid, optbench)


def test_beside_another_process(optbench):
    measured_beside(lambda: detached_busy_loop(60), optbench)
"""
    )
    helpers = f"import subprocess, sys\n\nBUSY_LOOP = {BUSY_LOOP!r}\n\n\n{inspect.getsource(detached_busy_loop)}"
    (pytester.path / "busy_helpers.py").write_text(helpers)
    result = pytester.runpytest_subprocess("--case-budget", "1.5", "--block-target", "0.01", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    records = [json.loads(line) for line in (pytester.path / ".optbench" / "records.jsonl").read_text().splitlines()]
    notes = {record["case"].rsplit("::", 1)[-1]: record["verdict"]["notes"] for record in records}
    assert any(note.startswith("machine busy: other processes used") for note in notes["test_beside_another_process"])
    assert not any(note.startswith("machine busy") for note in notes["test_with_its_own_child"])
