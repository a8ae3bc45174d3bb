"""The A/A check: two invocations' intervals of each case, compared at the nominal 5% and by the gate."""

import math
from dataclasses import replace

import pytest

from optbench.__main__ import main
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


def test_the_aa_command_runs_the_selection_twice_with_its_options_and_writes_the_table(tmp_path, monkeypatch):
    """The command's wiring: each run a pytest process of its own (optbench.order's, tested there) on the same node
    ids, with the options after --, recording into its own folder of --workdir."""
    runs = []

    def timed(root, nodes, results, options):
        runs.append((list(nodes), results.name, list(options)))
        return {"smoke:b.py::test_x[a]": make_record(speedup=(1.2, 1.1, 1.3))}

    monkeypatch.setattr("optbench.aa.collect", lambda root, tests, expression, options: [f"{tests}::{expression}"])
    monkeypatch.setattr("optbench.aa.timed_records", timed)
    output = tmp_path / "aa.md"
    arguments = ["aa", "--tests", "t.py", "-k", "x", "--workdir", str(tmp_path), "--output", str(output)]
    assert main([*arguments, "--", "--processes", "3"]) == 0
    assert runs == [(["t.py::x"], "first", ["--processes", "3"]), (["t.py::x"], "second", ["--processes", "3"])]
    assert "| test_x[a] | 1.20x [1.10, 1.30] | 1.20x [1.10, 1.30] | +0.0% | +0.0 | no | no |" in output.read_text()


def test_a_selection_timed_in_neither_run_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("optbench.aa.collect", lambda root, tests, expression, options: ["t.py::x"])
    monkeypatch.setattr("optbench.aa.timed_records", lambda root, nodes, results, options: {})
    assert main(["aa", "--output", str(tmp_path / "aa.md")]) == 2
    assert capsys.readouterr().err.strip() == "error: no case was timed in both runs; check the -k expression"
    assert not (tmp_path / "aa.md").exists()
