"""The verdict: a case's speed against its history and its floor, its accuracy against its limits.

Speed: with history on this environment, the regression test of
`optbench.verdict.regression` decides (pass, regression, inconclusive). A declared
floor is a promise only on the hardware classes the case names
(`Case.floor_applies_on`) and only where the case has history: there, a whole
interval below it fails. Elsewhere, and on a machine the suite has not seen,
speed below the floor is reported as "does not pay here", not as a failure.
A case whose payoff is memory (`Case.memory_payoff`) is judged on its
peak-memory ratio and a bound on its slowdown instead of the floor
(`optbench.measuring.memory_payoff`). Accuracy failures, a nondeterministic reference,
new graph breaks, eager measured as compiled and an optimization not seen in
effect fail everywhere.

An interval wider than `GateSettings.unstable_half_width` is not a
measurement: speed is neither passed nor failed on it, the verdict is
inconclusive ("measurement unstable") and the case measures again in a fresh
process where it has confirmation runs left. Why a bound at all: a stalled or
degenerate series once gave `1.665x [0.374, 7.425]` (issue 36) while its
independent timer read 1.73-1.87x; an interval that wide passes any floor test
by touching it and sinks any regression test by its variance, so either verdict
would be about the estimator, not the code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..measuring.accuracy import Accuracy, Check
from ..measuring.in_effect import InEffect
from ..measuring.in_effect import failures as not_in_effect
from ..measuring.memory_payoff import MemoryPayoff, judge_memory
from ..storage.baselines import Baseline
from .regression import Decision, decide
from .stats import Interval


@dataclass(frozen=True)
class GateSettings:
    false_alarm_rate: float
    """Share of runs of unchanged code allowed to fail on speed, split over the gated cases."""
    min_effect: float
    """A slowdown smaller than this is never a regression, however significant."""
    confirmations: int
    accuracy_drift: float
    gated_cases: int = 1
    pooled_variance: float = 0.0
    unstable_half_width: float = 0.5
    """An interval whose relative half-width exceeds this is not a measurement (see the module docstring).

    0.5 is ten times the widest a settled smoke case reads on the 2-core CPUs seen (+-5%); the profiles' targets
    are +-2-3%."""


@dataclass(frozen=True)
class Floor:
    value: float
    applies_here: bool
    """The case declares its floor a promise on this device's hardware class."""
    where: str = ""
    """The classes it applies to, for messages."""


@dataclass
class Verdict:
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    inconclusive: list[str] = field(default_factory=list)
    """Why the measurement cannot back a pass; fails only with failures."""
    decision: Decision | None = None
    does_not_pay: bool = False
    unstable: bool = False
    """No measurement was narrow enough to judge speed on (GateSettings.unstable_half_width)."""

    @property
    def status(self) -> str:
        if self.failures:
            return "fail"
        return "inconclusive" if self.inconclusive else "pass"

    @property
    def wants_confirmation(self) -> bool:
        return self.unstable or (self.decision is not None and self.decision.outcome != "pass")


def _accuracy_drift(accuracy: Accuracy, baseline: Baseline | None, drift: float) -> str | None:
    """A headline figure that moved more than `drift` of its baseline headroom toward the limit."""
    recorded = baseline.accuracy if baseline else None
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


@dataclass(frozen=True)
class MemoryClaim:
    """A memory case's promise and what was measured of it (`optbench.measuring.memory_payoff`)."""

    payoff: MemoryPayoff
    ratio: Interval | None


def _history(
    verdict: Verdict, measurements: Sequence[Interval], baseline: Baseline | None, settings: GateSettings
) -> None:
    if baseline is None:
        verdict.notes.append("no history on this machine: speed reported, not gated")
    else:
        decision = decide(
            measurements,
            baseline,
            settings.pooled_variance,
            settings.false_alarm_rate,
            settings.gated_cases,
            settings.min_effect,
            settings.confirmations,
        )
        verdict.decision = decision
        if decision.outcome == "regression":
            verdict.failures.append(f"speed: regression, {decision.text()}")
        elif decision.outcome == "inconclusive":
            verdict.inconclusive.append(f"speed: suspicious but not significant, {decision.text()}")
        elif decision.slowdown < -max(settings.min_effect, decision.margin):
            verdict.notes.append(f"faster than its history by {-decision.slowdown:.0%}")


def _floor(verdict: Verdict, latest: Interval, floor: Floor, ceiling: float | None, baseline: Baseline | None) -> None:
    if latest.high < floor.value:
        if floor.applies_here and baseline is not None:
            verdict.failures.append(
                f"speed: measured {latest.text()} lies entirely below the floor {floor.value:.2f}x, "
                f"which this optimization must reach on {floor.where}"
            )
        else:
            verdict.does_not_pay = True
            verdict.notes.append(f"does not pay here: {latest.text()} below its floor {floor.value:.2f}x")
    if ceiling is not None and latest.low > ceiling:
        verdict.failures.append(
            f"speed: measured {latest.text()} lies entirely above the expected ceiling {ceiling:.2f}x "
            "(this optimization is expected not to pay here)"
        )


def judge(
    measurements: Sequence[Interval],
    accuracy: Accuracy | None,
    floor: Floor,
    ceiling: float | None,
    baseline: Baseline | None,
    settings: GateSettings,
    graph_breaks: int | None = None,
    unrepeatable_reference: Check | None = None,
    extra_checks: Sequence[Check] = (),
    in_effect: Sequence[InEffect] = (),
    memory: MemoryClaim | None = None,
) -> Verdict:
    """Accuracy and compile checks everywhere; speed as the module docstring says. No measurements: untimed. No
    accuracy: not checked, which only a case not in effect may be (it fails on that)."""
    verdict = Verdict()
    if accuracy is None:
        if not not_in_effect(in_effect):
            raise ValueError("accuracy may go unchecked only where the optimization is not in effect")
        verdict.notes.append("accuracy not checked: the optimization is not in effect")
    elif unrepeatable_reference is not None:
        verdict.failures.append(
            f"reference not deterministic: two seeded runs differ ({unrepeatable_reference.text()}), "
            "so the optimization's accuracy cannot be judged"
        )
    else:
        verdict.failures.extend(f"accuracy: {check.text()}" for check in accuracy.failures)
        drifted = _accuracy_drift(accuracy, baseline, settings.accuracy_drift) if accuracy.passed else None
        if drifted:
            verdict.failures.append(drifted)
    verdict.failures.extend(f"check: {check.text()}" for check in extra_checks if not check.passed)
    verdict.failures.extend(not_in_effect(in_effect))
    recorded_breaks = baseline.graph_breaks if baseline else None
    if graph_breaks is not None and recorded_breaks is not None and graph_breaks > recorded_breaks:
        verdict.failures.append(f"compile: {graph_breaks} graph breaks, baseline had {recorded_breaks}")
    unstable = [m for m in measurements if m.relative_half_width > settings.unstable_half_width]
    stable = [m for m in measurements if m not in unstable]
    if memory is not None:
        history = [r.memory_ratio for r in baseline.recordings if r.memory_ratio] if baseline else []
        failures, notes, verdict.does_not_pay = judge_memory(
            memory.ratio, stable[-1] if stable else None, memory.payoff, history, settings.min_effect
        )
        verdict.failures += failures
        verdict.notes += notes
    if not measurements:
        verdict.notes.append("timing disabled: accuracy checked, speed not gated")
        return verdict
    if unstable:
        widest = max(unstable, key=lambda m: m.relative_half_width)
        problem = (
            f"measurement unstable: interval [{widest.low:.3g}, {widest.high:.3g}] "
            f"(+-{widest.relative_half_width:.0%}, beyond +-{settings.unstable_half_width:.0%})"
        )
        if not stable:
            verdict.unstable = True
            verdict.inconclusive.append(f"{problem}: speed neither passed nor failed")
            return verdict
        verdict.notes.append(f"{problem}: judged on the {len(stable)} stable measurement(s)")
    _history(verdict, stable, baseline, settings)
    if memory is None:
        _floor(verdict, stable[-1], floor, ceiling, baseline)
    return verdict
