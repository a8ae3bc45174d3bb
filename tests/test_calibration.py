"""The calibration experiment: a fast run in separate processes, planted slowdowns, verdicts read from records; and
its counting over enough runs to tell a gate that never false-alarms from one that does every second run."""

import re
from pathlib import Path

import pytest
from synthetic import HALF_THE_WORK

from optbench.studies import calibration
from optbench.studies.calibration import RunResult, calibrate, calibration_markdown


@pytest.mark.timed
def test_history_then_shuffled_levels_in_fresh_processes(tmp_path):
    """The real thing, once per level: the rates it measures are counted in the test below, over many runs."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text('pytest_plugins = ["optbench.plugin"]\n')
    (project / "test_synthetic.py").write_text(HALF_THE_WORK)
    (project / "pytest.ini").write_text("[pytest]\naddopts = --case-budget 1 --block-target 0.01\n")
    result = calibrate(
        project, tmp_path / "work", None, recordings=2, repetitions=1, slowdowns=[0.0, 0.6], tests="test_synthetic.py"
    )
    unchanged, slowed = result.levels
    assert len(unchanged.runs) == len(slowed.runs) == 1
    assert unchanged.failing_runs() == 0
    assert slowed.failing_runs() == 1
    recorded = Path(tmp_path / "work" / "baselines").glob("*.json")
    assert len(list(recorded)) == 1
    table = calibration_markdown(result)
    assert "| none (false alarms) | 1 | 0/1 (0%, 95% CI 0%-98%) |" in table
    assert "| 60% | 1 | 1/1 (100%, 95% CI 3%-100%) |" in table
    assert "min detectable (median)" in table
    assert re.search(r"\| 0/1 \| 1/1 \| \d+% \|", table), table


CASES = ("smoke:test_synthetic.py::test_a", "smoke:test_synthetic.py::test_b", "smoke:test_synthetic.py::test_c")
RECORDINGS = 3


class FakeRuns:
    """Stands in for the pytest processes of a calibration: recording `i` saves a median of `i + 1` s per case; a
    run fails `test_a` in `false_alarms` of the unchanged runs (evenly spread) and `test_a` and `test_b` where a
    slowdown is planted, and its medians are the last recording's grown by the slowdown."""

    def __init__(self, false_alarms: float) -> None:
        self.false_alarms = false_alarms
        self.recordings = 0
        self.unchanged = 0
        self.schedule: list[float] = []

    def __call__(self, root, tests, expression, results, *options, slowdown=0.0) -> RunResult:
        if "--update-baselines" in options:
            self.recordings += 1
            return RunResult({}, {}, dict.fromkeys(CASES, float(self.recordings)))
        self.schedule.append(slowdown)
        if slowdown:
            failing = {CASES[0], CASES[1]}
        else:
            self.unchanged += 1
            alarms = int(self.unchanged * self.false_alarms) - int((self.unchanged - 1) * self.false_alarms)
            failing = {CASES[0]} if alarms else set()
        statuses = {case: "fail" if case in failing else "pass" for case in CASES}
        medians = dict.fromkeys(CASES, RECORDINGS * (1 + slowdown))
        return RunResult(statuses, dict.fromkeys(CASES, 0.2), medians)


@pytest.mark.parametrize(
    ("false_alarms", "runs_failing", "case_runs_failing"),
    [
        (0.0, "0/20 (0%, 95% CI 0%-17%)", "0/60 (0%, 95% CI 0%-6%)"),
        (0.5, "10/20 (50%, 95% CI 27%-73%)", "10/60 (17%, 95% CI 8%-29%)"),
    ],
)
def test_twenty_runs_a_level_tell_no_false_alarms_from_one_run_in_two(
    monkeypatch, tmp_path, false_alarms, runs_failing, case_runs_failing
):
    """Each level's runs are its own, a run fails when any of its cases does, and the intervals of 0 and 10
    failing runs in 20 (0-17%, 27-73%) keep the two rates apart; compare-fail is judged against the last
    recording."""
    runs = FakeRuns(false_alarms)
    monkeypatch.setattr(calibration, "_pytest", runs)
    result = calibrate(tmp_path, tmp_path, None, recordings=RECORDINGS, repetitions=20, slowdowns=[0.0, 0.6])
    assert sorted(runs.schedule) == [0.0] * 20 + [0.6] * 20 and runs.schedule != sorted(runs.schedule)
    table = calibration_markdown(result)
    unchanged = f"| none (false alarms) | 20 | {runs_failing} | {case_runs_failing} | 0/60 (0%, 95% CI 0%-6%) |"
    slowed = (
        "| 60% | 20 | 20/20 (100%, 95% CI 83%-100%) | 40/60 (67%, 95% CI 53%-78%) | 60/60 (100%, 95% CI 94%-100%) |"
    )
    assert unchanged in table and slowed in table, table
    alarms = runs_failing.split(" ")[0]
    assert f"| test_a | {alarms} | 20/20 | 20% |" in table and "| test_c | 0/20 | 0/20 | 20% |" in table, table


def test_the_pytest_options_given_reach_every_recording_and_run(monkeypatch, tmp_path):
    """`calibrate -- --processes 3` calibrates the gate on intervals across processes: the history it builds and the
    runs it judges must all have them, or the gate would judge three-process runs against one-process history."""
    seen: list[tuple[str, ...]] = []

    def run(root, tests, expression, results, *options, slowdown=0.0) -> RunResult:
        seen.append(options)
        return RunResult({CASES[0]: "pass"}, {}, {})

    monkeypatch.setattr(calibration, "_pytest", run)
    calibrate(tmp_path, tmp_path, None, recordings=2, repetitions=2, slowdowns=[0.0, 0.1], options=["--processes", "3"])
    assert len(seen) == 6
    assert all(options[-2:] == ("--processes", "3") for options in seen), seen
