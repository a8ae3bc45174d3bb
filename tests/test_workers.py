import json

import pytest
import torch

from optbench.running.workers import merge_benchmark_runs, threads_per_worker, without_timing_data, worker_device


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


def run(worker, names, key="cuda-fake-h100-sm90-torch2.9"):
    return {
        "machine_info": {"node": "runner", "optbench": {"environment_key": key}},
        "commit_info": {"id": "abc"},
        "benchmarks": [{"fullname": name, "stats": {"median": 1.0, "data": [1.0, 1.0]}} for name in names],
        "datetime": f"2026-01-01T00:00:0{worker}",
        "version": "5.3.1",
    }


def test_worker_runs_merge_into_one_run_with_every_benchmark():
    merged = merge_benchmark_runs([run(1, ["b.py::d", "a.py::c"]), run(0, ["a.py::a"])])
    assert [benchmark["fullname"] for benchmark in merged["benchmarks"]] == ["a.py::a", "a.py::c", "b.py::d"]
    assert merged["machine_info"]["optbench"]["environment_key"] == "cuda-fake-h100-sm90-torch2.9"
    assert merged["datetime"] == "2026-01-01T00:00:01" and merged["version"] == "5.3.1"
    assert all("data" not in benchmark["stats"] for benchmark in without_timing_data(merged)["benchmarks"])
    assert merged["benchmarks"][0]["stats"]["data"] == [1.0, 1.0]


def test_workers_on_different_gpu_kinds_are_not_merged():
    with pytest.raises(ValueError, match="different environments"):
        merge_benchmark_runs([run(0, ["a"]), run(1, ["b"], key="cuda-fake-a100-sm80-torch2.9")])


FAKE_GPUS = """
import os

import torch

pytest_plugins = ["optbench.plugin"]


def refuse(*args, **kwargs):
    raise AssertionError("the xdist controller initialised CUDA")


torch.cuda.device_count = lambda: 2
torch.cuda.is_available = lambda: True
if "PYTEST_XDIST_WORKER" in os.environ:
    torch.cuda.set_device = lambda device: None
    torch.cuda.get_device_capability = lambda device=None: (9, 0)
    torch.cuda.get_device_name = lambda device=None: "Fake H100"
else:  # these create a CUDA context; device_count (NVML) and is_available (cuInit) do not
    for name in ("_lazy_init", "init", "set_device", "current_device", "synchronize",
                 "get_device_capability", "get_device_name", "get_device_properties"):
        setattr(torch.cuda, name, refuse)
"""

TIMED = """
import os

import torch


def test_workers_share_the_cpu():
    assert torch.get_num_threads() == int(os.environ["EXPECTED_THREADS"])


def test_a(benchmark):
    benchmark(sum, range(10))


def test_b(benchmark):
    benchmark(sum, range(20))


def test_c(benchmark):
    benchmark(sum, range(30))
"""


def test_gpu_per_worker_merges_the_workers_benchmarks_and_keeps_the_controller_off_the_gpus(pytester, monkeypatch):
    monkeypatch.setenv("EXPECTED_THREADS", str(max(1, torch.get_num_threads() // 2)))
    pytester.makeconftest(FAKE_GPUS)
    pytester.makepyfile(test_timed=TIMED)
    result = pytester.runpytest_subprocess(
        "-n", "2", "--gpu-per-worker", "--benchmark-json=run.json", "--benchmark-autosave",
        "--benchmark-max-time=0.01", "-p", "no:cacheprovider",
    )  # fmt: skip
    result.assert_outcomes(passed=4)
    merged = json.loads((pytester.path / "run.json").read_text())
    assert sorted(benchmark["name"] for benchmark in merged["benchmarks"]) == ["test_a", "test_b", "test_c"]
    assert all(benchmark["stats"]["data"] for benchmark in merged["benchmarks"])
    assert merged["machine_info"]["optbench"]["environment_key"].startswith("cuda-fake-h100-sm90-")
    (saved,) = (pytester.path / ".benchmarks").glob("*/0001_*.json")
    assert len(json.loads(saved.read_text())["benchmarks"]) == 3
    assert not list((pytester.path / ".optbench").glob("benchmark-gw*.json"))
