"""The nightly history: appends from real runs, refusals that name the problem, nothing half-written."""

import json
import os
import shutil
from pathlib import Path

import pytest

from optbench.__main__ import main
from optbench.storage.history import HistoryError, add_run, read_history
from optbench.storage.runs import load_run

RUN = Path(__file__).parent / "data" / "epyc-bf16-run.json"
"""A real smoke run of six cases on the 2-core AVX512-BF16 EPYC, its sample arrays dropped."""


def test_a_run_adds_one_night_per_timed_case_and_shows_them(tmp_path, capsys):
    history = tmp_path / "history.jsonl"
    assert main(["history", "add", str(RUN), "--history", str(history)]) == 0
    nights = read_history(history)
    run = json.loads(RUN.read_text())
    assert len(nights) == len(run["benchmarks"]) == 6
    compiled = next(night for night in nights if "test_compile[default-ln-mlp]" in night.case)
    record = next(b for b in run["benchmarks"] if b["name"] == "test_compile[default-ln-mlp]")["extra_info"]["optbench"]
    assert compiled.speedup == record["speedup"]["point"] and compiled.verdict == record["verdict"]["status"]
    assert compiled.commit == run["commit_info"]["id"] and compiled.torch.startswith("2.14")
    assert compiled.minimum_detectable == record["gate"]["decision"]["minimum_detectable_slowdown"]
    capsys.readouterr()
    assert main(["history", "show", "-k", "compile", "--history", str(history)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert "test_compile[default-ln-mlp]: 1 nights" in line


def test_the_same_run_twice_is_a_warning_and_adds_nothing(tmp_path, capsys):
    history = tmp_path / "history.jsonl"
    add_run(history, load_run(RUN))
    before = history.read_text()
    assert main(["history", "add", str(RUN), "--history", str(history)]) == 0
    assert "already in" in capsys.readouterr().err
    assert history.read_text() == before


def test_another_environment_is_refused_and_the_history_kept(tmp_path, capsys):
    history = tmp_path / "history.jsonl"
    add_run(history, load_run(RUN))
    before = history.read_text()
    other = json.loads(RUN.read_text())
    other["machine_info"]["optbench"]["environment_key"] = "cuda-h100-torch2.14"
    other["datetime"] = "2026-12-03T02:00:00"
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert main(["history", "add", str(tmp_path / "other.json"), "--history", str(history)]) == 2
    (error,) = capsys.readouterr().err.splitlines()
    assert "cuda-h100-torch2.14" in error and "one history per environment key" in error
    assert history.read_text() == before


def test_a_corrupt_history_is_named_and_left_as_it_was(tmp_path, capsys):
    history = tmp_path / "history.jsonl"
    add_run(history, load_run(RUN))
    corrupt = history.read_text() + '{"case": "half a line\n'
    history.write_text(corrupt)
    assert main(["history", "add", str(RUN), "--history", str(history)]) == 2
    (error,) = capsys.readouterr().err.splitlines()
    assert f"{history}:7: not a history line" in error and "restore" in error
    assert history.read_text() == corrupt
    with pytest.raises(HistoryError, match=":7:"):
        read_history(history)


def test_a_killed_append_leaves_the_history_as_it_was(tmp_path, monkeypatch):
    history = tmp_path / "history.jsonl"
    add_run(history, load_run(RUN))
    before = history.read_text()
    later = tmp_path / "later.json"
    shutil.copy(RUN, later)
    document = json.loads(later.read_text())
    document["datetime"] = "2026-12-03T02:00:00"
    later.write_text(json.dumps(document))

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        add_run(history, load_run(later))
    assert history.read_text() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["history.jsonl", "history.jsonl.lock", "later.json"]
