"""The A/A check: two invocations' intervals of each case, compared at the nominal 5% and by the gate."""

import math
from dataclasses import replace

import pytest
from synthetic import HALF_THE_WORK, run_study

from optbench.aa import AaCheck, aa_markdown, difference_z
from optbench.regression import within_run_error
from optbench.stats import Interval
from tests.records import make_record


def test_the_difference_is_in_standard_errors_of_both_intervals():
    first, second = Interval(1.0, 0.98, 1.0204), Interval(1.1, 1.078, 1.1224)
    error = math.hypot(within_run_error(first.low, first.high), within_run_error(second.low, second.high))
    assert difference_z(first, second) == pytest.approx(math.log(1.1) / error)
    assert difference_z(second, first) == pytest.approx(-math.log(1.1) / error)
    assert difference_z(Interval(1.2, 1.2, 1.2), Interval(1.2, 1.2, 1.2)) == 0.0
    assert difference_z(Interval(1.2, 1.2, 1.2), Interval(1.3, 1.3, 1.3)) == math.inf


def test_the_table_says_which_cases_differ_and_how_many_with_their_binomial_interval():
    steady = make_record("smoke:b.py::test_x[steady]", (1.50, 1.47, 1.53))
    moved = make_record("smoke:b.py::test_x[moved]", (1.00, 0.99, 1.01))
    untimed = make_record("smoke:b.py::test_x[untimed]", None)
    first = {r.case: r for r in (steady, moved, untimed)}
    second = {
        steady.case: replace(steady, speedup=Interval(1.52, 1.49, 1.55)),
        # 50% apart: z = ln 1.5 / hypot(0.0051, 0.0068) = 47.7, and past the gate's margin between two runs without
        # history (+-26-29% in README's order table).
        moved.case: replace(moved, speedup=Interval(1.50, 1.48, 1.52), processes=[Interval(1.5, 1.4, 1.6)] * 3),
    }
    table = aa_markdown(AaCheck(first, second, wall_s=120.0))
    lines = table.splitlines()
    assert lines[2] == "| test_x[steady] | 1.50x [1.47, 1.53] | 1.52x [1.49, 1.55] | +1.3% | +0.9 | no | no |"
    assert lines[3] == "| test_x[moved] | 1.00x [0.99, 1.01] | 1.50x [1.48, 1.52] | +50.0% | +47.7 | YES | YES |"
    assert "untimed" not in table
    assert "intervals that differ at the nominal 5%: 1/2 (50%, 95% CI 1%-99%)" in table
    assert "the gate calls a change: 1/2" in table
    assert "processes per case: 1, 3; 2 min" in table


def test_the_aa_command_runs_the_cases_twice_in_separate_processes(pytester):
    pytester.makeconftest('pytest_plugins = ["optbench.plugin"]\n')
    pytester.makepyfile(test_synthetic=HALF_THE_WORK)
    study = ("aa", "--tests", "test_synthetic.py", "--workdir", "work")
    # Its wiring is the subject, not isolation: each run measures in its own pytest process (--isolation none).
    fast = ("--", "--case-budget", "0.3", "--block-target", "0.01", "--min-rounds", "4", "--isolation", "none")
    finished = run_study(pytester.path, *study, *fast)
    assert finished.returncode == 0, finished.stderr[-2000:]
    (row,) = [line for line in (pytester.path / "aa.md").read_text().splitlines() if "test_half_the_work" in line]
    assert row.count("x [") == 2, row
    assert [p.name for p in sorted((pytester.path / "work").iterdir())] == ["first", "second"]
    nothing = run_study(pytester.path, *study, "-k", "no_such_case")
    assert nothing.returncode == 2 and "nothing collected" in nothing.stderr
