"""An inference workload: a model builder and one batch of its inputs, what every inference technique is applied to.

A batch is what the model is called with: a tensor (one argument), a tuple or
list (positional arguments) or a dict (keyword arguments), as a user's
`inputs()` returns it. Techniques change a batch's floating tensors only
(dtype) and its 4-d ones only (memory format): token ids and masks stay as
they are.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import pytest
import torch
from torch import nn

from ..internals import tree_leaves, tree_map
from .accuracy import FormatRounding, Leaves
from .case import Case
from .in_effect import CONVOLUTIONS, LOW_PRECISION_OPS, observed_ops

Batch = Any
"""A tensor, a tuple/list of positional arguments, or a dict of keyword arguments."""

OWN_MODEL_FLOOR = 1.0
"""A technique pays off on the user's model when it is faster at all; reported there, never failed on."""


def forward(model: Callable[..., Any], batch: Batch) -> Any:
    """`model` called with `batch` as the user's inputs function meant it."""
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def batch_as(batch: Batch, dtype: torch.dtype | None = None, memory_format: torch.memory_format | None = None) -> Batch:
    """`batch` with its floating tensors in `dtype` and its 4-d tensors in `memory_format`."""

    def convert(leaf: Any) -> Any:
        if not isinstance(leaf, torch.Tensor):
            return leaf
        if dtype is not None and leaf.is_floating_point():
            leaf = leaf.to(dtype)
        if memory_format is not None and leaf.dim() == 4:
            leaf = leaf.contiguous(memory_format=memory_format)
        return leaf

    return tree_map(convert, batch)


def batch_to(batch: Batch, device: torch.device, non_blocking: bool = False) -> Batch:
    return tree_map(
        lambda leaf: leaf.to(device, non_blocking=non_blocking) if isinstance(leaf, torch.Tensor) else leaf, batch
    )


def operations_of(call: Callable[[], Any]) -> frozenset[str]:
    """The convolution and matmul ATen ops one `call()` runs: what decides where a technique applies."""
    return frozenset(op_call.op for op_call in observed_ops(call, LOW_PRECISION_OPS))


def has_image_inputs(batch: Batch) -> bool:
    """Some leaf of `batch` is a 4-d floating tensor (N, C, H, W): what channels_last reorders."""
    return any(
        isinstance(leaf, torch.Tensor) and leaf.dim() == 4 and leaf.is_floating_point() for leaf in tree_leaves(batch)
    )


def channels_last_misfit(operations: frozenset[str], batch: Batch) -> str | None:
    """Why channels_last cannot act on a model running `operations` on `batch`; None where it can."""
    if not operations & CONVOLUTIONS:
        return "it runs no convolution, and only convolutions read NHWC"
    if not has_image_inputs(batch):
        return "none of its inputs is a 4-d floating tensor (N, C, H, W)"
    return None


def not_applicable(workload: str, technique: str, why: str) -> NoReturn:
    """Skip the case: `technique` cannot act on `workload`, for the reason `why`."""
    pytest.skip(f"{technique} does not apply to {workload}: {why}")


def format_rounded_output(model: nn.Module, batch: Batch, dtype: torch.dtype) -> Any:
    """`model` (fp64, consumed) from weights and inputs rounded to `dtype`, every result rounded as it is made."""
    with torch.no_grad():
        for tensor in (*model.parameters(), *model.buffers()):
            if tensor.is_floating_point():
                tensor.copy_(tensor.to(dtype))
    with torch.inference_mode(), FormatRounding(dtype):
        return forward(model, batch_as(batch_as(batch, dtype), torch.float64))


def _under_inference_mode(call: Callable[[], Any]) -> Callable[[], Any]:
    @functools.wraps(call)
    def under_inference_mode() -> Any:
        with torch.inference_mode():
            return call()

    return under_inference_mode


@dataclass(frozen=True)
class InferenceWorkload:
    name: str
    build: Callable[[], nn.Module]
    """A fresh model in eval mode on the workload's device, same weights every call."""
    inputs: Batch
    own_model: bool = False
    """The user's model (--model): floors are not promises there, and a technique that raises on it is a finding
    ("does not work on this model"), not a harness failure."""
    specs: tuple[str, str] | None = None
    """The user's --model and --inputs SPECs, absolute: how another process builds the same workload."""

    def model(self, dtype: torch.dtype | None = None, memory_format: torch.memory_format | None = None) -> nn.Module:
        model = self.build()
        if dtype is not None:
            model = model.to(dtype)
        if memory_format is not None:
            model = model.to(memory_format=memory_format)
        return model

    def inputs_as(self, dtype: torch.dtype | None = None, memory_format: torch.memory_format | None = None) -> Batch:
        return batch_as(self.inputs, dtype, memory_format)

    def call(self, model: Callable[..., Any], inputs: Batch | None = None) -> Callable[[], Any]:
        """One forward of `model` on `inputs` (default: the workload's batch)."""
        batch = self.inputs if inputs is None else inputs
        return lambda: forward(model, batch)

    def fp64_output(self) -> Any:
        """The high-precision truth that precision-changing cases are held against; None for a user's model that
        cannot run in fp64 (an op without a double kernel): its cases are then compared with the fp32 output only."""
        try:
            with torch.inference_mode():
                return forward(self.model(torch.float64), self.inputs_as(torch.float64))
        except (RuntimeError, TypeError, NotImplementedError):
            if self.own_model:
                return None
            raise

    def format_output(self, dtype: torch.dtype) -> Callable[[], Any]:
        """The fp64 model storing every intermediate in `dtype`: the error that format costs by itself.

        Computed once: the runner calls a case's comparator twice (the reference's repeat, then the optimized)."""
        return functools.cache(lambda: format_rounded_output(self.model(torch.float64), self.inputs, dtype))

    def floor(self, declared: Callable[[], float]) -> float:
        """The catalogue's `declared` floor for a built-in workload; for the user's model, any gain."""
        return OWN_MODEL_FLOOR if self.own_model else declared()

    @functools.cached_property
    def operations(self) -> frozenset[str]:
        """The convolution and matmul ATen ops one plain forward runs: what decides where a technique applies."""
        model = self.model()
        with torch.inference_mode():
            return operations_of(self.call(model))

    @property
    def device(self) -> torch.device:
        """Where the workload runs: its inputs' device."""
        return next(leaf.device for leaf in tree_leaves(self.inputs) if isinstance(leaf, torch.Tensor))

    def convolves(self) -> bool:
        return bool(self.operations & CONVOLUTIONS)

    def multiplies_matrices(self) -> bool:
        return bool(self.operations - CONVOLUTIONS)

    def case(
        self, reference: Callable[[], Any], optimized: Callable[[], Any], inference_mode: bool = True, **fields: Any
    ) -> Case:
        """`reference` vs `optimized` forward passes, each call under torch.inference_mode unless told otherwise,
        held against this workload's fp64 truth unless `fp64_output` says otherwise; `fields` are the rest of the
        `Case`. On the user's model, floors promise nothing, outputs are compared leaf by leaf (integer leaves
        exactly) and a technique that raises is that case's outcome."""
        wrap = _under_inference_mode if inference_mode else (lambda call: call)
        for output in ("reference_output", "optimized_output"):
            if fields.get(output) is not None:
                fields[output] = wrap(fields[output])
        fields.setdefault("fp64_output", self.fp64_output)
        if self.own_model:
            fields.update(floor_applies_on=(), accuracy=Leaves(fields["accuracy"]), model_may_break=True)
            fields.setdefault("workload", self.name)
        return Case(reference=wrap(reference), optimized=wrap(optimized), **fields)
