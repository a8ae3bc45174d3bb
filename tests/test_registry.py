"""The registry is the catalogue: every benchmark file measures a registered technique, every registered technique
is measured, and a technique's identity (what records, advise, the recipe and the recommendation key on) is its
registered name, never the name of the file that measures it (issue 35)."""

import importlib.util
import os
from dataclasses import replace
from pathlib import Path

import pytest

from optbench.advise.advice import advice_of, choose_recipe
from optbench.storage.record import read_records
from optbench.techniques import Technique, Used, named, registered
from optbench.verdict.stats import Interval
from tests.records import make_record

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK_FILES = sorted((ROOT / "benchmarks").glob("test_*.py"))


def declared(path: Path) -> Technique | None:
    """The technique a benchmark file declares with `pytestmark = pytest.mark.technique(...)`; None without one."""
    spec = importlib.util.spec_from_file_location(f"declared_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    marks = getattr(module, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    techniques = [mark.args[0] for mark in marks if mark.name == "technique"]
    return techniques[0] if techniques else None


@pytest.fixture(scope="module")
def declarations() -> dict[str, Technique | None]:
    return {path.name: declared(path) for path in BENCHMARK_FILES}


def test_every_benchmark_file_declares_a_registered_technique(declarations):
    undeclared = [name for name, technique in declarations.items() if technique is None]
    assert undeclared == [], "declare each with pytestmark = pytest.mark.technique(TECHNIQUE)"
    unregistered = [name for name, technique in declarations.items() if technique not in registered()]
    assert unregistered == [], "a benchmark file's technique must be a module of optbench/techniques"


def test_every_registered_technique_is_measured_by_a_benchmark_file(declarations):
    measured = {technique.name for technique in declarations.values() if technique}
    assert [technique.name for technique in registered() if technique.name not in measured] == []


def test_registered_names_are_unique_and_found_by_name():
    names = [technique.name for technique in registered()]
    assert len(names) == len(set(names)) > 20
    assert all(named(name).name == name for name in names)
    assert named("no_such_technique") is None


def test_the_registry_lists_techniques_in_seed_004s_order():
    order = [technique.name for technique in registered()]
    assert order.index("reduced_precision") < order.index("channels_last")
    assert order.index("reduced_precision") < order.index("tf32")
    assert [t.order for t in registered()] == sorted(t.order for t in registered())


def test_a_technique_enters_the_recipe_only_through_its_rule(monkeypatch):
    """Without its registered rule, a technique marked *use* changes nothing in the recipe."""
    record = replace(make_record(technique="reduced_precision", variant="bf16"), speedup=Interval(1.5, 1.4, 1.6))
    assert choose_recipe([advice_of(record, "cnn")]).dtype == "bf16"
    without_rule = tuple(
        replace(technique, recipe=None) if technique.name == "reduced_precision" else technique
        for technique in registered()
    )
    monkeypatch.setattr("optbench.advise.advice.registered", lambda: without_rule)
    assert choose_recipe([advice_of(record, "cnn")]).dtype is None


def test_used_picks_the_fastest_variant_marked_use():
    slow = replace(make_record(technique="compile", variant="compile:default"), speedup=Interval(1.2, 1.1, 1.3))
    fast = replace(make_record(technique="compile", variant="compile:max-autotune"), speedup=Interval(1.4, 1.1, 1.7))
    used = Used((slow, fast))
    assert used.fastest("compile:default", "compile:max-autotune") == "compile:max-autotune"
    assert used.fastest("compile:default") == "compile:default"
    assert used.fastest("compile:reduce-overhead") is None
    assert "compile:default" in used and "compile:reduce-overhead" not in used


def test_a_renamed_benchmark_file_keeps_its_technique_for_advise(pytester, monkeypatch):
    """The catalogue's inference_mode file, copied under another name and run: its record is still
    `inference_mode`, and advise puts it in the recipe as before."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    pytester.makeconftest('pytest_plugins = ["optbench.plugin", "fixtures.models"]\n')
    pytester.makepyfile(test_renamed_autograd=(ROOT / "benchmarks" / "test_inference_mode.py").read_text())
    result = pytester.runpytest_subprocess(
        "-k", "grad-vs-no_grad-tiny-mlp", "--benchmark-disable", "--results-dir", "out", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    [record] = read_records(pytester.path / "out")
    assert record.technique == "inference_mode"
    measured = replace(record, speedup=Interval(1.3, 1.2, 1.4))
    assert choose_recipe([advice_of(measured, "tiny-mlp")]).autograd == "no_grad"
