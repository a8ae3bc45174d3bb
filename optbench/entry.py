"""The pytest11 entry point: the `optbench` fixture in any project where optbench is installed.

Inert where no test asks for the fixture: it registers no option (nothing
can clash with a project's own `--device` or `--profile`), adds no hook and
imports nothing heavy; torch and the plugin proper (optbench.plugin) load
when the first test that uses the fixture is set up. In this repository the
root conftest loads optbench.plugin at configure instead, whose fixture of the
same name is the one used.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def optbench(request: pytest.FixtureRequest, benchmark: Any) -> Any:
    """Runs a `Case` through warm-up, paired timing, accuracy and the gate: `optbench.run(case)`, as in the
    catalogue. Cases are measured in the test's own process, with optbench's default settings."""
    from . import plugin

    plugin.activate(request.config, request.session.items)
    return plugin.case_runner(request, benchmark)
