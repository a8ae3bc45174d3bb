"""What a case needs from the machine, and why a machine falls short."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ..internals import MissingInternal, runs_natively_on_cpu

_DTYPE_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64"}


def dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def cuda_capability(device: torch.device) -> tuple[int, int] | None:
    if device.type != "cuda":
        return None
    return torch.cuda.get_device_capability(device)


def dtype_unsupported_reason(dtype: torch.dtype, device: torch.device) -> str | None:
    """Why `dtype` has no fast native path on `device`, or None when it has one."""
    if dtype in (torch.float32, torch.float64):
        return None
    name = dtype_name(dtype)
    if device.type == "cuda":
        needed = {torch.float16: (7, 0), torch.bfloat16: (8, 0)}.get(dtype)
        capability = cuda_capability(device)
        if needed and capability < needed:
            return (
                f"{name} needs compute capability >= {needed[0]}.{needed[1]} "
                f"({torch.cuda.get_device_name(device)} is {capability[0]}.{capability[1]})"
            )
        return None
    if device.type == "cpu":
        instructions = {torch.bfloat16: "AVX512-BF16 or AMX", torch.float16: "AVX512-FP16 or AMX-FP16"}.get(dtype)
        if instructions is None:
            return None
        try:
            native = runs_natively_on_cpu(dtype)
        except MissingInternal as error:
            # A skip: timing what may be emulation as if it were native would mislead more than no number.
            return str(error)
        if not native:
            return f"this CPU has no native {name} ({instructions}); {name} would run emulated, far slower than fp32"
        return None
    return f"{name} support on {device.type} is unknown to optbench"


@dataclass(frozen=True)
class Requires:
    """Hardware and profile a case needs; anything else skips it with the reason."""

    cuda: bool = False
    min_capability: tuple[int, int] | None = None
    dtype: torch.dtype | None = None
    profiles: tuple[str, ...] | None = None
    why: str = ""
    """Why CUDA is needed, said in the skip reason (e.g. 'pinned host memory only speeds host-to-GPU copies')."""

    def unmet(self, device: torch.device, profile: str) -> str | None:
        if self.profiles is not None and profile not in self.profiles:
            return f"runs only in profile {'/'.join(self.profiles)} (this run: {profile})"
        if (self.cuda or self.min_capability) and device.type != "cuda":
            because = f": {self.why}" if self.why else ""
            return f"needs a CUDA device{because} (running on {device.type})"
        if self.min_capability:
            capability = cuda_capability(device)
            if capability < self.min_capability:
                major, minor = self.min_capability
                return (
                    f"needs compute capability >= {major}.{minor}"
                    f" ({torch.cuda.get_device_name(device)} is {capability[0]}.{capability[1]})"
                )
        if self.dtype is not None:
            return dtype_unsupported_reason(self.dtype, device)
        return None


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first CPU's feature flags (e.g. amx_tile, avx512_bf16); empty where /proc/cpuinfo is missing."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


@dataclass(frozen=True)
class HardwareClass:
    """A class of machines where an optimization is expected to pay: a CUDA generation or a CPU feature."""

    name: str
    min_capability: tuple[int, int] | None = None
    cpu_flag: str | None = None
    everywhere: bool = False

    def includes(self, device: torch.device) -> bool:
        if self.everywhere:
            return True
        if self.min_capability is not None:
            return device.type == "cuda" and cuda_capability(device) >= self.min_capability
        if self.cpu_flag is not None:
            return device.type == "cpu" and self.cpu_flag in cpu_flags()
        return False


VOLTA = HardwareClass("CUDA capability >= 7.0 (tensor cores)", min_capability=(7, 0))
AMPERE = HardwareClass("CUDA capability >= 8.0 (bf16 and TF32 tensor cores)", min_capability=(8, 0))
AMX = HardwareClass("a CPU with AMX", cpu_flag="amx_tile")
ANY_DEVICE = HardwareClass("any device", everywhere=True)
"""For what pays wherever it applies: turning a debug mode off."""
