"""The optimizer's implementation (for-loop, foreach, fused) and the compiled optimizer step, on any setup."""

from dataclasses import replace

import pytest
import torch

from fixtures.data import synthetic_split
from fixtures.training import PatchMLP, TrainingSpec, training_workload
from optbench.measuring.in_effect import OptimizerKernels
from optbench.measuring.training import OPTIMIZER_ROUNDING, Tricks
from optbench.techniques.optimizer_impl import with_implementation

SPEC = TrainingSpec(lambda: PatchMLP(16, 6), 16, 12, 1, 160, lr=3e-3, weight_decay=1e-2, optimizer="adamw")
FOR_LOOP = Tricks(optimizer_impl="for-loop")


@pytest.fixture
def workload():
    return training_workload("tiny-adamw", SPEC, torch.device("cpu"), synthetic_split(16 * 12, 160, 0))


def accuracy_of(workload, tricks):
    case = workload.case(tricks, reference=FOR_LOOP, accuracy=OPTIMIZER_ROUNDING, floor=1, names=("a", "b"))
    return case, case.accuracy(case.reference_output(), case.optimized_output())


@pytest.mark.parametrize(
    "tricks", [Tricks(optimizer_impl="fused"), Tricks(optimizer_impl="foreach", compile_optimizer=True)]
)
def test_a_reordered_step_stays_within_the_reference_s_own_rounding(workload, tricks):
    case, result = accuracy_of(workload, tricks)
    assert result.passed, result.checks
    assert result.headline.metric == "parameter_deviation" and 0 < result.headline.limit < 1e-4
    assert case.expect_compiled == tricks.compile_optimizer


def test_an_implementation_that_steps_at_another_learning_rate_is_caught(workload, monkeypatch):
    """A planted fault of the kind: the fused optimizer takes its learning rate 1% off (the for-loop reference's
    is right)."""

    def off_by_one_percent(optimizer, implementation):
        rebuilt = with_implementation(optimizer, implementation)
        for group in rebuilt.param_groups:
            group["lr"] *= 1.01 if implementation == "fused" else 1
        return rebuilt

    monkeypatch.setattr("optbench.techniques.optimizer_impl.with_implementation", off_by_one_percent)
    _, result = accuracy_of(workload, Tricks(optimizer_impl="fused"))
    assert [check.metric for check in result.failures] == ["parameter_deviation"]


@pytest.mark.parametrize("implementation", ["for-loop", "foreach", "fused"])
def test_each_implementation_is_seen_in_the_kernels_its_step_dispatches(workload, implementation, monkeypatch):
    case = workload.case(Tricks(optimizer_impl=implementation), reference=FOR_LOOP, accuracy=OPTIMIZER_ROUNDING,
                         floor=1, names=("a", "b"))  # fmt: skip
    assert OptimizerKernels(implementation)(case).in_effect
    assert OptimizerKernels("for-loop", side="reference")(case).in_effect
    # A planted no-op: the optimizer left as the setup built it (AdamW's default on CPU is the for-loop).
    monkeypatch.setattr(
        "optbench.techniques.optimizer_impl.with_implementation", lambda optimizer, implementation: optimizer
    )
    idle = workload.case(Tricks(optimizer_impl=implementation), reference=FOR_LOOP, accuracy=OPTIMIZER_ROUNDING,
                         floor=1, names=("a", "b"))  # fmt: skip
    assert OptimizerKernels(implementation)(idle).in_effect == (implementation == "for-loop")


def test_an_optimizer_without_the_option_skips_with_the_reason(workload):
    lbfgs = replace(workload, setup=replace(workload.setup, optimizer=torch.optim.LBFGS))
    with pytest.raises(pytest.skip.Exception, match="its optimizer LBFGS takes no foreach/fused option"):
        lbfgs.case(Tricks(optimizer_impl="foreach"), accuracy=OPTIMIZER_ROUNDING, floor=1, names=("a", "b"))
