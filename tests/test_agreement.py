"""The suite's speedup held against torch.utils.benchmark.Timer."""

import gc
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from optbench.storage.record import read_records
from optbench.studies.agreement import Agreement, agreement_markdown, independent_ratios
from tests.records import make_record
from tests.synthetic import HALF_THE_WORK

ROOT = Path(__file__).resolve().parents[1]


def record(point, low, high, ratios):
    return make_record(speedup=(point, low, high), independent_ratios=ratios)


def test_the_table_says_inside_and_outside():
    inside = Agreement.from_record(record(1.2, 1.15, 1.25, [1.19, 1.22, 1.21]))
    outside = Agreement.from_record(record(0.92, 0.90, 0.93, [0.80, 0.77, 0.79]))
    assert inside.inside and abs(inside.gap) < 0.03
    assert not outside.inside and outside.gap < -0.1
    table = agreement_markdown([inside, outside])
    assert "| test_x[a] | 0.920x [0.900, 0.930] | 0.790x (0.780-0.795) | -14.1% | NO | NO |" in table
    assert table.endswith(
        "inside the suite's interval: 1/2; within 3% of its point: 1/2; either: 1/2 (target 90%); "
        "more than 5% off: test_x[a] (target none); target NOT met"
    )


def test_the_target_counts_a_close_median_outside_a_narrow_interval_as_agreeing():
    narrow = Agreement.from_record(record(1.00, 0.995, 1.005, [1.02, 1.025, 1.03]))
    assert not narrow.inside and narrow.agrees
    table = agreement_markdown([narrow] * 9 + [Agreement.from_record(record(1.0, 0.99, 1.01, [1.04] * 3))])
    assert table.endswith("either: 9/10 (target 90%); more than 5% off: none (target none); target met")


def test_untimed_records_are_left_out():
    assert Agreement.from_record(make_record(speedup=None)) is None
    assert Agreement.from_record(make_record(independent_ratios=None)) is None


@pytest.mark.timed
def test_the_independent_timer_sees_a_known_ratio():
    def work(n):
        return lambda: sum(range(n))

    ratios = independent_ratios(work(60_000), work(20_000), repetitions=3, min_run_time=0.2)
    # The agreement table reads the median of the pairs; one pair can meet a stall of this VM.
    assert len(ratios) == 3 and 2.0 < statistics.median(ratios) < 4.5


QUICK_INDEPENDENT_TIMER = """
import functools

import optbench.running.runner
from optbench.studies.agreement import independent_ratios

pytest_plugins = ["optbench.plugin"]
# Three pairs of 0.1 s blocks, not the five of 1 s a real case gets: enough to tell 3x from 1x or 1/3x. A conftest,
# so the fresh process the independent timer runs in is patched too.
optbench.running.runner.independent_ratios = functools.partial(independent_ratios, repetitions=3, min_run_time=0.1)
"""


@pytest.mark.timed
def test_the_suite_and_the_independent_timer_each_read_a_known_ratio_in_an_agree_run(pytester):
    """`--agree` on a case whose optimized side does a third of the reference's work: the suite's interval and
    the independent median each read about 3x. A timer that measures one side twice reads 1x and one that
    inverts the ratio 1/3x, which a catalogue case near 1x (compiled ResNet18's 0.89-1.05x) cannot tell apart."""
    pytester.makeconftest(QUICK_INDEPENDENT_TIMER)
    pytester.makepyfile(test_synthetic=HALF_THE_WORK)
    fast = ("--isolation", "none", "--case-budget", "1", "--block-target", "0.01", "--confirm", "0")
    result = pytester.runpytest_subprocess("--agree", *fast, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (record,) = read_records(pytester.path / ".optbench")
    agreement = Agreement.from_record(record)
    assert agreement is not None and len(agreement.independent) == 3
    assert 2.0 < agreement.suite.point < 4.5 and 2.0 < agreement.median < 4.5, agreement


AGREE_COMMAND = [sys.executable, "-m", "optbench", "agree", "-k", "test_compile and default-vit-b1 and not training"]
GAP_LIMIT = 0.10


def agree_row(output: Path) -> tuple[str, float]:
    """One `optbench agree` run of the case: its table row and the independent median's gap to the suite's point."""
    command = [*AGREE_COMMAND, "--output", str(output), "--", "--case-budget", "2"]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert finished.returncode == 0, finished.stderr[-2000:]
    (row,) = [line for line in output.read_text().splitlines() if line.startswith("| test_compile")]
    return row, float(row.split("|")[4].strip().rstrip("%")) / 100


@pytest.mark.timed
def test_agree_command_on_a_catalogue_case(tmp_path):
    """End to end on the catalogue: suite and Timer, each in its own fresh process, agree on compiled against eager
    ViT at one image per call. Far enough from 1x that a timer which inverts the ratio (0.8x) or times one side
    twice (1.0x) is off by 20% or more, in every pair of processes.

    Each fresh process draws its own speedup, so two processes' readings differ by that draw twice over. On the
    2-core EPYC family 25 model 1 (2026-12-07) this ViT read 1.22-1.31x in seven suite processes (four CI runs,
    three agree runs) and 1.16-1.31x in eight Timer processes (log sd about 2.5% and 4%): a gap over 10% in about
    3% of pairs, twice in a row in about 0.1%. ResNet18, this test's case until then, read 0.89-1.02x in the suite
    and 0.90-1.08x in six Timer processes (log sd about 6% each): over 10% in about a quarter of pairs, and a CI
    there failed with both pairs apart, by +12.1% and -11.8%. Near 1x it could tell neither wrong timer either."""
    rows = []
    for attempt in range(2):
        row, gap = agree_row(tmp_path / f"agreement-{attempt}.md")
        rows.append(row)
        if abs(gap) < GAP_LIMIT:
            return
    raise AssertionError("suite and independent timer apart by more than 10% in two pairs:\n" + "\n".join(rows))


@pytest.mark.parametrize("disable_gc", [False, True])
def test_the_independent_timer_times_with_the_garbage_collector_as_the_suite_does(disable_gc):
    """Timer, like timeit, switches gc off in its loop unless told otherwise; the suite times with gc on (pytest-
    benchmark's default), so a side that makes garbage would read faster under Timer alone."""
    seen = []

    def probe():
        seen.append(gc.isenabled())

    independent_ratios(probe, probe, repetitions=2, min_run_time=0.01, disable_gc=disable_gc)
    timed = seen[2:]  # after each side's first call, made outside Timer
    assert timed and set(timed) == {not disable_gc}
