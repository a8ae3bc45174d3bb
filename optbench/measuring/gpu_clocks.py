"""GPU clocks, temperature and clock-event (throttle) reasons, read through NVML at a case's start and end.

A GPU that boosts, heats up or hits its power cap during a case changes its
speed under the measurement: the record keeps both readings, and the verdict
notes when the clocks moved or a slowdown reason appeared. Locking the clocks
(`nvidia-smi -lgc`, docs/ci.md, "Nightly GPU CI") removes the cause.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

import torch

CLOCK_MOVED = 0.02
"""A change of the SM or memory clock larger than this share is noted."""

# NVML's clock event reason bits (nvmlClocksEventReason*), named here so that either binding spelling works.
_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
SLOWDOWNS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)


@dataclass(frozen=True)
class GpuState:
    sm_clock_mhz: int
    memory_clock_mhz: int
    temperature_c: int
    reasons: tuple[str, ...]
    """Active clock event reasons, e.g. ('sw_power_cap',)."""


def _nvml() -> ModuleType | None:
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


class GpuClocks:
    """NVML readings of one CUDA device; `read()` gives None where NVML is missing or fails (said in `problem`)."""

    def __init__(self, device: torch.device, nvml: ModuleType | None = None) -> None:
        self.problem: str | None = None
        self._nvml = nvml or _nvml()
        self._handle = None
        if self._nvml is None:
            self.problem = "nvidia-ml-py is not installed: GPU clocks not recorded"
            return
        try:
            self._nvml.nvmlInit()
            uuid = str(torch.cuda.get_device_properties(device).uuid)
            self._handle = self._nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        except Exception as error:  # NVMLError subclasses are generated per return code
            self.problem = f"NVML unavailable ({error}): GPU clocks not recorded"

    def _reasons(self) -> tuple[str, ...]:
        nvml = self._nvml
        read = (
            getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        mask = int(read(self._handle))
        return tuple(name for bit, name in _REASONS.items() if mask & bit)

    def read(self) -> GpuState | None:
        if self._handle is None:
            return None
        nvml = self._nvml
        try:
            return GpuState(
                sm_clock_mhz=int(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM)),
                memory_clock_mhz=int(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_MEM)),
                temperature_c=int(nvml.nvmlDeviceGetTemperature(self._handle, nvml.NVML_TEMPERATURE_GPU)),
                reasons=self._reasons(),
            )
        except Exception as error:
            self.problem = f"NVML read failed ({error})"
            return None


def clock_note(start: GpuState | None, end: GpuState | None) -> str | None:
    """A verdict note when the clocks moved during the case or a slowdown reason was active at either end."""
    if start is None or end is None:
        return None
    parts = []
    for name, before, after in (
        ("SM clock", start.sm_clock_mhz, end.sm_clock_mhz),
        ("memory clock", start.memory_clock_mhz, end.memory_clock_mhz),
    ):
        if before and abs(after / before - 1) > CLOCK_MOVED:
            parts.append(f"{name} {before} -> {after} MHz")
    slowdowns = sorted(SLOWDOWNS.intersection(start.reasons + end.reasons))
    if slowdowns:
        parts.append("slowdown reasons " + ", ".join(slowdowns))
    if not parts:
        return None
    return (
        f"GPU clocks moved during the case ({'; '.join(parts)}, {start.temperature_c} -> {end.temperature_c} C): "
        "lock them with nvidia-smi -lgc"
    )
