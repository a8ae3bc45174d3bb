"""Seed 004's `load_model()` stack end to end, and its order: precision before torch.compile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..measuring.accuracy import REORDERED, TF32_MAX_RELATIVE_RMSE, Close, ReducedPrecision, tensors
from ..measuring.case import Case
from ..measuring.hardware import AMPERE, AMX, Requires, cuda_capability, dtype_name
from ..measuring.in_effect import ChangesNumbers, Converted
from ..measuring.switches import Change, under
from ..measuring.workload import Batch, InferenceWorkload, batch_as, forward
from . import Technique

CUDNN_BENCHMARK: Change = (torch.backends.cudnn, "benchmark", True)
# Said in the record, since the names and the recommendation list the flag as part of the stack. Which shapes
# are new here depends on inductor's layout choice, to be seen on a GPU (docs/ci.md: "Check first on a new GPU runner").
CUDNN_BENCHMARK_UNUSED = (
    "cudnn.benchmark=True is set as load_model() sets it, but benchmarks only shapes this process has not met: "
    "cuDNN reuses the plans of those met with it off (this case's reference, earlier cases on these inputs), "
    "so the speedup does not show the flag's gain"
)


def seed_precision(device: torch.device, use_mixed_precision: bool) -> torch.dtype | None:
    """The dtype seed 004's `load_model` converts to on `device`, None for staying in fp32."""
    if not use_mixed_precision:
        return None
    if device.type == "cuda":
        return torch.bfloat16 if cuda_capability(device)[0] >= 8 else torch.float16
    return torch.bfloat16


def seed_settings(device: torch.device, use_mixed_precision: bool) -> tuple[Change, ...]:
    """The process-wide switches `load_model` flips on `device`: cudnn.benchmark (fixed input sizes), and TF32
    fp32 matmuls when it stays in fp32. cuDNN's plan cache ignores the benchmark flag, so benchmarking only
    touches shapes this process first meets with it on (see benchmarks/test_cudnn_benchmark.py)."""
    if device.type != "cuda":
        return ()
    if use_mixed_precision:
        return (CUDNN_BENCHMARK,)
    return (CUDNN_BENCHMARK, (torch.backends.cuda.matmul, "fp32_precision", "tf32"))


def seed_inference(
    model: Callable[..., Any], inputs: Batch, dtype: torch.dtype | None, changes: tuple[Change, ...]
) -> Callable[[], Any]:
    """The seed's `inference()`: inputs converted to the model's dtype, under inference_mode."""
    converted = batch_as(inputs, dtype)

    @torch.inference_mode()
    def call() -> Any:
        return forward(model, converted)

    return under(changes, call)


def seed_accuracy(dtype: torch.dtype | None, device: torch.device) -> Close | ReducedPrecision:
    if dtype is not None:
        return ReducedPrecision()
    if device.type == "cuda":
        return ReducedPrecision(max_relative_rmse=TF32_MAX_RELATIVE_RMSE)
    return REORDERED


def seed_stack(workload: InferenceWorkload, use_mixed_precision: bool, device: torch.device, floor: float) -> Case:
    """Seed 004's `load_model()` + `inference()` vs the plain fp32 eager model with autograd on: precision
    first, torch.compile after it, inference_mode, and on CUDA cudnn.benchmark and TF32."""
    dtype = seed_precision(device, use_mixed_precision)
    changes = seed_settings(device, use_mixed_precision)
    plain = workload.model()
    stack = torch.compile(workload.model(dtype))
    plain_forward = workload.call(plain)
    return workload.case(
        plain_forward,
        seed_inference(stack, workload.inputs, dtype, changes),
        inference_mode=False,
        # The plain model runs with autograd on; its output is compared as numbers.
        reference_output=lambda: tensors(plain_forward()),
        accuracy=seed_accuracy(dtype, device),
        floor=floor,
        # Mixed precision is the stack's main gain where the format is native.
        floor_applies_on=(AMPERE, AMX) if dtype is not None else (),
        requires=Requires(dtype=dtype),
        names=("fp32 eager", f"seed stack {dtype_name(dtype or torch.float32)}"),
        variant="seed-stack",
        in_effect=(Converted(dtype, stack), ChangesNumbers(dtype_name(dtype))) if dtype is not None else (),
        notes=(CUDNN_BENCHMARK_UNUSED,) if CUDNN_BENCHMARK in changes else (),
    )


class CompiledThenConverted:
    """The wrong order: compiled, run once in fp32, then converted to `dtype`.

    Done on the first call, because the harness resets dynamo before each case
    and would otherwise discard the fp32 compilation.
    """

    def __init__(self, model: nn.Module, dtype: torch.dtype) -> None:
        self.compiled = torch.compile(model)
        self.dtype = dtype
        self.converted = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.converted:
            self.compiled(*batch_as(args, torch.float32), **batch_as(kwargs, torch.float32))
            self.compiled.to(self.dtype)
            self.converted = True
        return self.compiled(*args, **kwargs)


def convert_before_compile(workload: InferenceWorkload, device: torch.device, floor: float) -> Case:
    """Seed 004's order: convert, then compile (reference) vs compile, run, then convert, where dynamo
    recompiles for the new dtype. torch.compile is lazy, so the wrong order only differs once the model ran."""
    dtype = seed_precision(device, use_mixed_precision=True)
    changes = seed_settings(device, use_mixed_precision=True)
    right = torch.compile(workload.model(dtype))
    wrong = CompiledThenConverted(workload.model(), dtype or torch.float32)
    return workload.case(
        seed_inference(right, workload.inputs, dtype, changes),
        seed_inference(wrong, workload.inputs, dtype, changes),
        inference_mode=False,
        accuracy=ReducedPrecision(),
        floor=floor,
        requires=Requires(dtype=dtype),
        names=("convert, compile", "compile, run, convert"),
        variant="convert-after-compile",
    )


TECHNIQUE = Technique(
    "load_model_stack",
    "seed 004's load_model() and inference() vs the plain fp32 model, and its order (convert, then compile)",
    "seed 004",
    order=70,
    recommended=True,
)
