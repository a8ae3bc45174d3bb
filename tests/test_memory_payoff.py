"""Memory cases: the peak-memory ratio's interval, the verdict, history, records and advice; checkpointing itself."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from torch import nn

from fixtures.data import synthetic_split
from fixtures.training import PatchMLP, TrainingSpec, training_workload
from optbench.advise.advice import advice_of
from optbench.measuring.accuracy import TrainingAgreement
from optbench.measuring.checkpointing import Checkpointed, repeated_blocks
from optbench.measuring.memory_payoff import MemoryPayoff, MemoryResult, judge_memory, memory_ratio, ratio_interval
from optbench.measuring.training import Tricks
from optbench.storage.baselines import Baseline, BaselineError, Recording, parse_entry
from optbench.storage.record import Record
from optbench.verdict.gate import MemoryClaim, judge
from optbench.verdict.stats import Interval
from tests.records import make_record
from tests.test_gate import GOOD, NOWHERE, SETTINGS

PAYOFF = MemoryPayoff(floor=2.0, max_slowdown=1.5)
SPEC = TrainingSpec(lambda: PatchMLP(16, 4), 8, 6, 1, 64)


def test_the_ratio_interval_covers_the_true_ratio_as_often_as_it_claims():
    """Simulated: three paired measurements of a true ratio of 3 under lognormal noise of 5%, 4000 times."""
    rng = np.random.default_rng(0)
    logs = math.log(3.0) + 0.05 * rng.standard_normal((4000, 3))
    covered = [interval.low <= 3.0 <= interval.high for interval in map(ratio_interval, logs.tolist())]
    share = sum(covered) / len(covered)
    # 95% claimed; the binomial 99.9% band around it for 4000 draws is +-1.1%.
    assert 0.939 <= share <= 0.961, share


def test_identical_repetitions_give_the_point_as_the_interval():
    identical = Interval(pytest.approx(4.0), pytest.approx(4.0), pytest.approx(4.0), degrees_of_freedom=2.0)
    assert ratio_interval([math.log(4.0)] * 3) == identical


def interval(point, width=0.01):
    return Interval(point, point - width, point + width)


@pytest.mark.parametrize(
    ("ratio", "speed", "history", "failures", "does_not_pay"),
    [
        (interval(4.6), interval(0.8), [4.6], [], False),
        (interval(1.2), interval(0.8), [4.6], ["memory: peak ratio", "memory: peak ratio"], True),
        (interval(1.2), interval(0.8), [], [], True),
        (interval(4.0), interval(0.9), [4.6], ["fell below its history"], False),
        (interval(4.6), interval(0.5), [4.6], ["speed: costs 2.00x"], False),
        (interval(4.6), interval(0.5), [], [], False),
    ],
    ids=[
        "pays",
        "below-floor-with-history",
        "below-floor-new-machine",
        "fell-from-history",
        "too-slow",
        "too-slow-new",
    ],
)
def test_the_memory_verdict(ratio, speed, history, failures, does_not_pay):
    failed, notes, not_paying = judge_memory(ratio, speed, PAYOFF, history, min_effect=0.05)
    assert len(failed) == len(failures) and all(text in f for text, f in zip(failures, failed, strict=True))
    assert not_paying == does_not_pay
    if not history and speed.high < 1 / PAYOFF.max_slowdown:
        assert any("over its time bound here" in note for note in notes)


def test_a_slow_memory_case_is_not_judged_against_a_speed_floor():
    claim = MemoryClaim(PAYOFF, interval(4.6))
    verdict = judge([interval(0.8)], GOOD, NOWHERE, None, None, SETTINGS, memory=claim)
    assert verdict.status == "pass" and not verdict.does_not_pay
    assert any(note.startswith("memory payoff") for note in verdict.notes)
    assert not any(note.startswith("does not pay here: 0.80x") for note in verdict.notes)


def test_the_history_keeps_memory_ratios_and_gates_a_drop():
    history = Baseline(tuple(Recording(0.8, (0.79, 0.81), memory_ratio=4.6) for _ in range(8)))
    verdict = judge([interval(0.8)], GOOD, NOWHERE, None, history, SETTINGS, memory=MemoryClaim(PAYOFF, interval(3.0)))
    assert any("fell below its history's 4.60x" in failure for failure in verdict.failures)


def test_a_recordings_memory_ratio_round_trips_and_a_bad_one_is_a_one_line_error(tmp_path):
    recording = Recording(0.8, (0.79, 0.81), memory_ratio=4.6)
    entry = {"recordings": [recording.as_dict()]}
    assert parse_entry(tmp_path / "b.json", "c", entry).latest.memory_ratio == 4.6
    entry["recordings"][0]["memory_ratio"] = "lots"
    with pytest.raises(BaselineError, match="memory_ratio"):
        parse_entry(tmp_path / "b.json", "c", entry)


def memory_record(ratio, speed):
    record = make_record(speedup=(speed, speed - 0.01, speed + 0.01))
    return dataclasses.replace(record, memory_payoff=MemoryResult(2.0, 1.5, interval(ratio)))


def test_a_records_memory_payoff_round_trips():
    record = memory_record(4.6, 0.8)
    assert Record.from_json(record.to_json()).memory_payoff == record.memory_payoff


@pytest.mark.parametrize(
    ("ratio", "speed", "word"), [(4.6, 0.8, "use for memory"), (1.2, 0.8, "skip"), (4.6, 0.5, "skip")]
)
def test_advice_weighs_a_memory_case_by_its_memory_and_its_cost(ratio, speed, word):
    assert advice_of(memory_record(ratio, speed), "model").word == word


@pytest.fixture
def workload():
    return training_workload("tiny-deep", SPEC, torch.device("cpu"), synthetic_split(48, 64, 0))


def checkpoint_case(workload):
    return workload.case(Tricks(checkpointing=True), accuracy=TrainingAgreement(loss_tolerance=0), floor=0.67,
                         memory_payoff=PAYOFF, names=("a", "b"))  # fmt: skip


def test_the_blocks_of_a_deep_model_are_its_repeated_stack():
    model = PatchMLP(16, 4)
    assert repeated_blocks(model) == list(model.blocks)
    assert repeated_blocks(nn.Sequential(nn.Linear(2, 2), nn.ReLU())) == []


def test_checkpointed_training_is_bitwise_the_reference_and_seen_recomputing_with_less_memory(workload):
    case = checkpoint_case(workload)
    assert case.accuracy(case.reference_output(), case.optimized_output()).passed
    seen = [observer(case) for observer in case.in_effect]
    assert [s.in_effect for s in seen] == [True, True], [s.text() for s in seen]


def test_a_checkpointed_block_that_drops_its_residual_is_caught(workload, monkeypatch):
    """A planted fault: the checkpointed block returns its branch without adding its input back."""

    checkpointed = Checkpointed.__call__
    monkeypatch.setattr(Checkpointed, "__call__", lambda self, x: checkpointed(self, x) - x)
    case = checkpoint_case(workload)
    result = case.accuracy(case.reference_output(), case.optimized_output())
    assert "max_abs_diff" in [check.metric for check in result.failures]


def test_checkpointing_that_does_not_checkpoint_is_not_in_effect(workload, monkeypatch):
    monkeypatch.setattr(Checkpointed, "__call__", lambda self, *args, **kwargs: self.forward(*args, **kwargs))
    case = checkpoint_case(workload)
    assert [observer(case).in_effect for observer in case.in_effect] == [False, False]


def test_a_model_without_repeated_blocks_or_a_budget_without_compile_skips_with_the_reason(workload):
    flat = dataclasses.replace(workload, setup=dataclasses.replace(workload.setup, model=nn.Sequential(
        nn.Flatten(), nn.Linear(3 * 32 * 32, 10))))  # fmt: skip
    with pytest.raises(pytest.skip.Exception, match="no stack of repeated blocks"):
        checkpoint_case(flat)
    with pytest.raises(pytest.skip.Exception, match="does not use it"):
        workload.case(
            Tricks(memory_budget=0.5), accuracy=TrainingAgreement(loss_tolerance=0), floor=1, names=("a", "b")
        )


# The memory verdict's edges, found by mutation testing (docs/mutation.md).


def test_an_unmeasured_peak_is_neither_judged_nor_does_not_pay():
    failures, notes, does_not_pay = judge_memory(None, interval(0.5), PAYOFF, [4.6], min_effect=0.05)
    assert (failures, does_not_pay) == ([], False)
    assert notes == ["peak memory not measured on this device, so the memory payoff is not judged"]


def test_a_ratio_or_speed_touching_its_bound_is_not_beyond_it():
    """'Entirely below': an interval whose top end is exactly the floor, the history's allowance or the time bound
    (all exact in binary here) is not below it."""
    payoff = MemoryPayoff(floor=2.0, max_slowdown=2.0)
    at_the_bounds = judge_memory(Interval(1.5, 1.0, 2.0), Interval(0.4, 0.3, 0.5), payoff, [4.0], min_effect=0.5)
    assert at_the_bounds == ([], ["memory payoff: peak 1.50x [1.00, 2.00] lower (floor 2.00x)"], False)


def test_the_peak_ratio_is_measured_from_alternating_calls():
    """A quarter of the reference's allocation reads 4x on CPU, where allocations repeat exactly; a side that
    allocates nothing cannot be measured."""
    device = torch.device("cpu")
    ratio = memory_ratio(lambda: torch.ones(256, 1024).sum(), lambda: torch.ones(64, 1024).sum(), device, 2)
    assert ratio is not None and ratio.point == pytest.approx(4.0, rel=1e-3) and ratio.low == ratio.high
    assert memory_ratio(lambda: torch.ones(256, 1024).sum(), lambda: 1, device, 2) is None


def test_two_repetitions_give_an_interval_with_one_degree_of_freedom():
    two = ratio_interval([math.log(2.0), math.log(8.0)])
    assert two.point == pytest.approx(4.0) and two.low < 2.0 and two.high > 8.0  # t with 1 df is 12.7


def test_one_repetition_is_no_interval():
    """A NaN interval used to come back, and every comparison with it reads False: no judgement at all."""
    with pytest.raises(ValueError, match="at least 2 repetitions"):
        ratio_interval([0.3])
