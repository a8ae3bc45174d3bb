"""The A/A check: two invocations' intervals of each case, compared at the nominal 5% and by the gate."""

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from optbench.__main__ import main
from optbench.running.processes import across_processes
from optbench.studies.aa import AaCheck, CaseLevels, aa_markdown, case_levels, difference
from optbench.verdict.stats import Interval
from tests.records import make_record


def test_the_difference_is_in_standard_errors_of_both_intervals():
    first, second = Interval(1.0, 0.98, 1.0204), Interval(1.1, 1.078, 1.1224)
    error = math.hypot(first.standard_error, second.standard_error)
    assert difference(first, second).statistic == pytest.approx(math.log(1.1) / error)
    assert difference(second, first).statistic == pytest.approx(-math.log(1.1) / error)
    assert difference(first, second).degrees_of_freedom == math.inf
    assert difference(Interval(1.2, 1.2, 1.2), Interval(1.2, 1.2, 1.2)).statistic == 0.0
    assert difference(Interval(1.2, 1.2, 1.2), Interval(1.3, 1.3, 1.3)).statistic == math.inf


def test_intervals_across_few_processes_are_compared_on_welch_s_degrees_of_freedom():
    two = Interval(1.0, 0.9, 1.1, degrees_of_freedom=2.0)
    # Equal errors on 2 degrees of freedom each: Satterthwaite gives 4; with one normal interval, 2 * 4 = 8.
    assert difference(two, replace(two, point=1.05)).degrees_of_freedom == pytest.approx(4.0)
    normal = Interval(1.0, math.exp(-1.959964 * two.standard_error), math.exp(1.959964 * two.standard_error))
    assert difference(two, normal).degrees_of_freedom == pytest.approx(8.0)


def test_two_runs_of_three_processes_differ_for_one_case_in_twenty_as_documented():
    """A/A by simulation: each run's interval across three processes (tau 3%, rounds 1%); Welch keeps the nominal
    5% (3.7% measured: Satterthwaite is conservative here), where z would call 13% of the pairs different."""
    rng = np.random.default_rng(0)

    def run():
        logs = 0.3 + rng.normal(0.0, 0.03, 3) + rng.normal(0.0, 0.01, 3)
        return across_processes([Interval(math.exp(y), math.exp(y - 0.0196), math.exp(y + 0.0196)) for y in logs])

    pairs = [difference(run().speedup, run().speedup) for _ in range(3000)]
    assert 0.025 <= np.mean([pair.significant for pair in pairs]) <= 0.065
    assert np.mean([abs(pair.statistic) > 1.959964 for pair in pairs]) > 0.1


def test_the_table_says_which_cases_differ_and_how_many_with_their_binomial_interval():
    steady = make_record("smoke:b.py::test_x[steady]", (1.50, 1.47, 1.53))
    moved = make_record("smoke:b.py::test_x[moved]", (1.00, 0.99, 1.01))
    untimed = make_record("smoke:b.py::test_x[untimed]", None)
    first = {r.case: r for r in (steady, moved, untimed)}
    second = {
        steady.case: replace(steady, speedup=Interval(1.52, 1.49, 1.55)),
        # 50% apart: z = ln 1.5 / hypot(0.0051, 0.0068) = 47.7, and past the gate's margin between two runs without
        # history (+-26-29% in the order table of docs/validation.md).
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
    """The command's wiring: each run a pytest process of its own (optbench.studies.order's, tested there) on the
    same node
    ids, with the options after --, recording into its own folder of --workdir."""
    runs = []

    def timed(root, nodes, results, options):
        runs.append((list(nodes), results.name, list(options)))
        return {"smoke:b.py::test_x[a]": make_record(speedup=(1.2, 1.1, 1.3))}

    monkeypatch.setattr(
        "optbench.studies.aa.collect", lambda root, tests, expression, options: [f"{tests}::{expression}"]
    )
    monkeypatch.setattr("optbench.studies.aa.timed_records", timed)
    output = tmp_path / "aa.md"
    arguments = ["aa", "--tests", "t.py", "-k", "x", "--workdir", str(tmp_path), "--output", str(output)]
    assert main([*arguments, "--", "--processes", "3"]) == 0
    assert runs == [(["t.py::x"], "first", ["--processes", "3"]), (["t.py::x"], "second", ["--processes", "3"])]
    assert "| test_x[a] | 1.20x [1.10, 1.30] | 1.20x [1.10, 1.30] | +0.0% | +0.0 | no | no |" in output.read_text()


def test_a_selection_timed_in_neither_run_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("optbench.studies.aa.collect", lambda root, tests, expression, options: ["t.py::x"])
    monkeypatch.setattr("optbench.studies.aa.timed_records", lambda root, nodes, results, options: {})
    assert main(["aa", "--output", str(tmp_path / "aa.md")]) == 2
    assert capsys.readouterr().err.strip() == "error: no case was timed in both runs; check the -k expression"
    assert not (tmp_path / "aa.md").exists()


def exact(*logs):
    return [Interval(math.exp(y), math.exp(y), math.exp(y)) for y in logs]


def test_the_levels_are_the_moment_estimates_of_the_module_docstring():
    found = case_levels(exact(0.0, 0.02, 0.04), exact(0.1, 0.12, 0.14))
    # Exact processes: nothing within; each run's three 0.02 apart; the runs 0.1 apart beyond what they explain.
    assert found.within == 0.0 and found.processes == 3
    assert found.between_processes == pytest.approx(0.02)
    assert found.between_runs == pytest.approx(math.sqrt(0.1**2 / 2 - 0.02**2 / 3))
    # Processes whose own rounds explain their spread: nothing left between them, nor between runs that agree.
    noisy = [Interval(math.exp(y), math.exp(y - 0.196), math.exp(y + 0.196)) for y in (0.0, 0.02, 0.04)]
    quiet = case_levels(noisy, noisy)
    assert quiet.within == pytest.approx(0.1, rel=1e-4) and quiet.between_processes == 0.0 and quiet.between_runs == 0.0


def test_the_half_width_with_k_processes_divides_the_rounds_and_pools_earlier_runs():
    case = CaseLevels(within=0.03, between_processes=0.02, between_runs=0.0, processes=3)
    # Six processes: each a sixth of the rounds, so the within part stays 0.03^2 / 3; t on 5, or 25 with 4 runs.
    spread = math.sqrt(0.02**2 / 6 + 0.03**2 / 3)
    assert case.half_width(6) == pytest.approx(math.expm1(stats.t.ppf(0.975, 5) * spread))
    assert case.half_width(6, 4) == pytest.approx(math.expm1(stats.t.ppf(0.975, 25) * spread))


def test_the_check_gives_the_levels_only_where_both_runs_had_several_processes():
    one = make_record("smoke:b.py::test_x[a]", (1.2, 1.1, 1.3))
    three = replace(one, processes=exact(0.1, 0.12, 0.14))
    assert "levels over" not in aa_markdown(AaCheck({one.case: one}, {one.case: three}, wall_s=60.0))
    table = aa_markdown(AaCheck({one.case: three}, {one.case: three}, wall_s=60.0))
    assert "levels over 1 cases (medians; optbench.studies.aa): within a process 0.0%, between processes 2.0%" in table
    assert "| 3 | " in table and "with 4 earlier runs" in table
