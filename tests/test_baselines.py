import json
import multiprocessing

import pytest

from optbench import baselines
from optbench.baselines import BaselineError, BaselineStore, read_baseline_file

KEY = "cpu-test-avx2-t2-torch2.14"
ENTRY = {"speedup": 1.5, "interval": [1.4, 1.6], "accuracy": {"metric": "cosine", "value": 0.999}}


def test_record_merges_and_keeps_other_entries(tmp_path):
    store = BaselineStore(tmp_path, KEY)
    store.record("smoke:a", ENTRY, {"environment_key": KEY})
    store.record("smoke:b", {**ENTRY, "speedup": 2.0}, {"environment_key": KEY})
    reread = BaselineStore(tmp_path, KEY)
    assert reread.get("smoke:a")["speedup"] == 1.5
    assert reread.get("smoke:b")["speedup"] == 2.0


def test_other_environments_are_untouched(tmp_path):
    BaselineStore(tmp_path, "cuda-h100-sm90-torch2.14").record("smoke:a", ENTRY, {})
    BaselineStore(tmp_path, KEY).record("smoke:a", {**ENTRY, "speedup": 3.0}, {})
    assert BaselineStore(tmp_path, "cuda-h100-sm90-torch2.14").get("smoke:a")["speedup"] == 1.5


def test_crash_mid_write_leaves_old_file_intact(tmp_path, monkeypatch):
    store = BaselineStore(tmp_path, KEY)
    store.record("smoke:a", ENTRY, {})
    before = store.path.read_text()

    def dump_then_die(document, stream, **kwargs):
        stream.write('{"schema": 1, "cases": {"smoke:a": ')
        raise KeyboardInterrupt

    monkeypatch.setattr(baselines.json, "dump", dump_then_die)
    with pytest.raises(KeyboardInterrupt):
        store.record("smoke:b", ENTRY, {})
    assert store.path.read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema": 99, "cases": {}}', "expected schema 1"),
        ('{"schema": 1, "cases": []}', "'cases' must be an object"),
        ('{"schema": 1, "cases": {"smoke:a": {"speedup": "fast", "interval": [1, 2]}}}', "positive number 'speedup'"),
        ('{"schema": 1, "cases": {"smoke:a": {"speedup": 1.2, "interval": [1]}}}', "'interval' as [low, high]"),
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
    path.write_text(json.dumps({"schema": 1, "environment": {"environment_key": "cuda-a100"}, "cases": {}}))
    with pytest.raises(BaselineError, match="recorded for environment 'cuda-a100'"):
        BaselineStore(tmp_path, KEY)


def _write_entries(directory, worker, count):
    store = BaselineStore(directory, KEY)
    for index in range(count):
        store.record(f"smoke:w{worker}-{index}", ENTRY, {"environment_key": KEY})


def test_concurrent_writers_lose_no_entry(tmp_path):
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_entries, args=(tmp_path, w, 15)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    cases = read_baseline_file(tmp_path / f"{KEY}.json")["cases"]
    assert len(cases) == 60


def test_baseline_is_the_median_of_the_last_recordings(tmp_path):
    store = BaselineStore(tmp_path, KEY)
    for speedup in [1.5, 3.0, 1.4, 1.6, 1.45, 1.55]:
        store.record("smoke:a", {**ENTRY, "speedup": speedup}, {})
    entry = BaselineStore(tmp_path, KEY).get("smoke:a")
    assert entry["history"] == [3.0, 1.4, 1.6, 1.45, 1.55]
    assert entry["speedup"] == 1.55


def test_entries_of_vanished_cases_are_found_only_within_collected_files(tmp_path):
    store = BaselineStore(tmp_path, KEY)
    for case_id in [
        "smoke:b/test_x.py::test_x[old]",
        "smoke:b/test_x.py::test_x[new]",
        "smoke:b/test_y.py::test_y",
        "standard:b/test_x.py::test_x[old]",
    ]:
        store.record(case_id, ENTRY, {})
    collected = {"b/test_x.py::test_x[new]"}
    assert store.unknown_cases("smoke", collected) == ["smoke:b/test_x.py::test_x[old]"]
