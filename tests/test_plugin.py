"""End to end: the plugin on a tiny synthetic benchmark whose optimized variant does half the work."""

import json

import pytest
import torch

from optbench.environment import environment_key

CONFTEST = 'pytest_plugins = ["optbench.plugin"]\n'

BENCHMARK = """
import torch
from optbench import Case, Exact, Requires


def count(n):
    total = 0
    for i in range(n):
        total += i
    return total


def test_half_the_work(optbench):
    optbench.run(
        Case(
            reference=lambda: torch.tensor([float(count(40_000) + count(40_000) - count(40_000))]),
            optimized=lambda: torch.tensor([float(count(40_000))]),
            accuracy=Exact(),
            floor=1.2,
            names=("3x work", "1x work"),
        )
    )


def test_needs_a_gpu(optbench):
    optbench.run(Case(reference=lambda: 1, optimized=lambda: 1, accuracy=Exact(), floor=1.0,
                      requires=Requires(cuda=True, why="it times host-to-GPU copies")))
"""

CASE_ID = "smoke:test_synthetic.py::test_half_the_work"
FAST = ("--case-budget", "1.5", "-rs", "-p", "no:cacheprovider")


@pytest.fixture
def project(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_synthetic=BENCHMARK)
    return pytester


def write_baseline(pytester, speedup, content=None):
    directory = pytester.path / "baselines"
    directory.mkdir(exist_ok=True)
    path = directory / f"{environment_key(torch.device('cpu'))}.json"
    entry = {
        "speedup": speedup,
        "interval": [speedup * 0.95, speedup * 1.05],
        "recorded": "2026-12-01",
        "accuracy": {"metric": "max_abs_diff", "value": 0.0, "limit": 0.0, "lower_is_better": True},
    }
    path.write_text(content if content is not None else json.dumps({"schema": 1, "cases": {CASE_ID: entry}}))
    return path


def test_passes_against_a_matching_baseline_and_records_everything(project):
    write_baseline(project, 3.0)
    result = project.runpytest_subprocess("--benchmark-json=run.json", *FAST)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*optbench: profile smoke on cpu*", "*test_half_the_work*3.00x*pass*"])
    result.stdout.fnmatch_lines(["*SKIP*needs a CUDA device: it times host-to-GPU copies*"])
    (bench,) = json.loads((project.path / "run.json").read_text())["benchmarks"]
    record = bench["extra_info"]["optbench"]
    assert record["speedup"]["low"] <= record["speedup"]["point"] <= record["speedup"]["high"]
    assert 2.0 < record["speedup"]["point"] < 4.0
    assert len(record["timing"]["reference_s"]["data"]) == len(bench["stats"]["data"]) == bench["stats"]["rounds"]
    assert record["accuracy"]["passed"] and record["gate"]["baseline"]["speedup"] == 3.0
    assert record["memory"]["reference_bytes"] is not None
    recorded_lines = (project.path / ".optbench" / "records.jsonl").read_text().splitlines()
    assert [json.loads(line)["case"] for line in recorded_lines] == [CASE_ID]


def test_fails_readably_against_a_baseline_demanding_3x_more(project):
    write_baseline(project, 9.0)
    result = project.runpytest_subprocess(*FAST)
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["*test_half_the_work: speed: measured *x * lies entirely below the threshold 8.10x (baseline 9.00x*"]
    )


def test_update_baselines_records_then_gates_the_next_run(project):
    result = project.runpytest_subprocess("--update-baselines", *FAST)
    result.assert_outcomes(passed=1, skipped=1)
    (path,) = (project.path / "baselines").glob("*.json")
    entry = json.loads(path.read_text())["cases"][CASE_ID]
    assert entry["interval"][0] <= entry["speedup"] <= entry["interval"][1]
    assert entry["accuracy"]["metric"] == "max_abs_diff"
    project.runpytest_subprocess(*FAST).assert_outcomes(passed=1, skipped=1)


def test_timing_disabled_checks_accuracy_without_gating_speed(project):
    write_baseline(project, 9.0)
    result = project.runpytest_subprocess("--benchmark-disable", *FAST)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*test_half_the_work*not timed*timing disabled*"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--profile", "fast"), "*argument --profile: invalid choice: 'fast'*"),
        (("--device", "tpu"), "*--device 'tpu': expected cpu, cuda or cuda:N*"),
        (("--speedup-tolerance", "2"), "*'2' must be a fraction in [[]0, 1)*"),
    ],
)
def test_bad_options_are_one_line_usage_errors(project, arguments, message):
    result = project.runpytest_subprocess(*arguments)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised where no GPU is visible")
def test_cuda_without_a_gpu_is_a_usage_error(project):
    result = project.runpytest_subprocess("--device", "cuda")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--device cuda: torch sees no CUDA device here; run with --device cpu*"])


def test_corrupt_baseline_is_a_one_line_error_and_is_left_alone(project):
    path = write_baseline(project, 3.0, content='{"schema": 1, "cases": {')
    result = project.runpytest_subprocess("--update-baselines", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {path}: not valid JSON*restore it from git or delete it*"])
    assert path.read_text() == '{"schema": 1, "cases": {'


def test_xdist_accuracy_lane_checks_accuracy_untimed_with_shared_threads(project, monkeypatch):
    monkeypatch.setenv("EXPECTED_THREADS", str(max(1, torch.get_num_threads() // 2)))
    project.makepyfile(
        test_threads="""
import os
import torch

def test_workers_share_the_cpu():
    assert torch.get_num_threads() == int(os.environ["EXPECTED_THREADS"])
"""
    )
    write_baseline(project, 9.0)  # would fail the speed gate if timings were (wrongly) gated
    result = project.runpytest_subprocess("-n", "2", *FAST)
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*test_half_the_work*not timed*", "timing disabled*speed was not gated"])


def test_gpu_per_worker_needs_xdist(project):
    result = project.runpytest_subprocess("--gpu-per-worker")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpu-per-worker needs pytest-xdist workers*"])


def test_compare_with_a_saved_run_reports_significance(project):
    project.runpytest_subprocess("--benchmark-autosave", *FAST).assert_outcomes(passed=1, skipped=1)
    result = project.runpytest_subprocess("--benchmark-compare", *FAST)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*optbench: change of each speedup vs*",
            "case*saved run*this run*change*Mann-Whitney p*significant*",
            "test_half_the_work *x *x *%*",
        ]
    )
    result.stdout.no_fnmatch_line("*COMPARING ACROSS ENVIRONMENTS*")


def test_baseline_entries_of_vanished_cases_are_a_one_line_warning(project):
    path = write_baseline(project, 3.0)
    document = json.loads(path.read_text())
    document["cases"]["smoke:test_synthetic.py::test_renamed_away"] = document["cases"][CASE_ID]
    path.write_text(json.dumps(document))
    result = project.runpytest_subprocess("--benchmark-disable", *FAST)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([f"*{path}: 1 entries name no collected case (e.g. *test_renamed_away)*"])
