"""The record of one case: plain JSON, written to pytest-benchmark's extra_info and read by every report."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from .accuracy import Accuracy
from .compilation import CompileActivity
from .gate import Verdict
from .gpu_clocks import GpuState
from .measurement import RoundPlan, Rounds, WarmUp
from .stats import Interval

RECORD_KEY = "optbench"
RECORDS_FILE = "records.jsonl"
"""One JSON record per line, appended as each case finishes, in the run's --results-dir."""


def read_records(results_dir: Path) -> list[dict[str, Any]]:
    """The records a run wrote to `results_dir`, in order; none if it wrote none."""
    path = Path(results_dir) / RECORDS_FILE
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _timing_summary(times: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "data": times}


def _timing(plan: RoundPlan | None, rounds: Rounds | None, cold_cache: bool) -> dict[str, Any] | None:
    if rounds is None:
        return None
    device = (
        {
            "reference_device_s": _timing_summary(rounds.reference_device_s),
            "optimized_device_s": _timing_summary(rounds.optimized_device_s),
        }
        if rounds.reference_device_s and rounds.optimized_device_s
        else {}
    )
    return {
        "plan": plan.as_dict() if plan else None,
        "block_calls": rounds.block_calls,
        "cold_cache": cold_cache,
        "reference_s": _timing_summary(rounds.reference_s),
        "optimized_s": _timing_summary(rounds.optimized_s),
        **device,
    }


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
    rounds: Rounds | None,
    cold_cache: bool,
    speedup: Interval | None,
    accuracy: Accuracy,
    reference_deterministic: bool,
    memory: tuple[int | None, int | None],
    floor: float,
    ceiling: float | None,
    baseline: dict[str, Any] | None,
    verdict: Verdict,
    confirmations: list[dict[str, float] | None],
    details: dict[str, Any] | None = None,
    phases_s: dict[str, float] | None = None,
    gpu: tuple[GpuState | None, GpuState | None] = (None, None),
    independent_ratios: list[float] | None = None,
    memory_note: str | None = None,
) -> dict[str, Any]:
    return {
        **_identity(case_id, technique, names, profile, environment_key, device),
        "workload": workload,
        "timing": _timing(plan, rounds, cold_cache),
        "speedup": speedup.as_dict() if speedup else None,
        "warmup": warmup.as_dict(),
        "compile": _compile_summary(warmup.first.compile, warmup.first.optimized_s),
        "memory": {"reference_bytes": memory[0], "optimized_bytes": memory[1], "optimized_note": memory_note},
        "accuracy": {
            "passed": accuracy.passed,
            "reference_deterministic": reference_deterministic,
            "checks": [check.as_dict() for check in accuracy.checks],
        },
        "gate": {
            "floor": floor,
            "ceiling": ceiling,
            "baseline": baseline,
            "decision": verdict.decision.as_dict() if verdict.decision else None,
            "does_not_pay": verdict.does_not_pay,
            "confirmations": confirmations,
        },
        "verdict": {
            "status": verdict.status,
            "failures": verdict.failures,
            "inconclusive": verdict.inconclusive,
            "notes": verdict.notes,
        },
        "details": details,
        "phases_s": phases_s,
        "gpu": {"start": gpu[0].as_dict(), "end": gpu[1].as_dict()} if gpu[0] and gpu[1] else None,
        "independent_ratios": independent_ratios,
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
        "verdict": {"status": "fail", "failures": [cause], "inconclusive": [], "notes": []},
        "details": None,
    }


def _compile_summary(activity: CompileActivity, first_call_s: float) -> dict[str, Any] | None:
    if not activity.compiled:
        return None
    return {"first_call_s": first_call_s, **activity.as_dict()}
