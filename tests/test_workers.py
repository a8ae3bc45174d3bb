import pytest
import torch

from optbench.workers import threads_per_worker, worker_device


@pytest.mark.parametrize(
    ("worker", "gpus", "expected"), [("gw0", 4, "cuda:0"), ("gw3", 4, "cuda:3"), ("gw1", 2, "cuda:1")]
)
def test_each_worker_owns_the_gpu_of_its_number(worker, gpus, expected):
    assert worker_device(worker, gpus) == torch.device(expected)


def test_more_workers_than_gpus_is_refused():
    with pytest.raises(ValueError, match="run with -n 4 or fewer"):
        worker_device("gw4", 4)


def test_a_controller_id_is_not_a_worker():
    with pytest.raises(ValueError, match="not an xdist worker id"):
        worker_device("master", 4)


@pytest.mark.parametrize(("threads", "workers", "expected"), [(16, 4, 4), (2, 2, 1), (2, 8, 1), (8, 1, 8)])
def test_workers_share_the_threads(threads, workers, expected):
    assert threads_per_worker(threads, workers) == expected
