"""The environment a measurement belongs to: its key for baselines and its fingerprint."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess
import warnings
from pathlib import Path
from typing import Any

import torch

from ..internals import MissingInternal, runs_natively_on_cpu
from ..measuring.hardware import cpu_flags
from ..running.allocator import Allocator, detect_allocator


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    path = Path("/proc/cpuinfo")
    if path.exists():
        for line in path.read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    return info


def cpu_model() -> str:
    info = _cpuinfo()
    name = info.get("model name") or platform.processor() or platform.machine()
    # Virtual machines often report a bare family name ("AMD EPYC"); family and
    # model numbers tell the generations apart.
    if "cpu family" in info and "model" in info:
        name += f" family {info['cpu family']} model {info['model']}"
    return name


def cpu_isa() -> str:
    isa = torch.backends.cpu.get_cpu_capability().lower()
    try:
        bf16 = runs_natively_on_cpu(torch.bfloat16)
    except MissingInternal as error:
        # Neither skip nor error: this runs when the plugin is configured, and the key only has to tell
        # machines apart, which the CPU's own flags do as well.
        warnings.warn(f"{error}; the environment key reads the CPU flags instead", stacklevel=2)
        bf16 = not cpu_flags().isdisjoint({"avx512_bf16", "amx_bf16"})
    return isa + "-bf16" if bf16 else isa


def torch_minor() -> str:
    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


def environment_key(device: torch.device, threads: int | None = None, allocator: Allocator | None = None) -> str:
    """Device class plus torch major.minor: the runs whose speedups are comparable.

    On CPU the intra-op thread count is part of the class; pass the count the
    run was configured with, before any per-worker throttling. A preloaded
    allocator (default: this process's) adds a suffix, e.g. `-jemalloc`, and so
    does glibc with other thresholds than the suite's (`-glibc-dynamic`); see Allocator.key_suffix.
    """
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        hardware = f"cuda-{_slug(torch.cuda.get_device_name(device))}-sm{major}{minor}"
    else:
        hardware = f"cpu-{_slug(cpu_model())}-{cpu_isa()}-t{threads or torch.get_num_threads()}"
    allocator = allocator or detect_allocator()
    return f"{hardware}-torch{torch_minor()}{allocator.key_suffix}"


def _version(distribution: str) -> str | None:
    """The installed version from the package's metadata: importing transformers and torchvision to read
    `__version__` took 5.3 s, which every pytest process paid at collection."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def fingerprint(device: torch.device, threads: int | None = None, allocator: Allocator | None = None) -> dict[str, Any]:
    """Everything that explains why two runs' numbers differ; `allocator` is the measuring processes' (default:
    this process's)."""
    allocator = allocator or detect_allocator()
    info: dict[str, Any] = {
        "environment_key": environment_key(device, threads, allocator),
        "allocator": allocator.label,
        "device": str(device),
        "torch": torch.__version__,
        "torchvision": _version("torchvision"),
        "transformers": _version("transformers"),
        "cpu_model": cpu_model(),
        "cpu_isa": cpu_isa(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        info["gpu_name"] = torch.cuda.get_device_name(device)
        info["gpu_capability"] = f"{major}.{minor}"
        info["gpu_driver"] = _nvidia_driver()
    return info


def _nvidia_driver() -> str | None:
    version_file = Path("/proc/driver/nvidia/version")
    if not version_file.exists():
        return None
    match = re.search(r"Kernel Module\s+(\S+)", version_file.read_text())
    return match.group(1) if match else None


def current_commit(root: Path) -> str | None:
    """The commit under test: $GITHUB_SHA in CI, else git's HEAD of the rootdir, else None."""
    if os.environ.get("GITHUB_SHA"):
        return os.environ["GITHUB_SHA"]
    try:
        finished = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=False, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if finished.returncode != 0:
        return None
    return finished.stdout.strip() or None
