"""Each private API behind optbench.internals, taken away: one line naming the version and what is lost."""

import collections
import importlib.metadata
import sys
import time
import types

import pytest
import torch
import torch._dynamo.config
import torch._dynamo.exc
import torch._dynamo.utils

from optbench import internals
from optbench.measuring.hardware import cpu_flags, dtype_unsupported_reason
from optbench.measuring.memory import peak_memory_bytes
from optbench.storage.environment import cpu_isa

TORCH = f"torch {importlib.metadata.version('torch')} has no "


@pytest.fixture(autouse=True)
def fresh_probes():
    """The probe results are cached per process; each test sees the torch it patched."""
    internals._compiled_probe.cache_clear()
    internals._dynamo_exception.cache_clear()
    yield
    internals._compiled_probe.cache_clear()
    internals._dynamo_exception.cache_clear()


def one_line(message: str, starts: str, lost: str) -> None:
    assert "\n" not in message
    assert message.startswith(starts), message
    assert lost in message, message


def test_graph_counts_are_trusted_where_torch_counts():
    assert internals.compile_counts_problem() is None


def test_a_missing_dynamo_counter_says_compilation_is_unknown(monkeypatch):
    monkeypatch.delattr(torch._dynamo.utils, "counters")
    assert internals.compile_counts() == (0, {})
    one_line(internals.compile_counts_problem(), TORCH + "torch._dynamo.utils.counters", "compiled is unknown")


def test_a_renamed_dynamo_counter_key_is_caught_by_the_probe(monkeypatch):
    # Dynamo increments its own counters; ours then never move, as after a rename of the key.
    monkeypatch.setattr(torch._dynamo.utils, "counters", collections.defaultdict(collections.Counter))
    one_line(internals.compile_counts_problem(), TORCH + "torch._dynamo.utils.counters", "compiled is unknown")


@pytest.fixture
def no_mkldnn_checks(monkeypatch):
    monkeypatch.setattr(torch.ops, "mkldnn", types.SimpleNamespace())


@pytest.mark.parametrize(("dtype", "name"), [(torch.bfloat16, "bf16"), (torch.float16, "fp16")])
def test_a_missing_mkldnn_check_skips_the_dtype_with_the_reason(no_mkldnn_checks, dtype, name):
    reason = dtype_unsupported_reason(dtype, torch.device("cpu"))
    one_line(reason, TORCH + f"torch.ops.mkldnn._is_mkldnn_{name}_supported", "natively or emulated")


def test_a_missing_mkldnn_check_leaves_the_environment_key_to_the_cpu_flags(no_mkldnn_checks):
    with pytest.warns(UserWarning) as warned:
        isa = cpu_isa()
    (warning,) = warned
    one_line(str(warning.message), TORCH + "torch.ops.mkldnn._is_mkldnn_bf16_supported", "reads the CPU flags")
    assert isa.endswith("-bf16") == ("avx512_bf16" in cpu_flags() or "amx_bf16" in cpu_flags())


def test_a_missing_suppress_errors_makes_compile_fallback_an_error(monkeypatch):
    monkeypatch.delattr(torch._dynamo.config, "suppress_errors")
    with pytest.raises(internals.MissingInternal) as raised:
        internals.compile_errors_fall_back_to_eager()
    one_line(str(raised.value), TORCH + "torch._dynamo.config.suppress_errors", "--compile-fallback cannot")


def test_compile_fallback_patches_suppress_errors():
    with internals.compile_errors_fall_back_to_eager():
        assert torch._dynamo.config.suppress_errors is True
    assert torch._dynamo.config.suppress_errors is False


def test_compiled_regions_are_counted_by_the_profiler_event():
    named = [f"{internals.COMPILED_REGION_EVENT}: 0/0", "aten::add", f"{internals.COMPILED_REGION_EVENT}: 0/1"]
    assert internals.count_compiled_regions(named) == 2
    assert internals.count_compiled_regions(["aten::add"]) == 0


def test_a_renamed_profiler_event_is_an_error_not_a_zero(monkeypatch):
    # What torch renaming its event looks like from here: no event carries the name we look for.
    monkeypatch.setattr(internals, "COMPILED_REGION_EVENT", "Compiled Region (renamed)")
    with pytest.raises(internals.MissingInternal) as raised:
        internals.count_compiled_regions(["aten::add"])
    one_line(str(raised.value), TORCH + "profiler event named 'Compiled Region (renamed)...'", "which path")


class FromDynamo(RuntimeError):
    __module__ = "torch._dynamo.exc"


def test_compiler_errors_are_recognized_by_class_or_module():
    assert internals.is_compiler_error(torch._dynamo.exc.Unsupported("graph break"))
    assert internals.is_compiler_error(FromDynamo("backend failed"))
    assert not internals.is_compiler_error(RuntimeError("the model's own error"))


def test_a_missing_dynamo_exception_warns_and_falls_back_to_the_module(monkeypatch):
    monkeypatch.delattr(torch._dynamo.exc, "TorchDynamoException")
    with pytest.warns(UserWarning) as warned:
        assert internals.is_compiler_error(FromDynamo("backend failed"))
    (warning,) = warned
    one_line(str(warning.message), TORCH + "torch._dynamo.exc.TorchDynamoException", "by their module only")


# Not pytest-benchmark's defaults (time.perf_counter, gc on): the timing read must be the one this test's mark chose.
@pytest.mark.benchmark(timer=time.process_time, disable_gc=True)
def test_the_reference_is_timed_like_pytest_benchmark_times(benchmark):
    assert internals.benchmark_timing(benchmark) == (time.process_time, True)
    benchmark.pedantic(lambda: None, rounds=1)


def test_missing_pytest_benchmark_privates_are_an_error():
    with pytest.raises(internals.MissingInternal) as raised:
        internals.benchmark_timing(types.SimpleNamespace(enabled=True))
    version = importlib.metadata.version("pytest-benchmark")
    one_line(str(raised.value), f"pytest-benchmark {version} has no BenchmarkFixture._timer", "cannot be timed")


def test_without_the_profiler_s_allocator_events_memory_reads_unmeasured(monkeypatch):
    monkeypatch.delattr(torch.autograd.profiler.profile, "kineto_results", raising=False)
    original = torch.autograd.profiler.profile.__exit__

    def exit_without_results(self, *args):
        result = original(self, *args)
        del self.kineto_results
        return result

    monkeypatch.setattr(torch.autograd.profiler.profile, "__exit__", exit_without_results)
    with pytest.warns(UserWarning) as warned:
        assert peak_memory_bytes(lambda: torch.ones(1024), torch.device("cpu")) is None
    one_line(str(warned[0].message), TORCH + "profiler.kineto_results", "CPU peak memory is not measured")


def test_without_cuda_graph_trees_graphed_variants_are_not_flagged(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch._inductor.cudagraph_trees", None)
    with pytest.warns(UserWarning) as warned:
        assert internals.recorded_cuda_graphs(0) is False
    one_line(str(warned[0].message), TORCH + "torch._inductor.cudagraph_trees.get_manager", "not flagged")


@pytest.mark.parametrize(("mode", "graphs"), [("reduce-overhead", True), ("max-autotune-no-cudagraphs", False)])
def test_compile_modes_with_cuda_graphs_are_known_with_or_without_inductor_s_table(monkeypatch, mode, graphs):
    assert internals.mode_uses_cuda_graphs(mode) is graphs
    monkeypatch.delattr(torch._inductor, "list_mode_options")
    assert internals.mode_uses_cuda_graphs(mode) is graphs


def test_a_torch_without_an_activation_memory_budget_gives_no_backend(monkeypatch):
    assert callable(internals.inductor_with_memory_budget(0.5))
    monkeypatch.delattr(torch._functorch.config, "activation_memory_budget")
    assert internals.inductor_with_memory_budget(0.5) is None


def test_a_module_without_ddp_logging_data_says_so_in_one_line():
    with pytest.warns(UserWarning, match="_get_ddp_logging_data.*DDP cases cannot prove their options"):
        assert internals.ddp_logging_data(torch.nn.Linear(2, 2)) is None


def test_a_renamed_dataloader_shutdown_warns_that_the_workers_are_left_to_the_garbage_collector(monkeypatch):
    loader = torch.utils.data.DataLoader(list(range(8)), batch_size=2, num_workers=2, persistent_workers=True)
    list(loader)
    workers = loader._iterator._workers
    monkeypatch.delattr(type(loader._iterator), "_shutdown_workers")
    with pytest.warns(UserWarning, match="no DataLoader._iterator._shutdown_workers: a loader's workers are left"):
        internals.shut_down_workers(loader)
    monkeypatch.undo()
    internals.shut_down_workers(loader)
    assert loader._iterator is None and not any(worker.is_alive() for worker in workers)
