"""A fast run of the calibration experiment: separate processes, planted slowdowns, verdicts read from records."""

import re
from pathlib import Path

from synthetic import HALF_THE_WORK

from optbench.calibration import calibrate, calibration_markdown


def test_history_then_shuffled_levels_in_fresh_processes(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text('pytest_plugins = ["optbench.plugin"]\n')
    (project / "test_synthetic.py").write_text(HALF_THE_WORK)
    (project / "pytest.ini").write_text("[pytest]\naddopts = --case-budget 1 --block-target 0.01\n")
    result = calibrate(
        project, tmp_path / "work", None, recordings=3, repetitions=2, slowdowns=[0.0, 0.6], tests="test_synthetic.py"
    )
    unchanged, slowed = result.levels
    assert len(unchanged.runs) == len(slowed.runs) == 2
    assert unchanged.failing_runs() == 0
    assert slowed.failing_runs() == 2
    recorded = Path(tmp_path / "work" / "baselines").glob("*.json")
    assert len(list(recorded)) == 1
    table = calibration_markdown(result)
    assert "| none (false alarms) | 2 | 0/2 (0%, 95% CI 0%-84%) |" in table
    assert "| 60% | 2 | 2/2 (100%, 95% CI 16%-100%) |" in table
    assert "min detectable (median)" in table
    assert re.search(r"\| 0/2 \| 2/2 \| \d+% \|", table), table
