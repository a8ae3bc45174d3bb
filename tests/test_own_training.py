"""--train: the user's training setup loaded, checked and measured by the catalogue's own training techniques."""

import copy
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from optbench.advise.own_model import SpecError, load_training
from optbench.measuring.accuracy import TrainingAgreement
from optbench.measuring.training import REORDERED_FP32, TrainingSetup, Tricks
from optbench.storage.record import read_records
from tests.catalogue_run import catalogue

ROOT = Path(__file__).resolve().parent.parent
MODELS = "tests/own_models.py"
CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("train", "says"),
    [
        (f"{MODELS}:absent", "names no function: tests/own_models.py has no attribute 'absent'"),
        (f"{MODELS}:not_a_setup", "returned a Tagger: return optbench.TrainingSetup(model=..."),
        (f"{MODELS}:no_batches", "its data gave no batch"),
        (f"{MODELS}:per_example_loss", "its loss gave a torch.float32 tensor of shape (8,): return one floating-point"),
        (f"{MODELS}:wrong_targets", "one plain fp32 training step fails: RuntimeError"),
    ],
)
def test_a_training_spec_that_cannot_be_measured_is_one_line_naming_it(train, says, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SpecError) as error:
        load_training(train, None, CPU)
    assert str(error.value).startswith(f"--train {train!r}") and says in str(error.value)
    assert "\n" not in str(error.value)


@pytest.fixture
def tagger(monkeypatch) -> object:
    monkeypatch.chdir(ROOT)
    return load_training(f"{MODELS}:tagger_training", "tagger", CPU)


def test_checking_the_setup_leaves_its_model_s_weights_as_they_were(tagger):
    from tests.own_models import tagger_training

    fresh = tagger_training().model.state_dict()
    assert all(torch.equal(fresh[name], value) for name, value in tagger.setup.model.state_dict().items())


def test_a_technique_on_a_setup_without_held_out_data_compares_the_loss_path_bitwise(tagger):
    case = tagger.case(
        Tricks(set_to_none=True), accuracy=TrainingAgreement(loss_tolerance=0), floor=1, names=("a", "b")
    )
    reference, optimized = case.reference_output(), case.optimized_output()
    assert reference.heldout_accuracy is None and len(reference.losses) == 6
    result = case.accuracy(reference, optimized)
    assert result.passed and [check.metric for check in result.checks] == ["max_abs_diff"]
    assert case.model_may_break and case.floor_applies_on == ()
    assert torch.equal(case.reference_rerun().losses, reference.losses)  # the data's order is the same every run


@pytest.mark.parametrize(
    ("tricks", "why"),
    [
        (Tricks(channels_last=True), "channels_last does not apply to tagger: it runs no convolution"),
        (Tricks(pin_memory=True), "pinned does not apply to tagger: its data is not a DataLoader"),
    ],
)
def test_a_trick_with_nothing_to_act_on_skips_with_the_reason(tagger, tricks, why):
    with pytest.raises(pytest.skip.Exception, match=why):
        tagger.case(tricks, accuracy=REORDERED_FP32, floor=1, names=("a", "b"))


def test_held_out_accuracy_is_scored_by_the_setup_s_own_rule(monkeypatch):
    """Against a count made here: the untrained CNN's top-1 (about one in ten), then a rule of the setup's own
    that holds for a known share of the examples, over two batches of unequal size (a mean of each batch's mean
    would differ). An accuracy that is not the share scored would never let the held-out drop fail a verdict."""
    monkeypatch.chdir(ROOT)
    workload = load_training("examples/cnn_bn.py:train", None, CPU)
    assert workload.name == "train" and isinstance(workload.setup, TrainingSetup)
    trainer = workload.trainer(Tricks())
    heldout = workload.setup.heldout.dataset
    images, labels = (torch.stack(column) for column in zip(*heldout, strict=True))
    with torch.no_grad():
        top1 = copy.deepcopy(trainer.model).eval()(images).argmax(dim=-1) == labels
    assert 0 < trainer.heldout_accuracy() == top1.sum().item() / len(heldout) < 0.5
    low_labels = (labels < 5).sum().item() / len(heldout)
    trainer.setup = replace(
        workload.setup, heldout=DataLoader(heldout, batch_size=48), correct=lambda outputs, batch: batch[1] < 5
    )
    assert trainer.heldout_accuracy() == low_labels and 0 < low_labels < 1


def test_the_training_techniques_run_on_the_user_s_setup_and_nothing_else_does(tmp_path):
    results = tmp_path / "results"
    run = catalogue(
        "--train",
        "examples/cnn_bn.py:train",
        "--model-name",
        "cnn_bn",
        results=results,
        select="zero_grad or compile_training or channels_last",
    )
    assert run.returncode == 0, run.stdout[-3000:]
    records = {record.case.rpartition("::")[2]: record for record in read_records(results)}
    assert set(records) == {
        "test_zero_grad[cnn_bn]",
        "test_compile_training[default-cnn_bn]",
        "test_channels_last_training[cnn_bn]",
    }, run.stdout[-3000:]
    assert records["test_zero_grad[cnn_bn]"].accuracy.headline.metric == "max_abs_diff"
    compiled = records["test_compile_training[default-cnn_bn]"]
    assert compiled.compile is not None and compiled.compile.graphs >= 1
    assert {check.metric for check in compiled.accuracy.checks} >= {"loss_path_deviation", "heldout_accuracy_drop"}
    assert all(not record.verdict.failures for record in records.values()), run.stdout[-3000:]


def test_a_hugging_face_model_trains_on_dict_batches_with_its_own_loss(monkeypatch):
    """examples/hf_encoder.py:train: the default forward passes the dict, labels included; no special case."""
    monkeypatch.chdir(ROOT)
    workload = load_training("examples/hf_encoder.py:train", "bert", CPU)
    case = workload.case(
        Tricks(set_to_none=True), accuracy=TrainingAgreement(loss_tolerance=0), floor=1, names=("a", "b")
    )
    reference, optimized = case.reference_output(), case.optimized_output()
    assert len(reference.losses) == 4 and reference.heldout_accuracy is not None
    assert case.accuracy(reference, optimized).passed
    assert len(case.optimized()) == 1  # one timed step
