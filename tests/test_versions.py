"""Comparing PyTorch versions: tox.ini's cross-version flow end to end, and the torch/torchvision pair check.

The flow runs the commands tox.ini gives its torch envs and its report env, as tox would run them (its work
folder not made beforehand, `-k` as posargs), on the installed torch for both envs: no other build downloaded.
"""

import configparser
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from optbench.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
CASE = ["-k", "test_inference_mode and grad-vs-no_grad and tiny", "--case-budget", "2", "--min-rounds", "4"]


def tox_commands(section, toxworkdir, envname, posargs=()):
    """A tox.ini section's commands as argument lists for this interpreter."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "tox.ini")
    commands = []
    for line in config[section]["commands"].strip().splitlines():
        line = line.replace("{toxworkdir}", str(toxworkdir)).replace("{envname}", envname)
        words = [word for word in shlex.split(line) if word != "{posargs}"]
        words += list(posargs) if "{posargs}" in line else []
        program = {"python": [sys.executable], "pytest": [sys.executable, "-m", "pytest"]}[words[0]]
        commands.append(program + words[1:])
    return commands


def run(command):
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


def test_the_version_comparison_flow_of_tox_ini_runs_end_to_end(tmp_path):
    """Both torch envs' commands as tox.ini gives them, then the report env's. Both envs have the installed torch
    here, so the second env's measuring command, the first's but for its env name, is not run again: the first's
    run stands in for it (one catalogue run less, about 30 s of a CI worker)."""
    toxworkdir = tmp_path / "toxwork"
    first = None  # the env that measured: its name, its measuring command, its saved run
    for envname in ("torch2.9", "torch2.14"):
        posargs = [*CASE, "--results-dir", str(tmp_path / envname)]
        pair_check, measure = tox_commands("testenv:torch{2.14,2.9,-other}", toxworkdir, envname, posargs)
        finished = run(pair_check)
        assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
        saved = toxworkdir / "runs" / f"{envname}.json"
        if first is None:
            finished = run(measure)
            assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
            assert saved.exists()
            first = (envname, measure, saved)
        else:
            first_env, first_measure, first_saved = first
            assert [word.replace(envname, first_env) for word in measure] == first_measure
            shutil.copyfile(first_saved, saved)
    (report,) = tox_commands("testenv:versions-report", toxworkdir, "versions-report")
    finished = run(report)
    assert finished.returncode == 0, finished.stderr
    assert f"missing: {toxworkdir / 'runs' / 'torch-other.json'}" in finished.stdout
    markdown = (toxworkdir / "runs" / "report" / "report.md").read_text()
    assert "torch2.9.json" in markdown and "torch2.14.json" in markdown
    assert "## What changed: run 2 against run 1" in markdown
    assert "test_inference_mode[grad-vs-no_grad-tiny-mlp]" in markdown
    assert (toxworkdir / "runs" / "report" / "speedup.png").read_bytes()[:4] == b"\x89PNG"


def test_the_installed_pair_works_together(capsys):
    assert main(["torch-pair"]) == 0
    assert "work together" in capsys.readouterr().out


def test_a_pair_that_does_not_work_together_is_one_line_naming_what_to_install(monkeypatch, capsys):
    import torchvision.ops

    def missing_operator(*_, **__):
        raise RuntimeError("operator torchvision::nms does not exist\nmore lines of the loader")

    monkeypatch.setattr(torchvision.ops, "nms", missing_operator)
    assert main(["torch-pair"]) == 2
    error = capsys.readouterr().err.strip()
    assert "do not work together (operator torchvision::nms does not exist)" in error
    assert "install the torchvision release built for torch" in error and "\n" not in error
