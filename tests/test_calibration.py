"""A fast run of the calibration experiment: the gate must stay quiet on unchanged code and catch a big slowdown."""

from optbench.calibration import calibrate, rows_markdown


def test_gate_is_quiet_on_unchanged_code_and_catches_a_30_percent_slowdown(tmp_path):
    unchanged, slowed = calibrate(tmp_path, repetitions=4, slowdowns=[0.0, 0.3], tolerances=[0.1], case_budget=1.0)
    assert unchanged.repetitions == slowed.repetitions == 4
    assert unchanged.gate_failures[0.1] <= 1
    assert slowed.gate_failures[0.1] >= 3
    assert "none (false alarms)" in rows_markdown([unchanged, slowed], [0.1])
