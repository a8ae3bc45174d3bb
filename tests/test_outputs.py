"""Output paths are checked before anything is measured: a long run never fails at its end on a bad path."""

import subprocess
import time

import pytest
from synthetic import HALF_THE_WORK

from optbench.__main__ import main
from optbench.storage.record import read_records

CONFTEST = 'pytest_plugins = ["optbench.plugin"]\n'


@pytest.fixture
def project(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_synthetic=HALF_THE_WORK)
    return pytester


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("--benchmark-json=/proc/no/run.json", "--benchmark-json: cannot create /proc/no"),
        ("--results-dir=/proc/no", "--results-dir: cannot create /proc/no"),
        ("--benchmark-storage=/proc/no", "--benchmark-storage (where --benchmark-save writes): cannot create"),
    ],
)
def test_an_unwritable_output_is_a_one_line_usage_error_before_measuring(project, option, said):
    extra = ["--benchmark-autosave"] if "storage" in option else []
    started = time.monotonic()
    result = project.runpytest(option, *extra, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert time.monotonic() - started < 30  # no case ran
    (error,) = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert error.startswith(f"ERROR: {said}") and error.endswith("choose a writable path")
    assert not (project.path / ".optbench" / "records.jsonl").exists()


def test_the_folder_of_the_benchmark_json_is_made_before_the_run(project):
    result = project.runpytest_subprocess(
        "--benchmark-json=runs/torch.json", "--case-budget", "1", "--block-target", "0.01", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    assert (project.path / "runs" / "torch.json").exists()


# The run's JSON folder disappears while the case runs: pytest-benchmark's save at the session's end then fails.
FOLDER_REMOVED = """
import shutil

import pytest


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    shutil.rmtree("runs", ignore_errors=True)
"""


def test_when_pytest_benchmark_cannot_save_the_summary_and_records_are_still_complete(project):
    project.makeconftest(CONFTEST + FOLDER_REMOVED)
    result = project.runpytest_subprocess(
        "--benchmark-json=runs/torch.json", "--case-budget", "1", "--block-target", "0.01", "-p", "no:cacheprovider"
    )
    assert result.ret != 0 and not (project.path / "runs" / "torch.json").exists()
    assert any("FileNotFoundError" in line for line in result.stdout.lines + result.stderr.lines)
    result.stdout.fnmatch_lines(["*optbench: profile smoke on cpu*", "*test_half_the_work*"])
    (record,) = read_records(project.path / ".optbench")
    assert record.speedup is not None and record.verdict.status
    assert "test_half_the_work" in (project.path / ".optbench" / "summary.md").read_text()


@pytest.mark.parametrize("command", ["agree", "order", "calibrate"])
def test_a_command_whose_output_cannot_be_written_stops_before_measuring(command, capsys):
    started = time.monotonic()
    assert main([command, "--output", "/proc/no/table.md"]) == 2
    assert time.monotonic() - started < 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: --output: cannot create /proc/no") and "\n" not in error


@pytest.mark.parametrize("command", ["agree", "drift", "components", "advise"])
@pytest.mark.parametrize("option", [["--results-dir", "elsewhere"], ["--results-dir=elsewhere"]])
def test_a_command_that_reads_its_own_runs_refuses_a_results_dir_before_measuring(command, option, capsys, monkeypatch):
    def measuring(*_, **__):
        raise AssertionError("started a pytest run")

    monkeypatch.setattr(subprocess, "run", measuring)
    monkeypatch.setattr(subprocess, "Popen", measuring)
    assert main([command, "--", "--case-budget", "1", *option]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (
        f"error: {command} keeps its runs' records in folders of its own and writes what it found to --output; "
        "drop --results-dir"
    )
