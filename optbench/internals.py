"""Every private torch and pytest-benchmark API the suite touches, each behind a guard.

A private name can move in any release. Reached from here only, a rename
costs one line saying what is lost instead of breaking every run, or failing
every compile case with a wrong reason. Public APIs are used where they exist
(`torch.compiler.reset` instead of `torch._dynamo.reset`).

Guarded here:

- `torch._dynamo.utils.counters` ("stats"/"unique_graphs", "graph_break"): graphs captured and graph breaks.
  No public API counts them.
- `torch.ops.mkldnn._is_mkldnn_bf16_supported` / `_is_mkldnn_fp16_supported`: whether oneDNN runs bf16/fp16
  natively on this CPU. No public API; called when the plugin is configured.
- `torch._dynamo.config.suppress_errors`: compile errors fall back to eager (--compile-fallback). No public API.
- The "Torch-Compiled Region" profiler event dynamo wraps each compiled frame in. No public API.
- `torch._dynamo.utils.guard_failures`: why each cached graph rejected a call that then recompiled, for telling
  a shape policy's recompiles from a model's own specialisation (optbench.techniques.dynamic_shapes). No public
  API lists them.
- `torch._dynamo.exc.TorchDynamoException` and the `torch._dynamo`/`torch._inductor` module prefix: which errors
  are compiler errors.
- `torch.autograd.profiler.profile.kineto_results`: the allocator's allocation and free events, for CPU peak
  memory (optbench.measuring.memory). The public profiler reports memory per op, not the events in time order.
- `torch._inductor.cudagraph_trees.get_manager`: whether inductor recorded CUDA graphs in this case, whose
  replays allocate nothing. No public API.
- `torch._inductor.list_mode_options`: which compile modes turn on CUDA graphs (torch.compile's docstring
  points to it). No public API.
- `torch._functorch.config.activation_memory_budget` and `torch._inductor.compile_fx.compile_fx`: torch.compile's
  activation memory budget, which its min-cut partitioner reads, set around inductor's compilation in a backend
  of its own. No public API sets it.
- `DistributedDataParallel._get_ddp_logging_data`: the options and buckets DDP's C++ reducer runs with, for
  proof that a DDP setting is in effect. No public API reads them.
- `torch._C._set_deterministic_algorithms`: the deterministic-kernels flag without the inductor import that
  `torch.use_deterministic_algorithms` makes to set inductor's own flag (`use_deterministic_algorithms`).
- `DataLoader._iterator._shutdown_workers`: a DataLoader's persistent workers stopped when the harness is done with
  it. No public API stops them; left to the garbage collector they can take 5 s each (optbench.measuring.training).
- pytest-benchmark's `BenchmarkFixture._timer` / `_disable_gc`: the timer and gc setting it times with, which
  `--benchmark-timer`, `--benchmark-disable-gc` or a test's benchmark mark chose.
- pytest-benchmark's `config._benchmarksession`: its session, whose JSON and saved-run paths an xdist worker
  points at a file of its own and the controller merges (optbench.plugin). No public API reaches it.
- `torch.utils._pytree` (`tree_leaves`, `tree_map`, `tree_flatten`, `tree_unflatten`): walking outputs and
  batches of any structure, as torch itself does. No public pytree module; re-exported from here, so the
  other modules import it from here. (The recipe file that `advise` writes imports it itself: it is
  standalone, without optbench.)
- `torch.utils._python_dispatch.TorchDispatchMode`: seeing which ATen operations ran, below autocast and
  autograd (optbench.measuring.in_effect). Documented in torch's extension notes, but only under its private module.

The dynamo counters and the profiler event fail silently when renamed (a
counter key reads 0, no event matches), so they are checked against a
one-line function compiled once per process.
"""

from __future__ import annotations

import functools
import importlib.metadata
import sys
import types
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_leaves, tree_map, tree_unflatten

__all__ = ["TorchDispatchMode", "tree_flatten", "tree_leaves", "tree_map", "tree_unflatten"]
"""What other modules import from torch's private modules, through this one (module docstring); the functions
below are imported by name."""

COMPILED_REGION_EVENT = "Torch-Compiled Region"
_COMPILER_MODULES = ("torch._dynamo", "torch._inductor")
_NATIVE_CPU_CHECKS = {torch.bfloat16: "_is_mkldnn_bf16_supported", torch.float16: "_is_mkldnn_fp16_supported"}


class MissingInternal(RuntimeError):
    """A private API this suite relies on is gone; the message names the version and what is lost."""


def missing(what: str, lost: str, package: str = "torch") -> str:
    return f"{package} {importlib.metadata.version(package)} has no {what}: {lost}"


def dynamo_loaded() -> bool:
    """Whether dynamo has been imported in this process. `torch.compile` imports it, so until it is nothing has
    compiled: its counters would read zero and a reset would forget nothing. Importing it only to learn that costs
    1.8 s (2-core AMD EPYC, torch 2.14.1; 3.2 s under cProfile) in every case process that never compiles."""
    return "torch._dynamo" in sys.modules


def reset_compiler() -> None:
    """`torch.compiler.reset()` where dynamo is loaded (`dynamo_loaded`): each case compiles from scratch."""
    if dynamo_loaded():
        torch.compiler.reset()


def use_deterministic_algorithms(mode: bool, warn_only: bool) -> None:
    """`torch.use_deterministic_algorithms`, without its import of inductor (and dynamo) where inductor is not
    loaded yet: it sets inductor's `deterministic` config beside the eager flag, and an inductor nothing has
    imported has compiled nothing. The import costs 1.8 s of every case process that never compiles.

    Private: `torch._C._set_deterministic_algorithms`, the eager flag alone; without it, the public call."""
    set_eager_flag = getattr(torch._C, "_set_deterministic_algorithms", None)
    if set_eager_flag is None or "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        set_eager_flag(mode, warn_only=warn_only)


def _dynamo_counters() -> Any:
    if not dynamo_loaded():
        return None
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    return counters


def compile_counts() -> tuple[int, dict[str, int]]:
    """Graphs dynamo captured so far in this process, and its graph breaks by reason; (0, {}) when uncountable.

    Whether (0, {}) means "nothing compiled" or "cannot count" is `compile_counts_problem()`'s to say.
    """
    counters = _dynamo_counters()
    if counters is None:
        return 0, {}
    return counters["stats"]["unique_graphs"], dict(counters["graph_break"])


GuardMarks = dict[object, int]
"""How many guard failures dynamo had recorded per code object, to read the later ones from."""


def guard_failure_marks() -> GuardMarks:
    return {code: len(reasons) for code, reasons in _guard_failures().items()}


def guard_failures_since(marks: GuardMarks) -> list[str]:
    """The guard failures recorded after `marks`: one line per cached graph that rejected a call which then
    compiled anew, `"<compile id>: <failed guard>[; <failed guard>...]"`. Empty where torch keeps none."""
    return [
        str(reason).split("\n", 1)[0]
        for code, reasons in _guard_failures().items()
        for reason in reasons[marks.get(code, 0) :]
    ]


def _guard_failures() -> dict[object, list[object]]:
    if not dynamo_loaded():
        return {}
    try:
        from torch._dynamo.utils import guard_failures
    except ImportError:
        return {}
    return dict(guard_failures)


def _probe(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@functools.cache
def _compiled_probe() -> tuple[bool, bool]:
    """Compiles and runs a one-line function: (did the graph counter rise, did the profiler name its region)."""
    # A fresh code object: dynamo caches compiled code per code object, and the suite resets dynamo per case.
    fresh = types.FunctionType(_probe.__code__.replace(), _probe.__globals__)
    graphs_before, _ = compile_counts()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as recorded:
        torch.compile(fresh, backend="eager")(torch.ones(1))
    named = any(event.name.startswith(COMPILED_REGION_EVENT) for event in recorded.events())
    return compile_counts()[0] > graphs_before, named


def compile_counts_problem() -> str | None:
    """Why `compile_counts()` cannot tell whether anything compiled in this torch, or None when it can."""
    if _compiled_probe()[0]:
        return None
    # An error, not a skip: the case did run; only its "did it compile" check is lost, and saying so beats
    # blaming torch.compile for capturing no graph.
    return missing(
        "torch._dynamo.utils.counters['stats']['unique_graphs'] that counts captured graphs",
        "whether the optimized variant compiled is unknown; update optbench.internals",
    )


def count_compiled_regions(event_names: list[str]) -> int:
    """How many of the profiler events are compiled frames dynamo ran."""
    count = sum(name.startswith(COMPILED_REGION_EVENT) for name in event_names)
    # An error, not a skip: a 0 here fails the case as "never entered compiled code", a wrong reason.
    if count == 0 and not _compiled_probe()[1]:
        raise MissingInternal(
            missing(
                f"profiler event named '{COMPILED_REGION_EVENT}...' around compiled frames",
                "cannot tell which path generate() ran; update optbench.internals.COMPILED_REGION_EVENT",
            )
        )
    return count


def runs_natively_on_cpu(dtype: torch.dtype) -> bool:
    """Whether oneDNN runs `dtype` (bf16 or fp16) with native instructions on this CPU."""
    name = _NATIVE_CPU_CHECKS[dtype]
    check = getattr(torch.ops.mkldnn, name, None)
    if check is None:
        raise MissingInternal(
            missing(f"torch.ops.mkldnn.{name}", "cannot tell whether this CPU runs it natively or emulated")
        )
    return check()


def compile_errors_fall_back_to_eager() -> AbstractContextManager[None]:
    """A block in which a torch.compile error runs the code eager instead (what --compile-fallback asks)."""
    try:
        from torch._dynamo import config
    except ImportError:
        config = None
    if not hasattr(config, "suppress_errors"):
        # An error: the user asked for this fallback; without it compile errors would fail cases they said not to.
        raise MissingInternal(
            missing(
                "torch._dynamo.config.suppress_errors",
                "--compile-fallback cannot turn compile errors into eager runs; run without it",
            )
        )
    return config.patch(suppress_errors=True)


@functools.cache
def _dynamo_exception() -> type[BaseException] | None:
    try:
        from torch._dynamo.exc import TorchDynamoException
    except ImportError:
        # A warning, neither skip nor error: the module prefix below still recognizes compiler errors.
        warnings.warn(
            missing(
                "torch._dynamo.exc.TorchDynamoException",
                "compiler errors are recognized by their module only; others fail with a raw traceback",
            ),
            stacklevel=2,
        )
        return None
    return TorchDynamoException


def is_compiler_error(error: BaseException) -> bool:
    """Raised by torch.compile (dynamo or inductor), rather than by the code it compiled."""
    dynamo_exception = _dynamo_exception()
    if dynamo_exception is not None and isinstance(error, dynamo_exception):
        return True
    return type(error).__module__.startswith(_COMPILER_MODULES)


def benchmark_timing(benchmark: Any) -> tuple[Callable[[], float], bool]:
    """The timer and gc setting pytest-benchmark times the optimized calls with, for timing the reference alike."""
    try:
        return benchmark._timer, benchmark._disable_gc
    except AttributeError:
        # An error: timing the reference with another timer or gc setting would bias every speedup.
        raise MissingInternal(
            missing(
                "BenchmarkFixture._timer/_disable_gc",
                "the reference cannot be timed like the optimized calls; pin the version in constraints.txt",
                package="pytest-benchmark",
            )
        ) from None


def allocator_events(fn: Callable[[], Any]) -> list[Any] | None:
    """The profiler's allocation and free events of one call of `fn`; None (with a warning) when unreadable."""
    with torch.autograd.profiler.profile(profile_memory=True) as profiler:
        fn()
    results = getattr(profiler, "kineto_results", None)
    if results is None:
        # A warning: the memory column reads "-", the measurement itself is unaffected.
        warnings.warn(missing("profiler.kineto_results", "CPU peak memory is not measured"), stacklevel=2)
        return None
    return list(results.events())


def recorded_cuda_graphs(device_index: int) -> bool:
    """Whether inductor's CUDA graph trees hold a recorded graph on this GPU (since the last compiler reset)."""
    try:
        from torch._inductor.cudagraph_trees import get_manager
    except ImportError:
        # A warning: a graphed variant's memory then reads about 0 instead of n/a.
        warnings.warn(
            missing("torch._inductor.cudagraph_trees.get_manager", "CUDA-graphed variants' memory is not flagged"),
            stacklevel=2,
        )
        return False
    manager = get_manager(device_index, create_if_none_exists=False)
    return manager is not None and any(manager.roots.values())


_CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def mode_uses_cuda_graphs(mode: str) -> bool:
    """Whether torch.compile `mode` turns on inductor's CUDA graphs."""
    list_mode_options = getattr(getattr(torch, "_inductor", None), "list_mode_options", None)
    if list_mode_options is None:
        # No warning needed: the modes that add CUDA graphs are documented by name.
        return mode in _CUDA_GRAPH_MODES
    return bool(list_mode_options(mode).get("triton.cudagraphs"))


_MISSING = object()


def shut_down_workers(loader: torch.utils.data.DataLoader) -> None:
    """Stops `loader`'s persistent worker processes now; a later iter() starts new ones."""
    iterator = getattr(loader, "_iterator", _MISSING)
    if iterator is None:  # no persistent workers, or none started
        return
    shut_down = getattr(iterator, "_shutdown_workers", None)
    if shut_down is None:
        lost = "a loader's workers are left to the garbage collector"
        warnings.warn(missing("DataLoader._iterator._shutdown_workers", lost), stacklevel=2)
        return
    shut_down()
    loader._iterator = None


def fused_optimizer_devices() -> frozenset[str]:
    """The device types torch.optim has fused (`fused=True`) kernels for."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
    except ImportError:
        warnings.warn(
            missing(
                "torch.utils._foreach_utils._get_fused_kernels_supported_devices",
                "fused optimizer cases assume CUDA only",
            ),
            stacklevel=2,
        )
        return frozenset({"cuda"})
    return frozenset(_get_fused_kernels_supported_devices())


def ddp_logging_data(model: torch.nn.Module) -> dict[str, Any] | None:
    """What DDP's reducer reports it runs with (bucket sizes and cap, gradient_as_bucket_view, ...); None, with a
    warning, where this torch has no such report."""
    try:
        return dict(model._get_ddp_logging_data())  # type: ignore[operator]
    except AttributeError:
        warnings.warn(missing("DistributedDataParallel._get_ddp_logging_data", "DDP cases cannot prove their options"),
                      stacklevel=2)  # fmt: skip
        return None


def inductor_with_memory_budget(budget: float) -> Callable[..., Any] | None:
    """A torch.compile backend: inductor, partitioning forward from backward under activation memory budget
    `budget`; None where this torch has no budget. A new function at each call: dynamo reuses compiled code across
    equal backends (plain inductor with the same mode), and the budget is not among its guards, so a budgeted
    trainer compiled after a plain one would run the plain one's graphs."""
    try:
        from torch._functorch import config
        from torch._inductor.compile_fx import compile_fx
    except ImportError:
        return None
    if not hasattr(config, "activation_memory_budget"):
        return None

    def backend(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
        with config.patch(activation_memory_budget=budget):
            return compile_fx(graph, example_inputs)

    return backend


def mark_dynamic(tensor: torch.Tensor, dim: int) -> None:
    """Tells torch.compile that `tensor`'s size along `dim` varies: compile it symbolic from the first call."""
    try:
        from torch._dynamo import mark_dynamic as mark
    except ImportError as error:
        raise MissingInternal(missing("torch._dynamo.mark_dynamic", "the mark_dynamic policy cannot run")) from error
    mark(tensor, dim)


def profiler_recording() -> bool:
    """Whether a profiler records this thread's ops right now (the flag autograd's profiler sets)."""
    try:
        return bool(torch.autograd._profiler_enabled())
    except AttributeError as error:
        lost = "the profiler debug-mode case cannot prove which side profiles"
        raise MissingInternal(missing("torch.autograd._profiler_enabled", lost)) from error


def benchmark_session_of(config: Any) -> Any | None:
    """pytest-benchmark's session of this run (module docstring), or None where the plugin is off or keeps it
    elsewhere."""
    return getattr(config, "_benchmarksession", None)
