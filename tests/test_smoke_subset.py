"""The smoke profile's subsets: which variants CI runs, read from the catalogue as collected."""

from __future__ import annotations

import pytest

from optbench.reporting.progress import is_case
from tests.catalogue_run import ROOT

OWN_MODEL = "examples/cnn_bn.py"


class Collected:
    """The items a collection ends with, after every plugin has marked them."""

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = list(session.items)


def collect(*arguments: str) -> list[pytest.Item]:
    collected = Collected()
    code = pytest.main(
        [str(ROOT / "benchmarks"), "--collect-only", "-q", "-p", "no:cacheprovider", *arguments], plugins=[collected]
    )
    assert code == pytest.ExitCode.OK
    return collected.items


def skip_reason(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("skip")
    return marker.kwargs["reason"] if marker else None


def test_under_smoke_only_the_named_variants_of_a_marked_test_run_and_every_name_is_a_case(monkeypatch):
    monkeypatch.chdir(ROOT)
    items = collect("--profile", "smoke")
    marked = [item for item in items if item.get_closest_marker("smoke")]
    assert {item.originalname for item in marked} >= {"test_ddp", "test_allocator", "test_inference_mode"}
    for test in {item.originalname for item in marked}:
        cases = [item for item in marked if item.originalname == test]
        named = set(cases[0].get_closest_marker("smoke").args)
        ids = {item.callspec.id for item in cases}
        assert named <= ids, f"{test}: the smoke marker names cases that do not exist: {named - ids}"
        assert named < ids, f"{test}: the smoke marker names every case; drop it"
        for item in cases:
            reason = skip_reason(item)
            if item.callspec.id in named:
                assert reason is None, item.nodeid
            else:
                assert reason.startswith("runs only in profile standard (this run: smoke runs "), item.nodeid
    unmarked = [item for item in items if not item.get_closest_marker("smoke")]
    assert not any((skip_reason(item) or "").startswith("runs only") for item in unmarked)


def test_standard_and_the_users_own_model_run_every_variant(monkeypatch):
    monkeypatch.chdir(ROOT)
    standard = collect("--profile", "standard")
    own = collect("--profile", "smoke", "--model", f"{OWN_MODEL}:model", "--inputs", f"{OWN_MODEL}:inputs")
    assert any(item.originalname == "test_inference_mode" for item in own)
    for items in (standard, own):
        assert [item.nodeid for item in items if skip_reason(item)] == []


def test_the_run_s_estimate_counts_no_case_the_smoke_subset_skips(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    items = collect("--profile", "smoke")
    skipped = [item for item in items if is_case(item) and skip_reason(item)]
    assert skipped
    assert f" for {sum(map(is_case, items)) - len(skipped)} cases on 1 worker(s)" in capsys.readouterr().out
