"""The memory allocator a process runs with: which one this process has, and how to start one with another.

Why it matters: on a CPU, PyTorch tensors come from the C library's `malloc`, so
a speedup is partly a fact about the allocator and its state. Compiled vs eager
ResNet18 (batch 8) on a 2-core Xeon read 0.77x in a fresh process with glibc
malloc, 0.82-0.85x with jemalloc preloaded and 0.89-0.90x with tcmalloc (issue
19); PyTorch's CPU performance tuning guide names the allocator as a technique.
glibc's own behaviour moves with the process's history too: its dynamic mmap
threshold rises when large mmapped blocks are freed, which changes how many
page faults later allocations take. So the allocator belongs in a run's
fingerprint, and in its environment key when it is not the system's.

The allocator is chosen when a process starts (`LD_PRELOAD` of jemalloc or
tcmalloc, glibc's `MALLOC_*` variables and `GLIBC_TUNABLES` are read before
`main`), so a run cannot switch it in-process: `allocator_environment` gives
the environment of a new process instead.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import re
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ALLOCATORS = ("system", "jemalloc", "tcmalloc")
"""What a run can ask for: the C library's own malloc, or one of the two that PyTorch's tuning guide names."""

_PRELOADED = {"jemalloc": re.compile(r"libjemalloc[.\-_]"), "tcmalloc": re.compile(r"libtcmalloc[.\-_]")}
"""How each preloadable allocator's shared object is named (tcmalloc_minimal and gperftools' full tcmalloc alike)."""

LIBRARIES = {"jemalloc": ("libjemalloc.so.2",), "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4")}
"""The file names preloaded for each allocator, in order of preference (the minimal tcmalloc has no profiler)."""

PACKAGES = {"jemalloc": "libjemalloc2", "tcmalloc": "libtcmalloc-minimal4"}
"""The Debian/Ubuntu package that provides each library."""


class AllocatorNotFound(Exception):
    """The requested allocator's library is not installed; the message is one line naming the package."""


@dataclass(frozen=True)
class Allocator:
    """The allocator a process calls for `malloc`, and the settings it read at start."""

    name: str
    """One of ALLOCATORS: "system" is whatever the C library provides (glibc's ptmalloc here)."""
    library: str | None
    """The shared object that `malloc` resolves to in this process; None where it could not be found."""
    libc: str | None
    """The C library and its version, e.g. "glibc-2.36"."""
    settings: tuple[str, ...] = ()
    """`NAME=value` of the environment variables this allocator reads at start, sorted."""

    @property
    def is_system(self) -> bool:
        return self.name == "system"

    @property
    def label(self) -> str:
        """Short and readable, e.g. "glibc-2.36", "glibc-2.36 MALLOC_MMAP_THRESHOLD_=131072", "jemalloc"."""
        base = (self.libc or "system") if self.is_system else self.name
        return " ".join([base, *self.settings])


def _preloaded_name(path: str) -> str | None:
    """The preloadable allocator whose library `path` is, or None for any other file."""
    filename = os.path.basename(path)
    return next((name for name, pattern in _PRELOADED.items() if pattern.match(filename)), None)


def _allocator_settings(name: str, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The variables `name` reads, from `environ`; another allocator's variables change nothing and are left out."""
    if name == "jemalloc":
        wanted = [key for key in environ if key == "MALLOC_CONF"]
    elif name == "tcmalloc":
        wanted = [key for key in environ if key.startswith("TCMALLOC_")]
    else:
        # glibc: MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, MALLOC_ARENA_MAX, ...; MALLOC_CONF is jemalloc's.
        wanted = [key for key in environ if key.startswith("MALLOC_") and key != "MALLOC_CONF"]
    settings = [f"{key}={environ[key]}" for key in wanted]
    # GLIBC_TUNABLES also holds CPU and threading tunables; only its glibc.malloc.* entries are the allocator's.
    tunables = [item for item in environ.get("GLIBC_TUNABLES", "").split(":") if item.startswith("glibc.malloc.")]
    if name == "system" and tunables:
        settings.append("GLIBC_TUNABLES=" + ":".join(tunables))
    return tuple(sorted(settings))


def classify(library: str | None, environ: Mapping[str, str], libc: str | None) -> Allocator:
    """The allocator of a process whose `malloc` lives in `library`, started with `environ`."""
    name = (_preloaded_name(library) if library else None) or "system"
    return Allocator(name=name, library=library, libc=libc, settings=_allocator_settings(name, environ))


def _malloc_library(maps: str) -> str | None:
    """The file mapped at the address `malloc` resolves to in this process (the global symbol, preloads first).

    A library can be loaded without serving `malloc` (dlopened later, after
    libc's symbols were bound), so the address decides, not the list of names.
    """
    address = ctypes.cast(ctypes.CDLL(None).malloc, ctypes.c_void_p).value or 0
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6:
            continue
        low, _, high = fields[0].partition("-")
        if int(low, 16) <= address < int(high, 16):
            return fields[5].strip()
    return None


def _start_environment() -> dict[str, str]:
    """The environment this process started with: what glibc and the preloaded allocator read before `main`.

    Later changes to os.environ do not reach the allocator, so they are not read.
    """
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return dict(os.environ)
    pairs = (entry.decode(errors="replace").partition("=") for entry in raw.split(b"\0") if entry)
    return {key: value for key, _, value in pairs}


def _libc() -> str | None:
    name, version = platform.libc_ver()
    return f"{name}-{version}" if name and version else None


@functools.cache
def detect_allocator() -> Allocator:
    """This process's allocator. Cached: it is fixed when the process starts."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        maps = ""  # not Linux: the system allocator is the only one this module knows how to start
    return classify(_malloc_library(maps), _start_environment(), _libc())


def library_dirs() -> tuple[Path, ...]:
    """Where the Debian/Ubuntu packages (multiarch), other distributions and local builds put shared libraries."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"
    return (
        Path("/usr/lib") / multiarch,
        Path("/lib") / multiarch,
        Path("/usr/lib64"),
        Path("/usr/lib"),
        Path("/usr/local/lib"),
    )


def find_library(name: str, search: Sequence[Path] | None = None) -> Path:
    """The shared object to preload for allocator `name`; AllocatorNotFound naming the package when absent."""
    if name not in LIBRARIES:
        raise ValueError(f"no library to preload for allocator {name!r}; choose from {', '.join(LIBRARIES)}")
    directories = library_dirs() if search is None else tuple(search)
    for filename in LIBRARIES[name]:
        for directory in directories:
            if (directory / filename).is_file():
                return directory / filename
    where = ", ".join(str(directory) for directory in directories)
    raise AllocatorNotFound(
        f"{name} requested but {LIBRARIES[name][0]} is not in {where}; install it: apt-get install {PACKAGES[name]}"
    )


def allocator_environment(
    name: str, environ: Mapping[str, str] | None = None, search: Sequence[Path] | None = None
) -> dict[str, str]:
    """The whole environment for a new process that should run with allocator `name` (one of ALLOCATORS).

    Starts from `environ` (default: this process's) and drops any jemalloc or
    tcmalloc it preloads, so "system" undoes an allocator inherited from the
    parent; other preloads stay. jemalloc and tcmalloc are then preloaded first.
    """
    if name not in ALLOCATORS:
        raise ValueError(f"unknown allocator {name!r}; choose from {', '.join(ALLOCATORS)}")
    environment = dict(os.environ if environ is None else environ)
    # ld.so splits LD_PRELOAD at spaces and colons.
    kept = [entry for entry in re.split(r"[:\s]+", environment.pop("LD_PRELOAD", "")) if entry]
    kept = [entry for entry in kept if _preloaded_name(entry) is None]
    if name != "system":
        kept.insert(0, str(find_library(name, search)))
    if kept:
        environment["LD_PRELOAD"] = ":".join(kept)
    return environment


def started_with(name: str) -> Allocator:
    """The allocator of a new process started with `allocator_environment(name)`, for the run that starts it."""
    library = None if name == "system" else str(find_library(name))
    return Allocator(name, library, _libc())
