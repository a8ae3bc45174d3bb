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

glibc's thresholds are fixed for measuring (GLIBC_THRESHOLDS): with its dynamic
threshold, the same ResNet forward with autograd on took either 0 or about 5,000
page faults per call (20 MB of fresh pages), at random from one fresh process to
the next, so grad against no_grad read 1.0x in one process and 1.25x in the next.
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

ALLOCATORS = ("system", "glibc-dynamic", "jemalloc", "tcmalloc")
"""What a run can ask for: the C library's own malloc (with glibc, its thresholds fixed: GLIBC_THRESHOLDS), glibc's
malloc as a plain `python` gets it (thresholds that follow the process's history), or one of the two allocators
that PyTorch's tuning guide names."""

GLIBC_THRESHOLDS = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
"""glibc malloc's thresholds as the suite measures with them, unless the run's environment sets its own.

Why: glibc serves a block at or above its mmap threshold with fresh pages
(page faults on first touch, unmapped again on free), and gives the top of
its heap back to the kernel when more than the trim threshold is free there.
By default both move: each free of a mmapped block raises the mmap threshold
to that block's size (up to 32 MiB) and the trim threshold to twice that.
So the page faults a call takes follow what the process freed before. The
smoke ResNet18 forward with autograd on, measured in fresh processes on a
2-core EPYC (issue 19, minor faults per call in the steady state):

| glibc settings | with autograd | no_grad | speedup of no_grad |
| --- | --- | --- | --- |
| none (dynamic) | 0 or about 5,000, per process | 0 | 1.01-1.08x or 1.2-1.3x |
| trim threshold fixed only | 30,000 | 30,000 | 0.97-0.98x |
| mmap threshold fixed only | 12,000-14,000 | 0 | 1.32-1.55x |
| both fixed (these) | 0 | 0 | 1.02-1.03x |

Both fixed, the steady state takes no page faults for blocks up to 32 MiB
(glibc's largest mmap threshold), whatever ran before, as with tcmalloc.
Setting any threshold turns glibc's dynamic threshold off (mallopt(3)).
"""

_THRESHOLD_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
_THRESHOLD_TUNABLES = tuple(
    f"glibc.malloc.{name}" for name in ("mmap_threshold", "trim_threshold", "top_pad", "mmap_max")
)
"""The glibc settings of which any one fixes its thresholds (mallopt(3)), as variables and as GLIBC_TUNABLES."""

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
    def is_glibc(self) -> bool:
        return self.is_system and (self.libc or "").startswith("glibc")

    @property
    def dynamic_thresholds(self) -> bool:
        """glibc malloc with none of the settings that fix its thresholds: its page faults follow the history."""
        return self.is_glibc and not any(_fixes_thresholds(setting) for setting in self.settings)

    @property
    def key_suffix(self) -> str:
        """What this allocator adds to an environment key: nothing for the system's as the suite measures with it
        (glibc with GLIBC_THRESHOLDS, or another C library), else e.g. `-jemalloc`, `-glibc-dynamic`."""
        if not self.is_system:
            return f"-{self.name}"
        if not self.is_glibc or self.settings == _settings_of(GLIBC_THRESHOLDS):
            return ""
        return "-glibc-dynamic" if self.dynamic_thresholds else "-glibc-custom"

    @property
    def label(self) -> str:
        """Short and readable, e.g. "glibc-2.36", "glibc-2.36 MALLOC_MMAP_THRESHOLD_=131072", "jemalloc"."""
        base = (self.libc or "system") if self.is_system else self.name
        return " ".join([base, *self.settings])


def _preloaded_name(path: str) -> str | None:
    """The preloadable allocator whose library `path` is, or None for any other file."""
    filename = os.path.basename(path)
    return next((name for name, pattern in _PRELOADED.items() if pattern.match(filename)), None)


def _fixes_thresholds(setting: str) -> bool:
    """Whether `NAME=value` (a variable, or one GLIBC_TUNABLES item) fixes glibc's thresholds."""
    name, _, value = setting.partition("=")
    if name == "GLIBC_TUNABLES":
        return any(item.partition("=")[0] in _THRESHOLD_TUNABLES for item in value.split(":"))
    return name in _THRESHOLD_VARIABLES or name in _THRESHOLD_TUNABLES


def _settings_of(environ: Mapping[str, str]) -> tuple[str, ...]:
    return _allocator_settings("system", environ)


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
    "system" on glibc adds GLIBC_THRESHOLDS unless `environ` fixes the
    thresholds itself; "glibc-dynamic" removes every setting that fixes them.
    """
    if name not in ALLOCATORS:
        raise ValueError(f"unknown allocator {name!r}; choose from {', '.join(ALLOCATORS)}")
    environment = dict(os.environ if environ is None else environ)
    # ld.so splits LD_PRELOAD at spaces and colons.
    kept = [entry for entry in re.split(r"[:\s]+", environment.pop("LD_PRELOAD", "")) if entry]
    kept = [entry for entry in kept if _preloaded_name(entry) is None]
    if name in LIBRARIES:
        kept.insert(0, str(find_library(name, search)))
    if kept:
        environment["LD_PRELOAD"] = ":".join(kept)
    glibc = (_libc() or "").startswith("glibc")
    if name == "system" and glibc and not any(_fixes_thresholds(s) for s in _settings_of(environment)):
        environment.update(GLIBC_THRESHOLDS)
    if name == "glibc-dynamic":
        for variable in _THRESHOLD_VARIABLES:
            environment.pop(variable, None)
        tunables = [t for t in environment.pop("GLIBC_TUNABLES", "").split(":") if not _fixes_thresholds(t)]
        if any(tunables):
            environment["GLIBC_TUNABLES"] = ":".join(t for t in tunables if t)
    return environment


def started_with(environment: Mapping[str, str]) -> Allocator:
    """The allocator of a new process started with `environment` (from `allocator_environment`), for the run that
    starts it: the first jemalloc or tcmalloc it preloads, else the system's, with the settings it will read."""
    preloads = re.split(r"[:\s]+", environment.get("LD_PRELOAD", ""))
    library = next((entry for entry in preloads if entry and _preloaded_name(entry) is not None), None)
    return classify(library, environment, _libc())


class AllocatorFixed(Exception):
    """An allocator was asked for in a process that measures in itself, where the one it started with is fixed."""


def measuring_allocator(
    requested: str | None, isolates: bool, environ: Mapping[str, str] | None = None
) -> tuple[Allocator, dict[str, str]]:
    """The allocator a run's cases are measured with, and the environment that starts their processes with it.

    Without `requested`, the system's (glibc with its thresholds fixed: GLIBC_THRESHOLDS) unless this process
    preloads another. A run that measures in its own process (not `isolates`) keeps whatever it started with, and
    its environment key says so; asked for another, it raises `AllocatorFixed`. A missing library raises
    `AllocatorNotFound`.
    """
    # An xdist worker's variables would make a case's process act as a worker, which records nothing itself.
    environment = {
        k: v for k, v in (os.environ if environ is None else environ).items() if not k.startswith("PYTEST_XDIST")
    }
    own = detect_allocator()
    wanted = allocator_environment(requested or ("system" if own.is_system else own.name), environment)
    measuring = started_with(wanted)
    if (measuring.name, measuring.settings) == (own.name, own.settings):
        return own, environment
    if isolates:
        return measuring, wanted
    if requested is None:
        return own, environment
    raise AllocatorFixed(
        f"--allocator {requested}: this process runs {own.label}, and an allocator is chosen when a process "
        "starts; measure with --isolation process (the default), or start pytest with it preloaded"
    )
