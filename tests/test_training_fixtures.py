from dataclasses import replace

import pytest
import torch

from benchmarks.test_compile_training import MODES
from fixtures.data import load_cifar10, synthetic_cifar, synthetic_split
from fixtures.training import SPECS, TrainingSpec, training_workload, wide_mlp
from optbench.measuring.accuracy import TrainingAgreement, TrainingOutcome, loss_path_deviation
from optbench.measuring.hardware import dtype_unsupported_reason
from optbench.measuring.training import MIXED_PRECISION, OFF, Loading, Tricks

TINY = TrainingSpec(lambda: wide_mlp(128), batch_size=16, steps_per_epoch=12, epochs=2, heldout_size=200)


def tiny_workload(spec=TINY, seed=0):
    data = synthetic_split(spec.batch_size * spec.steps_per_epoch, spec.heldout_size, seed)
    return training_workload("tiny", spec, torch.device("cpu"), data)


def test_synthetic_data_is_a_function_of_the_seed():
    first, again, other = synthetic_cifar(64, seed=3), synthetic_cifar(64, seed=3), synthetic_cifar(64, seed=4)
    assert all(torch.equal(a, b) for a, b in zip(first.tensors, again.tensors, strict=True))
    assert not torch.equal(first.tensors[0], other.tensors[0])
    images, labels = first.tensors
    assert images.shape == (64, 3, 32, 32) and labels.min() >= 0 and labels.max() < 10


def test_reference_training_learns_well_above_chance():
    outcome = tiny_workload().trainer(OFF).train()
    first_epoch, last_epoch = outcome.losses.view(TINY.epochs, -1).mean(dim=1)
    assert last_epoch < 0.5 * first_epoch
    assert outcome.heldout_accuracy > 0.5


def test_learning_rate_schedule_steps_once_per_epoch():
    spec = replace(TINY, lr_step_epochs=1)
    trainer = tiny_workload(spec).trainer(OFF)
    trainer.train()
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(spec.lr * 0.1**spec.epochs)


def test_training_restarts_from_the_same_weights():
    trainer = tiny_workload().trainer(replace(OFF, set_to_none=True))
    first = trainer.train()
    trainer.timed_steps()
    assert TrainingAgreement(loss_tolerance=0)(first, trainer.train()).passed


def test_set_to_none_changes_no_number():
    workload = tiny_workload()
    reference = workload.trainer(OFF).train()
    optimized = workload.trainer(replace(OFF, set_to_none=True)).train()
    assert TrainingAgreement(loss_tolerance=0)(reference, optimized).passed


@pytest.mark.parametrize("mode", ["max-autotune", "reduce-overhead"])
def test_training_refuses_compile_modes_that_replay_cuda_graphs(mode):
    with pytest.raises(ValueError, match="replays CUDA graphs"):
        tiny_workload().trainer(Tricks(compile_mode=mode))


@pytest.mark.parametrize("mode", list(MODES))
def test_compile_training_declares_modes_a_training_step_survives(mode):
    assert tiny_workload().trainer(Tricks(compile_mode=mode)).tricks.label == f"compile:{mode}"


def test_epoch_slices_continue_one_epoch_and_start_the_next_only_when_it_ends(monkeypatch):
    """Each iter() of a DataLoader with persistent workers restarts the epoch and drops prefetched batches."""
    # The iterator logic is the same, with no processes.
    monkeypatch.setattr("optbench.measuring.training.PINNED_LOADING", Loading())
    spec = replace(TINY, steps_per_call=5)  # 12 batches an epoch: the third call crosses into the second epoch
    trainer = tiny_workload(spec).trainer(OFF)
    epochs_started = []
    start_epoch = torch.utils.data.DataLoader.__iter__
    monkeypatch.setattr(
        torch.utils.data.DataLoader, "__iter__", lambda self: epochs_started.append(self) or start_epoch(self)
    )
    steps = [len(trainer.epoch_slice()) for _ in range(3)]
    assert steps == [5, 5, 5]
    assert len(epochs_started) == 2


def outcome(losses, accuracy, parameter=1.0):
    return TrainingOutcome(torch.tensor(losses), accuracy, (torch.tensor([parameter]),))


def test_training_agreement_passes_small_drift_and_fails_a_run_that_stops_learning():
    reference = outcome([2.3, 1.5, 1.0, 0.6], 0.8)
    agreement = TrainingAgreement(loss_tolerance=0.25)
    assert agreement(reference, outcome([2.3, 1.6, 0.95, 0.62], 0.78)).passed
    stalled = agreement(reference, outcome([2.3, 2.3, 2.3, 2.3], 0.1))
    assert {check.metric for check in stalled.failures} == {
        "loss_path_deviation",
        "heldout_accuracy_drop",
        "heldout_accuracy",
    }


def test_training_agreement_fails_when_the_reference_itself_is_at_chance():
    chance, learned = outcome([2.3, 2.3], 0.1), outcome([2.3, 2.3], 0.6)
    result = TrainingAgreement(loss_tolerance=0.25)(chance, learned)
    assert [check.metric for check in result.failures] == ["reference_heldout_accuracy"]


def test_exact_training_agreement_catches_one_ulp_in_a_parameter():
    reference = outcome([2.3, 1.0], 0.8, parameter=1.0)
    nudged = outcome([2.3, 1.0], 0.8, parameter=float(torch.nextafter(torch.tensor(1.0), torch.tensor(2.0))))
    result = TrainingAgreement(loss_tolerance=0)(reference, nudged)
    assert result.headline.metric == "max_abs_diff" and not result.headline.passed


def test_natural_spread_sets_the_loss_limit():
    reference = outcome([2.0, 1.0, 0.5, 0.5], 0.8)
    moved = outcome([2.0, 1.3, 0.5, 0.5], 0.8)  # the path moved by 0.3 / 1.0
    asked: list[float] = []

    def spread_of(value):
        return lambda jitter, deviation, every_step: asked.append(jitter) or value

    tight = TrainingAgreement(loss_tolerance=0.4, jitter=2**-8, natural_spread=spread_of(0.09))(reference, moved)
    assert [check.metric for check in tight.failures] == ["loss_path_deviation"]
    assert tight.headline.limit == pytest.approx(0.27) and asked == [2**-8]
    assert TrainingAgreement(loss_tolerance=0.1, jitter=2**-8, natural_spread=spread_of(0.2))(reference, moved).passed
    chaotic = TrainingAgreement(loss_tolerance=0.4, jitter=2**-8, natural_spread=spread_of(1.5))(reference, moved)
    assert [check.metric for check in chaotic.failures] == ["reference_loss_path_spread"]


def test_a_references_rerun_is_a_second_training_made_once_per_run():
    workload = tiny_workload()
    trainer = workload.trainer(OFF)
    trainings = []
    train = trainer.train
    trainer.train = lambda: trainings.append(1) or train()
    first, rerun = workload.outcome(trainer), workload.rerun(trainer)
    assert rerun is not first and len(trainings) == 2
    assert workload.rerun(trainer) is rerun and workload.outcome(trainer) is first and len(trainings) == 2
    assert torch.equal(first.losses, rerun.losses)


def test_natural_spread_measures_jittered_and_rethreaded_runs_once():
    workload = tiny_workload()
    threads = torch.get_num_threads()
    spread = workload.natural_spread(OFF, 2**-8, loss_path_deviation)
    assert 0 < spread < 1
    assert torch.get_num_threads() == threads
    assert workload.natural_spread(OFF, 2**-8, loss_path_deviation) == spread and len(workload.spreads) == 1
    assert workload.natural_spread(OFF, 2**-4, loss_path_deviation) > spread  # larger perturbations move it further


@pytest.mark.skipif(dtype_unsupported_reason(torch.bfloat16, torch.device("cpu")) is not None, reason="no native bf16")
def test_autocast_bf16_resnet_stays_within_its_natural_spread_limit():
    """test_amp[bf16-resnet]'s accuracy on one thread, as the accuracy lane (xdist) sees it; the smoke suite's
    own test_amp[bf16-resnet] checks it at a default run's thread count."""
    spec = SPECS["resnet"]["smoke"]
    workload = training_workload("resnet", spec, torch.device("cpu"), synthetic_split(96, 160, 0))
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        case = workload.case(replace(OFF, autocast=torch.bfloat16), accuracy=MIXED_PRECISION, floor=1, names=("a", "b"))
        result = case.accuracy(case.reference_output(), case.optimized_output())
    finally:
        torch.set_num_threads(previous)
    assert result.passed, result.checks
    assert result.headline.limit == pytest.approx(MIXED_PRECISION.spread_multiplier * result.checks[-1].value)


@pytest.mark.parametrize("make", [lambda tmp: tmp / "missing", lambda tmp: tmp], ids=["missing", "empty"])
def test_bad_cifar10_root_is_a_one_line_usage_error(tmp_path, make):
    with pytest.raises(pytest.UsageError) as error:
        load_cifar10(str(make(tmp_path)))
    message = str(error.value)
    assert message.startswith("--cifar10-root") and "\n" not in message


def test_bad_cifar10_root_stops_pytest_before_any_test(pytester):
    pytester.makeconftest('pytest_plugins = ["fixtures.data"]')
    pytester.makepyfile("def test_never_runs():\n    raise AssertionError")
    result = pytester.runpytest("--cifar10-root", str(pytester.path / "nowhere"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and "--cifar10-root" in errors[0]


NONDETERMINISTIC_REFERENCE = """
import torch
from torch import nn

from fixtures.data import synthetic_split
from fixtures.training import TrainingSpec, training_workload, wide_mlp
from optbench.measuring.accuracy import TrainingAgreement
from optbench.measuring.training import Tricks


class Noisy(nn.Module):
    \"\"\"Noise from a generator of its own that no seed resets: a nondeterministic kernel, on purpose.\"\"\"

    def __init__(self):
        super().__init__()
        self.net = wide_mlp(32)
        self.noise = torch.Generator().manual_seed(0)

    def forward(self, images):
        logits = self.net(images)
        return logits + 1e-2 * torch.randn(logits.shape, generator=self.noise)


def test_training(optbench):
    spec = TrainingSpec(Noisy, batch_size=8, steps_per_epoch=4, epochs=1, heldout_size=16)
    workload = training_workload("noisy", spec, torch.device("cpu"), synthetic_split(32, 16, 0))
    optbench.run(
        workload.case(Tricks(set_to_none=True), accuracy=TrainingAgreement(loss_tolerance=0), floor=0.1,
        names=("a", "b"))
    )
"""


def test_a_training_reference_that_does_not_repeat_itself_is_reported(pytester):
    """The reference's training run is cached for the session; the repeat must train again, not reread the cache."""
    pytester.makeconftest('pytest_plugins = ["optbench.plugin"]')
    pytester.makepyfile(test_noisy=NONDETERMINISTIC_REFERENCE)
    result = pytester.runpytest("--benchmark-disable")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*::test_training: reference not deterministic: two seeded runs differ*"])
