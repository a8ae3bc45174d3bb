"""A case's numbers do not depend on what ran before it: each case is measured in a process of its own.

The planted history is a real allocator state: a test that fixes glibc's mmap
threshold at 64 KiB (as a run of large frees moves it) makes every 1 MiB
allocation of a later case fresh pages and page faults. The case allocates a
1 MiB tensor per call and writes one float in each of its 256 pages, against
the same writes into a reused buffer: 1.34x-1.44x in six fresh processes with
the suite's fixed thresholds, 71x with the planted one (2-core Xeon family 6
model 207, medians of 15 loops of 2,000 calls per side in each process).

Why one float per page: filling all of the 1 MiB read 1.04x-1.52x from one
fresh process to the next on that Xeon (eight processes), wider than the gate's
between-run margin, so the three arrangements disagreed without any history
leaking between them (forward 1.07x against 1.45x, or alone 1.09x against
1.41x). The cost that moved was the fill of the newly allocated block, 33-44
us, while filling any of six reused buffers read within 1% of each other in
each process; its cause was not found. Touching a page costs the same page
fault as filling it, so the planted state still shows in full.
"""

import ctypes
import ctypes.util
import os
import statistics

import pytest

from optbench.running.isolation import IsolationError, Outcome, Zygote, preloaded_modules
from optbench.storage.record import read_records
from optbench.studies.order import check_order, order_markdown

CONFTEST = 'pytest_plugins = ["optbench.plugin"]\n'

STATEFUL = """
import ctypes

import torch
from optbench import Case, Exact

M_MMAP_THRESHOLD = -3
buffer = torch.empty(262144)
# One thread: a fill split over two OpenMP threads waits for a scheduler slice when the machine is busy.
torch.set_num_threads(1)


def test_a_moves_the_allocators_threshold():
    assert ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, 64 * 1024) == 1


def test_b_allocating_against_reusing(optbench):
    optbench.run(
        Case(
            reference=lambda: torch.empty(262144)[::1024].fill_(1.0),
            optimized=lambda: buffer[::1024].fill_(1.0),
            accuracy=Exact(),
            floor=0.1,
            names=("new 1 MiB tensor", "reused buffer"),
        )
    )
"""

FAST = ("--case-budget", "1", "--block-target", "0.01", "--confirm", "0", "-p", "no:cacheprovider")
CASE = "test_stateful.py::test_b_allocating_against_reusing"
FIRST = "test_stateful.py::test_a_moves_the_allocators_threshold"


def glibc() -> bool:
    return bool(ctypes.util.find_library("c")) and "jemalloc" not in os.environ.get("LD_PRELOAD", "")


pytestmark = pytest.mark.skipif(not glibc(), reason="the planted history is glibc malloc's mmap threshold")


@pytest.fixture
def stateful(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_stateful=STATEFUL)
    return pytester


def speedup_of(pytester, *arguments):
    results = pytester.path / f"results-{len(list(pytester.path.glob('results-*')))}"
    outcome = pytester.runpytest_subprocess(*arguments, "--results-dir", str(results), *FAST)
    assert outcome.ret == 0, outcome.stdout.str()[-3000:]
    (record,) = [record for record in read_records(results) if record.case.endswith(CASE)]
    return record


@pytest.mark.timed
def test_a_cases_speedup_is_the_same_alone_after_a_state_changing_test_and_in_reverse_order(stateful):
    """`python -m optbench order` on a case and a test that puts the allocator in another state: forward (the
    test first), reversed and alone read the same. In one process put in that state on purpose the suite sees
    it and the independent timer, in a fresh process of its own, does not: it agrees with the isolated runs."""
    check = check_order(stateful.path, stateful.path / "order", tests="test_stateful.py", options=FAST)
    assert list(check.forward) == list(check.reversed) == list(check.alone), check
    (case,) = check.forward
    # Alone, only the case ran: the test before it times nothing, and a run of it alone would have nothing to show.
    assert [path.name for path in (stateful.path / "order").glob("alone-*")] == ["alone-1"]
    isolated = check.alone[case].speedup
    in_one_process = speedup_of(stateful, FIRST, CASE, "--isolation", "none", "--agree")
    # Without isolation the planted state shows (the test can fail): allocating pays page faults on every call.
    assert in_one_process.speedup.point > 4 * isolated.point, (isolated, in_one_process.speedup)
    fresh = in_one_process.independent_ratios
    assert in_one_process.speedup.point > 4 * statistics.median(fresh)
    # Each fresh process draws its own speedup of this case, and the draws need not be near one another: five
    # read 0.87, 0.88, 1.35, 0.85 and 1.33 in one CI run (2-core Xeon, 2026-12-06) beside an isolated 1.36. The
    # isolated run is one such draw, so it must read as some fresh process does, far from the planted 4x.
    assert min(fresh) / 1.3 < isolated.point < 1.3 * max(fresh), (isolated, fresh)
    table = order_markdown(check)
    assert "within the gate's between-run margin in all three: 1/1" in table, table


def test_a_failure_and_a_skip_in_the_cases_own_process_are_the_tests_outcome(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_outcomes="""
import pytest
import torch
from optbench import Case, Exact


def test_wrong_numbers(optbench):
    optbench.run(Case(reference=lambda: torch.ones(3), optimized=lambda: torch.zeros(3), accuracy=Exact(), floor=0.1))


def test_skips_inside(optbench):
    pytest.importorskip("a_module_that_is_not_there", reason="needs a_module_that_is_not_there")
"""
    )
    result = pytester.runpytest_subprocess("-rs", *FAST)
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["*test_wrong_numbers: accuracy: max_abs_diff 1*", "*needs a_module_that_is_not_there*"]
    )


def test_a_crash_of_the_cases_process_fails_the_case_with_its_last_words(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_crash="""
import os
import sys
import torch
from optbench import Case, Exact


def crash():
    print("about to crash", file=sys.stderr, flush=True)
    os._exit(7)


def test_crashes(optbench):
    optbench.run(Case(reference=lambda: torch.ones(2), optimized=crash, accuracy=Exact(), floor=0.1))
"""
    )
    result = pytester.runpytest_subprocess(*FAST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*own process exited with code 7 before it finished; its output ended:*about to crash*"]
    )
    (record,) = read_records(pytester.path / ".optbench")
    assert record.verdict.status == "fail" and "exited with code 7" in record.verdict.failures[0]


def test_the_zygote_preloads_the_runs_plugin_modules_and_what_they_name_but_no_conftest():
    import types

    plugins = [types.ModuleType(name) for name in ("optbench.plugin", "conftest", "_pytest.main", "fixtures.models")]
    plugins[1].ZYGOTE_PRELOAD = ("a_conftest_is_not_read",)
    plugins[3].ZYGOTE_PRELOAD = ("transformers", "torch")
    assert preloaded_modules([*plugins, object()]) == ["torch", "optbench.plugin", "fixtures.models", "transformers"]


def test_an_outcome_reads_a_skip_reason_and_a_failure_text():
    class Report:
        def __init__(self, outcome, longrepr, text=""):
            self.outcome, self.longrepr, self.longreprtext, self.when = outcome, longrepr, text, "call"
            self.skipped, self.failed = outcome == "skipped", outcome == "failed"

    assert Outcome.of(Report("skipped", ("f.py", 3, "Skipped: no GPU"))).text == "no GPU"
    assert Outcome.of(Report("failed", "boom", "boom")) == Outcome("failed", "call", "boom")


def test_a_zygote_that_cannot_import_the_suite_says_which_module_in_one_line(tmp_path):
    zygote = Zygote(tmp_path, ["torch", "a_module_that_is_not_there"], dict(os.environ), tmp_path / "scratch")
    with pytest.raises(IsolationError, match="importing a_module_that_is_not_there: ModuleNotFoundError"):
        zygote.run(["--version"], tmp_path, timeout_s=60)
    zygote.close()


def test_a_case_process_past_its_time_limit_is_killed_and_said_so(tmp_path):
    (tmp_path / "test_sleeps.py").write_text("import time\n\ndef test_sleeps():\n    time.sleep(60)\n")
    zygote = Zygote(tmp_path, ["torch"], dict(os.environ), tmp_path / "scratch")
    try:
        finished = zygote.run(["test_sleeps.py", "-p", "no:cacheprovider"], tmp_path, timeout_s=3)
    finally:
        zygote.close()
    assert finished.problem.startswith("the case's own process was killed after running 3 s before it finished")
    assert finished.wall_s < 30
