"""Live progress: the running case's phase on a terminal (redrawn in place, never left in pytest's output), a line
per phase in logs once a case runs long, and a case that hangs in its warm-up showing that phase throughout."""

import re
from types import SimpleNamespace

import pytest

from optbench.profiles import PROFILES
from optbench.reporting.progress import LINE_AFTER_S, Progress, WorkerPhase, at_most_every, phase_kind, progress_mode

CONFTEST = 'pytest_plugins = ["optbench.plugin"]\n'
# The optimized side sleeps 3 s once, at its fifth call: in the warm-up, after the first calls.
HANGS_IN_WARM_UP = """
import time
import torch
from optbench import Case, Exact

calls = []


def one():
    return torch.ones(1)


def optimized():
    calls.append(1)
    if len(calls) == 5:
        time.sleep(3)
    return one()


def test_hangs(optbench):
    optbench.run(Case(reference=one, optimized=optimized, accuracy=Exact(), floor=0.1))


def test_quick(optbench):
    optbench.run(Case(reference=one, optimized=one, accuracy=Exact(), floor=0.1))
"""
FAST = ("--case-budget", "0.5", "--block-target", "0.001", "-p", "no:cacheprovider")
STATUS = re.compile(r"\x1b\[K(?: ([^\x1b]*)\x1b\[\d+D)?")
"""What the status line writes: clear to the end of the line, then the status and the cursor moved back."""


class Lines:
    """A terminal reporter's write_line, kept."""

    def __init__(self):
        self.lines = []

    def write_line(self, line):
        self.lines.append(line)


def log_progress(clock, worker_phases=None, workers=1):
    reporter = Lines()
    plugins = {"terminalreporter": reporter, "capturemanager": None}
    config = SimpleNamespace(pluginmanager=SimpleNamespace(getplugin=plugins.get))
    progress = Progress(
        config, "lines", per_case_s=40, cases=3, workers=workers, clock=lambda: clock[0], worker_phases=worker_phases
    )
    return progress, reporter


def test_in_a_log_a_case_past_30_s_gets_one_line_per_phase():
    clock = [0.0]
    progress, reporter = log_progress(clock)
    progress.start("bench.py::test_long")
    progress.show("warm-up")
    assert reporter.lines == []  # a short case writes nothing
    clock[0] = LINE_AFTER_S + 1
    progress.show("warm-up")
    for done in range(3):
        progress.show(f"timed rounds {done} of 24")
    progress.show("accuracy")
    assert reporter.lines == [
        "optbench: test_long: warm-up, 31 s; run ~89 s left",
        "optbench: test_long: timed rounds 0 of 24, 31 s; run ~89 s left",
        "optbench: test_long: accuracy, 31 s; run ~89 s left",
    ]


def test_an_xdist_controller_logs_each_workers_case_from_the_phase_it_left(tmp_path):
    clock = [0.0]
    progress, reporter = log_progress(clock, worker_phases=tmp_path)
    progress.start("bench.py::test_a")
    progress.start("bench.py::test_b")
    WorkerPhase(tmp_path, "gw0", "bench.py::test_a")("warm-up")
    WorkerPhase(tmp_path, "gw1", "bench.py::test_b")("accuracy")
    progress.tick()
    assert reporter.lines == []
    clock[0] = LINE_AFTER_S + 1
    progress.tick()
    progress.tick()  # nothing new told
    WorkerPhase(tmp_path, "gw0", "bench.py::test_a")("timed rounds 3 of 24")
    progress.tick()
    both = "test_a: {}, 31 s | test_b: accuracy, 31 s; run ~58 s left"
    assert reporter.lines == [f"optbench: {both.format('warm-up')}"] * 2 + [
        f"optbench: {both.format('timed rounds 3 of 24')}"
    ]
    # A worker's file names its case: once that case has finished, what it said is not another case's phase.
    progress.finish("bench.py::test_a")
    progress.start("bench.py::test_c")
    assert progress.status().startswith("test_b: accuracy, 31 s | test_c: 0 s;")


def test_what_is_left_is_the_unfinished_cases_at_the_per_case_estimate():
    clock = [0.0]
    progress, _ = log_progress(clock)
    progress.start("a")
    clock[0] = 10
    assert progress.left_s() == 3 * 40 - 10
    progress.finish("a")
    assert progress.left_s() == 2 * (10 + 40) / 2  # the finished case's 10 s and the estimate, averaged
    assert phase_kind("timed rounds 12 of 24") == "timed rounds"


def test_cases_that_skip_at_once_bring_the_estimate_down_to_what_cases_really_take():
    clock = [0.0]
    reporter = Lines()
    config = SimpleNamespace(pluginmanager=SimpleNamespace(getplugin={"terminalreporter": reporter}.get))
    progress = Progress(config, "lines", per_case_s=30, cases=100, clock=lambda: clock[0])
    for case in range(60):  # a CPU catalogue: every third case skips, the others take 12 s
        progress.start(str(case))
        clock[0] += 0 if case % 3 == 0 else 12
        progress.finish(str(case))
    case_s = (40 * 12 + 30) / 61
    assert progress.left_s() == pytest.approx(40 * case_s)
    assert abs(progress.left_s() - 40 * 8) < 0.1 * 40 * 8  # the true rest: 40 cases at 8 s on average


def test_under_xdist_what_is_left_is_shared_among_the_workers(tmp_path):
    clock = [0.0]
    progress, _ = log_progress(clock, worker_phases=tmp_path, workers=2)
    progress.start("a")
    progress.start("b")
    clock[0] = 10
    assert progress.left_s() == (3 * 40 - 2 * 10) / 2
    progress.finish("a")
    assert progress.status() == "b: 10 s; run ~20 s left"  # (2 cases at (10 + 40) / 2 s, less b's 10 s) / 2


@pytest.mark.parametrize(
    ("requested", "isatty", "worker", "mode"),
    [
        ("auto", True, False, "tty"),
        ("auto", False, False, "lines"),
        ("tty", False, True, "off"),
        ("off", True, False, "off"),
    ],
)
def test_the_mode_follows_the_terminal_and_xdist_workers_write_none(requested, isatty, worker, mode):
    assert progress_mode(requested, isatty, worker) == mode


@pytest.fixture
def project(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_hangs=HANGS_IN_WARM_UP)
    return pytester


def test_a_case_that_hangs_in_its_warm_up_shows_that_phase_while_it_hangs(project):
    result = project.runpytest_subprocess("--progress", "tty", *FAST)
    result.assert_outcomes(passed=2)
    statuses = [status for status in STATUS.findall(result.stdout.str()) if status.startswith("test_hangs:")]
    seconds = [int(s) for s in re.findall(r"test_hangs: warm-up, (\d+) s", " ".join(statuses))]
    # Redrawn about every second of the 3 s sleep, each time still saying warm-up.
    assert len(set(seconds)) >= 3, statuses


PLAIN_TESTS = """
def test_plain_one():
    pass


def test_plain_two():
    pass


def test_plain_three():
    pass
"""
LEFT = re.compile(r"run ~(\d+) s left")


def test_plain_tests_before_the_cases_leave_the_estimate_to_the_cases(pytester):
    """README's `pytest tests benchmarks`: more plain tests than cases run first, and none of them is a finished
    case, so the estimate is still the cases' own while they run."""
    pytester.makeconftest(CONFTEST)
    # The cases run after the plain tests (pytest's file order), without the hang.
    pytester.makepyfile(test_a_plain=PLAIN_TESTS, test_b_cases=HANGS_IN_WARM_UP.replace("len(calls) == 5", "False"))
    result = pytester.runpytest_subprocess("--profile", "smoke", "--progress", "tty", "--benchmark-disable", *FAST)
    result.assert_outcomes(passed=5)
    statuses = [status for status in STATUS.findall(result.stdout.str()) if status]
    # What is left as each case starts, none shown for a plain test: both cases at the profile's per-case
    # estimate, then the second at the mean of that estimate and the first case's own time.
    per_case_s = PROFILES["smoke"].with_overrides(case_budget_s=float(FAST[1])).case_estimate_s
    left = {}
    for status in statuses:
        left.setdefault(status.split(":")[0], int(LEFT.search(status)[1]))
    first_case_s = int(re.search(r"(\d+) s;", [s for s in statuses if s.startswith("test_hangs")][-1])[1])
    assert left == {
        "test_hangs": pytest.approx(2 * per_case_s, abs=1.5),
        "test_quick": pytest.approx((first_case_s + per_case_s) / 2, abs=1.5),
    }


def _shape(output):
    lines = [line for line in output.splitlines() if line.strip() and "optbench:" not in line]
    # pytest centres its rule lines on the width of their text, so a time with one more digit takes one "=" less.
    numbered = (re.sub(r"[\d.]+", "#", line) for line in lines if "tmp" not in line and "seconds" not in line)
    return [re.sub(r"={2,}", "==", line) for line in numbered]


def test_the_timed_rounds_are_told_at_most_once_a_second_and_a_new_phase_at_once():
    clock, told = [0.0], []
    report = at_most_every(1.0, told.append, clock=lambda: clock[0])
    for done in range(8):  # eight rounds in 0.875 s
        report(f"timed rounds {done} of 24")
        clock[0] += 0.125
    report("timed rounds 8 of 24")
    report("accuracy")
    assert told == ["timed rounds 0 of 24", "timed rounds 8 of 24", "accuracy"]


def test_under_xdist_the_controller_draws_its_workers_phases_and_leaves_pytest_s_output_as_it_was(pytester):
    """One pair of `-n 2` runs, plain tests beside two cases, one of which sleeps 3 s in its first call (untimed
    under xdist on a CPU, the first call is the one phase every case has).

    The controller hears node ids only: the harness's own 758 tests under `-n 2` once read "estimated 183 min for
    758 cases", none of them a case. While the worker sleeps the controller redraws its phase about every second;
    and what pytest wrote is the same as with the status off, timings aside."""
    pytester.makeconftest(CONFTEST)
    hangs_first = HANGS_IN_WARM_UP.replace("len(calls) == 5", "len(calls) == 1")
    pytester.makepyfile(test_a_plain=PLAIN_TESTS, test_b_cases=hangs_first)
    plain = pytester.runpytest_subprocess("-n", "2", "--profile", "smoke", "--progress", "off", *FAST)
    shown = pytester.runpytest_subprocess("-n", "2", "--profile", "smoke", "--progress", "tty", *FAST)
    shown.assert_outcomes(passed=5)
    shown.stdout.fnmatch_lines(["optbench: estimated * for 2 cases on 2 worker(s) *"])
    drawn = STATUS.findall(shown.stdout.str())
    seconds = re.findall(r"test_hangs: first calls \(compilation\), (\d+) s", " ".join(drawn))
    assert len(set(seconds)) >= 3, drawn
    cleaned = STATUS.sub("", shown.stdout.str())
    assert "run ~" not in cleaned
    assert _shape(cleaned) == _shape(plain.stdout.str())
