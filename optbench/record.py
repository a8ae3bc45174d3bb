"""The record of one case: plain JSON, written to pytest-benchmark's extra_info and read by every report."""

from __future__ import annotations

import datetime
import statistics
from typing import Any

import torch

from .accuracy import Accuracy
from .compilation import CompileActivity
from .gate import Threshold, Verdict
from .measurement import RoundPlan, WarmUp
from .stats import Interval

RECORD_KEY = "optbench"


def _timing_summary(times: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "data": times}


def build_record(
    *,
    case_id: str,
    technique: str,
    names: tuple[str, str],
    workload: str,
    profile: str,
    environment_key: str,
    device: str,
    warmup: WarmUp,
    plan: RoundPlan | None,
    reference_times: list[float] | None,
    optimized_times: list[float] | None,
    speedup: Interval | None,
    accuracy: Accuracy,
    reference_deterministic: bool,
    memory: tuple[int | None, int | None],
    threshold: Threshold,
    floor: float,
    ceiling: float | None,
    tolerance: float,
    baseline: dict[str, Any] | None,
    verdict: Verdict,
    details: dict[str, Any] | None = None,
    phases_s: dict[str, float] | None = None,
) -> dict[str, Any]:
    timed = reference_times is not None and optimized_times is not None
    return {
        **_identity(case_id, technique, names, profile, environment_key, device),
        "workload": workload,
        "timing": {
            "plan": plan.as_dict() if plan else None,
            "reference_s": _timing_summary(reference_times),
            "optimized_s": _timing_summary(optimized_times),
        }
        if timed
        else None,
        "speedup": speedup.as_dict() if speedup else None,
        "warmup": warmup.as_dict(),
        "compile": _compile_summary(warmup.first.compile, warmup.first.optimized_s),
        "memory": {"reference_bytes": memory[0], "optimized_bytes": memory[1]},
        "accuracy": {
            "passed": accuracy.passed,
            "reference_deterministic": reference_deterministic,
            "checks": [check.as_dict() for check in accuracy.checks],
        },
        "gate": {
            "threshold": threshold.value,
            "source": threshold.source,
            "floor": floor,
            "ceiling": ceiling,
            "tolerance": tolerance,
            "baseline": baseline,
        },
        "verdict": {"status": verdict.status, "failures": verdict.failures, "notes": verdict.notes},
        "details": details,
        "phases_s": phases_s,
    }


def _identity(
    case_id: str, technique: str, names: tuple[str, str], profile: str, environment_key: str, device: str
) -> dict[str, Any]:
    return {
        "case": case_id,
        "technique": technique,
        "variants": {"reference": names[0], "optimized": names[1]},
        "profile": profile,
        "device": device,
        "environment_key": environment_key,
    }


def fault_record(
    *, case_id: str, technique: str, names: tuple[str, str], profile: str, environment_key: str, device: str, cause: str
) -> dict[str, Any]:
    """The record of a case that ended in a fault (time-out, OOM, compiler error) before it was measured."""
    return {
        **_identity(case_id, technique, names, profile, environment_key, device),
        "timing": None,
        "speedup": None,
        "accuracy": None,
        "memory": None,
        "compile": None,
        "gate": None,
        "verdict": {"status": "fail", "failures": [cause], "notes": []},
        "details": None,
    }


def _compile_summary(activity: CompileActivity, first_call_s: float) -> dict[str, Any] | None:
    if not activity.compiled:
        return None
    return {"first_call_s": first_call_s, **activity.as_dict()}


def baseline_entry(record: dict[str, Any]) -> dict[str, Any]:
    """What a record contributes to the baselines file."""
    speedup = record["speedup"]
    compiled = record["compile"]
    return {
        "speedup": speedup["point"],
        "interval": [speedup["low"], speedup["high"]],
        "rounds": record["timing"]["plan"]["rounds"],
        "accuracy": record["accuracy"]["checks"][0],
        "graph_breaks": compiled["graph_breaks"] if compiled else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda if record["device"].startswith("cuda") else None,
        "recorded": datetime.date.today().isoformat(),
    }
