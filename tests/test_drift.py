"""Drift with time alone: a case's sessions of timed rounds, back to back in one process (optbench.studies.drift)."""

import math
from dataclasses import replace

import pytest
from records import make_record
from synthetic import HALF_THE_WORK

from optbench.__main__ import main
from optbench.studies.drift import Drift, drift_markdown
from optbench.verdict.stats import Interval


def sessions(*points, half_width=0.01):
    return tuple(Interval(p, p * (1 - half_width), p * (1 + half_width)) for p in points)


def test_sessions_further_apart_than_their_intervals_are_disjoint_and_have_a_spread_beyond_them():
    drifted = Drift("smoke:b::test_a", sessions(1.0, 1.1, 1.0, 1.1))
    steady = Drift("smoke:b::test_b", sessions(1.0, 1.005, 0.995, 1.0, half_width=0.03))
    assert drifted.disjoint and not steady.disjoint
    assert drifted.spread == pytest.approx(0.1)
    # ln 1.1 / 2 from the mean on every session: tau^2 = (4/3)(ln 1.1 / 2)^2 less the intervals' own share.
    assert 0.05 < drifted.tau < math.log(1.1) / 2 * math.sqrt(4 / 3)
    assert steady.tau == 0
    table = drift_markdown([drifted, steady])
    assert "disjoint: 1/2" in table and "1.100x [1.089, 1.111]" in table


def test_one_wide_session_does_not_hide_the_others_drift():
    wide = Interval(1.0, 0.75, 1.33)
    drift = Drift("smoke:b::test_a", (*sessions(1.0, 1.1, 1.0, 1.1), wide))
    assert drift.tau > 0.04


@pytest.mark.timed
def test_drift_command_times_each_case_in_sessions_in_its_own_process(pytester, monkeypatch):
    pytester.makeconftest('pytest_plugins = ["optbench.plugin"]\n')
    pytester.makepyfile(test_synthetic=HALF_THE_WORK)
    monkeypatch.chdir(pytester.path)
    output = pytester.path / "drift.md"
    options = ["--", "--case-budget", "1", "--block-target", "0.01"]
    assert main(["drift", "--tests", "test_synthetic.py", "--sessions", "3", "--output", str(output), *options]) == 0
    (row,) = [line for line in output.read_text().splitlines() if line.startswith("| test_half_the_work")]
    points = [float(cell.split("x")[0]) for cell in row.split("|")[2].split(";")]
    assert len(points) == 3 and all(2 < point < 4 for point in points)  # a third of the work: about 3x


def test_drift_needs_two_sessions(capsys):
    assert main(["drift", "--sessions", "1", "--output", "/tmp/drift-never.md"]) == 2
    assert "at least 2" in capsys.readouterr().err


def test_the_drift_table_has_a_row_per_case_and_the_root_mean_square_tau_under_it():
    """What `optbench drift` writes: each case's sessions, spread, whether any two are disjoint, its tau; then the
    count of disjoint cases and the root mean square of the taus over the cases."""
    drifted = Drift("smoke:b.py::test_a", sessions(1.0, 1.1))
    steady = Drift("smoke:b.py::test_b", sessions(1.0, 1.001))
    lines = drift_markdown([drifted, steady]).splitlines()
    assert lines[0] == "| case | sessions (speedup [95% interval], in time order) | spread | disjoint | tau |"
    assert lines[2] == f"| test_a | 1.000x [0.990, 1.010]; 1.100x [1.089, 1.111] | 10.0% | YES | {drifted.tau:.1%} |"
    assert lines[3] == f"| test_b | 1.000x [0.990, 1.010]; 1.001x [0.991, 1.011] | 0.1% | no | {steady.tau:.1%} |"
    rms = math.sqrt((drifted.tau**2 + steady.tau**2) / 2)
    assert drifted.tau > 0.05 and steady.tau == 0 and abs(rms - drifted.tau / math.sqrt(2)) < 1e-12
    assert lines[-1] == (
        f"cases whose sessions' intervals are disjoint: 1/2; tau over the cases (root mean square): {rms:.1%} "
        "(the gate's prior between-run spread: 5%)"
    )
    assert drift_markdown([]).endswith(
        "disjoint: 0/0; tau over the cases (root mean square): 0.0% (the gate's prior between-run spread: 5%)"
    )


def test_a_record_gives_a_drift_only_with_two_sessions_or_more():
    record = make_record("smoke:b.py::test_a")
    assert Drift.from_record(record) is None
    assert Drift.from_record(replace(record, sessions=list(sessions(1.0)))) is None
    two = Drift.from_record(replace(record, sessions=list(sessions(1.0, 1.1))))
    assert two == Drift("smoke:b.py::test_a", sessions(1.0, 1.1))
