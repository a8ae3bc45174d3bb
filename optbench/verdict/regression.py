"""Is this run's speedup a regression against the case's history? A test with an explicit false-alarm budget.

Work on the log scale. History: recordings j = 1..m of the case on this
environment, y_j = ln(speedup_j), each with its within-run standard error
s_j = (ln high_j - ln low_j) / (2 q) from its 95% interval, q the quantile
it was made with: z_0.975, or t_0.975 on its degrees of freedom (t_2 = 4.30
for an interval across three processes; stats.Interval.standard_error). 0
where a migrated recording has none, which errs toward a larger between-run
spread.

Between-run spread. Runs differ by more than their intervals say (memory
layout, page-fault cost, the neighbours on a shared VM). Per case, by the
method of moments (DerSimonian and Laird),

    tau2_case = max(0, Var(y) - mean(s_j^2)),   nu = m - 1 degrees of freedom,

and, since a short history says little, shrunk toward the pooled value of
this environment's cases (each weighted by its nu; PRIOR_SPREAD with
PRIOR_WEIGHT when no case has three recordings yet):

    tau2 = (nu tau2_case + nu0 tau2_pool) / (nu + nu0),   nu0 = PRIOR_WEIGHT.

Center: mu = mean(y_j), Var(mu) = (tau2 + mean(s_j^2)) / m.

This run: n measurements i = 1..n, each in a fresh process (the first run
and its confirmations), ybar = mean(y_i), Var(ybar) = (tau2 + mean(s_i^2)) / n:
every fresh process draws its own between-run effect, so confirmations
average it away as well as the within-run noise.

    d = ybar - mu,   sigma = sqrt(Var(ybar) + Var(mu)).

The run's false-alarm budget (at most `false_alarm_rate` of runs of
unchanged code fail) is split over the G gated cases: alpha = rate / G,
one-sided, z = Phi^-1(1 - alpha). The optimized variant is *slower* by
exp(-d) - 1. Outcomes:

- regression: d < -z sigma and the slowdown exceeds `min_effect`;
- inconclusive: not a regression, but d < -SCREEN_Z sigma (suspicious) and
  a regression is still possible: the slowdown at the far end of the margin,
  exp(-d + z sigma) - 1, exceeds `min_effect` (else more runs cannot change
  the answer, and confirming would only spend time);
- pass: otherwise.

Minimum detectable slowdown: the slowdown caught with 95% probability after
the confirmations, exp((z + z_0.95) sigma_n) - 1 with sigma_n computed for
n = 1 + confirmations measurements and this run's within-run error, and no
less than `min_effect`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from ..storage.baselines import Baseline, Recording
from .stats import Interval

PRIOR_SPREAD = 0.05
"""Between-run standard deviation of ln(speedup) assumed before any case has history: 4.8% was measured on
the committed CPU baselines' recordings (issue 11)."""
PRIOR_WEIGHT = 4.0
"""Degrees of freedom the pooled spread counts for when shrinking one case's spread."""
SCREEN_Z = NormalDist().inv_cdf(0.98)
"""Below the center by this many sigmas: worth confirming, not yet a regression."""
DETECTION_POWER = 0.95


@dataclass(frozen=True)
class CaseSpread:
    """A case's between-run variance on the log scale, with the degrees of freedom behind it."""

    variance: float
    degrees_of_freedom: int

    @classmethod
    def of(cls, baseline: Baseline) -> CaseSpread:
        logs = [math.log(r.speedup) for r in baseline.recordings]
        if len(logs) < 2:
            return cls(0.0, 0)
        within = statistics.fmean(s * s for s in (r.standard_error for r in baseline.recordings))
        return cls(max(0.0, statistics.variance(logs) - within), len(logs) - 1)


def pooled_variance(histories: Iterable[Baseline]) -> float:
    """This environment's between-run variance, pooled over cases with at least 3 recordings; the prior without."""
    spreads = [CaseSpread.of(h) for h in histories if len(h.recordings) >= 3]
    total = sum(s.degrees_of_freedom for s in spreads)
    if total == 0:
        return PRIOR_SPREAD**2
    return sum(s.variance * s.degrees_of_freedom for s in spreads) / total


def between_run_variance(baseline: Baseline, pooled: float) -> float:
    spread = CaseSpread.of(baseline)
    return (spread.degrees_of_freedom * spread.variance + PRIOR_WEIGHT * pooled) / (
        spread.degrees_of_freedom + PRIOR_WEIGHT
    )


def threshold_z(false_alarm_rate: float, gated_cases: int) -> float:
    return NormalDist().inv_cdf(1 - false_alarm_rate / max(1, gated_cases))


@dataclass(frozen=True)
class Decision:
    outcome: str
    """pass, regression or inconclusive."""
    slowdown: float
    """How much slower the optimized variant is than the history's center: exp(-d) - 1 (negative: faster)."""
    margin: float
    """The statistical margin as a slowdown, exp(z sigma) - 1."""
    minimum_detectable_slowdown: float
    center: float
    """The history's center speedup, exp(mu)."""
    between_run_spread: float
    """tau, the between-run standard deviation of ln(speedup) used."""
    runs: int
    history: int

    def text(self) -> str:
        return (
            f"{self.slowdown:+.1%} slower than its history's {self.center:.2f}x ({self.history} recordings; "
            f"margin {self.margin:.1%} at this run's false-alarm budget, {self.runs} run(s))"
        )


@dataclass(frozen=True)
class Deviation:
    """This run's log speedup against the history's center, and the spread that judges it."""

    d: float
    center: float
    tau2: float
    center_variance: float
    run_error2: float
    runs: int

    def sigma(self, runs: int | None = None) -> float:
        return math.sqrt((self.tau2 + self.run_error2) / (runs or self.runs) + self.center_variance)


def deviation(measurements: Sequence[Interval], baseline: Baseline, pooled: float) -> Deviation:
    tau2 = between_run_variance(baseline, pooled)
    history_logs = [math.log(r.speedup) for r in baseline.recordings]
    center = statistics.fmean(history_logs)
    center_variance = (tau2 + statistics.fmean(r.standard_error**2 for r in baseline.recordings)) / len(history_logs)
    return Deviation(
        d=statistics.fmean(math.log(m.point) for m in measurements) - center,
        center=center,
        tau2=tau2,
        center_variance=center_variance,
        run_error2=statistics.fmean(m.standard_error**2 for m in measurements),
        runs=len(measurements),
    )


def decide(
    measurements: Sequence[Interval],
    baseline: Baseline,
    pooled: float,
    false_alarm_rate: float,
    gated_cases: int,
    min_effect: float,
    confirmations: int,
) -> Decision:
    """The outcome for this run's measurements (first run, then its confirmations) against the history."""
    found = deviation(measurements, baseline, pooled)
    z = threshold_z(false_alarm_rate, gated_cases)
    slowdown = math.exp(-found.d) - 1
    now = found.sigma()
    if found.d < -z * now and slowdown > min_effect:
        outcome = "regression"
    elif found.d < -SCREEN_Z * now and math.exp(-found.d + z * now) - 1 > min_effect:
        outcome = "inconclusive"
    else:
        outcome = "pass"
    detectable = math.exp((z + NormalDist().inv_cdf(DETECTION_POWER)) * found.sigma(1 + confirmations)) - 1
    return Decision(
        outcome=outcome,
        slowdown=slowdown,
        margin=math.exp(z * now) - 1,
        minimum_detectable_slowdown=max(min_effect, detectable),
        center=math.exp(found.center),
        between_run_spread=math.sqrt(found.tau2),
        runs=found.runs,
        history=len(baseline.recordings),
    )


@dataclass(frozen=True)
class Change:
    """A case's speedup in two runs, and whether the change is beyond the same test's margin (two-sided)."""

    before: float
    after: float
    margin: float
    significant: bool

    @property
    def relative(self) -> float:
        return self.after / self.before - 1

    def text(self) -> str:
        verdict = "significant" if self.significant else "within noise"
        return f"{self.before:.2f}x -> {self.after:.2f}x ({self.relative:+.1%}, margin +-{self.margin:.1%}, {verdict})"


def compare(
    before: Interval, after: Interval, pooled: float, false_alarm_rate: float, cases: int, min_effect: float
) -> Change:
    """Two runs of a case, judged as the gate judges a run against a one-recording history, in both directions."""
    history = Recording(before.point, (before.low, before.high), degrees_of_freedom=before.degrees_of_freedom)
    found = deviation([after], Baseline((history,)), pooled)
    z = threshold_z(false_alarm_rate / 2, cases)
    margin = math.exp(z * found.sigma()) - 1
    significant = abs(found.d) > z * found.sigma() and abs(math.exp(found.d) - 1) > min_effect
    return Change(before.point, after.point, margin, significant)
