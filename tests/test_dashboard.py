"""The trend page: regressions on top, a plot per case, and it renders in a real browser."""

import re
import shutil
import subprocess
from dataclasses import replace
from html.parser import HTMLParser

import pytest
from test_changes import NIGHTS, QUIET, REAL, history

from optbench.__main__ import main
from optbench.reporting.dashboard import write_dashboard

BROWSER = shutil.which("chromium-headless-shell")


class Page(HTMLParser):
    """What a reader sees: section headings, plots, and the order they come in."""

    def __init__(self):
        super().__init__()
        self.order: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        classes = dict(attrs).get("class", "")
        if tag == "svg" or (tag in ("div", "section") and classes):
            self.order.append(f"{tag}.{classes}" if classes else tag)

    def handle_data(self, data):
        self.text.append(data)


def nights_with_a_late_slowdown():
    """Every real case over 90 nights; the first quiet case 15% slower for its last 5, torch updated at 60."""
    nights = []
    for case in REAL:
        slow = case == QUIET[0]
        case_nights = history(case, 3, lambda night, slow=slow: 0.85 if slow and night >= NIGHTS - 5 else 1.0)
        nights += [replace(night, torch="2.14.2") if i >= 60 else night for i, night in enumerate(case_nights)]
    return nights


def read(page_path):
    page = Page()
    page.feed(page_path.read_text())
    return page


def test_regressions_come_first_then_one_plot_per_case(tmp_path):
    page = read(write_dashboard(nights_with_a_late_slowdown(), tmp_path))
    assert page.order[0] == "div.news"
    assert page.order.count("section.case") == len(REAL) == page.order.count("svg")
    text = "".join(page.text)
    (news,) = re.findall(re.escape(QUIET[0]) + r": (\d+\.\d)% slower .*? from night (2026-\d+)", text)
    assert 10 < float(news[0]) < 20 and news[1] == f"2026-{NIGHTS - 5:03d}"
    assert "torch 2.14.2" in text


def test_a_quiet_history_says_so(tmp_path):
    quiet = [night for case in QUIET for night in history(case, 4)]
    page = read(write_dashboard(quiet, tmp_path))
    assert page.order[0] == "div.quiet" and "none in the last 7 nights" in "".join(page.text)


def test_dashboard_command_refuses_a_missing_history(tmp_path, capsys):
    assert main(["dashboard", str(tmp_path / "missing.jsonl"), "--output", str(tmp_path)]) == 2
    assert "no such history" in capsys.readouterr().err


@pytest.mark.skipif(BROWSER is None, reason="chromium-headless-shell is not installed (apt-get install it)")
def test_the_page_renders_in_a_browser_without_console_errors(tmp_path):
    page = write_dashboard(nights_with_a_late_slowdown(), tmp_path / "site")
    browse = [BROWSER, "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
    dom = subprocess.run([*browse, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr
    assert "CONSOLE" not in dom.stderr and "Uncaught" not in dom.stderr, dom.stderr
    assert dom.stdout.count("<svg") == len(REAL) and "Regressions now" in dom.stdout
    screenshot = tmp_path / "dashboard.png"
    shot = [*browse, f"--screenshot={screenshot}", "--window-size=1200,2400", page.as_uri()]
    subprocess.run(shot, capture_output=True, timeout=120, check=True)
    assert screenshot.stat().st_size > 20_000  # a blank page is a few kB
