"""The suite's speedup held against torch.utils.benchmark.Timer."""

import statistics
import subprocess
import sys
from pathlib import Path

from optbench.agreement import Agreement, agreement_markdown, independent_ratios
from tests.records import make_record

ROOT = Path(__file__).resolve().parents[1]


def record(point, low, high, ratios):
    return make_record(speedup=(point, low, high), independent_ratios=ratios)


def test_the_table_says_inside_and_outside():
    inside = Agreement.from_record(record(1.2, 1.15, 1.25, [1.19, 1.22, 1.21]))
    outside = Agreement.from_record(record(0.92, 0.90, 0.93, [0.80, 0.77, 0.79]))
    assert inside.inside and abs(inside.gap) < 0.03
    assert not outside.inside and outside.gap < -0.1
    table = agreement_markdown([inside, outside])
    assert "| test_x[a] | 0.920x [0.900, 0.930] | 0.790x (0.770-0.800) | -14.1% | NO | NO |" in table
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


def test_the_independent_timer_sees_a_known_ratio():
    def work(n):
        return lambda: sum(range(n))

    ratios = independent_ratios(work(60_000), work(20_000), repetitions=3, min_run_time=0.2)
    # The agreement table reads the median of the pairs; one pair can meet a stall of this VM.
    assert len(ratios) == 3 and 2.0 < statistics.median(ratios) < 4.5


def test_agree_command_on_a_catalogue_case(tmp_path):
    """End to end on the catalogue: suite and Timer, each in its own fresh process, agree on compiled against eager
    ResNet18 (0.85x suite, 0.83x Timer on 2026-12-03, 2-core EPYC). Not the tiny MLP's autograd cost: at half a
    millisecond a call, its ratio moved between 1.10x and 1.37x inside one process within a minute here, whichever
    timer read it; a reading of 0.85x also rules out an inverted (1.18x) or an identical-sides (1.0x) measurement."""
    output = tmp_path / "agreement.md"
    command = [sys.executable, "-m", "optbench", "agree", "-k", "test_compile and default-resnet and not training"]
    command += ["--output", str(output), "--", "--case-budget", "2"]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert finished.returncode == 0, finished.stderr[-2000:]
    (row,) = [line for line in output.read_text().splitlines() if line.startswith("| test_compile")]
    gap = float(row.split("|")[4].strip().rstrip("%")) / 100
    assert abs(gap) < 0.10, row
