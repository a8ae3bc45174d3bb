"""Proof that an optimization is in effect: one call of a case's side, observed after the timed rounds.

A speedup of 1.00x and an accuracy deviation of 0 are what an optimization
that silently does nothing looks like, and on a machine without history they
pass ("does not pay here"). So every technique declares what it changes that
can be seen (`Case.in_effect`): the dtype the matmuls ran in, the layout the
convolutions read, the setting read inside the model's forward, the gradients
zero_grad leaves. The runner calls each observer once, outside the timed
rounds, and the gate fails the case with `not in effect: ...` when the change
is not seen. Observers are typed callables of the case (of its `Sides`, so
that this module needs nothing of `optbench.measuring.case`), and they fit any
workload: they run its `reference` or `optimized` call (or compare its
outputs) under a `TorchDispatchMode`, a forward pre-hook or a wrapped
`zero_grad`, and give back an `InEffect`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
from torch import nn

from ..internals import TorchDispatchMode, tree_leaves
from .accuracy import TrainingOutcome, as_containers, tensors
from .hardware import dtype_name
from .memory import peak_memory_bytes

Side = Literal["reference", "optimized"]


@dataclass(frozen=True)
class InEffect:
    """What one observer saw: whether the technique acted, and the evidence in words."""

    technique: str
    """What was expected to act, e.g. "autocast:bf16" or "reference zero_grad(set_to_none=False)"."""
    in_effect: bool
    evidence: str
    """Completes a sentence after `technique`, e.g. "ran 43 of 43 matmul/conv in bfloat16"."""

    def text(self) -> str:
        return f"{self.technique} {self.evidence}"


class Sides(Protocol):
    """What an observer runs of a case (`optbench.measuring.case.Case` is one): its two timed calls, and the calls whose
    outputs its accuracy check compares instead, where it declares them."""

    @property
    def reference(self) -> Callable[[], Any]: ...

    @property
    def optimized(self) -> Callable[[], Any]: ...

    @property
    def reference_output(self) -> Callable[[], Any] | None: ...

    @property
    def optimized_output(self) -> Callable[[], Any] | None: ...


class Observer(Protocol):
    """Called once per case after the timed rounds; runs what it needs of the case and says what it saw."""

    def __call__(self, case: Sides) -> InEffect: ...


def _call(case: Sides, side: Side) -> Any:
    return case.optimized() if side == "optimized" else case.reference()


@dataclass(frozen=True)
class OpCall:
    """One ATen operation as a dispatch mode sees it, below autocast and autograd: what actually ran."""

    op: str
    """The overload packet, e.g. "aten.convolution"."""
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: tuple[torch.Tensor, ...]


class _OpLog(TorchDispatchMode):
    """Records every ATen call that `keep` accepts; keeps only those, as a whole step can run thousands."""

    def __init__(self, keep: Callable[[str], bool]) -> None:
        super().__init__()
        self.keep = keep
        self.calls: list[OpCall] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        op = str(func.overloadpacket)
        if self.keep(op):
            leaves = tuple(leaf for leaf in tree_leaves(out) if isinstance(leaf, torch.Tensor))
            self.calls.append(OpCall(op, args, kwargs, leaves))
        return out


def observed_ops(call: Callable[[], Any], ops: frozenset[str]) -> list[OpCall]:
    """The calls of `ops` that one `call()` made. Compiled code runs eager under a dispatch mode (dynamo skips
    frames while one is active), so this sees what the technique's own switches did, not inductor's kernels."""
    with _OpLog(ops.__contains__) as log:
        call()
    return log.calls


CONVOLUTIONS = frozenset({"aten.convolution", "aten.conv1d", "aten.conv2d", "aten.conv3d"})
"""Convolutions as a dispatch mode meets them: `convolution` with autograd on; under inference_mode, which skips
the autograd key where `conv2d` is decomposed, the `conv1d`/`conv2d`/`conv3d` call itself (never both)."""
LOW_PRECISION_OPS = CONVOLUTIONS | {
    "aten.convolution_backward",
    "aten.mm",
    "aten.addmm",
    "aten.bmm",
    "aten.baddbmm",
    "aten.linear",
    "aten.matmul",
}
"""The matmuls and convolutions, forward and backward: what autocast runs in the low-precision dtype on every
backend (its "lower_precision_fp" list). `linear` and `matmul` reach a dispatch mode whole under inference_mode,
as `mm`/`addmm` otherwise."""


@dataclass(frozen=True)
class Autocast:
    """Every matmul/convolution of one call ran in `dtype`: autocast's whole effect, and what a no-op lacks."""

    dtype: torch.dtype
    side: Side = "optimized"

    def __call__(self, case: Sides) -> InEffect:
        calls = observed_ops(lambda: _call(case, self.side), LOW_PRECISION_OPS)
        low = sum(all(t.dtype == self.dtype for t in c.outputs if t.is_floating_point()) for c in calls)
        technique, dtype = f"autocast:{dtype_name(self.dtype)}", str(self.dtype).removeprefix("torch.")
        if not calls:
            return InEffect(technique, False, "ran no matmul/conv at all, so nothing shows it acting")
        if low == 0:
            return InEffect(technique, False, f"ran no matmul/conv in {dtype} (0 of {len(calls)} ops)")
        return InEffect(technique, low == len(calls), f"ran {low} of {len(calls)} matmul/conv in {dtype}")


def _floating(values: list[torch.Tensor]) -> list[torch.Tensor]:
    return [value for value in values if value.is_floating_point()]


@dataclass(frozen=True, eq=False)
class Converted:
    """`model`'s parameters and one call's outputs are in `dtype`: a conversion (`.to(torch.bfloat16)`,
    `.half()`) that was skipped leaves them in fp32."""

    dtype: torch.dtype
    model: nn.Module
    side: Side = "optimized"

    def __call__(self, case: Sides) -> InEffect:
        parameters = _floating(list(self.model.parameters()))
        outputs = _floating(tensors(_call(case, self.side)))
        converted_parameters = sum(p.dtype == self.dtype for p in parameters)
        converted_outputs = sum(o.dtype == self.dtype for o in outputs)
        dtype = str(self.dtype).removeprefix("torch.")
        evidence = (
            f"has {converted_parameters} of {len(parameters)} parameters and "
            f"{converted_outputs} of {len(outputs)} outputs in {dtype}"
        )
        done = converted_parameters == len(parameters) and converted_outputs == len(outputs) > 0
        return InEffect(dtype_name(self.dtype), done, evidence)


def _channels_last(tensor: torch.Tensor) -> bool:
    return tensor.dim() != 4 or tensor.is_contiguous(memory_format=torch.channels_last)


@dataclass(frozen=True)
class ChannelsLast:
    """Every convolution of one call read and wrote channels_last-contiguous activations. A tensor both layouts
    describe (1x1 images, one channel) counts as channels_last: nothing in it says otherwise."""

    side: Side = "optimized"

    def __call__(self, case: Sides) -> InEffect:
        calls = observed_ops(lambda: _call(case, self.side), CONVOLUTIONS)
        nhwc = sum(_channels_last(c.args[0]) and all(_channels_last(t) for t in c.outputs) for c in calls)
        if not calls:
            return InEffect("channels_last", False, "ran no convolution, so nothing shows the layout")
        return InEffect(
            "channels_last",
            nhwc == len(calls),
            f"ran {nhwc} of {len(calls)} convolutions on channels_last activations (input and output)",
        )


GradMode = Literal["grad", "no_grad", "inference_mode"]


@dataclass(frozen=True)
class AutogradMode:
    """One call's outputs carry the marks of `mode`: inference tensors under inference_mode, no autograd
    history under no_grad, history with autograd on. Declared on both sides, it shows the two differ."""

    mode: GradMode
    side: Side = "optimized"

    def __call__(self, case: Sides) -> InEffect:
        # Not `tensors()`: it detaches, which drops the autograd marks this looks at.
        outputs = [
            leaf for leaf in tree_leaves(as_containers(_call(case, self.side))) if isinstance(leaf, torch.Tensor)
        ]
        inference = sum(o.is_inference() for o in outputs)
        history = sum(o.requires_grad for o in outputs)
        expected = {
            "inference_mode": (len(outputs), 0),
            "no_grad": (0, 0),
            "grad": (0, len(outputs)),
        }[self.mode]
        label = self.mode if self.side == "optimized" else f"reference {self.mode}"
        evidence = f"gave {inference} of {len(outputs)} outputs as inference tensors, {history} with autograd history"
        return InEffect(label, bool(outputs) and (inference, history) == expected, evidence)


@dataclass(frozen=True, eq=False)
class ReadInside:
    """`read()` inside `module`'s forward during one call equals `value`: a switch seen where the kernels read
    it, not where the case meant to set it."""

    read: Callable[[], Any]
    value: Any
    label: str
    """The setting in words, e.g. "oneDNN matmul fp32_precision"."""
    module: nn.Module
    side: Side = "optimized"

    def __call__(self, case: Sides) -> InEffect:
        seen: list[Any] = []
        handle = self.module.register_forward_pre_hook(lambda module, args: seen.append(self.read()))
        try:
            _call(case, self.side)
        finally:
            handle.remove()
        technique = self.label if self.side == "optimized" else f"reference {self.label}"
        if not seen:
            return InEffect(technique, False, "was never read: the model's forward did not run")
        read = sorted({repr(value) for value in seen})
        ok = all(value == self.value for value in seen)
        return InEffect(technique, ok, f"read {', '.join(read)} inside the forward (expected {self.value!r})")


class SettingInside(ReadInside):
    """`owner.name` read inside the forward: a process-wide switch (TF32, oneDNN precision, cudnn.benchmark)."""

    def __init__(self, owner: Any, name: str, value: Any, label: str, module: nn.Module, side: Side = "optimized"):
        super().__init__(lambda: getattr(owner, name), value, label, module, side)


COPIES = frozenset({"aten._to_copy", "aten.copy_"})
MATMULS = frozenset({"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution"})


def _host_to_device(call: OpCall) -> tuple[torch.Tensor, bool] | None:
    """(source, non_blocking) of a copy from host memory to another device; None for any other copy."""
    if call.op == "aten._to_copy":
        source, destination = call.args[0], call.outputs[0]
    else:
        destination, source = call.args[0], call.args[1]
    if not isinstance(source, torch.Tensor) or source.device.type != "cpu" or destination.device.type == "cpu":
        return None
    return source, bool(call.kwargs.get("non_blocking", call.args[2] if len(call.args) > 2 else False))


@dataclass(frozen=True)
class PinnedCopies:
    """Every host-to-device copy of one call read pinned memory (and, with `non_blocking`, did not wait)."""

    non_blocking: bool = False
    side: Side = "optimized"

    def __call__(self, case: Sides) -> InEffect:
        copies = [copy for c in observed_ops(lambda: _call(case, self.side), COPIES) if (copy := _host_to_device(c))]
        technique = "pin_memory+non_blocking" if self.non_blocking else "pin_memory"
        if not copies:
            return InEffect(technique, False, "made no host-to-device copy, so nothing shows pinned memory")
        pinned = sum(source.is_pinned() for source, _ in copies)
        waited = sum(not non_blocking for _, non_blocking in copies) if self.non_blocking else 0
        evidence = f"copied {pinned} of {len(copies)} host batches from pinned memory"
        if self.non_blocking:
            evidence += f", {len(copies) - waited} of them non_blocking"
        return InEffect(technique, pinned == len(copies) and waited == 0, evidence)


HOST_READS = "host reads"
"""`.item()`, `float(t)`, `if t:` (ATen's `_local_scalar_dense`) or a copy back to host memory: a tensor's value
read on the host, which waits for everything queued on its device."""
HOST_TO_DEVICE_COPIES = "host-to-device copies"


def _is_host_read(call: OpCall) -> bool:
    if call.op == "aten._local_scalar_dense":
        return True
    return call.op == "aten._to_copy" and call.args[0].device.type != "cpu" and call.outputs[0].device.type == "cpu"


@dataclass(frozen=True)
class HostTraffic:
    """Over `calls` calls of each side, the optimized side makes at least `fewer` fewer of what `counted` names
    (HOST_READS or HOST_TO_DEVICE_COPIES) than the reference: the synchronizations a technique removes.
    Counting both sides leaves out what the model itself does, the same on each."""

    technique: str
    counted: str
    calls: int
    fewer: int

    def _count(self, case: Sides, side: Side) -> int:
        reads = self.counted == HOST_READS
        counts = _is_host_read if reads else _host_to_device
        ops = frozenset({"aten._local_scalar_dense", "aten._to_copy"}) if reads else COPIES
        return sum(bool(counts(c)) for _ in range(self.calls) for c in observed_ops(lambda: _call(case, side), ops))

    def __call__(self, case: Sides) -> InEffect:
        reference, optimized = self._count(case, "reference"), self._count(case, "optimized")
        evidence = (
            f"made {optimized} {self.counted} in {self.calls} call(s) against the reference's {reference}"
            f" (expected at least {self.fewer} fewer)"
        )
        return InEffect(self.technique, reference - optimized >= self.fewer, evidence)


@dataclass(frozen=True)
class Recomputes:
    """One call of the optimized side runs more matmuls than one of the reference: checkpointed blocks run their
    forward again in backward."""

    def __call__(self, case: Sides) -> InEffect:
        counts = [
            len(observed_ops(lambda side=side: _call(case, side), MATMULS)) for side in ("reference", "optimized")
        ]
        evidence = f"ran {counts[1]} matmuls in a step against the reference's {counts[0]}"
        return InEffect("activation checkpointing", counts[1] > counts[0], evidence)


@dataclass(frozen=True)
class LessMemory:
    """One call of the optimized side needs less peak memory than one of the reference: what a memory technique
    exists for, seen even where the compiled code it changed is out of a dispatch mode's sight."""

    technique: str
    device: torch.device

    def __call__(self, case: Sides) -> InEffect:
        peaks = [
            peak_memory_bytes(lambda side=side: _call(case, side), self.device) for side in ("reference", "optimized")
        ]
        if None in peaks:
            return InEffect(self.technique, False, "left no peak memory to compare on this device")
        mib = [peak / 2**20 for peak in peaks]
        evidence = f"needed {mib[1]:.1f} MiB at peak in a call against the reference's {mib[0]:.1f} MiB"
        return InEffect(self.technique, peaks[1] < peaks[0], evidence)


@dataclass(frozen=True, eq=False)
class LoaderWorkers:
    """Two calls' batches were collated in `num_workers` worker processes (0: in this process), the same ones in both
    calls if `persistent`, new ones otherwise; the loader prefetches `prefetch_factor` batches per worker.

    `loaded_by` gives the process ids that collated the last call's batches, as the loader tagged them
    (`optbench.measuring.training.Loaded`); `loader` the DataLoader whose settings are read.
    """

    loader: Callable[[], Any]
    loaded_by: Callable[[], Sequence[int]]
    num_workers: int
    persistent: bool
    prefetch_factor: int | None
    side: Side = "optimized"

    def __call__(self, case: Sides) -> InEffect:
        calls = []
        for _ in range(2):
            _call(case, self.side)
            calls.append(set(self.loaded_by()))
        here = os.getpid()
        technique = f"{self.side} DataLoader(num_workers={self.num_workers}"
        technique += ", persistent_workers=True" if self.persistent else ""
        technique += f", prefetch_factor={self.prefetch_factor})" if self.prefetch_factor else ")"
        if not all(calls):
            return InEffect(technique, False, "loaded no batch, so nothing shows who loads them")
        if self.num_workers == 0:
            return InEffect(technique, calls == [{here}, {here}], f"collated in processes {sorted(set.union(*calls))}")
        workers = [len(pids - {here}) for pids in calls]
        kept = calls[0] == calls[1]
        read = self.loader().prefetch_factor
        evidence = (
            f"collated batches in {workers[0]} and {workers[1]} worker processes in two epochs"
            f"{' (this process too)' if any(here in pids for pids in calls) else ''}, "
            f"{'the same ones' if kept else 'new ones'} in the second; prefetch_factor {read}"
        )
        acted = (
            all(here not in pids and len(pids) == self.num_workers for pids in calls)
            and kept == self.persistent
            and read == (self.prefetch_factor or 2)
        )
        return InEffect(technique, acted, evidence)


@dataclass(frozen=True, eq=False)
class GradsCleared:
    """Right after every `zero_grad` of one call, the gradients are None (`set_to_none`) or still there.

    `optimizer` is looked up at call time: a trainer may replace its optimizer between calls. Its `zero_grad` is
    wrapped on the instance for the call, so what is seen is what zero_grad did, whatever it was asked to do.
    """

    optimizer: Callable[[], torch.optim.Optimizer]
    set_to_none: bool
    side: Side = "optimized"

    def __call__(self, case: Sides) -> InEffect:
        optimizer = self.optimizer()
        zero_grad = optimizer.zero_grad
        seen: list[tuple[int, int]] = []

        def observed(*args: Any, **kwargs: Any) -> None:
            zero_grad(*args, **kwargs)
            grads = [p.grad for group in optimizer.param_groups for p in group["params"]]
            seen.append((sum(g is None for g in grads), len(grads)))

        optimizer.zero_grad = observed  # type: ignore[method-assign]
        try:
            _call(case, self.side)
        finally:
            del optimizer.zero_grad  # the class's method again
        technique = f"zero_grad(set_to_none={self.set_to_none})"
        technique = technique if self.side == "optimized" else f"reference {technique}"
        if not seen:
            return InEffect(technique, False, "was never called")
        none, total = min(seen) if self.set_to_none else max(seen)
        ok = none == total if self.set_to_none else none == 0
        return InEffect(technique, ok, f"left {none} of {total} gradients None")


OPTIMIZER_KERNELS = {"foreach": "aten._foreach_", "fused": "aten._fused_"}
"""What each implementation of a torch.optim step dispatches: multi-tensor ops, or one fused kernel per group."""


@dataclass(frozen=True)
class OptimizerKernels:
    """One call's optimizer steps dispatched the kernels of `implementation`: `_foreach_*` ops for "foreach",
    `_fused_*` for "fused", neither for "for-loop" (one op per parameter)."""

    implementation: str
    side: Side = "optimized"

    def __call__(self, case: Sides) -> InEffect:
        with _OpLog(lambda op: op.startswith(tuple(OPTIMIZER_KERNELS.values()))) as log:
            _call(case, self.side)
        seen = {kind for kind, prefix in OPTIMIZER_KERNELS.items() if any(c.op.startswith(prefix) for c in log.calls)}
        technique = f"optimizer:{self.implementation}"
        technique = technique if self.side == "optimized" else f"reference {technique}"
        expected = {self.implementation} & set(OPTIMIZER_KERNELS)
        # A fused step may dispatch foreach helpers too (e.g. to clip or to unscale); its own kernel must run.
        ok = "fused" in seen if self.implementation == "fused" else seen == expected
        return InEffect(
            technique, ok, f"dispatched {' and '.join(sorted(seen)) or 'neither foreach nor fused'} kernels"
        )


def _numbers(output: Any) -> list[torch.Tensor]:
    if isinstance(output, TrainingOutcome):
        return [output.losses, *output.parameters]
    return tensors(output)


@dataclass(frozen=True)
class ChangesNumbers:
    """The optimized output is not bitwise equal to the reference's, where the technique changes precision.

    bf16/fp16 or autocast that leaves every number exactly as fp32 computed it did not run: real rounding
    moves at least one. Compares the case's accuracy outputs (`reference_output`/`optimized_output` where
    declared, e.g. cached training runs), converted to the reference's dtype.
    """

    technique: str

    def __call__(self, case: Sides) -> InEffect:
        reference = _numbers((case.reference_output or case.reference)())
        optimized = _numbers((case.optimized_output or case.optimized)())
        same = len(reference) == len(optimized) and all(
            r.shape == o.shape and torch.equal(r, o.to(r.device, r.dtype))
            for r, o in zip(reference, optimized, strict=True)
        )
        if same:
            return InEffect(self.technique, False, "left every number bitwise equal to the reference's")
        return InEffect(self.technique, True, "changed the numbers, as reduced precision must")


def failures(observations: Sequence[InEffect]) -> list[str]:
    """The verdict's failure lines for what was not seen acting."""
    return [f"not in effect: {seen.text()}" for seen in observations if not seen.in_effect]
