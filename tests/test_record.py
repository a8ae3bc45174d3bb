"""The typed record: JSON at the edges and back into the same types; unreadable records named in one line."""

import json
from pathlib import Path

import pytest

from optbench.storage.record import RECORDS_FILE, SCHEMA, Record, RecordError, read_records
from tests.records import make_record

RUN = Path(__file__).parent / "data" / "epyc-bf16-run.json"


def test_a_record_survives_json_and_back():
    record = make_record(times=([0.2, 0.3, 0.25], [0.1, 0.12, 0.11]), independent_ratios=[2.1, 2.3], variant="bf16")
    document = json.loads(json.dumps(record.to_json()))
    assert document["schema"] == SCHEMA
    assert Record.from_json(document) == record


def test_records_written_before_the_schema_load_with_the_new_fields_at_their_defaults():
    """A real run of this machine, written by the untyped layout (no schema, variant or extra checks)."""
    with open(RUN) as stream:
        benchmarks = json.load(stream)["benchmarks"]
    documents = [bench["extra_info"]["optbench"] for bench in benchmarks]
    assert all("schema" not in document for document in documents)
    records = [Record.from_json(document) for document in documents]
    assert {record.schema for record in records} == {1} and all(record.variant == "" for record in records)
    assert all(record.speedup.low <= record.speedup.point <= record.speedup.high for record in records)
    assert all(record.accuracy.headline.metric for record in records)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "records.jsonl:2: not JSON"),
        ('{"case": "smoke:a"}', 'records.jsonl:2: not an optbench record (missing value for field "technique")'),
        ('{"schema": 99}', "records.jsonl:2: record schema 99 is newer than this optbench reads"),
        ("[1, 2]", "records.jsonl:2: not a JSON object"),
    ],
)
def test_an_unreadable_record_is_named_by_file_and_line(tmp_path, line, message):
    good = json.dumps(make_record().to_json())
    (tmp_path / RECORDS_FILE).write_text(f"{good}\n{line}\n")
    with pytest.raises(RecordError) as raised:
        read_records(tmp_path)
    assert message in str(raised.value) and "\n" not in str(raised.value)
