"""Drift with time alone: a case's sessions of timed rounds, back to back in one process (optbench.drift)."""

import math

import pytest
from synthetic import HALF_THE_WORK

from optbench.__main__ import main
from optbench.drift import Drift, drift_markdown
from optbench.stats import Interval


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
