"""The accuracy check runs each variant in the mode that makes a bitwise comparison fair."""

import json

CASES = """
import json

import torch
from optbench import Case, Exact

SEEN = {}


def modes(name, output):
    def recorded():
        SEEN[name] = [torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic]
        return output()

    return recorded


def ones():
    return torch.ones(4)


compiled = torch.compile(lambda: torch.ones(4) + 0, backend="eager")


def run(optbench, name, optimized, **fields):
    optbench.run(
        Case(reference=ones, optimized=optimized, optimized_output=modes(name, optimized), accuracy=Exact(),
             floor=0.1, **fields)
    )


def test_eager(optbench):
    run(optbench, "eager", ones)


def test_declared_compiled(optbench):
    run(optbench, "declared compiled", compiled, expect_compiled=True)


def test_seen_compiling(optbench):
    run(optbench, "seen compiling", torch.compile(lambda: torch.ones(4) * 1, backend="eager"))


def test_zz_report():
    with open("modes.json", "w") as report:
        json.dump(SEEN, report)
"""


def test_eager_optimized_outputs_are_checked_deterministically_compiled_ones_as_timed(pytester):
    pytester.makeconftest('pytest_plugins = ["optbench.plugin"]\n')
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest_subprocess("--benchmark-disable", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    assert json.loads((pytester.path / "modes.json").read_text()) == {
        "eager": [True, True],
        "declared compiled": [False, False],
        "seen compiling": [False, False],
    }
