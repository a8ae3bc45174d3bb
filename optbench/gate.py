"""The verdict: a case's speedup and accuracy held against its floor and its baseline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .accuracy import Accuracy, Check
from .stats import Interval


@dataclass(frozen=True)
class Threshold:
    value: float
    source: str


def speed_threshold(floor: float, baseline: dict[str, Any] | None, tolerance: float) -> Threshold:
    """max(declared floor, baseline speedup x (1 - tolerance)), with where it came from."""
    if baseline is None:
        return Threshold(floor, f"declared floor {floor:.2f}x, no baseline")
    from_baseline = baseline["speedup"] * (1 - tolerance)
    if from_baseline >= floor:
        return Threshold(
            from_baseline,
            f"baseline {baseline['speedup']:.2f}x ({baseline.get('recorded', 'undated')})"
            f" less {tolerance:.0%} tolerance",
        )
    return Threshold(
        floor, f"declared floor {floor:.2f}x, above baseline {baseline['speedup']:.2f}x less {tolerance:.0%}"
    )


@dataclass
class Verdict:
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "fail" if self.failures else "pass"


def _accuracy_drift(accuracy: Accuracy, baseline: dict[str, Any] | None, drift: float) -> str | None:
    """A headline figure that moved more than `drift` of its baseline headroom toward the limit."""
    recorded = (baseline or {}).get("accuracy")
    check = accuracy.headline
    if not recorded or recorded.get("metric") != check.metric:
        return None
    headroom = abs(check.limit - recorded["value"])
    if headroom == 0:
        return None
    if check.lower_is_better:
        allowed = recorded["value"] + drift * headroom
        drifted = check.value > allowed
    else:
        allowed = recorded["value"] - drift * headroom
        drifted = check.value < allowed
    if not drifted:
        return None
    return (
        f"accuracy drifted: {check.metric} {check.value:.4g} vs baseline {recorded['value']:.4g} "
        f"(allowed {allowed:.4g}, {drift:.0%} of the headroom to the limit {check.limit:.4g})"
    )


def judge(
    speedup: Interval | None,
    accuracy: Accuracy,
    threshold: Threshold,
    ceiling: float | None,
    baseline: dict[str, Any] | None,
    tolerance: float,
    accuracy_drift: float,
    graph_breaks: int | None = None,
    unrepeatable_reference: Check | None = None,
) -> Verdict:
    """Speed fails only when the whole interval is past the threshold, so noise alone never fails a case."""
    verdict = Verdict()
    if unrepeatable_reference is not None:
        verdict.failures.append(
            f"reference not deterministic: two seeded runs differ ({unrepeatable_reference.text()}), "
            "so the optimization's accuracy cannot be judged"
        )
    else:
        verdict.failures.extend(f"accuracy: {check.text()}" for check in accuracy.failures)
        drifted = _accuracy_drift(accuracy, baseline, accuracy_drift) if accuracy.passed else None
        if drifted:
            verdict.failures.append(drifted)
    recorded_breaks = (baseline or {}).get("graph_breaks")
    if graph_breaks is not None and recorded_breaks is not None and graph_breaks > recorded_breaks:
        verdict.failures.append(f"compile: {graph_breaks} graph breaks, baseline had {recorded_breaks}")
    if speedup is None:
        verdict.notes.append("timing disabled: accuracy checked, speed not gated")
        return verdict
    if speedup.high < threshold.value:
        verdict.failures.append(
            f"speed: measured {speedup.text()} lies entirely below the threshold "
            f"{threshold.value:.2f}x ({threshold.source})"
        )
    if ceiling is not None and speedup.low > ceiling:
        verdict.failures.append(
            f"speed: measured {speedup.text()} lies entirely above the expected ceiling {ceiling:.2f}x "
            "(this optimization is expected not to pay here)"
        )
    if baseline is None:
        verdict.notes.append("no baseline")
    elif speedup.low > baseline["speedup"] * (1 + tolerance):
        verdict.notes.append(f"faster than baseline by over {tolerance:.0%}; consider --update-baselines")
    return verdict
