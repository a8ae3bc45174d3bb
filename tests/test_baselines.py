import json
import multiprocessing

import pytest

from optbench.storage import baselines
from optbench.storage.baselines import KEEP, BaselineError, BaselineStore, Recording, read_baseline_file

KEY = "cpu-test-avx2-t2-torch2.14"
ACCURACY = {"metric": "cosine", "value": 0.999}


def recording(speedup=1.5):
    return Recording(speedup, (speedup * 0.95, speedup * 1.05), rounds=40, recorded="2026-12-02T18:00:00+00:00")


def record(store, case_id, speedup=1.5):
    return store.record(case_id, recording(speedup), ACCURACY, None, {"environment_key": store.environment_key})


def test_record_merges_and_keeps_other_entries(tmp_path):
    store = BaselineStore(tmp_path, KEY)
    record(store, "smoke:a")
    record(store, "smoke:b", 2.0)
    reread = BaselineStore(tmp_path, KEY)
    assert reread.get("smoke:a").latest == recording()
    assert reread.get("smoke:b").latest.speedup == 2.0


def test_a_recording_across_processes_keeps_its_degrees_of_freedom(tmp_path):
    store = BaselineStore(tmp_path, KEY)
    across = Recording(1.5, (1.3, 1.7), process_spread=baselines.ProcessSpread(0.01, 3), degrees_of_freedom=2.0)
    store.record("smoke:a", across, ACCURACY, None, {"environment_key": KEY})
    assert BaselineStore(tmp_path, KEY).get("smoke:a").latest == across


def test_other_environments_are_untouched(tmp_path):
    record(BaselineStore(tmp_path, "cuda-h100-sm90-torch2.14"), "smoke:a")
    record(BaselineStore(tmp_path, KEY), "smoke:a", 3.0)
    assert BaselineStore(tmp_path, "cuda-h100-sm90-torch2.14").get("smoke:a").latest.speedup == 1.5


def test_crash_mid_write_leaves_old_file_intact(tmp_path, monkeypatch):
    store = BaselineStore(tmp_path, KEY)
    record(store, "smoke:a")
    before = store.path.read_text()

    def killed_before_the_rename(descriptor):
        raise KeyboardInterrupt  # the new text is in the temporary file, not yet in place

    monkeypatch.setattr(baselines.os, "fsync", killed_before_the_rename)
    with pytest.raises(KeyboardInterrupt):
        record(store, "smoke:b")
    assert store.path.read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema": 99, "cases": {}}', "expected schema 2"),
        ('{"schema": 1, "cases": {}}', "schema 1 was measured with alternating single calls"),
        ('{"schema": 2, "cases": []}', "'cases' must be an object"),
        ('{"schema": 2, "cases": {"smoke:a": {"recordings": []}}}', "non-empty list 'recordings'"),
        ('{"schema": 2, "cases": {"smoke:a": {"recordings": [{"speedup": "fast"}]}}}', "positive number 'speedup'"),
        ('{"schema": 2, "cases": {"smoke:a": {"recordings": [{"speedup": 1.2, "interval": [1]}]}}}', "[low, high]"),
        (
            '{"schema": 2, "cases": {"smoke:a": {"recordings": [{"speedup": 1.2, "process_spread": {"variance": 0.1, '
            '"processes": 1}}]}}}',
            "'process_spread' that is not {variance >= 0, processes >= 2}",
        ),
        (
            '{"schema": 2, "cases": {"smoke:a": {"recordings": [{"speedup": 1.2, "process_spread": [0.1, 3]}]}}}',
            "'process_spread' that is not",
        ),
        (
            '{"schema": 2, "cases": {"smoke:a": {"recordings": [{"speedup": 1.2, "degrees_of_freedom": 0}]}}}',
            "'degrees_of_freedom' that is not a positive number",
        ),
    ],
)
def test_bad_files_give_one_line_errors_naming_the_file(tmp_path, content, expected):
    path = tmp_path / f"{KEY}.json"
    path.write_text(content)
    with pytest.raises(BaselineError) as error:
        BaselineStore(tmp_path, KEY)
    message = str(error.value)
    assert expected in message and str(path) in message and "\n" not in message


def test_file_from_another_environment_is_refused(tmp_path):
    path = tmp_path / f"{KEY}.json"
    path.write_text(json.dumps({"schema": 2, "environment": {"environment_key": "cuda-a100"}, "cases": {}}))
    with pytest.raises(BaselineError, match="recorded for environment 'cuda-a100'"):
        BaselineStore(tmp_path, KEY)


def _write_entries(directory, worker, count):
    store = BaselineStore(directory, KEY)
    for index in range(count):
        record(store, f"smoke:w{worker}-{index}")


def test_concurrent_writers_lose_no_entry(tmp_path):
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_entries, args=(tmp_path, w, 15)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    _, cases = read_baseline_file(tmp_path / f"{KEY}.json")
    assert len(cases) == 60


def test_history_keeps_the_last_recordings_in_order(tmp_path):
    store = BaselineStore(tmp_path, KEY)
    speedups = [1.0 + index / 100 for index in range(KEEP + 3)]
    for speedup in speedups:
        record(store, "smoke:a", speedup)
    history = BaselineStore(tmp_path, KEY).get("smoke:a")
    assert [r.speedup for r in history.recordings] == speedups[-KEEP:]
    assert history.accuracy == ACCURACY


def test_entries_of_vanished_cases_are_found_only_within_collected_files(tmp_path):
    store = BaselineStore(tmp_path, KEY)
    for case_id in [
        "smoke:b/test_x.py::test_x[old]",
        "smoke:b/test_x.py::test_x[new]",
        "smoke:b/test_y.py::test_y",
        "standard:b/test_x.py::test_x[old]",
    ]:
        record(store, case_id)
    collected = {"b/test_x.py::test_x[new]"}
    assert store.unknown_cases("smoke", collected) == ["smoke:b/test_x.py::test_x[old]"]
