"""Block rounds, cold-cache mode, CUDA-event timing (with a fake CUDA) and NVML clock readings (with a fake NVML)."""

import re
import time
import types

import pytest
import torch

from optbench.measuring.cache_flush import CacheFlush, last_level_cache_bytes
from optbench.measuring.clock import DeviceClock
from optbench.measuring.gpu_clocks import GpuClocks, GpuState, clock_note
from optbench.measuring.measurement import (
    MIN_BLOCK_CALLS,
    BeyondTimeLimit,
    Blocks,
    RoundPlan,
    block_calls,
    first_calls,
    paired_rounds,
    warm_up,
)
from optbench.profiles import PROFILES

SMOKE = PROFILES["smoke"]
CPU = torch.device("cpu")


def test_blocks_last_at_least_the_target_and_hold_at_least_the_minimum_calls():
    assert block_calls(1e-6, SMOKE, cold_cache=False) * 1e-6 >= SMOKE.block_target_s
    assert block_calls(10.0, SMOKE, cold_cache=False) == MIN_BLOCK_CALLS
    assert block_calls(1e-6, SMOKE, cold_cache=True) == 1


def test_a_block_primes_then_times_its_calls_as_one_interval():
    ticks = iter([10.0, 14.0])
    clock = DeviceClock(CPU, timer=lambda: next(ticks))
    calls = []
    measured = Blocks(clock, calls=4).time(lambda: calls.append(1))
    assert len(calls) == 5  # one untimed primer, four timed
    assert measured.host_s == 1.0 and measured.device_s is None


def test_cold_cache_blocks_flush_instead_of_priming():
    flushes, calls = [], []
    blocks = Blocks(DeviceClock(CPU), calls=1, flush=lambda: flushes.append(1))
    blocks.time(lambda: calls.append(1))
    blocks.time(lambda: calls.append(1))
    assert flushes == [1, 1] and calls == [1, 1]


def test_warm_up_chooses_blocks_from_the_call_time_and_pilots_both_variants():
    clock = DeviceClock(CPU)
    first = first_calls(lambda: torch.ones(4), lambda: torch.ones(4), clock)
    same = lambda: torch.ones(4)  # noqa: E731 - one object as both variants must still give two series
    warmup = warm_up(same, same, clock, SMOKE, first)
    assert warmup.block_calls > MIN_BLOCK_CALLS
    assert len(warmup.pilot_reference) == len(warmup.pilot_optimized) == 2 * SMOKE.warmup_window


def test_a_warm_up_that_cannot_finish_with_the_fewest_rounds_in_time_says_so_before_its_rounds():
    """50 ms calls: the fewest rounds (a warm-up window and the minimum timed rounds, each round two blocks with
    their primers) take far more than a 3 s limit allows after 1 s of first calls; with 300 s they fit."""
    clock = DeviceClock(CPU)
    first = first_calls(lambda: torch.ones(4), lambda: torch.ones(4), clock)
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.05)

    started = time.monotonic()
    with pytest.raises(BeyondTimeLimit) as raised:
        warm_up(slow, slow, clock, SMOKE, first, elapsed_s=1.0, limit_s=3.0)
    assert time.monotonic() - started < 1.0 and len(calls) == 4  # the probe's two calls a side, no round
    fewest = f"{SMOKE.warmup_window} warm-up and {SMOKE.min_rounds} timed rounds of at least "
    assert str(raised.value).startswith(f"cannot be timed within its time limit here: {fewest}")
    assert re.search(
        r"after 1 s of first calls exceed --case-timeout 3; rerun with --case-timeout \d+$", str(raised.value)
    )
    budget = SMOKE.with_overrides(case_budget_s=0.5, warmup_budget_s=0.5)
    assert warm_up(slow, slow, clock, budget, first, elapsed_s=1.0, limit_s=300.0).pairs >= SMOKE.warmup_window


def test_the_cache_flush_writes_twice_the_last_level_cache(tmp_path):
    for index, size in enumerate(["48K", "2048K", "32768K"]):
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "size").write_text(size + "\n")
    assert last_level_cache_bytes(CPU, tmp_path) == 32 * 2**20
    assert CacheFlush(CPU, cache_bytes=2**20).buffer.numel() * 4 == 2 * 2**20


class FakeEvent:
    elapsed_ms = 8.0

    def __init__(self, enable_timing):
        assert enable_timing

    def record(self):
        pass

    def elapsed_time(self, end):
        return self.elapsed_ms


def test_cuda_blocks_are_timed_by_events_and_by_the_host(monkeypatch):
    synchronized = []
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synchronized.append(device))
    ticks = iter([0.0, 0.012])
    clock = DeviceClock(torch.device("cuda", 0), timer=lambda: next(ticks))
    measured = clock.time_block(lambda: None, calls=4)
    assert measured.host_s == pytest.approx(0.003) and measured.device_s == pytest.approx(0.002)
    assert len(synchronized) == 2  # before the block and after its last call, not after every call
    events = clock.events()
    clock.block(lambda: None, calls=2, events=iter([events]))()
    assert events.seconds_per_call(2) == pytest.approx(0.004)


def fake_nvml(sm_clocks, reasons=0, fail_init=False):
    """A pynvml stand-in whose SM clock reads `sm_clocks` in turn."""
    sm = iter(sm_clocks)

    def init():
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    return types.SimpleNamespace(
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_TEMPERATURE_GPU=0,
        nvmlInit=init,
        nvmlDeviceGetHandleByUUID=lambda uuid: ("handle", uuid),
        nvmlDeviceGetClockInfo=lambda handle, kind: next(sm) if kind == 1 else 2619,
        nvmlDeviceGetTemperature=lambda handle, sensor: 61,
        nvmlDeviceGetCurrentClocksEventReasons=lambda handle: reasons,
    )


@pytest.fixture
def fake_gpu(monkeypatch):
    properties = types.SimpleNamespace(uuid="5f3c1a2e-0000-0000-0000-000000000000")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: properties)
    return torch.device("cuda", 0)


def test_clocks_that_moved_during_a_case_are_noted(fake_gpu):
    clocks = GpuClocks(fake_gpu, nvml=fake_nvml([1980, 1755], reasons=0x4 | 0x1))
    start, end = clocks.read(), clocks.read()
    assert start == GpuState(1980, 2619, 61, ("gpu_idle", "sw_power_cap"))
    note = clock_note(start, end)
    assert "SM clock 1980 -> 1755 MHz" in note and "sw_power_cap" in note and "nvidia-smi -lgc" in note


def test_steady_locked_clocks_add_no_note(fake_gpu):
    clocks = GpuClocks(fake_gpu, nvml=fake_nvml([1410, 1410]))
    assert clock_note(clocks.read(), clocks.read()) is None


def test_missing_nvml_is_said_once_and_reads_nothing(fake_gpu):
    clocks = GpuClocks(fake_gpu, nvml=fake_nvml([], fail_init=True))
    assert clocks.read() is None
    assert clocks.problem.startswith("NVML unavailable (NVML Shared Library Not Found)")


class FakeBenchmark:
    """pytest-benchmark's pedantic as far as paired_rounds uses it: setup, timed target, teardown per round."""

    def __init__(self):
        self.stats = types.SimpleNamespace(stats=types.SimpleNamespace(data=[]), iterations=1)
        self.timing = False

    def pedantic(self, target, setup, teardown, rounds):
        for _ in range(rounds):
            setup()
            self.timing = True
            target()
            self.timing = False
            self.stats.stats.data.append(0.008)
            teardown()


def test_optimized_blocks_time_no_event_bookkeeping(monkeypatch):
    benchmark = FakeBenchmark()

    class WatchedEvent(FakeEvent):
        def __init__(self, enable_timing):
            assert not benchmark.timing, "an event was made inside the timed block"
            super().__init__(enable_timing)

        def elapsed_time(self, end):
            assert not benchmark.timing, "an event was read inside the timed block"
            return super().elapsed_time(end)

    monkeypatch.setattr(torch.cuda, "Event", WatchedEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    blocks = Blocks(DeviceClock(torch.device("cuda", 0)), calls=4)
    rounds = paired_rounds(benchmark, lambda: None, lambda: None, blocks, rounds=4)
    assert rounds.optimized_s == [0.002] * 4 and benchmark.stats.iterations == 4
    assert rounds.optimized_device_s == [pytest.approx(0.002)] * 4 and len(rounds.reference_device_s) == 4


def test_rounds_that_cannot_finish_within_the_case_time_limit_say_so_before_they_start():
    plan = RoundPlan(rounds=24, needed_for_target=24, affordable_in_budget=1, round_s=10.0)
    assert plan.beyond_time_limit(elapsed_s=50, limit_s=300) is None  # 50 + 240 s fits
    reason = plan.beyond_time_limit(elapsed_s=70, limit_s=300)  # 70 + 240 s does not
    assert reason == (
        "cannot be timed within its time limit here: 24 rounds of 10.0 s (240 s, the fewest that give an "
        "interval) after 70 s of first calls and warm-up exceed --case-timeout 300; rerun with --case-timeout 660"
    )
    # --sessions 3 times the rounds three times over: 50 + 720 s does not fit either.
    assert plan.beyond_time_limit(elapsed_s=50, limit_s=300, sessions=3) == (
        "cannot be timed within its time limit here: 3 sessions of 24 rounds of 10.0 s (720 s, the fewest that give "
        "an interval) after 50 s of first calls and warm-up exceed --case-timeout 300; rerun with --case-timeout 1560"
    )
