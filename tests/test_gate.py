from optbench.accuracy import Accuracy, Check
from optbench.gate import judge, speed_threshold
from optbench.stats import Interval

GOOD = Accuracy((Check("cosine", 0.999, 0.99, lower_is_better=False),))
BASELINE = {
    "speedup": 1.8,
    "interval": [1.75, 1.85],
    "recorded": "2026-12-01",
    "accuracy": {"metric": "cosine", "value": 0.999, "limit": 0.99, "lower_is_better": False},
}


def verdict(speedup, accuracy=GOOD, baseline=BASELINE, floor=1.2, ceiling=None, graph_breaks=None):
    threshold = speed_threshold(floor, baseline, tolerance=0.10)
    return judge(speedup, accuracy, threshold, ceiling, baseline, 0.10, 0.5, graph_breaks=graph_breaks)


def test_threshold_comes_from_baseline_less_tolerance():
    threshold = speed_threshold(1.2, BASELINE, 0.10)
    assert abs(threshold.value - 1.62) < 1e-9
    assert "baseline 1.80x" in threshold.source


def test_declared_floor_wins_when_higher_than_baseline():
    threshold = speed_threshold(1.7, BASELINE, 0.10)
    assert threshold.value == 1.7 and "declared floor" in threshold.source


def test_matching_speed_passes():
    assert verdict(Interval(1.79, 1.72, 1.86)).status == "pass"


def test_interval_straddling_threshold_passes_noise_is_not_a_regression():
    assert verdict(Interval(1.55, 1.30, 1.80)).status == "pass"


def test_whole_interval_below_threshold_fails_with_a_readable_reason():
    result = verdict(Interval(1.30, 1.25, 1.35))
    assert result.status == "fail"
    (reason,) = result.failures
    assert "1.30x [1.25, 1.35]" in reason and "1.62x" in reason and "baseline 1.80x" in reason


def test_without_baseline_only_the_floor_applies():
    assert verdict(Interval(1.30, 1.25, 1.35), baseline=None).status == "pass"
    result = verdict(Interval(1.10, 1.05, 1.15), baseline=None)
    assert result.status == "fail" and "no baseline" in result.failures[0]
    assert "no baseline" in verdict(Interval(1.3, 1.25, 1.35), baseline=None).notes


def test_ceiling_fails_a_speedup_that_should_not_exist():
    assert verdict(Interval(1.0, 0.95, 1.05), baseline=None, floor=0.5, ceiling=1.0).status == "pass"
    assert verdict(Interval(1.3, 1.2, 1.4), baseline=None, floor=0.5, ceiling=1.0).status == "fail"


def test_accuracy_outside_tolerance_fails_even_when_fast():
    bad = Accuracy((Check("cosine", 0.95, 0.99, lower_is_better=False),))
    result = verdict(Interval(1.8, 1.75, 1.85), accuracy=bad)
    assert result.status == "fail" and "cosine 0.95" in result.failures[0]


def test_accuracy_drift_from_baseline_fails_within_the_limit():
    # 0.993 still meets 0.99, but moved more than half the headroom (0.999 -> 0.99) away.
    drifted = Accuracy((Check("cosine", 0.993, 0.99, lower_is_better=False),))
    result = verdict(Interval(1.8, 1.75, 1.85), accuracy=drifted)
    assert result.status == "fail" and "drifted" in result.failures[0]
    slight = Accuracy((Check("cosine", 0.997, 0.99, lower_is_better=False),))
    assert verdict(Interval(1.8, 1.75, 1.85), accuracy=slight).status == "pass"


def test_new_graph_break_fails():
    baseline = {**BASELINE, "graph_breaks": 0}
    assert verdict(Interval(1.8, 1.75, 1.85), baseline=baseline, graph_breaks=0).status == "pass"
    result = verdict(Interval(1.8, 1.75, 1.85), baseline=baseline, graph_breaks=2)
    assert result.status == "fail" and "graph breaks" in result.failures[0]


def test_untimed_run_checks_accuracy_only():
    result = verdict(None)
    assert result.status == "pass" and "timing disabled" in result.notes[0]
