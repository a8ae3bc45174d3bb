"""The pytest11 entry point on a throwaway project: its own tests, its own conftest, none of this repository's."""

import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_CONFTEST = """
def pytest_addoption(parser):
    # Names a torch project's suite often takes, which optbench's catalogue options use too.
    parser.addoption("--device", default="cpu")
    parser.addoption("--profile", action="store_true")
"""

PLAIN = """
def test_arithmetic():
    assert 1 + 1 == 2
"""

OWN_CASE = """
import copy

import torch
from torch import nn

from optbench import Close
from optbench.measuring.workload import InferenceWorkload


def test_my_model_compiled(optbench):
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.GELU()) for _ in range(4)]).eval()
    inputs = torch.randn(8, 32)
    workload = InferenceWorkload("mlp", lambda: copy.deepcopy(model), inputs)
    compiled = torch.compile(workload.model())
    optbench.run(
        workload.case(workload.call(model), workload.call(compiled), accuracy=Close(1e-3, 1e-3), floor=0.1,
                      names=("eager", "compiled"), variant="compile", expect_compiled=True)
    )
"""


@pytest.fixture
def throwaway(pytester):
    pytester.makeconftest(PROJECT_CONFTEST)
    pytester.mkdir("tests")
    return pytester


def test_a_session_that_never_asks_for_the_fixture_is_unchanged(throwaway):
    (throwaway.path / "tests" / "test_x.py").write_text(PLAIN)
    result = throwaway.runpytest_subprocess("tests", "-p", "no:cacheprovider", "--device", "cpu")
    result.assert_outcomes(passed=1)
    assert "optbench:" not in result.stdout.str()  # its summary; the header lists the plugin as installed
    assert not (throwaway.path / ".optbench").exists()


def test_the_entry_point_loads_torch_only_when_a_test_asks_for_the_fixture(throwaway):
    (throwaway.path / "tests" / "test_x.py").write_text(
        PLAIN + "\n\ndef test_torch_not_loaded():\n    import sys\n    assert 'torch' not in sys.modules\n"
    )
    throwaway.runpytest_subprocess("tests", "-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_a_test_that_asks_for_the_fixture_gets_a_measured_gated_case(throwaway):
    (throwaway.path / "tests" / "test_x.py").write_text(PLAIN + OWN_CASE)
    result = throwaway.runpytest_subprocess("tests", "-p", "no:cacheprovider", "--device", "cpu", "--profile")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*optbench: profile smoke on cpu*", "test_my_model_compiled *x [[]*"])
    (row,) = [line for line in result.stdout.lines if line.startswith("test_my_model_compiled ") and "x [" in line]
    assert " fail" not in row  # measured, checked and judged: pass, or inconclusive on a noisy host
    assert (throwaway.path / ".optbench" / "records.jsonl").read_text().count("\n") == 1


def test_the_console_script_runs_the_commands_of_python_m_optbench():
    """`optbench` beside `python -m optbench` (issue 35): installed by pip with the package, same parser."""
    script = Path(sys.executable).with_name("optbench")
    assert script.exists(), f"{script}: not installed; reinstall optbench (pip install -e .) for its console script"
    shown = subprocess.run([str(script), "calibrate", "--help"], capture_output=True, text=True, check=True).stdout
    assert shown.startswith("usage: optbench calibrate"), shown
    assert "--recordings" in shown
