"""The run page: a forest plot with a planted regression in red at the top, one plot per section, offline HTML that
renders in a real browser without console errors; written at the end of every run and by `report --html`."""

import dataclasses
import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_compact_summary import RUN, regressed

from optbench.__main__ import main
from optbench.measuring.accuracy import Check
from optbench.reporting.run_page import COLOURS, limit_share, write_run_page
from optbench.storage.record import Record

BROWSER = shutil.which("chromium-headless-shell")
PLOTS = ("speedups", "accuracy", "resources")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The page of a real recorded run (73 smoke cases, commit b78738c) with case 40 planted 25% slower."""
    with gzip.open(RUN, "rt") as lines:
        records = [Record.from_json(json.loads(line), str(RUN)) for line in lines]
    planted = [*records[:40], regressed(records[40]), *records[41:]]
    path = write_run_page(planted, tmp_path_factory.mktemp("run") / "report.html", {"environment key": "test"})
    return path, records[40].case.rsplit("::", 1)[-1]


def test_the_planted_regression_is_the_first_row_of_the_forest_plot_in_red(page):
    path, planted = page
    text = path.read_text()
    forest = text[text.index('id="speedups"') : text.index('id="accuracy"')]
    rows = re.findall(r'id="speedup-row-(\d+)-(\w+)"', forest)
    assert rows[0] == ("0", "fail") and [status for _, status in rows[1:]].count("fail") == 0
    first = forest[forest.index('id="speedup-row-0-fail"') :][:1500]
    assert f"stroke: {COLOURS['fail']}" in first
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", forest)
    assert planted in labels and labels.index(planted) < labels.index("test_zero_grad[wide-mlp]")


def test_one_plot_per_plot_section_and_nothing_fetched(page):
    text = page[0].read_text()
    for name in PLOTS:
        start = text.index(f'id="{name}"')
        section = text[start : text.index("</section>", start)]
        assert section.count("<svg") == 1, name
    assert text.count("<svg") == len(PLOTS)
    assert "<script" not in text and not re.search(r'(src|href)="https?:', text)  # namespaces only, nothing loaded
    assert "What to use on this device" in text and "1 fail" in text


def test_the_share_of_a_limit_reads_1_at_the_limit_either_way():
    assert limit_share(Check("max_abs_diff", 0.5, 1.0, True)) == 0.5
    assert limit_share(Check("max_abs_diff", 0.0, 0.0, True)) == 0.0
    assert limit_share(Check("max_abs_diff", 1e-9, 0.0, True)) == float("inf")
    assert limit_share(Check("top1_agreement", 0.95, 0.9, False)) == pytest.approx(0.5)
    assert limit_share(Check("top1_agreement", 0.8, 0.9, False)) == pytest.approx(2.0)


@pytest.mark.skipif(BROWSER is None, reason="chromium-headless-shell is not installed (apt-get install it)")
def test_the_page_renders_in_a_browser_without_console_errors(page, tmp_path):
    path = page[0]
    browse = [BROWSER, "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
    dom = subprocess.run([*browse, "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr
    assert "CONSOLE" not in dom.stderr and "Uncaught" not in dom.stderr, dom.stderr
    assert dom.stdout.count("<svg") == len(PLOTS)
    screenshot = tmp_path / "report.png"
    shot = [*browse, f"--screenshot={screenshot}", "--window-size=1200,1600", path.as_uri()]
    subprocess.run(shot, capture_output=True, timeout=120, check=True)
    assert screenshot.stat().st_size > 50_000  # a blank page is a few kB


def test_report_html_writes_the_page_of_a_saved_run(tmp_path, capsys):
    run = Path(__file__).parent / "data" / "epyc-bf16-run.json"
    assert main(["report", str(run), "--html", "--output", str(tmp_path)]) == 0
    text = (tmp_path / "report.html").read_text()
    assert text.count("<svg") == len(PLOTS) and "test_zero_grad[wide-mlp]" in text
    assert f"wrote {tmp_path / 'report.html'}" in capsys.readouterr().out


def test_a_record_without_timing_or_accuracy_still_gets_its_row(page, tmp_path):
    with gzip.open(RUN, "rt") as lines:
        record = Record.from_json(json.loads(next(lines)), str(RUN))
    faulted = dataclasses.replace(record, speedup=None, accuracy=None, memory=None, compile=None, gate=None)
    text = write_run_page([faulted, record], tmp_path / "report.html", {}).read_text()
    assert text.count("<svg") == len(PLOTS)
