"""The inference techniques of the catalogue, each turning any `InferenceWorkload` into its `Case`.

This is the one place that knows how to apply a technique: the files in
`benchmarks/` parametrize these functions over the built-in workloads and the
user's model (`--model`), and `optbench.recipe` applies the same conversions
in seed 004's order. Where a technique cannot apply to a model (no
convolution for channels_last to reorder), the case skips with that reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

import pytest
import torch
from torch import nn

from .accuracy import TF32_MAX_RELATIVE_RMSE, Check, Close, Exact, ReducedPrecision, tensors
from .case import Case, Observed
from .hardware import AMPERE, AMX, HardwareClass, Requires, cuda_capability, dtype_name
from .in_effect import AutogradMode, ChangesNumbers, ChannelsLast, Converted, SettingInside, Side
from .remote import RemoteWorkload, WorkerSpec
from .switches import Change, under
from .workload import Batch, InferenceWorkload, batch_as, channels_last_misfit, forward, not_applicable

AUTOGRAD_CONTEXTS: dict[str, Callable[[], Any]] = {
    "grad": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}
REORDERED = Close(rtol=1e-3, atol=1e-3)
"""Same numbers up to summation order (fusion, another layout or algorithm), or no further from fp64."""


def autograd_mode(workload: InferenceWorkload, reference: str, optimized: str, floor: float) -> Case:
    """Seed 004, section 1: the forward under `optimized` (no_grad, inference_mode) vs under `reference`;
    disabling autograd bookkeeping may not change a single number."""
    model = workload.model()
    forward_pass = workload.call(model)

    def run_under(context: str) -> Callable[[], Any]:
        def call() -> Any:
            with AUTOGRAD_CONTEXTS[context]():
                return forward_pass()

        return call

    return workload.case(
        run_under(reference),
        run_under(optimized),
        inference_mode=False,
        fp64_output=None,
        accuracy=Exact(),
        floor=floor,
        names=(reference, optimized),
        variant=f"{reference}->{optimized}",
        # Bitwise-equal outputs are the point here, so the outputs' autograd marks show each side's mode.
        in_effect=(AutogradMode(reference, side="reference"), AutogradMode(optimized)),
    )


def reduced_precision(
    workload: InferenceWorkload, dtype: torch.dtype, floor: float, pays_on: tuple[HardwareClass, ...]
) -> Case:
    """Seed 004, section 2: fp32 vs the model and its floating inputs converted to `dtype`."""
    fp32, reduced = workload.model(), workload.model(dtype)
    return workload.case(
        workload.call(fp32),
        workload.call(reduced, workload.inputs_as(dtype)),
        accuracy=ReducedPrecision(format_output=workload.format_output(dtype)),
        floor=floor,
        floor_applies_on=pays_on,
        requires=Requires(dtype=dtype),
        names=("fp32", dtype_name(dtype)),
        variant=dtype_name(dtype),
        in_effect=(Converted(dtype, reduced), ChangesNumbers(dtype_name(dtype))),
    )


def compiled_call(workload: InferenceWorkload, model: nn.Module, mode: str) -> Callable[[], Any]:
    """One call of `torch.compile(model, mode=mode)` on the workload's inputs."""
    compiled_forward = workload.call(torch.compile(model, mode=mode))
    if mode != "reduce-overhead":
        return compiled_forward

    def call() -> Any:
        # CUDA-graph outputs are overwritten by the next replay; each call is a new step.
        torch.compiler.cudagraph_mark_step_begin()
        return compiled_forward()

    return call


def compiled(workload: InferenceWorkload, mode: str, floor: float, requires: Requires) -> Case:
    """Seeds 000 and 004: torch.compile in `mode` vs eager."""
    optimized = compiled_call(workload, workload.model(), mode)
    return workload.case(
        workload.call(workload.model()),
        optimized,
        # Copies: a CUDA-graph replay overwrites its outputs.
        optimized_output=lambda: [tensor.clone() for tensor in tensors(optimized())],
        accuracy=REORDERED,
        floor=floor,
        requires=requires,
        names=("eager", f"compile:{mode}"),
        variant=f"compile:{mode}",
        expect_compiled=True,
    )


def channels_last(workload: InferenceWorkload, dtype: torch.dtype, floor: float) -> Case:
    """Seed 004 (tensor-core paths): model and 4-d inputs in channels_last (NHWC) vs NCHW, both in `dtype`."""
    if misfit := channels_last_misfit(workload.operations, workload.inputs):
        not_applicable(workload.name, "channels_last", misfit)
    nchw, nhwc = workload.model(dtype), workload.model(dtype, torch.channels_last)
    return workload.case(
        workload.call(nchw, workload.inputs_as(dtype)),
        workload.call(nhwc, workload.inputs_as(dtype, torch.channels_last)),
        accuracy=REORDERED,
        floor=floor,
        requires=Requires(dtype=dtype),
        names=(f"{dtype_name(dtype)} NCHW", f"{dtype_name(dtype)} channels_last"),
        variant=f"channels_last:{dtype_name(dtype)}",
        in_effect=(ChannelsLast(),),
    )


TENSOR_CORES = Requires(min_capability=(8, 0), why="TF32 runs on tensor cores (Ampere and later)")
BF16_MAX_RELATIVE_RMSE = ReducedPrecision().max_relative_rmse


@dataclass(frozen=True)
class Fp32Precision:
    """One backend's `fp32_precision` switched from IEEE fp32 to `value` for the optimized calls.

    Only the `fp32_precision` attributes are used: recent PyTorch raises when the legacy
    `set_float32_matmul_precision`/`allow_tf32` API is read after they were set."""

    backend: str
    owner: Any
    value: str
    requires: Requires
    max_relative_rmse: float
    pays_on: tuple[HardwareClass, ...]
    kernels: str
    """What the switch changes: "matmul" or "convolution"."""

    def change(self, value: str) -> Change:
        return (self.owner, "fp32_precision", value)

    def read_inside(self, model: nn.Module, value: str, side: Side) -> SettingInside:
        """`value` is the precision `model`'s forward runs under on `side`."""
        return SettingInside(*self.change(value), f"{self.backend} fp32_precision", model, side)


def _tf32(backend: str, owner: Any, kernels: str) -> Fp32Precision:
    return Fp32Precision(backend, owner, "tf32", TENSOR_CORES, TF32_MAX_RELATIVE_RMSE, (AMPERE,), kernels)


def _onednn_bf16(owner: Any, kernels: str) -> Fp32Precision:
    """oneDNN computing fp32 in bf16, which needs native bf16: without it oneDNN silently keeps fp32."""
    return Fp32Precision(
        "oneDNN", owner, "bf16", Requires(dtype=torch.bfloat16), BF16_MAX_RELATIVE_RMSE, (AMX,), kernels
    )


def matmul_precision(level: str, device: torch.device) -> Fp32Precision:
    """What `set_float32_matmul_precision(level)` changes for fp32 matmuls on `device`: highest = ieee
    everywhere, high = tf32 in cuBLAS and oneDNN, medium = tf32 in cuBLAS and bf16 in oneDNN."""
    if device.type == "cuda":
        if level == "medium":
            pytest.skip("on CUDA 'medium' sets the same cuBLAS TF32 mode as 'high': cuBLAS has no bf16 mode for fp32")
        return _tf32("cuBLAS", torch.backends.cuda.matmul, "matmul")
    if level == "high":
        return _tf32("oneDNN", torch.backends.mkldnn.matmul, "matmul")
    return _onednn_bf16(torch.backends.mkldnn.matmul, "matmul")


def conv_precision(device: torch.device) -> Fp32Precision:
    """fp32 convolutions in TF32 (cuDNN) or bf16 (oneDNN)."""
    if device.type == "cuda":
        return _tf32("cuDNN", torch.backends.cudnn.conv, "convolution")
    return _onednn_bf16(torch.backends.mkldnn.conv, "convolution")


def fp32_precision(workload: InferenceWorkload, precision: Fp32Precision, floor: float) -> Case:
    """Seed 004, section 4: float32 matmuls or convolutions computed in fewer mantissa bits."""
    runs_them = workload.convolves() if precision.kernels == "convolution" else workload.multiplies_matrices()
    if not runs_them:
        not_applicable(workload.name, f"{precision.backend} {precision.value}", f"it runs no {precision.kernels}")
    model = workload.model()
    return workload.case(
        under((precision.change("ieee"),), workload.call(model)),
        under((precision.change(precision.value),), workload.call(model)),
        accuracy=ReducedPrecision(max_relative_rmse=precision.max_relative_rmse),
        floor=floor,
        floor_applies_on=precision.pays_on,
        requires=precision.requires,
        names=(f"{precision.backend} ieee", f"{precision.backend} {precision.value}"),
        variant=precision.value,
        in_effect=(
            precision.read_inside(model, "ieee", "reference"),
            precision.read_inside(model, precision.value, "optimized"),
        ),
    )


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


def recipe(workload: InferenceWorkload, recipe: ModuleType) -> Case:
    """A recipe written by `advise` (optbench.recipe), end to end, vs the plain fp32 model called with autograd on:
    the measured headline, since the effects of its parts do not multiply."""
    plain, model = workload.model(), recipe.apply(workload.model())
    batch = recipe.prepare(workload.inputs)
    dtype = recipe.DTYPE
    plain_forward = workload.call(plain)

    def optimized() -> Any:
        return recipe.run(model, batch)

    if dtype is not None:
        accuracy: Close | ReducedPrecision = ReducedPrecision(format_output=workload.format_output(dtype))
    elif recipe.FP32_PRECISION:
        accuracy = ReducedPrecision(max_relative_rmse=BF16_MAX_RELATIVE_RMSE)
    else:
        accuracy = REORDERED
    converted = (Converted(dtype, model), ChangesNumbers(dtype_name(dtype))) if dtype is not None else ()
    autograd = (AutogradMode("grad", side="reference"), AutogradMode(recipe.AUTOGRAD)) if recipe.AUTOGRAD else ()
    # Read where the kernels read them; a compiled forward evaluates its hooks once, at tracing, so only eager.
    switches = tuple(
        SettingInside(recipe.backend(path), "fp32_precision", value, f"{path} fp32_precision", model)
        for path, value in recipe.FP32_PRECISION.items()
        if recipe.COMPILE_MODE is None
    )
    return workload.case(
        plain_forward,
        optimized,
        inference_mode=False,
        reference_output=lambda: tensors(plain_forward()),
        optimized_output=lambda: [tensor.clone() for tensor in tensors(optimized())],
        accuracy=accuracy,
        floor=workload.floor(lambda: 1.0),
        requires=Requires(dtype=dtype),
        names=("plain fp32", "recipe"),
        variant="recipe",
        expect_compiled=recipe.COMPILE_MODE is not None,
        in_effect=(*converted, *((ChannelsLast(),) if recipe.CHANNELS_LAST else ()), *autograd, *switches),
    )


CUDNN_PLANS = Requires(cuda=True, why="cudnn.benchmark chooses among cuDNN convolution algorithms")


def benchmark_read_by(side: str, expected: bool) -> Callable[[Observed], Check]:
    """The check that `side`'s worker ran its model's forward with cudnn.benchmark at `expected`."""

    def check(observed: Observed) -> Check:
        seen = observed.details[side]["cudnn_benchmark"] if observed.details else None
        label = f"cudnn.benchmark read in the {side}'s forward: {seen} (expected {expected})"
        return Check(label if seen == expected else f"not in effect: {label}", int(seen == expected), 1, False)

    return check


@contextlib.contextmanager
def cudnn_benchmark_apart(workload: InferenceWorkload, profile: str, floor: float) -> Iterator[Case]:
    """Seed 004, section 5, on the user's model: cudnn.benchmark off vs on with fixed shapes, each side in a fresh
    process of its own (optbench.remote) that sets the flag before meeting a shape, since cuDNN keeps the plan it
    chose for a shape for the rest of the process whatever the flag says later; the harness times each call's
    round trip, whose pipe overhead is the same on both sides. The workers are stopped when the block ends."""
    device = workload.device
    if unmet := CUDNN_PLANS.unmet(device, profile):
        pytest.skip(unmet)
    if not workload.convolves():
        not_applicable(workload.name, "cudnn.benchmark", "it runs no convolution, and only cuDNN convolutions plan")
    assert workload.specs is not None, "only the user's model is rebuilt from its SPECs"
    model, inputs = workload.specs

    def side(benchmark: bool) -> RemoteWorkload:
        spec = WorkerSpec(
            workload.name, profile, str(device), "eager", torch.get_num_threads(), model, inputs, benchmark
        )
        return RemoteWorkload(spec, "system")

    with side(False) as reference, side(True) as optimized:
        yield workload.case(
            reference.call,
            optimized.call,
            reference_output=reference.output,
            optimized_output=optimized.output,
            accuracy=REORDERED,
            floor=floor,
            requires=CUDNN_PLANS,
            names=("benchmark off", "benchmark on"),
            variant="benchmark",
            details=lambda: {"reference": asdict(reference.describe()), "optimized": asdict(optimized.describe())},
            checks=(benchmark_read_by("reference", False), benchmark_read_by("optimized", True)),
        )
