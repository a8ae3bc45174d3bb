"""README's examples run as written."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_block(section: str) -> str:
    """The first ```python block under the README heading `section`."""
    text = (ROOT / "README.md").read_text()
    body = text[text.index(f"## {section}\n") :]
    return re.search(r"```python\n(.*?)```", body, flags=re.S).group(1)


def test_the_adding_an_optimization_example_runs_as_written(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    pytester.makeconftest('pytest_plugins = ["optbench.plugin", "fixtures.models"]\n')
    pytester.makepyfile(test_my_trick=readme_block("Adding an optimization"))
    result = pytester.runpytest_subprocess(
        "--profile",
        "smoke",
        "--case-budget",
        "2",
        "--min-rounds",
        "4",
        "--baselines-dir",
        "empty",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_my_trick[[]resnet[]] *x [[]*] *"])
