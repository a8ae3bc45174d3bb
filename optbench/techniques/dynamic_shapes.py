"""torch.compile on a stream of inputs whose size changes: the default, dynamic=True, mark_dynamic, and buckets.

A server meets prompts of many lengths, a pipeline batches of many sizes. What
torch.compile does with a stream of n distinct sizes, by how it is told:

| policy                | compiles                                   | graphs it runs          |
|-----------------------|--------------------------------------------|-------------------------|
| default ("automatic") | 2: the first size static, then the first   | static for the first    |
|                       | new size recompiles with that dimension    | size, symbolic for the  |
|                       | symbolic ("automatic dynamic")             | rest                    |
| dynamic=True          | 1: every dimension symbolic from the start | symbolic                |
| mark_dynamic(dim)     | 1: the marked dimension symbolic           | symbolic                |
| buckets               | one per bucket met: each input padded up   | static, on padded work  |
|                       | to the next power of two, compiled static  |                         |

A symbolic graph's kernels cannot specialise on the size; a bucket's graph
does the padded part's work for nothing. The commonest compile regression in
user code is the first row turning into n (a guard on the size, automatic
dynamic turned off, `dynamic=False`), each recompile costing seconds until
dynamo's recompile limit (8 per function) leaves the rest eager. So each case
counts the sizes at which each side compiled in its first pass over the
stream, and fails a side that compiled more often than its policy declares
(`ShapePolicy.declared_compiles`); the first pass's time, compiles included,
is reported beside the steady-state speedup, which times the whole stream.

A model's own graph may specialise too: a symbolic graph is compiled for a
range of sizes, and a size outside it compiles again, under every policy that
keeps the dimension symbolic. On mobilenet_v3_small (random weights, batch
stream 4-16) the symbolic graph held `2 <= batch.size()[0] <= 15`, so size 16
compiled once more on the default, dynamic=True and mark_dynamic sides alike
(issue 33: it failed them as 3 > 2 and 2 > 1). So a compile is counted
against the policy unless a cached graph rejected the size by a range guard
alone (`torch._dynamo.utils.guard_failures`): that compile is the model's,
noted in the case's details with the guard, not the policy's. A guard on an
exact size (a dict keyed by length) or a static size mismatch still counts,
which is the regression the count is there to catch.

Each side compiles a function of its own name: dynamo keeps compiled code per
code object, and what automatic dynamic learnt (which dimensions changed) per
function name and place, so two sides compiling the same module's forward
would share both, the second starting symbolic because the first saw sizes change.
"""

from __future__ import annotations

import itertools
import re
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..internals import mark_dynamic, tree_leaves, tree_map
from ..measuring.accuracy import REORDERED, Check
from ..measuring.case import Case, Observed
from ..measuring.compilation import watch_compilation
from ..measuring.in_effect import InEffect
from ..measuring.workload import Batch, InferenceWorkload, forward
from . import Technique

STREAM_FRACTIONS = (0.625, 0.375, 1.0, 0.28, 0.8, 0.52, 0.45, 0.75)
"""The stream's sizes as fractions of its largest, in the order they arrive: none twice, none 0 or 1 (sizes dynamo
specialises on), as many as dynamo's recompile limit (8 per function) lets through if each is compiled."""

POLICIES = ("automatic", "dynamic", "mark_dynamic", "buckets")
_RANGE_GUARD = re.compile(r"(?:-?\d+ <= )?\S+ <= -?\d+|-?\d+ <= \S+")
"""A guard on the range of a symbolic size, as dynamo words it: `2 <= batch.size()[0] <= 15`."""
_FUNCTIONS = itertools.count()


def bucket(size: int) -> int:
    """The power of two a bucketing policy pads `size` up to."""
    return 1 << (size - 1).bit_length()


@dataclass(frozen=True)
class SizeStream:
    """Inputs whose size along `dim` takes each of `sizes` in turn."""

    dim: int
    sizes: tuple[int, ...]

    @classmethod
    def up_to(cls, dim: int, largest: int) -> SizeStream:
        return cls(dim, tuple(dict.fromkeys(max(2, round(fraction * largest)) for fraction in STREAM_FRACTIONS)))

    def misfit(self, batch: Batch) -> str | None:
        """Why the stream cannot be cut from `batch`; None where it can."""
        if not _varying(batch, self.dim):
            return f"none of its input tensors has a dimension {self.dim} to vary"
        return None

    def batches(self, batch: Batch, padded: Callable[[int], int]) -> list[tuple[int, Batch]]:
        """Each size of the stream with its batch, cut (as contiguous copies) from `batch` repeated along `dim`
        to the largest padded size: positions past a size are real inputs, which a model whose positions (or
        samples) do not see later ones leaves out of the earlier ones' outputs."""
        largest = max(padded(size) for size in self.sizes)
        source = _extended(batch, self.dim, largest)
        return [(size, _cut(source, self.dim, padded(size))) for size in self.sizes]


def batch_stream(batch: Batch, least: int = 16) -> SizeStream:
    """A stream over the batch dimension of a user's inputs, up to their batch size or `least`, the larger."""
    varying = _varying(batch, 0)
    return SizeStream.up_to(0, max(least, varying[0].shape[0] if varying else least))


def without_source(failure: str) -> str:
    """A guard failure, `"<compile id>: <guard>  # <source, which may hold anything>"`, without its source."""
    return failure.split("  #", 1)[0]


def range_guard_only(failure: str) -> bool:
    """Whether a guard failure rejected the call by the range of a symbolic size alone. Dynamo names the first
    guard that failed (all of them, joined by "; ", only with verbose recompile logging; then those before the
    first source are read)."""
    guards = without_source(failure).partition(": ")[2].split("; ")
    return all(_RANGE_GUARD.fullmatch(guard.strip()) for guard in guards)


def _varying(batch: Batch, dim: int) -> list[torch.Tensor]:
    """The tensor leaves the stream varies: those as long along `dim` as the first leaf that has `dim`."""
    leaves = [leaf for leaf in tree_leaves(batch) if isinstance(leaf, torch.Tensor) and leaf.dim() > dim]
    return [leaf for leaf in leaves if leaf.shape[dim] == leaves[0].shape[dim]] if leaves else []


def _extended(batch: Batch, dim: int, length: int) -> Batch:
    varying = {id(leaf) for leaf in _varying(batch, dim)}

    def extend(leaf: Any) -> Any:
        if id(leaf) not in varying:
            return leaf
        copies = -(-length // leaf.shape[dim])
        return torch.cat([leaf] * copies, dim) if copies > 1 else leaf

    return tree_map(extend, batch)


def _cut(batch: Batch, dim: int, size: int) -> Batch:
    varying = {id(leaf) for leaf in _varying(batch, dim)}
    return tree_map(lambda leaf: leaf.narrow(dim, 0, size).contiguous() if id(leaf) in varying else leaf, batch)


@dataclass(frozen=True)
class ShapePolicy:
    """How one side compiles for a stream of sizes (module docstring)."""

    name: str
    """One of POLICIES."""

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ValueError(f"unknown shape policy {self.name!r}; choose one of {', '.join(POLICIES)}")

    @property
    def label(self) -> str:
        return {
            "automatic": "compile:default",
            "dynamic": "compile:dynamic=True",
            "mark_dynamic": "compile+mark_dynamic",
            "buckets": "compile:dynamic=False+buckets:pow2",
        }[self.name]

    def padded(self, size: int) -> int:
        return bucket(size) if self.name == "buckets" else size

    def declared_compiles(self, stream: SizeStream) -> int:
        if self.name == "buckets":
            return len({bucket(size) for size in stream.sizes})
        return 1 if self.name in ("dynamic", "mark_dynamic") else min(2, len(stream.sizes))

    def compile_options(self) -> dict[str, Any]:
        return {"dynamic": {"dynamic": True}, "buckets": {"dynamic": False}}.get(self.name, {})


def _own_function(model: nn.Module, side: str) -> Callable[[Batch], Any]:
    """`forward(model, batch)` as a function whose code object and name are its own (module docstring); numbered,
    as dynamo's automatic-dynamic state outlives a case that ran in this process before."""

    def stream_forward(batch: Batch) -> Any:
        return forward(model, batch)

    name = f"stream_{side}_{next(_FUNCTIONS)}"
    code = stream_forward.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, stream_forward.__globals__, name, None, stream_forward.__closure__)


class CompiledStream:
    """One side of a case: `model` compiled under `policy`, each call running the whole stream.

    The first call is the first pass: it notes the sizes at which graphs were compiled and how long it took."""

    def __init__(self, model: nn.Module, stream: SizeStream, batch: Batch, policy: ShapePolicy, side: str) -> None:
        self.stream = stream
        self.policy = policy
        self.batches = stream.batches(batch, policy.padded)
        if policy.name == "mark_dynamic":
            for _, cut in self.batches:
                for leaf in _varying(cut, stream.dim):
                    mark_dynamic(leaf, stream.dim)
        self.compiled = torch.compile(_own_function(model, side), **policy.compile_options())
        self.compiled_at: list[int] | None = None
        """The input sizes (padded, where the policy pads) at which the first pass compiled graphs."""
        self.specialized_at: dict[int, str] = {}
        """Of those, the sizes that a symbolic graph rejected by its range alone (module docstring), with the guard."""
        self.first_pass_s: float | None = None

    def __call__(self) -> list[Any]:
        if self.compiled_at is None:
            return self._first_pass()
        return [self._trimmed(size, self.compiled(cut)) for size, cut in self.batches]

    def _first_pass(self) -> list[Any]:
        compiled_at: list[int] = []
        outputs = []
        start = time.perf_counter()
        for size, cut in self.batches:
            with watch_compilation() as activity:
                outputs.append(self._trimmed(size, self.compiled(cut)))
            if activity.compiled:
                compiled_at.append(self.policy.padded(size))
                ranges = [failure for failure in activity.guard_failures if range_guard_only(failure)]
                if ranges:
                    self.specialized_at[self.policy.padded(size)] = without_source(ranges[0])
        self.first_pass_s = time.perf_counter() - start
        self.compiled_at = compiled_at
        return outputs

    def _trimmed(self, size: int, output: Any) -> Any:
        """A padded input's output cut back to `size` along the stream's dimension."""
        padded = self.policy.padded(size)
        if padded == size:
            return output
        dim = self.stream.dim
        return tree_map(
            lambda leaf: (
                leaf.narrow(dim, 0, size)
                if isinstance(leaf, torch.Tensor) and leaf.dim() > dim and leaf.shape[dim] == padded
                else leaf
            ),
            output,
        )

    def compiles_check(self, side: str) -> Callable[[Observed], Check]:
        """An extra check: this side compiled at no more sizes than its policy declares, the model's own
        specialisations left out (module docstring)."""

        def check(_: Observed) -> Check:
            compiled_at = self.compiled_at
            compiles = len(compiled_at) - len(self.specialized_at) if compiled_at is not None else float("nan")
            limit = self.policy.declared_compiles(self.stream)
            return Check(f"{side}_compiles", compiles, limit, lower_is_better=True)

        return check

    def serves_sizes(self, _: Case) -> InEffect:
        """In effect: one graph served several sizes (symbolic, or a bucket's padded size)."""
        sizes = {self.policy.padded(size) for size in self.stream.sizes}
        compiled_at = self.compiled_at or []
        technique = self.policy.label
        if not compiled_at:
            return InEffect(technique, False, "compiled nothing in its first pass over the stream")
        served = f"compiled at sizes {compiled_at} for a stream of {len(self.stream.sizes)} sizes"
        if self.policy.name == "buckets":
            return InEffect(technique, len(sizes) < len(self.stream.sizes), f"{served}, fed padded to {sorted(sizes)}")
        return InEffect(technique, len(compiled_at) < len(sizes), served)


def dynamic_shapes(workload: InferenceWorkload, stream: SizeStream, policy: ShapePolicy, floor: float) -> Case:
    """The stream through `policy`'s compiled model vs through torch.compile's default, each timed call the
    whole stream; outputs of every size held to compile's reordering limit or, past it, no further from fp64."""
    reference = CompiledStream(workload.model(), stream, workload.inputs, ShapePolicy("automatic"), "reference")
    optimized = CompiledStream(workload.model(), stream, workload.inputs, policy, "optimized")

    def fp64_output() -> list[Any]:
        model = workload.model(torch.float64)
        cuts = stream.batches(workload.inputs_as(torch.float64), lambda size: size)
        with torch.inference_mode():
            return [forward(model, cut) for _, cut in cuts]

    def details() -> dict[str, Any]:
        return {
            "stream_sizes": list(stream.sizes),
            "compiled_at_sizes": {"reference": reference.compiled_at, "optimized": optimized.compiled_at},
            "model_specialized_at": {"reference": reference.specialized_at, "optimized": optimized.specialized_at},
            "first_pass_s": {"reference": reference.first_pass_s, "optimized": optimized.first_pass_s},
        }

    return workload.case(
        reference,
        optimized,
        accuracy=REORDERED,
        fp64_output=fp64_output,
        floor=floor,
        names=(reference.policy.label, policy.label),
        variant=policy.name,
        expect_compiled=True,
        details=details,
        checks=(reference.compiles_check("reference"), optimized.compiles_check("optimized")),
        in_effect=(optimized.serves_sizes,),
    )


TECHNIQUE = Technique(
    "dynamic_shapes",
    "torch.compile on inputs of many sizes: static, dynamic, mark_dynamic, buckets",
    "PyTorch's torch.compile troubleshooting guide",
    order=100,
    recommended=True,
)
