"""Output paths are checked before anything is measured: a long run never fails at its end on a bad path."""

import time

import pytest
from synthetic import HALF_THE_WORK

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
    result = project.runpytest_subprocess(option, *extra, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert time.monotonic() - started < 30  # the interpreter's start; no case ran
    (error,) = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert error.startswith(f"ERROR: {said}") and error.endswith("choose a writable path")
    assert not (project.path / ".optbench" / "records.jsonl").exists()


def test_the_folder_of_the_benchmark_json_is_made_before_the_run(project):
    result = project.runpytest_subprocess(
        "--benchmark-json=runs/torch.json", "--case-budget", "1", "--block-target", "0.01", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    assert (project.path / "runs" / "torch.json").exists()
