import json

import numpy as np
import pytest

from optbench.__main__ import main
from optbench.accuracy import Check
from optbench.runs import load_run
from optbench.significance import ComparisonSettings, compare_records
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
    assert not compare_records(before, record("smoke:a", 1.8, "cpu-x", seed=3), SETTINGS).significant


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
