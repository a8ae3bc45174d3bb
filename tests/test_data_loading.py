"""Data loading (num_workers, persistent_workers, prefetch_factor): same batches, workers seen, on any setup."""

import multiprocessing
from dataclasses import replace

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset
from torchvision.io import decode_jpeg

from fixtures.data import EncodedImages, SeededSampler, encoded_split
from fixtures.training import PatchMLP, TrainingSpec, training_workload
from optbench.measuring.accuracy import SameBatches
from optbench.measuring.training import FirstBatches, Loading, TrainingSetup, TrainingWorkload, Tricks, with_loading

SPEC = TrainingSpec(lambda: PatchMLP(8, 1), 4, 3, 1, 0, steps_per_call=3, encoded_side=48)
IN_PROCESS = Tricks(loading=Loading())
VARIANTS = [Loading(2), Loading(2, persistent_workers=True), Loading(2, persistent_workers=True, prefetch_factor=4)]


def jpeg_workload(data=None):
    data = data or encoded_split(SPEC.batch_size * SPEC.steps_per_epoch, 0, SPEC.encoded_side)
    return training_workload("tiny-jpeg", SPEC, torch.device("cpu"), data)


CASES = []
"""The loading cases a test made, closed after it (`_close_the_cases_workers`)."""


@pytest.fixture(autouse=True)
def _close_the_cases_workers():
    """As the runner closes each case: left to the garbage collector, a case's persistent workers took 5 s each
    to stop, in whichever later test the collection happened to run."""
    yield
    while CASES:
        CASES.pop().close()


def loading_case(workload, loading):
    case = workload.case(
        Tricks(loading=loading), reference=IN_PROCESS, accuracy=SameBatches(), floor=1, names=("0", loading.label)
    )
    CASES.append(case)
    return case


@pytest.mark.parametrize("loading", VARIANTS, ids=lambda loading: loading.label)
def test_workers_deliver_the_batches_the_training_process_would_load(loading):
    case = loading_case(jpeg_workload(), loading)
    reference, optimized = case.reference_output(), case.optimized_output()
    assert len(reference) == 2 * SPEC.steps_per_epoch
    assert case.accuracy(reference, optimized).passed
    # Two epochs see other orders and other crops: the comparison would catch a loader that repeats one epoch.
    first, second = reference[: SPEC.steps_per_epoch], reference[SPEC.steps_per_epoch :]
    assert SameBatches()(first, second).headline.value == SPEC.steps_per_epoch


class WorkerSeeded(EncodedImages):
    """A planted seeding bug: augmentation drawn from the loading process's own RNG, which each worker seeds from
    the loader's base seed and its worker id, instead of from the sample's seed."""

    def __getitem__(self, item):
        index, _ = item
        return self.augment(decode_jpeg(self.encoded[index])), self.labels[index]


def test_a_worker_seeding_bug_that_changes_the_batches_is_caught():
    split = encoded_split(SPEC.batch_size * SPEC.steps_per_epoch, 0, SPEC.encoded_side)
    split.train.__class__ = WorkerSeeded
    case = loading_case(jpeg_workload(split), Loading(2, persistent_workers=True))
    result = case.accuracy(case.reference_output(), case.optimized_output())
    assert [check.metric for check in result.failures] == ["batches_differing"]
    assert result.headline.value == 2 * SPEC.steps_per_epoch


@pytest.mark.parametrize("loading", VARIANTS, ids=lambda loading: loading.label)
def test_workers_are_seen_loading_and_a_loader_that_ignores_them_is_not_in_effect(loading, monkeypatch):
    case = loading_case(jpeg_workload(), loading)
    seen = [observer(case) for observer in case.in_effect]
    assert [s.in_effect for s in seen] == [True, True], [s.text() for s in seen]
    assert "2 and 2 worker processes" in seen[0].evidence

    def in_process(data, loading, *, pin_memory):
        return with_loading(data, Loading(), pin_memory=pin_memory)

    monkeypatch.setattr("optbench.measuring.training.with_loading", in_process)
    idle = loading_case(jpeg_workload(), loading)
    observed = [observer(idle) for observer in idle.in_effect]
    assert [s.in_effect for s in observed] == [False, True], [s.text() for s in observed]


def test_closing_a_case_stops_its_workers_at_once():
    """Not left to the garbage collector, which took 5 s a worker (optbench.measuring.training.Trainer.close)."""
    before = set(multiprocessing.active_children())
    case = loading_case(jpeg_workload(), Loading(2, persistent_workers=True))
    case.optimized_output()
    workers = set(multiprocessing.active_children()) - before
    assert len(workers) == 2
    case.close()
    assert not any(worker.is_alive() for worker in workers)


def test_persistent_workers_that_restart_each_epoch_are_not_in_effect(monkeypatch):
    """A planted no-op: the loader keeps its workers but not between epochs."""

    def restarting(data, loading, *, pin_memory):
        return with_loading(data, replace(loading, persistent_workers=False), pin_memory=pin_memory)

    monkeypatch.setattr("optbench.measuring.training.with_loading", restarting)
    case = loading_case(jpeg_workload(), Loading(2, persistent_workers=True))
    seen = case.in_effect[0](case)
    assert not seen.in_effect and "new ones in the second" in seen.evidence


def test_the_timed_epoch_is_the_whole_window_and_start_up_is_reported_apart():
    workload = jpeg_workload()
    case = loading_case(workload, Loading(2))
    assert len(case.optimized()) == SPEC.steps_per_epoch
    starts = case.details()["epoch_start_s"]
    assert set(starts) == {"reference", "optimized"} and all(len(s) == 2 and min(s) > 0 for s in starts.values())


def test_an_epoch_window_is_the_first_batches_of_a_long_epoch():
    batches = torch.utils.data.BatchSampler(range(100), batch_size=3, drop_last=True)
    window = FirstBatches(batches, 4)
    assert len(window) == 4 and list(window) == [list(range(i, i + 3)) for i in range(0, 12, 3)]


def test_the_seeded_sampler_depends_on_the_epoch_alone():
    sampler = SeededSampler(10, seed=3)
    first = list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != first
    sampler.set_epoch(0)
    assert list(sampler) == first and sorted(index for index, _ in first) == list(range(10))


def own_workload(data):
    setup = TrainingSetup(
        model=torch.nn.Linear(4, 2),
        loss=lambda outputs, batch: outputs.square().mean(),
        optimizer=lambda params: torch.optim.SGD(params, lr=0.1),
        data=data,
    )
    return TrainingWorkload("own", setup, torch.device("cpu"), own_model=True)


def shuffled_loader():
    return DataLoader(TensorDataset(torch.randn(24, 4), torch.randn(24, 2)), batch_size=4, shuffle=True,
                      generator=torch.Generator().manual_seed(0))  # fmt: skip


def test_a_users_dataloader_is_loaded_by_workers_with_the_same_batches():
    case = loading_case(own_workload(shuffled_loader()), Loading(2))
    assert case.accuracy(case.reference_output(), case.optimized_output()).passed
    assert all(observer(case).in_effect for observer in case.in_effect)


def test_persistent_workers_reorder_a_shuffle_drawn_from_the_loaders_generator_from_the_second_epoch():
    """A finding, not a fault of the harness: a DataLoader draws its workers' base seed from its generator at
    each new iterator, and persistent workers keep one iterator, so from the second epoch on its RandomSampler
    draws from another point of the same generator. A sampler seeded by its epoch (`set_epoch`) does not."""
    case = loading_case(own_workload(shuffled_loader()), Loading(2, persistent_workers=True))
    reference, optimized = case.reference_output(), case.optimized_output()
    epoch = len(reference) // 2
    assert SameBatches()(reference[:epoch], optimized[:epoch]).passed
    assert SameBatches()(reference[epoch:], optimized[epoch:]).headline.value == epoch


class Stream(IterableDataset):
    def __iter__(self):
        return iter(torch.randn(8, 4))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ([torch.randn(4, 4)], "not a DataLoader"),
        (DataLoader(Stream(), batch_size=2), "IterableDataset"),
    ],
)
def test_a_setup_loading_cannot_act_on_skips_with_the_reason(data, reason):
    with pytest.raises(pytest.skip.Exception, match=reason):
        loading_case(own_workload(data), Loading(2))
