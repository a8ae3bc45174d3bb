"""The GitHub workflows parse, and do what README promises."""

import re
import subprocess
import sys
from pathlib import Path

import yaml

from optbench.running.allocator import PACKAGES

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    document = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    # YAML 1.1 reads the bare key `on` as boolean true.
    triggers = document.get("on", document.get(True))
    steps = [step for job in document["jobs"].values() for step in job["steps"]]
    return document, triggers, steps


def commands(steps):
    return "\n".join(step.get("run", "") for step in steps)


def test_nightly_runs_the_standard_profile_on_a_self_hosted_gpu_runner_per_gpu_kind():
    document, triggers, _ = load("nightly-gpu.yml")
    assert "schedule" in triggers
    job = document["jobs"]["standard-profile"]
    kinds = job["strategy"]["matrix"]["gpu"]
    assert len(kinds) >= 2 and job["strategy"]["fail-fast"] is False
    assert {"self-hosted", "gpu", "${{ matrix.gpu }}"} <= set(job["runs-on"])
    steps = job["steps"]
    script = commands(steps)
    assert "--profile standard" in script and "--benchmark-autosave" in script
    assert "python -m optbench report" in script and "GITHUB_STEP_SUMMARY" in script
    assert "gh run download" in script
    assert steps[-1]["if"] == "steps.bench.outcome != 'success' || steps.changes.outcome != 'success'"
    assert "exit 1" in steps[-1]["run"]


def test_each_gpu_kind_carries_its_history_and_is_checked_for_change_points():
    document, _, _ = load("nightly-gpu.yml")
    steps = document["jobs"]["standard-profile"]["steps"]
    uploads = {
        step["with"]["name"]: step for step in steps if step.get("uses", "").startswith("actions/upload-artifact")
    }
    assert set(uploads) == {"nightly-results-${{ matrix.gpu }}", "nightly-history-${{ matrix.gpu }}"}
    assert all(step["if"] == "always()" for step in uploads.values())
    fetch = next(step for step in steps if "gh run download" in step.get("run", ""))
    assert '--name "nightly-history-${{ matrix.gpu }}"' in fetch["run"]
    changes = next(step for step in steps if step.get("id") == "changes")
    assert "optbench history add" in changes["run"] and "optbench changes" in changes["run"]
    assert steps.index(changes) < steps.index(uploads["nightly-history-${{ matrix.gpu }}"])


def test_fan_in_reports_across_gpu_kinds_after_every_matrix_job():
    document, _, _ = load("nightly-gpu.yml")
    fan_in = document["jobs"]["across-gpus"]
    assert fan_in["needs"] == "standard-profile" and fan_in["if"] == "always()"
    download = next(step for step in fan_in["steps"] if step.get("uses", "").startswith("actions/download-artifact"))
    assert download["with"]["pattern"] == "nightly-*"
    script = commands(fan_in["steps"])
    assert "optbench report nightly/nightly-results-*/run.json" in script and "optbench changes" in script
    assert "optbench dashboard" in script and "Trend pages" in script
    assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in fan_in["steps"])


def test_pull_requests_run_the_readme_test_command():
    _, triggers, steps = load("pull-request.yml")
    assert "pull_request" in triggers
    readme = (ROOT / "README.md").read_text()
    test_command = next(line for line in readme.splitlines() if line.startswith(".venv/bin/pytest tests"))
    assert test_command in commands(steps)


def test_pull_requests_install_the_allocators_the_allocator_tests_need():
    """Without them benchmarks/test_allocator.py and the --allocator tests skip, and a pull request never runs them."""
    _, _, steps = load("pull-request.yml")
    installs = [line for line in commands(steps).splitlines() if "apt-get install" in line and "||" not in line]
    assert all(any(package in line for line in installs) for package in PACKAGES.values())


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


def test_nightly_uses_one_worker_per_gpu_and_deterministic_cublas():
    document, _, _ = load("nightly-gpu.yml")
    job = document["jobs"]["standard-profile"]
    assert job["env"]["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    bench = next(step for step in job["steps"] if step.get("id") == "bench")["run"]
    assert "gpus=$(nvidia-smi -L | wc -l)" in bench
    assert 'if [ "$gpus" -gt 1 ]; then workers=(-n "$gpus" --gpu-per-worker); fi' in bench
    assert '.venv/bin/pytest benchmarks "${workers[@]}" --profile standard' in bench


def test_nightly_timeout_covers_the_estimate_for_the_catalogue_on_one_gpu():
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks", "--collect-only", "-q", "--profile", "standard"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    minutes, cases = map(int, re.search(r"estimated (\d+) min for (\d+) cases", collected.stdout).groups())
    assert cases == int(re.search(r"(\d+) tests? collected", collected.stdout).group(1))
    document, _, _ = load("nightly-gpu.yml")
    # Half again for confirmation runs of inconclusive cases and the setup and report steps.
    assert document["jobs"]["standard-profile"]["timeout-minutes"] >= 1.5 * minutes
