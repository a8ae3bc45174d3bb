import dataclasses
import json

import numpy as np
import pytest

from optbench.__main__ import main
from optbench.measuring.accuracy import Check
from optbench.reporting.crossrun import accuracy_move, compile_move, environment_warning
from optbench.storage.record import AccuracySummary, CompileSummary
from optbench.storage.runs import load_run
from optbench.verdict.significance import ComparisonSettings, compare_records
from tests.records import make_record

SETTINGS = ComparisonSettings(pooled_variance=0.02**2, cases=10)


def record(case, ratio, environment, seed, rounds=60):
    rng = np.random.default_rng(seed)
    optimized = 0.01 * np.exp(rng.normal(0, 0.05, rounds))
    reference = ratio * 0.01 * np.exp(rng.normal(0, 0.05, rounds))
    point = float(np.median(reference) / np.median(optimized))
    return make_record(
        case,
        (point, point * 0.97, point * 1.03),
        environment_key=environment,
        accuracy=Check("cosine", 0.999, 0.99, lower_is_better=False),
        times=(reference.tolist(), optimized.tolist()),
    )


def test_a_real_change_is_significant_and_noise_is_not():
    before = record("smoke:a", 1.8, "cpu-x", seed=1)
    assert compare_records(before, record("smoke:a", 1.5, "cpu-x", seed=2), SETTINGS).significant
    # The minimum effect off: the same speedup measured again is within the statistical margin itself.
    statistics_only = dataclasses.replace(SETTINGS, min_effect=0.0)
    assert not compare_records(before, record("smoke:a", 1.8, "cpu-x", seed=3), statistics_only).significant


def test_untimed_records_are_not_compared():
    assert compare_records(record("smoke:a", 1.8, "cpu-x", 1), make_record("smoke:a", None), SETTINGS) is None


def write_run(path, environment, torch_version, records):
    benchmarks = [{"fullname": r.node_id, "extra_info": {"optbench": r.to_json()}} for r in records]
    machine = {"optbench": {"environment_key": environment, "torch": torch_version}}
    path.write_text(json.dumps({"benchmarks": benchmarks, "machine_info": machine, "datetime": "2026-12-02"}))
    return path


def test_report_command_writes_table_and_plot_across_versions(tmp_path, capsys):
    old = write_run(
        tmp_path / "old.json",
        "cpu-x-torch2.13",
        "2.13.0",
        [record("smoke:b::test_bf16", 1.8, "cpu-x-torch2.13", 1), record("smoke:b::test_only_old", 1.1, "e", 5)],
    )
    new = write_run(
        tmp_path / "new.json", "cpu-x-torch2.14", "2.14.1", [record("smoke:b::test_bf16", 1.4, "cpu-x-torch2.14", 2)]
    )
    assert main(["report", str(old), str(new), "--output", str(tmp_path / "out")]) == 0
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "2 different environments" in markdown
    assert "torch 2.13.0" in markdown and "torch 2.14.1" in markdown
    (row,) = [line for line in markdown.splitlines() if line.startswith("| test_bf16")]
    assert "1.80x" in row and "**-2" in row  # about -22%, significant
    (only_old,) = [line for line in markdown.splitlines() if line.startswith("| test_only_old")]
    assert only_old.rstrip().endswith("| - |")
    assert (tmp_path / "out" / "speedup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [("{", "cannot read"), ('{"x": 1}', "no 'benchmarks'"), ('{"benchmarks": []}', "no optbench records")],
)
def test_report_command_rejects_bad_files_in_one_line(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["report", str(bad)]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and str(bad) in error and "\n" not in error


def test_loaded_run_is_keyed_by_case(tmp_path):
    path = write_run(tmp_path / "r.json", "cpu-x", "2.14.1", [record("smoke:b::test_a", 1.2, "cpu-x", 1)])
    assert list(load_run(path).records) == ["smoke:b::test_a"]


def with_compile(record, first_call_s, graphs=1, breaks=0):
    return dataclasses.replace(record, compile=CompileSummary(first_call_s, graphs, breaks, []))


def test_report_says_what_changed_between_versions(tmp_path):
    """Payoff both ways beyond the gate's margin, an accuracy figure moving toward its limit, compile changes."""
    before = [
        record("smoke:b::test_up", 1.2, "cpu-x-torch2.9", 1),
        record("smoke:b::test_down", 1.8, "cpu-x-torch2.9", 2),
        record("smoke:b::test_same", 1.5, "cpu-x-torch2.9", 3),
        with_compile(record("smoke:b::test_compiled", 1.3, "cpu-x-torch2.9", 4), 2.0),
    ]
    after = [
        record("smoke:b::test_up", 1.6, "cpu-x-torch2.14", 5),
        record("smoke:b::test_down", 1.3, "cpu-x-torch2.14", 6),
        dataclasses.replace(
            record("smoke:b::test_same", 1.5, "cpu-x-torch2.14", 7),
            accuracy=AccuracySummary(True, True, [Check("cosine", 0.992, 0.99, lower_is_better=False)]),
        ),
        with_compile(record("smoke:b::test_compiled", 1.3, "cpu-x-torch2.14", 8), 4.5, graphs=3, breaks=2),
    ]
    old = write_run(tmp_path / "torch2.9.json", "cpu-x-torch2.9", "2.9.1", before)
    new = write_run(tmp_path / "torch2.14.json", "cpu-x-torch2.14", "2.14.1", after)
    assert main(["report", str(old), str(new), "--output", str(tmp_path / "out")]) == 0
    markdown = (tmp_path / "out" / "report.md").read_text()
    changed = markdown.split("## What changed: run 2 against run 1")[1].split("## Every case")[0]
    lines = [line for line in changed.splitlines() if line.startswith("- ")]
    assert lines[0].startswith("- pays more: test_up: ") and "significant" in lines[0]
    assert lines[1].startswith("- pays less: test_down: ") and "significant" in lines[1]
    assert "- accuracy toward its limit: test_same: cosine 0.999 -> 0.992 (limit >= 0.99)" in lines
    assert "- compilation: test_compiled: first call 2.0 s -> 4.5 s; graphs 1 -> 3, graph breaks 0 -> 2" in lines
    assert not any("test_same" in line and "pays" in line for line in lines)
    (row,) = [line for line in markdown.splitlines() if line.startswith("| test_compiled")]
    assert "compile 2.0 s/0 breaks" in row and "compile 4.5 s/2 breaks" in row


@pytest.mark.parametrize(
    ("old", "new", "moved"),
    [
        (Check("rmse", 0.001, 0.01, True), Check("rmse", 0.002, 0.01, True), True),  # headroom 0.009 -> 0.008
        (Check("rmse", 0.001, 0.01, True), Check("rmse", 0.0015, 0.01, True), False),  # 0.009 -> 0.0085: noise
        (Check("max_abs_diff", 0.0, 0.0, True), Check("max_abs_diff", 1e-7, 0.0, True), True),  # bitwise no more
        (Check("rmse", 0.002, 0.01, True), Check("rmse", 0.001, 0.01, True), False),  # away from the limit
        (Check("rmse", 0.002, 0.01, True), Check("cosine", 0.5, 0.99, False), False),  # another figure
    ],
)
def test_an_accuracy_figure_moves_toward_its_limit_only_beyond_a_tenth_of_its_headroom(old, new, moved):
    def at(check):
        return make_record("smoke:b::test_a", accuracy=check)

    assert (accuracy_move(at(old), at(new)) is not None) == moved


def test_a_figure_that_now_fails_says_so_even_where_its_headroom_cannot_be_compared():
    def at(value):
        return make_record("smoke:b::test_a", accuracy=Check("rmse", value, 0.01, True))

    assert accuracy_move(at(0.009), at(0.011)) == "rmse 0.009 -> 0.011 (limit <= 0.01), now fails"
    # A NaN has no headroom to shrink: only its failing tells it moved.
    assert accuracy_move(at(0.001), at(float("nan"))) == "rmse 0.001 -> nan (limit <= 0.01), now fails"
    assert accuracy_move(at(float("nan")), at(float("nan"))) is None


@pytest.mark.parametrize(
    ("before", "after", "moved"),
    [
        (None, 2.0, "compiled in the later run only"),
        (2.0, None, "compiled in the first run only"),
        (None, None, None),
        (2.0, 2.9, None),  # within COMPILE_TIME_MOVE: first calls are noisy
        (2.0, 1.2, "first call 2.0 s -> 1.2 s"),
    ],
)
def test_compilation_changed_when_only_one_run_compiled_or_its_first_call_moved_far(before, after, moved):
    def at(first_call_s):
        plain = make_record("smoke:b::test_a")
        return plain if first_call_s is None else with_compile(plain, first_call_s)

    assert compile_move(at(before), at(after)) == moved


def test_report_names_missing_runs_or_refuses_them(tmp_path, capsys):
    present = write_run(tmp_path / "torch2.14.json", "cpu-x", "2.14.1", [record("smoke:b::test_a", 1.2, "cpu-x", 1)])
    missing = tmp_path / "torch2.9.json"
    assert main(["report", str(missing), str(present), "--output", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert f"{missing}: no such run file" in error and "--skip-missing" in error and "\n" not in error
    assert main(["report", "--skip-missing", str(missing), str(present), "--output", str(tmp_path / "out")]) == 0
    assert f"missing: {missing}" in capsys.readouterr().out
    assert f"- not in this report (no file): {missing}" in (tmp_path / "out" / "report.md").read_text()
    assert main(["report", "--skip-missing", str(missing), "--output", str(tmp_path / "none")]) == 2
    assert "none of the runs exists" in capsys.readouterr().err


def test_the_report_numbers_its_runs_names_cases_in_one_run_only_and_warns_across_environments():
    """The skeleton a reader navigates by: runs numbered from 1 in the order given, a section per later run, the
    cases only one run has, the warning when environments differ, the table's columns; an accuracy-only change,
    a compile time exactly at its 1.5x bound and a missing accuracy on one side move nothing."""
    from pathlib import Path

    from optbench.reporting.crossrun import crossrun_markdown
    from optbench.storage.runs import Run

    shared = record("smoke:b::test_same", 1.5, "cpu-a", 3)
    compiled = with_compile(record("smoke:b::test_compiled", 1.3, "cpu-a", 4), 2.0)
    first = Run(
        Path("a.json"),
        "cpu-a",
        "2.9.1",
        "2026-01-01",
        None,
        {"smoke:b::test_same": shared, "smoke:b::test_gone": shared},
    )
    later = {
        "smoke:b::test_same": dataclasses.replace(shared, accuracy=None),
        "smoke:b::test_new": shared,
        "smoke:b::test_compiled": with_compile(compiled, 3.0),
    }
    second = Run(Path("b.json"), "cpu-b", "2.14.1", "2026-02-01", None, later)
    markdown = crossrun_markdown([first, second])
    lines = markdown.splitlines()
    assert lines[:3] == ["# optbench: speedup across runs", "", lines[2]]
    assert lines[2].startswith("**Warning: these runs come from 2 different environments (cpu-a, cpu-b).** ")
    assert lines[4:7] == [
        "- run 1: torch 2.9.1 / cpu-a (a.json), 2026-01-01",
        "- run 2: torch 2.14.1 / cpu-b (b.json), 2026-02-01",
        "",
    ]
    section = markdown.split("## What changed: run 2 against run 1\n\n")[1].split("\n\n## Every case")[0]
    assert section.splitlines() == [
        "- no case's payoff changed beyond its margin (1 cases in both runs)",
        "- only in run 1: test_gone",
        "- only in run 2: test_compiled, test_new",
    ]
    assert "| case | run 1 | run 2 |" in lines
    (row,) = [line for line in lines if line.startswith("| test_compiled")]
    assert row.startswith("| test_compiled | - | 1.")
    assert environment_warning([first, first]) is None
    assert compile_move(compiled, with_compile(compiled, 3.0)) is None  # 1.5x: at the bound, not beyond it
    assert compile_move(with_compile(compiled, 0.0), with_compile(compiled, 3.0)) is None  # no first time to scale
