"""Typed records for tests of the readers (reports, recommendation, agreement), without running a case."""

from __future__ import annotations

from optbench.measuring.accuracy import Check
from optbench.storage.record import AccuracySummary, Record, TimeSummary, Timing, Variants, VerdictSummary
from optbench.verdict.stats import Interval

CPU_KEY = "cpu-amd-epyc-family-25-model-1-avx2-t2-torch2.14"
CLOSE = Check("cosine", 0.9999, 0.99, lower_is_better=False)


def make_record(
    case: str = "smoke:b.py::test_x[a]",
    speedup: tuple[float, float, float] | None = (1.0, 0.95, 1.05),
    *,
    technique: str = "x",
    variant: str = "",
    names: tuple[str, str] = ("reference", "optimized"),
    environment_key: str = CPU_KEY,
    accuracy: Check | None = CLOSE,
    times: tuple[list[float], list[float]] | None = None,
    independent_ratios: list[float] | None = None,
    status: str = "pass",
) -> Record:
    return Record(
        case=case,
        technique=technique,
        variant=variant,
        variants=Variants(*names),
        profile=case.split(":", 1)[0],
        device="cuda:0" if "-sm" in environment_key else "cpu",
        environment_key=environment_key,
        timing=Timing(None, 4, False, TimeSummary.of(times[0]), TimeSummary.of(times[1])) if times else None,
        speedup=Interval(*speedup) if speedup else None,
        accuracy=AccuracySummary(accuracy.passed, True, [accuracy]) if accuracy else None,
        verdict=VerdictSummary(status, ["failed"] if status == "fail" else [], [], []),
        independent_ratios=independent_ratios,
    )
