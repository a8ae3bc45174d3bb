"""optbench's command-line options: what they are, their checks, and how code reads them.

A run started by pytest with the plugin loaded (the catalogue's conftest, or
`-p optbench.plugin`) registers them in pytest's parser; one started by a test
that asks for the `optbench` fixture through the pytest11 entry point never
does (a project's own `--device` or `--profile` is not optbench's), and reads
each option's default instead (`use_defaults`). Code reads them through
`option`, which serves both.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from .profiles import MIN_ROUNDS_FLOOR, PROFILES
from .reporting.progress import MODES
from .running.allocator import ALLOCATORS

_DEFAULTS = pytest.StashKey[dict[str, Any]]()
"""Where optbench was started by a test (`activate`): the values of its options, which were never registered."""
_REQUIRED = object()
Number = TypeVar("Number", int, float)


HELPER_ROLES = ("optbench_isolated", "optbench_confirming", "optbench_independent")
"""The options that make a process one of the harness's helpers for a case: its own, a confirmation, a timer."""


def option(config: pytest.Config, name: str, default: Any = _REQUIRED) -> Any:
    """The value of option `name`: from the command line, or optbench's default where `activate` started it (its
    options unregistered, a project's own `--device` or `--profile` is not optbench's)."""
    defaults = config.stash.get(_DEFAULTS, {})
    if name in defaults:
        return defaults[name]
    return config.getoption(name) if default is _REQUIRED else config.getoption(name, default)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a fraction in [0, 1), e.g. 0.1 for 10%")
    return value


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def _checked(parse: Callable[[str], Number], valid: Callable[[Number], bool], need: str) -> Callable[[str], Number]:
    """An option's type: `parse`, then an error saying what it must be unless `valid`."""

    def check(text: str) -> Number:
        value = parse(text)
        if not valid(value):
            raise argparse.ArgumentTypeError(f"{text!r} must be {need}")
        return value

    return check


_positive_fraction = _checked(_fraction, lambda value: value > 0, "above 0, e.g. 0.02 for one run in 50")
_positive_count = _checked(_count, lambda value: value > 0, "at least 1")
_rounds = _checked(
    _count, lambda value: value >= MIN_ROUNDS_FLOOR, f"at least {MIN_ROUNDS_FLOOR}: two ABBA pairs of rounds"
)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def add_options(parser: pytest.Parser) -> None:
    """Every option of optbench, in its group of pytest's help."""
    group = parser.getgroup("optbench", "optbench: gated benchmarks of PyTorch optimizations")
    group.addoption(
        "--profile",
        choices=sorted(PROFILES),
        default=None,
        help="workload sizes and measurement budget: smoke (small, CPU CI) or standard (the seeds' "
        "sizes, GPU nightly). Default: smoke on CPU, standard on CUDA.",
    )
    group.addoption(
        "--device",
        default=None,
        help="cpu, cuda or cuda:N. Default: cuda if torch sees a GPU, else cpu.",
    )
    group.addoption(
        "--update-baselines",
        action="store_true",
        help="record the measured speedup and accuracy of every case that ran as the baseline for "
        "this environment (merged into baselines/<environment key>.json; other entries kept).",
    )
    group.addoption(
        "--false-alarm-rate",
        type=_positive_fraction,
        default=0.02,
        help="share of runs of unchanged code allowed to fail on speed, split over the cases with history "
        "(optbench.verdict.regression). Default 0.02: one run in 50.",
    )
    group.addoption(
        "--min-effect",
        type=_fraction,
        default=0.05,
        help="a slowdown smaller than this is never a regression, however significant. Default 0.05.",
    )
    group.addoption(
        "--confirm",
        type=_count,
        default=2,
        help="measure a case that came out regression or inconclusive again in a fresh process, up to this "
        "many times; the verdict uses every measurement. Default 2; 0 turns confirmation off.",
    )
    group.addoption(
        "--plant-slowdown",
        type=_fraction,
        default=0.0,
        help="calibration only: make every timed call of each optimized variant this much slower (0.1 = 10%%), "
        "to measure what the gate catches. Default 0.",
    )
    group.addoption(
        "--isolation",
        choices=("process", "none"),
        default="process",
        help="process (default): measure each case in a process of its own, forked from one that has only "
        "imported the suite, so its numbers do not depend on the cases that ran before (optbench.running.isolation); "
        "none: measure in this process (for --pdb and debugging; speedups then follow the run's history).",
    )
    group.addoption(
        "--allocator",
        choices=ALLOCATORS,
        default=None,
        help="the memory allocator the cases are measured with: system (the C library's malloc; glibc's with its "
        "mmap and trim thresholds fixed, so page faults do not follow the history), glibc-dynamic (glibc as a plain "
        "python gets it), jemalloc or tcmalloc (preloaded into each case's process; apt-get install libjemalloc2 / "
        "libtcmalloc-minimal4). Default: system, or the allocator this process preloads. Part of the environment "
        "key when not the default system one.",
    )
    group.addoption(
        "--progress",
        choices=MODES,
        default="auto",
        help="what the running case is doing, live: tty (a status line redrawn in place), lines (a line per phase "
        "of a case past 30 s, for CI logs) or off. Default auto: tty on a terminal, lines elsewhere.",
    )
    # The roles of the processes a case runs in, set by the harness itself.
    group.addoption("--optbench-confirming", action="store_true", help=argparse.SUPPRESS)
    group.addoption("--optbench-isolated", action="store_true", help=argparse.SUPPRESS)
    group.addoption("--optbench-independent", action="store_true", help=argparse.SUPPRESS)
    group.addoption("--optbench-gated-cases", type=int, default=None, help=argparse.SUPPRESS)
    group.addoption("--optbench-timing-only", action="store_true", help=argparse.SUPPRESS)
    group.addoption("--optbench-earlier", type=Path, default=None, help=argparse.SUPPRESS)
    group.addoption("--optbench-threads", type=int, default=None, help=argparse.SUPPRESS)
    group.addoption("--optbench-key-threads", type=int, default=None, help=argparse.SUPPRESS)
    group.addoption(
        "--accuracy-drift",
        type=_fraction,
        default=0.5,
        help="fail a case whose accuracy figure moved more than this share of its baseline headroom "
        "toward the limit. Default 0.5.",
    )
    group.addoption(
        "--ci-target",
        type=_fraction,
        default=None,
        help="target relative half-width of the speedup's 95%% interval (profile default: 0.03 smoke, 0.02 standard).",
    )
    group.addoption(
        "--case-budget",
        type=_positive,
        default=None,
        help="most seconds of timed rounds per case (profile default: 8 smoke, 60 standard).",
    )
    group.addoption(
        "--block-target",
        type=_positive,
        default=None,
        help="least seconds a block of back-to-back calls lasts (profile default: 0.05).",
    )
    group.addoption(
        "--min-rounds",
        type=_rounds,
        default=None,
        help="fewest timed rounds per case, whatever the pilot says the target needs (profile default: 24). "
        "Fewer make a quick look quicker and its intervals wider; a gate run keeps the default.",
    )
    group.addoption(
        "--case-timeout",
        type=_positive,
        default=None,
        help="fail a case still running after this many seconds, naming its phase (profile default: "
        "300 smoke, 1800 standard).",
    )
    group.addoption(
        "--compile-fallback",
        action="store_true",
        help="when torch.compile fails, measure eager instead and say so in the record (the seed's fallback "
        "chain); without it a compiler error fails the case with the error's first lines.",
    )
    group.addoption(
        "--gpu-per-worker",
        action="store_true",
        help="with pytest-xdist on a multi-GPU machine (-n <GPUs>): pin worker gwN to cuda:N and keep timing "
        "on, since workers no longer share a device. Without it, xdist runs are an accuracy lane, untimed.",
    )
    group.addoption(
        "--agree",
        action="store_true",
        help="after each case's timed rounds, time it again with torch.utils.benchmark.Timer (ABBA blocks of "
        "blocked_autorange) and record the ratios; `python -m optbench agree` tabulates them.",
    )
    group.addoption(
        "--sessions",
        type=_positive_count,
        default=1,
        help="time each case's rounds this many times back to back in its process and record each session's "
        "speedup: how much it drifts with time alone; `python -m optbench drift` tabulates them. Default 1.",
    )
    group.addoption(
        "--processes",
        type=_positive_count,
        default=None,
        metavar="K",
        help="time each case in K fresh processes, its rounds divided among them, and give the interval across "
        "them (t on K-1 degrees of freedom; optbench.running.processes): one that holds for the next run, which "
        "draws its own process. The processes of different cases are interleaved across the run "
        "(optbench.running.interleave); accuracy and memory are checked once, in the last. Default: the "
        "profile's (1 in both).",
    )
    group.addoption(
        "--model",
        default=None,
        metavar="SPEC",
        help="measure the catalogue's inference techniques on your model instead of the built-in workloads: "
        "package.module:function or path/to/file.py:function returning an nn.Module (it may take the device as "
        "its one argument). Needs --inputs.",
    )
    group.addoption(
        "--inputs",
        default=None,
        metavar="SPEC",
        help="with --model: a function returning one batch for it: a tensor, a tuple/list (positional arguments) "
        "or a dict (keyword arguments).",
    )
    group.addoption(
        "--train",
        default=None,
        metavar="SPEC",
        help="measure the catalogue's training techniques on your training setup instead of the built-in "
        "workloads: a function returning optbench.TrainingSetup(model=..., loss=..., optimizer=..., data=...) "
        "(it may take the device as its one argument).",
    )
    group.addoption(
        "--model-name",
        default=None,
        help="with --model or --train: the name in test ids, records and baselines. Default: the function's name.",
    )
    group.addoption(
        "--recipe",
        default=None,
        metavar="PATH",
        help="with --model or --train: measure this recipe (written by `python -m optbench advise`) end to end "
        "against the plain model (benchmarks/test_recipe.py).",
    )
    group.addoption(
        "--baselines-dir",
        default=None,
        help="folder of baseline files. Default: baselines/ in the rootdir.",
    )
    group.addoption(
        "--results-dir",
        default=".optbench",
        help="folder for this run's records.jsonl (written as cases finish) and summary.md. Default .optbench.",
    )


class _OptionDefaults:
    """Stands in for pytest's parser to collect what `pytest_addoption` would declare: each option's default."""

    def __init__(self) -> None:
        self.defaults: dict[str, Any] = {}

    def getgroup(self, *args: Any, **kwargs: Any) -> _OptionDefaults:
        return self

    def addoption(self, *names: str, **attributes: Any) -> None:
        dest = attributes.get("dest") or names[0].lstrip("-").replace("-", "_")
        flag = attributes.get("action") == "store_true"
        self.defaults[dest] = attributes.get("default", False if flag else None)


IN_TEST_PROCESS = {"isolation": "none", "confirm": 0}
"""What optbench changes from its defaults where it is started by a test that asks for it (`activate`): its case
processes would be started with options this session never registered."""


def use_defaults(config: pytest.Config) -> None:
    """Make `option` read optbench's defaults, with IN_TEST_PROCESS's changes, in a session that never registered
    its options (optbench.plugin.activate)."""
    recorder = _OptionDefaults()
    add_options(recorder)  # type: ignore[arg-type]
    config.stash[_DEFAULTS] = {**recorder.defaults, **IN_TEST_PROCESS}
