"""Host-sync cases: the loss read every step against once per N, tensors made on the host against on the device.
The timing is CUDA's; what runs here is each side's loop, its counts and its numbers."""

from types import SimpleNamespace

import pytest
import torch

from fixtures.data import synthetic_split
from fixtures.training import PatchMLP, TrainingSpec, training_workload
from optbench.measuring.accuracy import TrainingAgreement
from optbench.measuring.in_effect import HOST_TO_DEVICE_COPIES, HostTraffic
from optbench.measuring.training import Trainer, Tricks

SPEC = TrainingSpec(lambda: PatchMLP(8, 2), 4, 8, 1, 16, steps_per_call=2)
BITWISE = TrainingAgreement(loss_tolerance=0, min_accuracy=None)


@pytest.fixture
def workload():
    return training_workload("tiny", SPEC, torch.device("cpu"), synthetic_split(32, 16, 0))


def habit_case(workload, reference, optimized):
    return workload.case(optimized, reference=reference, accuracy=BITWISE, floor=1.05, names=("habit", "without"))


def test_reading_the_loss_once_per_n_steps_is_seen_and_changes_no_loss(workload):
    case = habit_case(workload, Tricks(log_loss_every=1), Tricks(log_loss_every=4))
    (observer,) = case.in_effect
    seen = observer(case)
    # 4 calls of 2 steps: 8 reads every step against 2 once per 4 steps.
    assert seen.in_effect, seen.text()
    assert "made 2 host reads in 4 call(s) against the reference's 8 (expected at least 6 fewer)" in seen.text()
    assert case.accuracy(case.reference_output(), case.optimized_output()).passed


def test_a_loop_that_still_reads_the_loss_every_step_is_not_in_effect(workload, monkeypatch):
    case = habit_case(workload, Tricks(log_loss_every=1), Tricks(log_loss_every=4))
    monkeypatch.setattr(Trainer, "log_loss", lambda self, loss: loss.item())
    seen = case.in_effect[0](case)
    assert not seen.in_effect
    assert "made 8 host reads in 4 call(s) against the reference's 8" in seen.text()


def test_the_logged_loss_is_the_mean_of_the_steps_since_the_last_read(workload):
    trainer = workload.trainer(Tricks(log_loss_every=4))
    losses = trainer.timed_steps() + trainer.timed_steps()
    assert trainer.logged_loss == pytest.approx(float(torch.stack(losses).mean()), rel=1e-6)


def test_a_mask_made_on_either_side_changes_no_number(workload):
    case = habit_case(workload, Tricks(new_tensors="host"), Tricks(new_tensors="device"))
    assert case.accuracy(case.reference_output(), case.optimized_output()).passed
    assert [type(observer).__name__ for observer in case.in_effect] == ["HostTraffic"]


def copies_case(optimized_device: str) -> SimpleNamespace:
    # The meta device stands in for a GPU: `.to("meta")` is a host-to-device copy as a dispatch mode sees it.
    return SimpleNamespace(
        reference=lambda: [torch.ones(4).to("meta") for _ in range(3)],
        optimized=lambda: [torch.ones(4, device=optimized_device).to("meta") for _ in range(3)],
    )


def test_tensors_created_on_the_device_make_no_host_to_device_copy():
    seen = HostTraffic("mask on the device", HOST_TO_DEVICE_COPIES, calls=2, fewer=6)(copies_case("meta"))
    assert seen.in_effect, seen.text()
    assert "made 0 host-to-device copies in 2 call(s) against the reference's 6" in seen.text()


def test_tensors_still_created_on_the_host_are_not_in_effect():
    seen = HostTraffic("mask on the device", HOST_TO_DEVICE_COPIES, calls=2, fewer=6)(copies_case("cpu"))
    assert not seen.in_effect
    assert "made 6 host-to-device copies" in seen.text()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"log_loss_every": 0}, "log_loss_every must be a number of steps >= 1, not 0"),
        ({"new_tensors": "gpu"}, "new_tensors is one of host, device, not 'gpu'"),
    ],
)
def test_a_bad_host_sync_option_is_a_one_line_error(options, message):
    with pytest.raises(ValueError, match=message):
        Tricks(**options)
