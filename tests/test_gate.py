"""The verdict: accuracy and compile checks everywhere, speed against history, floors only where they apply."""

from optbench.accuracy import Accuracy, Check
from optbench.baselines import Baseline, Recording
from optbench.gate import Floor, GateSettings, judge
from optbench.stats import Interval

GOOD = Accuracy((Check("cosine", 0.999, 0.99, lower_is_better=False),))
HISTORY = Baseline(
    recordings=tuple(Recording(s, (s * 0.98, s * 1.02)) for s in [1.80, 1.76, 1.83, 1.79, 1.82, 1.78, 1.81, 1.80]),
    accuracy={"metric": "cosine", "value": 0.999, "limit": 0.99, "lower_is_better": False},
)
SETTINGS = GateSettings(
    false_alarm_rate=0.02, min_effect=0.05, confirmations=2, accuracy_drift=0.5, gated_cases=30, pooled_variance=0.02**2
)
NOWHERE = Floor(1.2, applies_here=False)


def verdict(speedup, accuracy=GOOD, baseline=HISTORY, floor=NOWHERE, ceiling=None, graph_breaks=None):
    measurements = [speedup] if speedup else []
    return judge(measurements, accuracy, floor, ceiling, baseline, SETTINGS, graph_breaks=graph_breaks)


def test_matching_speed_passes_with_its_decision_recorded():
    result = verdict(Interval(1.79, 1.75, 1.83))
    assert result.status == "pass" and result.decision.outcome == "pass"
    assert result.decision.history == 8 and abs(result.decision.center - 1.80) < 0.01


def test_a_clear_slowdown_against_a_steady_history_is_a_regression():
    result = verdict(Interval(1.45, 1.42, 1.48))
    assert result.status == "fail" and result.decision.outcome == "regression"
    assert "speed: regression, +24.0% slower than its history's 1.80x (8 recordings" in result.failures[0]


def test_a_slowdown_below_the_minimum_effect_is_never_a_regression():
    result = verdict(Interval(1.74, 1.735, 1.745))  # 3% slower, measured very precisely
    assert result.decision.outcome != "regression" and result.status != "fail"


def test_a_borderline_slowdown_is_inconclusive_and_asks_for_confirmation():
    result = verdict(Interval(1.72, 1.69, 1.75))
    assert result.status == "inconclusive" and result.wants_confirmation
    assert not verdict(Interval(1.79, 1.75, 1.83)).wants_confirmation


def test_below_the_floor_fails_only_where_it_applies_and_there_is_history():
    slow = Interval(1.10, 1.05, 1.15)
    where = Floor(1.2, applies_here=True, where="a CPU with AMX")
    assert "which this optimization must reach on a CPU with AMX" in verdict(slow, floor=where).failures[-1]
    elsewhere = verdict(slow, baseline=None, floor=NOWHERE)
    assert elsewhere.status == "pass" and elsewhere.does_not_pay
    assert "does not pay here: 1.10x [1.05, 1.15] below its floor 1.20x" in elsewhere.notes
    new_machine = verdict(slow, baseline=None, floor=where)
    assert new_machine.status == "pass" and new_machine.does_not_pay


def test_without_history_speed_is_reported_not_gated():
    result = verdict(Interval(0.5, 0.45, 0.55), baseline=None, floor=Floor(0.1, applies_here=True))
    assert result.status == "pass" and result.decision is None
    assert "no history on this machine: speed reported, not gated" in result.notes


def test_ceiling_fails_a_speedup_that_should_not_exist():
    assert verdict(Interval(1.0, 0.95, 1.05), baseline=None, ceiling=1.1).status == "pass"
    assert verdict(Interval(1.3, 1.2, 1.4), baseline=None, ceiling=1.1).status == "fail"


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
    baseline = Baseline(HISTORY.recordings, HISTORY.accuracy, graph_breaks=0)
    assert verdict(Interval(1.8, 1.75, 1.85), baseline=baseline, graph_breaks=0).status == "pass"
    result = verdict(Interval(1.8, 1.75, 1.85), baseline=baseline, graph_breaks=2)
    assert result.status == "fail" and "graph breaks" in result.failures[0]


def test_untimed_run_checks_accuracy_only():
    result = verdict(None)
    assert result.status == "pass" and "timing disabled" in result.notes[0]


def test_failures_outrank_an_inconclusive_measurement():
    result = verdict(Interval(1.79, 1.72, 1.86))
    result.inconclusive.append("interval +-9% misses its target +-3%")
    assert result.status == "inconclusive"
    result.failures.append("accuracy: cosine 0.5")
    assert result.status == "fail"
