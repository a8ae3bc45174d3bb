"""The GitHub workflows parse, and do what README promises."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    document = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    # YAML 1.1 reads the bare key `on` as boolean true.
    triggers = document.get("on", document.get(True))
    steps = [step for job in document["jobs"].values() for step in job["steps"]]
    return document, triggers, steps


def commands(steps):
    return "\n".join(step.get("run", "") for step in steps)


def test_nightly_runs_the_standard_profile_on_a_self_hosted_gpu_runner():
    document, triggers, steps = load("nightly-gpu.yml")
    assert "schedule" in triggers
    (job,) = document["jobs"].values()
    assert {"self-hosted", "gpu"} <= set(job["runs-on"])
    script = commands(steps)
    assert "--profile standard" in script and "--benchmark-autosave" in script
    assert "python -m optbench report" in script and "GITHUB_STEP_SUMMARY" in script
    assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in steps)
    assert any("gh run download" in step.get("run", "") for step in steps)
    assert steps[-1]["if"] == "steps.bench.outcome != 'success'" and "exit 1" in steps[-1]["run"]


def test_pull_requests_run_the_readme_test_command():
    _, triggers, steps = load("pull-request.yml")
    assert "pull_request" in triggers
    readme = (ROOT / "README.md").read_text()
    test_command = next(line for line in readme.splitlines() if line.startswith(".venv/bin/pytest tests"))
    assert test_command in commands(steps)


def test_nightly_locks_the_gpu_clocks_around_the_suite_and_always_unlocks_them():
    _, _, steps = load("nightly-gpu.yml")
    names = [step.get("name") for step in steps]
    lock, bench, unlock = (
        names.index(name)
        for name in ("Lock GPU clocks", "Run the standard profile, gated against baselines/", "Unlock GPU clocks")
    )
    assert lock < bench < unlock
    assert "--lock-gpu-clocks" in steps[lock]["run"] and "--reset-gpu-clocks" in steps[unlock]["run"]
    assert steps[unlock]["if"] == "always()"
