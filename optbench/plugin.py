"""The pytest plugin: options, the `optbench`, `device` and `profile` fixtures, and the run summary."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from .advise.own_inputs import OwnInputs, load_own_inputs
from .advise.own_model import SpecError
from .measuring.faults import forget_frames, release_memory
from .measuring.training import TrainingWorkload
from .measuring.workload import InferenceWorkload
from .options import HELPER_ROLES, add_options, option, use_defaults
from .profiles import PROFILES, SMOKE_MARKER_HELP, Profile, outside_smoke_subset
from .reporting.progress import (
    PHASE_FILE,
    WORKER_PHASES,
    PhaseFile,
    Progress,
    WorkerCases,
    WorkerPhase,
    is_case,
    progress_mode,
)
from .reporting.recommendation import recommendation_markdown
from .reporting.report import summary
from .reporting.run_page import PAGE, write_run_page
from .reporting.terminal import SummarizedRun, write_summary
from .running.allocator import Allocator, AllocatorFixed, AllocatorNotFound, measuring_allocator
from .running.confirmation import confirm_in_fresh_process, independent_in_fresh_process
from .running.forks import CaseForks
from .running.isolation import Outcome
from .running.processes import read_earlier
from .running.runner import CaseRunner, RunSettings
from .running.workers import (
    WORKER_RUN_KEY,
    merge_worker_runs,
    threads_per_worker,
    time_on_own_gpu,
    worker_device,
    xdist_worker,
)
from .storage.baselines import BaselineError, BaselineStore
from .storage.environment import current_commit, environment_key, fingerprint
from .storage.outputs import OutputError, writable_folder
from .storage.record import RECORD_KEY, RECORDS_FILE, Record
from .techniques import Technique
from .verdict.gate import GateSettings
from .verdict.regression import pooled_variance

# What every case's fresh process would otherwise import for itself: the case's interval needs scipy.special
# (optbench.verdict.stats imports it at first use, so a pytest process that times nothing does not pay for it). Not
# torch._dynamo (1.8 s, 2-core AMD EPYC): only a case that compiles needs it, and torchvision, which the
# catalogue's models preload, imports it anyway.
ZYGOTE_PRELOAD = ("scipy.special",)

DETERMINISTIC_CUBLAS = ":4096:8"
"""CUBLAS_WORKSPACE_CONFIG that makes cuBLAS deterministic, as torch.use_deterministic_algorithms asks."""

_SESSION = pytest.StashKey["OptbenchSession"]()
_FAILURE = pytest.StashKey[BaseException]()
"""A failed case's error, from its report until its teardown."""


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def resolve_device(value: str | None) -> torch.device:
    """The device `--device` names, checked without creating a CUDA context (device_count asks NVML first)."""
    if value is None:
        return torch.device("cuda", 0) if torch.cuda.device_count() else torch.device("cpu")
    match = re.fullmatch(r"cpu|cuda(?::(\d+))?", value)
    if not match:
        raise pytest.UsageError(f"--device {value!r}: expected cpu, cuda or cuda:N")
    if value == "cpu":
        return torch.device("cpu")
    if not torch.cuda.device_count():
        raise pytest.UsageError(f"--device {value}: torch sees no CUDA device here; run with --device cpu")
    index = int(match.group(1) or 0)
    if index >= torch.cuda.device_count():
        raise pytest.UsageError(f"--device {value}: only {torch.cuda.device_count()} CUDA device(s) visible")
    return torch.device("cuda", index)


class OptbenchSession:
    """Per-run state: resolved settings, and the records of finished cases."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        if option(config, "optbench_threads"):  # a case's own process runs with its parent's threads
            torch.set_num_threads(option(config, "optbench_threads"))
        # Before any per-worker throttling: part of the environment key.
        self.threads = option(config, "optbench_key_threads") or torch.get_num_threads()
        self.isolated = option(config, "optbench_isolated")
        """This process is one case's own (optbench.running.isolation): it writes the case's outcome for its parent."""
        self.is_controller = xdist_worker() is None and option(config, "dist", "no") != "no"
        """An xdist controller: it measures nothing, so it stays off the GPUs (no CUDA context)."""
        self.worker_phases: Path | None = None
        """On an xdist controller, once it sets up its workers: where they leave their cases' phases (WorkerPhase)."""
        self.device = self._worker_device() or self._own_device()
        if self.device.type == "cuda" and not self.is_controller:
            torch.cuda.set_device(self.device)
        name = option(config, "profile") or ("standard" if self.device.type == "cuda" else "smoke")
        self.profile: Profile = PROFILES[name].with_overrides(
            ci_half_width=option(config, "ci_target"),
            case_budget_s=option(config, "case_budget"),
            case_timeout_s=option(config, "case_timeout"),
            block_target_s=option(config, "block_target"),
            min_rounds=option(config, "min_rounds"),
            processes=option(config, "processes"),
        )
        if self.profile.processes > 1 and option(config, "isolation") != "process":
            raise pytest.UsageError(
                "--processes: a case's processes are forks of the run's zygote; drop --isolation none, or --processes"
            )
        self.results_dir = Path(option(config, "results_dir"))
        self.records: list[Record] = []
        self._settings: RunSettings | None = None
        self._estimated = False
        self._worker_runs: list[Path] = []
        """On a --gpu-per-worker controller: each worker's benchmark JSON, merged at the end."""
        self._outcome: Outcome | None = None
        self.allocator, zygote_environment = self._allocator()
        self.forks = CaseForks(
            config, self.profile, self.device, self.threads, zygote_environment,
            gate=lambda: self.settings().gate, progress_of=self.case_progress, interleaved=not self.is_worker,
        )  # fmt: skip
        self.progress: Progress | None = None
        """Made once the cases are counted (the terminal reporter exists by then)."""
        self.own = self._own_inputs()

    def _progress(self, cases: frozenset[str]) -> Progress | None:
        """The live status on this run's terminal; None where this process does not write to it."""
        config = self.config
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        quiet = self.is_helper or self.is_worker
        mode = progress_mode(option(config, "progress"), bool(reporter and reporter.isatty), quiet)
        if mode == "off" or reporter is None:
            return None
        workers = option(config, "numprocesses") if self.is_controller else 1
        progress = Progress(
            config, mode, self.profile.case_estimate_s, len(cases), workers or 1,
            worker_phases=self.worker_phases, case_ids=cases,
        )  # fmt: skip
        config.pluginmanager.register(progress, "optbench-progress")
        if self.is_controller:
            progress.redraw_every_second()
        return progress

    def case_progress(self, node_id: str) -> Callable[[str], None] | None:
        """Where a case run in this process tells its phases: the status line; in a case's own process, the file
        its parent reads; in an xdist worker, the file its controller reads."""
        if self.isolated:
            return PhaseFile(self.results_dir / PHASE_FILE)
        if self.progress:
            return self.progress.show
        folder = getattr(self.config, "workerinput", {}).get(WORKER_PHASES)
        return WorkerPhase(Path(folder), str(xdist_worker()), node_id) if folder else None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist's controller, setting up a worker: where to leave its cases' phases."""
        if self.worker_phases is None:
            self.worker_phases = Path(tempfile.mkdtemp(prefix="optbench-phases-"))
        node.workerinput[WORKER_PHASES] = str(self.worker_phases)

    def _own_inputs(self) -> OwnInputs:
        config = self.config
        try:
            return load_own_inputs(
                option(config, "model"), option(config, "inputs"), option(config, "train"),
                option(config, "recipe"), option(config, "model_name"), self.device,
            )  # fmt: skip
        except SpecError as error:
            raise pytest.UsageError(str(error)) from None

    def _allocator(self) -> tuple[Allocator, dict[str, str]]:
        try:
            return measuring_allocator(option(self.config, "allocator"), self.isolates())
        except AllocatorNotFound as error:
            raise pytest.UsageError(f"--allocator: {error}") from None
        except AllocatorFixed as error:
            raise pytest.UsageError(str(error)) from None

    @property
    def is_helper(self) -> bool:
        """This process is one of the harness's helpers for a case (HELPER_ROLES), not the run the user started."""
        return any(option(self.config, role) for role in HELPER_ROLES)

    def isolates(self) -> bool:
        """Whether this process hands each timed case to a process of its own (--isolation)."""
        return option(self.config, "isolation") == "process" and not self.is_helper

    def note_outcome(self, report: pytest.TestReport) -> None:
        """In a case's own process: keep the first phase that did not pass, else the call, for the parent."""
        if self._outcome is not None and self._outcome.outcome != "passed":
            return
        if report.when == "call" or not report.passed:
            self._outcome = Outcome.of(report)
            self.results_dir.mkdir(parents=True, exist_ok=True)
            self._outcome.write(self.results_dir)

    @property
    def is_worker(self) -> bool:
        return xdist_worker() is not None

    def _own_device(self) -> torch.device:
        if not (self.is_controller and option(self.config, "gpu_per_worker")):
            return resolve_device(option(self.config, "device"))
        gpus, workers = torch.cuda.device_count(), option(self.config, "numprocesses")
        if workers > gpus:
            raise pytest.UsageError(f"--gpu-per-worker: -n {workers} workers but {gpus} GPU(s) visible")
        return torch.device("cuda")  # the workers' GPUs, one each

    def _worker_device(self) -> torch.device | None:
        """Under xdist: a fair share of the CPU threads, and the worker's own GPU with --gpu-per-worker."""
        worker = xdist_worker()
        if worker is None:
            if option(self.config, "gpu_per_worker") and not self.is_controller:
                raise pytest.UsageError("--gpu-per-worker needs pytest-xdist workers: add -n <number of GPUs>")
            return None
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        torch.set_num_threads(threads_per_worker(self.threads, workers))
        if not option(self.config, "gpu_per_worker"):
            return None
        try:
            return worker_device(worker, torch.cuda.device_count())
        except ValueError as error:
            raise pytest.UsageError(f"--gpu-per-worker: {error}") from None

    def _environment(self) -> tuple[str, dict[str, Any]]:
        """Environment key and fingerprint; a controller's are its workers' (it only reads records)."""
        if self.is_controller:
            return self.records[0].environment_key, {}
        return (
            environment_key(self.device, self.threads, self.allocator),
            fingerprint(self.device, self.threads, self.allocator),
        )

    def settings(self) -> RunSettings:
        """Built on first need, so runs without benchmarks never read baselines."""
        if self._settings is None:
            directory = option(self.config, "baselines_dir") or Path(self.config.rootpath, "baselines")
            key, environment = self._environment()
            baselines = BaselineStore(Path(directory), key)
            self._settings = RunSettings(
                device=self.device,
                profile=self.profile,
                gate=GateSettings(
                    false_alarm_rate=option(self.config, "false_alarm_rate"),
                    min_effect=option(self.config, "min_effect"),
                    confirmations=option(self.config, "confirm"),
                    accuracy_drift=option(self.config, "accuracy_drift"),
                    pooled_variance=pooled_variance(baselines.histories().values()),
                ),
                update_baselines=option(self.config, "update_baselines"),
                baselines=baselines,
                environment=environment,
                compile_fallback=option(self.config, "compile_fallback"),
                agree=option(self.config, "agree"),
                sessions=option(self.config, "sessions"),
                timing_only=option(self.config, "optbench_timing_only"),
                earlier_processes=read_earlier(option(self.config, "optbench_earlier")),
                plant_slowdown=option(self.config, "plant_slowdown"),
                commit=current_commit(self.config.rootpath),
            )
        return self._settings

    def case_id(self, node_id: str) -> str:
        """`<profile>:<node id>`: the key of a case's record and history."""
        return f"{self.profile.name}:{node_id}"

    def gate_cases(self, count: int) -> None:
        """The cases with history this run gates: the false-alarm budget is split over them."""
        settings = self.settings()
        count = option(self.config, "optbench_gated_cases") or count  # a case's own process: its parent's count
        self._settings = replace(settings, gate=replace(settings.gate, gated_cases=max(1, count)))

    def add(self, record: Record) -> None:
        """Keep a finished case's record and append it to records.jsonl at once, so a crash loses nothing."""
        if not self.records:
            self.results_dir.mkdir(parents=True, exist_ok=True)
            (self.results_dir / RECORDS_FILE).write_text("")
        self.records.append(record)
        with open(self.results_dir / RECORDS_FILE, "a") as stream:
            stream.write(json.dumps(record.to_json()) + "\n")

    # Hooks: on an xdist controller the workers' records arrive here through report.user_properties.

    def _print_estimate(self, cases: frozenset[str]) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if cases and terminal is not None and not self._estimated:
            workers = option(self.config, "numprocesses") if self.is_controller else 1
            terminal.write_line(f"optbench: {self.profile.describe_estimate(len(cases), workers)}")
            self._estimated = True
            self.progress = self._progress(cases)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # Cases skipped by marker (the smoke subset) are known now and cost nothing; a device's skips come later.
        ordered = [item.nodeid for item in session.items if is_case(item) and not item.get_closest_marker("skip")]
        cases = frozenset(ordered)
        if self.isolates():
            self.forks.schedule(ordered)
        folder = getattr(self.config, "workerinput", {}).get(WORKER_PHASES)
        if folder:  # tryfirst: written before xdist's own hook tells the controller the collection is done
            WorkerCases(Path(folder), str(xdist_worker())).write(cases)
        self._print_estimate(cases)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """An xdist controller collects nothing itself: every worker's collection is the whole run, and the
        worker's list says which of its tests are cases."""
        if self.worker_phases is not None:
            self._print_estimate(WorkerCases(self.worker_phases, node.workerinput["workerid"]).read())

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        run = getattr(node, "workeroutput", {}).get(WORKER_RUN_KEY)
        if run:
            self._worker_runs.append(Path(run))

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.isolated:
            self.note_outcome(report)
        if report.when != "call" or self.is_worker:
            return
        for name, value in report.user_properties:
            if name == RECORD_KEY:
                self.add(Record.from_json(value, report.nodeid))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when == "call" and report.failed and call.excinfo and is_case(item):
            item.stash[_FAILURE] = call.excinfo.value
        return report

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        """Free a failed case's memory before the next test builds its fixtures.

        The failure's traceback holds the test's models: pytest keeps it as
        sys.last_value until the next test's call phase, after that test's
        setup, or, for pytest.fail, in reference cycles until gc runs. Here,
        after --pdb has had its look.
        """
        failure = item.stash.get(_FAILURE, None)
        if failure is not None:
            del item.stash[_FAILURE]
            forget_frames(failure)
            release_memory(self.device)

    @pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's table, which _fit_benchmark_table shapes
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.records:
            run = SummarizedRun(self.records, self.profile, str(self.device), self.results_dir, self.settings().gate)
            write_summary(terminalreporter, self.config, run)

    def _write_page(self) -> None:
        """The run's page (optbench.reporting.run_page), or one line on why it could not be drawn."""
        first = self.records[0]
        environment = {
            "environment key": first.environment_key,
            "device": first.device,
            "torch": torch.__version__,
            "allocator": first.allocator.label if first.allocator else "not read",
            "commit": self.settings().commit or "unknown",
            "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        try:
            write_run_page(self.records, self.results_dir / PAGE, environment)
        except ImportError as error:
            print(f"optbench: {self.results_dir / PAGE} not written: {error} (pip install 'optbench[report]')")

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # around pytest-benchmark's, whose JSON save may still fail
    def pytest_sessionfinish(self) -> Generator[None, None, None]:
        if self.progress:
            self.progress.stop()
        if self.worker_phases is not None:
            shutil.rmtree(self.worker_phases, ignore_errors=True)
        self.forks.close()
        merge_worker_runs(self.config, self._worker_runs)
        if self.records and not self.is_worker:
            (self.results_dir / "summary.md").write_text(summary(self.records, markdown=True) + "\n")
            recommendation = recommendation_markdown(self.records)
            if recommendation:
                (self.results_dir / "recommendation.md").write_text(recommendation + "\n")
            if not self.is_helper:  # a case's own process, or one confirming it: the run the user started draws
                self._write_page()
        try:
            return (yield)
        except Exception:
            # pytest prints no terminal summary after a failed session finish: the run's results still reach it.
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                self.pytest_terminal_summary(reporter)
            raise


def check_outputs(config: pytest.Config) -> None:
    """Every folder this run will write into exists and is writable, so a long run cannot fail at its end."""
    folders = [(Path(option(config, "results_dir")), "--results-dir")]
    report = option(config, "benchmark_json", None)
    if report is not None:
        folders.append((Path(report).parent, "--benchmark-json"))
    storage = str(option(config, "benchmark_storage", "") or "")
    saves = option(config, "benchmark_save", None) or option(config, "benchmark_autosave", False)
    if saves and "://" not in storage.removeprefix("file://"):
        folders.append((Path(storage.removeprefix("file://")), "--benchmark-storage (where --benchmark-save writes)"))
    try:
        for folder, named_by in folders:
            writable_folder(folder, named_by)
    except OutputError as error:
        raise pytest.UsageError(str(error)) from None


@pytest.hookimpl(tryfirst=True)  # pytest-benchmark asks for machine info in its own configure
def pytest_configure(config: pytest.Config) -> None:
    # Before anything initialises CUDA, which reads it once; a value set by the user is kept.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", DETERMINISTIC_CUBLAS)
    config.addinivalue_line(
        "markers", "workloads(*names): the built-in inference workloads a test runs on; the user's model under --model"
    )
    config.addinivalue_line(
        "markers", "trainings(*names): the built-in training workloads a test runs on; the user's setup under --train"
    )
    config.addinivalue_line(
        "markers",
        "timed: reads a measured speed or the machine's load, so it must not share the CPU with another test (every "
        "case is one), or must run in a process of known history. `-m 'not timed'` selects what may run under "
        "pytest-xdist",
    )
    config.addinivalue_line("markers", SMOKE_MARKER_HELP)
    config.addinivalue_line(
        "markers",
        "technique(TECHNIQUE): the registered technique (optbench.techniques) a test measures, which its records "
        "keep; declared once per benchmark file as `pytestmark`",
    )
    session = OptbenchSession(config)  # first: a --model that cannot run stops the run before any folder is made
    if not hasattr(config, "workerinput"):  # an xdist worker writes where its controller said
        check_outputs(config)
    config.stash[_SESSION] = session
    config.pluginmanager.register(session, "optbench-session")


RECIPE_CASES = "test_recipe.py"
"""The catalogue file measuring a recipe end to end: collected only with --recipe, so that without it the catalogue
is what it always was."""


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    return True if collection_path.name == RECIPE_CASES and option(config, "recipe") is None else None


def own_workload(config: pytest.Config) -> InferenceWorkload | None:
    """The user's model (--model) as the workload every inference technique runs on; None without --model."""
    return config.stash[_SESSION].own.workload


def own_training(config: pytest.Config) -> TrainingWorkload | None:
    """The user's training setup (--train) as the workload every training technique runs on; None without it."""
    return config.stash[_SESSION].own.training


WORKLOAD_MARKERS = {"workloads": ("workload", own_workload), "trainings": ("training", own_training)}


@pytest.hookimpl(trylast=True)  # after the parametrize marks, so the workload's id comes last as it always has
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for marker_name, (fixture, own_of) in WORKLOAD_MARKERS.items():
        marker = metafunc.definition.get_closest_marker(marker_name)
        if marker is not None:
            own = own_of(metafunc.config)
            metafunc.parametrize(fixture, [own.name] if own else list(marker.args), indirect=True)


# tryfirst: before -k/-m deselection, so stale entries are told from deselected cases and `-m timed` sees the marker
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_case(item):
            item.add_marker("timed")
    session = config.stash[_SESSION]
    if own := session.own.fixtures:  # only the techniques that take the user's model or setup run
        runs_on_own = [bool(own & set(getattr(item, "fixturenames", ()))) for item in items]
        others = [item for item, on_own in zip(items, runs_on_own, strict=True) if not on_own]
        if others:
            config.hook.pytest_deselected(items=others)
            items[:] = [item for item, on_own in zip(items, runs_on_own, strict=True) if on_own]
    else:  # the user's model or setup gets every variant: the subsets are chosen for the built-in workloads
        for item in items:
            if reason := outside_smoke_subset(item, session.profile.name):
                item.add_marker(pytest.mark.skip(reason=reason))
    time_on_own_gpu(config, session.results_dir, option(config, "gpu_per_worker"))
    count_gated(config, [item for item in items if not item.get_closest_marker("skip")])


def count_gated(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Tell the session how many collected cases have history: the gate splits its false-alarm budget over them."""
    session = config.stash[_SESSION]
    cases = [item for item in items if is_case(item)]
    if not cases:
        return
    try:
        baselines = session.settings().baselines
    except BaselineError as error:
        raise pytest.UsageError(str(error)) from None
    session.gate_cases(sum(baselines.get(session.case_id(item.nodeid)) is not None for item in cases))
    # Under --model or --train the built-in cases are not collected, so their entries are not stale.
    stale = baselines.unknown_cases(session.profile.name, {item.nodeid for item in cases})
    if stale and not session.own.fixtures:
        config.issue_config_time_warning(
            pytest.PytestWarning(
                f"{baselines.path}: {len(stale)} entries name no collected case (e.g. {stale[0]}); "
                "remove them or re-record with --update-baselines"
            ),
            stacklevel=2,
        )


@pytest.fixture(scope="session")
def own_recipe(pytestconfig: pytest.Config) -> ModuleType:
    """The recipe file given with --recipe, imported (optbench.advise.recipe)."""
    recipe = pytestconfig.stash[_SESSION].own.recipe
    if recipe is None:
        pytest.skip("measures a recipe: give --recipe PATH with --model/--inputs or --train (as advise does)")
    return recipe


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> torch.device:
    """The torch device this run measures on (--device)."""
    return pytestconfig.stash[_SESSION].device


@pytest.fixture(scope="session")
def profile(pytestconfig: pytest.Config) -> Profile:
    """The measurement profile of this run (--profile); fixtures size workloads by its name."""
    return pytestconfig.stash[_SESSION].profile


@pytest.fixture
def optbench(request: pytest.FixtureRequest, benchmark: Any) -> CaseRunner:
    """Runs a `Case` through warm-up, paired timing, accuracy and the gate: `optbench.run(case)`."""
    return case_runner(request, benchmark)


def activate(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Start optbench in a session that did not load it at configure: the pytest11 entry point (optbench.entry)
    calls this when the first test asks for the `optbench` fixture. Its options were never registered, so none can
    clash with the project's own (`--device`, `--profile`): each keeps its default, and cases are measured in the
    test's process."""
    if _SESSION in config.stash:
        return
    use_defaults(config)
    session = OptbenchSession(config)
    check_outputs(config)
    config.stash[_SESSION] = session
    config.pluginmanager.register(session, "optbench-session")
    count_gated(config, items)


def case_runner(request: pytest.FixtureRequest, benchmark: Any) -> CaseRunner:
    """The `optbench` fixture's value for the test `request` is for."""
    session = request.config.stash[_SESSION]
    technique = technique_of(request)
    config, node_id = request.config, request.node.nodeid
    confirming = option(config, "optbench_confirming")
    settings = session.settings()
    return CaseRunner(
        settings,
        benchmark,
        case_id=session.case_id(node_id),
        technique=technique,
        # As JSON: under xdist user_properties travel from worker to controller through execnet.
        publish=lambda record: request.node.user_properties.append((RECORD_KEY, record.to_json())),
        confirm=None if confirming else partial(confirm_in_fresh_process, config, node_id),
        isolate=partial(session.forks.run, node_id) if benchmark.enabled and session.isolates() else None,
        independent=partial(independent_in_fresh_process, config, node_id) if settings.agree else None,
        independent_only=option(config, "optbench_independent"),
        progress=session.case_progress(node_id),
    )


def technique_of(request: pytest.FixtureRequest) -> str:
    """The registered name of the technique the test declares (`pytest.mark.technique(TECHNIQUE)`); for a test of
    the user's own that declares none, its file's name without `test_`."""
    marker = request.node.get_closest_marker("technique")
    if marker is None:
        return request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    technique = marker.args[0] if marker.args else None
    if not isinstance(technique, Technique):
        pytest.fail(
            f"pytest.mark.technique takes a registered Technique (optbench.techniques), not {technique!r}",
            pytrace=False,
        )
    return technique.name


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    session = config.stash[_SESSION]
    if session.is_controller:  # it measures nothing; the merged JSON carries its workers' machine info
        return
    machine_info[RECORD_KEY] = fingerprint(session.device, session.threads, session.allocator)


def pytest_benchmark_compare_machine_info(
    config: pytest.Config, benchmarksession: Any, machine_info: dict[str, Any], compared_benchmark: dict[str, Any]
) -> None:
    if config.stash[_SESSION].is_controller:
        return
    current = machine_info.get(RECORD_KEY, {}).get("environment_key")
    saved = compared_benchmark.get("machine_info", {}).get(RECORD_KEY, {}).get("environment_key")
    if current != saved:
        benchmarksession.logger.warning(
            f"OPTBENCH: COMPARING ACROSS ENVIRONMENTS: this run is {current}, the saved run is {saved or 'unknown'}. "
            "Their times differ by machine or PyTorch version, not only by your change."
        )
