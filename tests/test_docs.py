"""README and docs/ hold: every link resolves, every command parses, and the contributing example runs as written.

Pages that moved out of README (issue 35) are read by people who paste their
commands; a renamed option, a removed command or a moved page must fail here,
not in a user's terminal.
"""

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from optbench.__main__ import parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
INLINE = re.compile(r"`([^`]+)`")
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", flags=re.S | re.M)
OPTBENCH = re.compile(r"^(?:\.venv/bin/)?(?:python -m optbench|optbench) ")
PYTEST = re.compile(r"^(?:\.venv/bin/)?pytest ")


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens and underscores gone, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in page.read_text().splitlines() if line.startswith("#")}


def fenced_lines(page: Path) -> list[str]:
    """The lines of `page`'s fenced blocks, continuation lines joined."""
    return [
        line.strip() for block in FENCE.findall(page.read_text()) for line in block.replace("\\\n", " ").splitlines()
    ]


def inline_spans(page: Path) -> list[str]:
    """`page`'s inline code spans outside its fenced blocks, wrapped lines joined."""
    return [" ".join(span.split()) for span in INLINE.findall(FENCE.sub("", page.read_text()))]


def help_of(words: list[str]) -> str | None:
    """What `optbench WORDS --help` prints, or None where WORDS name no command."""
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(io.StringIO()):
        try:
            parser().parse_args([*words, "--help"])
        except SystemExit as exit:
            return shown.getvalue() if exit.code == 0 else None
    return None


def unknown_in_mention(span: str) -> list[str]:
    """What an inline mention such as `python -m optbench drift --sessions 6` names that does not exist: its
    command, or an option its command's help does not show. A mention need not be a whole command line."""
    words = shlex.split(OPTBENCH.sub("", span))
    words = words[: words.index("--")] if "--" in words else words  # pytest's own after it
    commands = [words[0]] + [w for w in words[1:2] if not w.startswith("-") and help_of(words[:2]) is not None]
    shown = help_of(commands)
    if shown is None:
        return [f"no command {words[0]!r}"]
    options = set(re.findall(r"--[\w-]+", shown))
    return [word for word in words if word.startswith("--") and word.split("=")[0] not in options]


@cache
def pytest_options() -> frozenset[str]:
    """The options `pytest --help` shows in the repository (pytest's, pytest-benchmark's, xdist's, optbench's),
    and those optbench keeps out of it, which its processes pass each other and its docs explain."""
    shown = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True
    )
    internal = re.findall(r'addoption\(\s*"(--[\w-]+)"', (ROOT / "optbench" / "options.py").read_text())
    return frozenset(re.findall(r"--[\w-]+", shown.stdout)) | frozenset(internal)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_link_of_a_page_reaches_a_file_and_its_heading(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"https?://", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no such heading in {linked.name}")
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_optbench_command_of_a_page_parses_and_every_mention_exists(page):
    """Whole command lines are parsed by the commands' own parser, so a renamed option or command fails here."""
    for line in filter(OPTBENCH.match, fenced_lines(page)):
        try:
            with contextlib.redirect_stderr(io.StringIO()) as error:
                parser().parse_args(shlex.split(OPTBENCH.sub("", line), comments=True))
        except SystemExit:
            pytest.fail(f"{page_id(page)}: `{line}` does not parse: {error.getvalue().strip()}")
    unknown = {
        span: found for span in filter(OPTBENCH.match, inline_spans(page)) if (found := unknown_in_mention(span))
    }
    assert unknown == {}


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_pytest_option_of_a_page_exists(page):
    missing = [
        (word.split("=")[0], line)
        for line in filter(PYTEST.match, fenced_lines(page) + inline_spans(page))
        for word in shlex.split(line, comments=True)
        if word.startswith("--") and len(word) > 2 and word.split("=")[0] not in pytest_options()
    ]
    assert missing == []


def test_the_checks_above_can_fail(tmp_path):
    """A dead link, a command that does not parse, a mention of a missing command or option, and an option
    pytest does not know are all caught."""
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n[there](missing.md) [here](#title) [nowhere](#no-such) `optbench drift --sessions 6`\n\n```\n"
        ".venv/bin/python -m optbench calibrate --no-such-option\n.venv/bin/pytest benchmarks --no-such-flag\n```\n"
    )
    assert slug("Several processes per case: an interval") == "several-processes-per-case-an-interval"
    assert LINK.findall(page.read_text()) == ["missing.md", "#title", "#no-such"]
    assert "title" in anchors(page) and "no-such" not in anchors(page)
    assert [line for line in fenced_lines(page) if OPTBENCH.match(line)] == [
        ".venv/bin/python -m optbench calibrate --no-such-option"
    ]
    assert inline_spans(page) == ["optbench drift --sessions 6"]
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        parser().parse_args(["calibrate", "--no-such-option"])
    assert unknown_in_mention("optbench drift --sessions 6") == []
    assert unknown_in_mention("optbench drift --session 6") == ["--session"]
    assert unknown_in_mention("optbench history add --history h.jsonl") == []
    assert unknown_in_mention("optbench aa -- --processes 3") == []
    assert unknown_in_mention("python -m optbench no-such-command") == ["no command 'no-such-command'"]
    assert "--no-such-flag" not in pytest_options() and "--processes" in pytest_options()
    assert "--benchmark-compare" in pytest_options() and "--benchmark-comp" not in pytest_options()


def docs_block(page: str, section: str) -> str:
    """The first ```python block under the heading `section` of `page`."""
    text = (ROOT / page).read_text()
    body = text[text.index(f"## {section}\n") :]
    return re.search(r"```python\n(.*?)```", body, flags=re.S).group(1)


def test_the_adding_an_optimization_example_runs_as_written(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    pytester.makeconftest('pytest_plugins = ["optbench.plugin", "fixtures.models"]\n')
    pytester.makepyfile(test_my_trick=docs_block("docs/contributing.md", "Adding an optimization"))
    result = pytester.runpytest_subprocess(
        "--profile",
        "smoke",
        "--case-budget",
        "2",
        "--min-rounds",
        "4",
        "--baselines-dir",
        "empty",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_my_trick[[]resnet[]] *x [[]*] *"])
