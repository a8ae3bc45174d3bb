"""Seed 004, section 5: cudnn.benchmark off -> on, with fixed input shapes and with a new shape every call.

cuDNN plans live in one process-wide cache whose key leaves out the benchmark
flag: whichever flag is set when a shape is first seen decides its plan for
the rest of the process. So the two variants never share a shape: the
reference runs the ResNet on h x w images, the optimized variant runs the same
ResNet with every kernel transposed on w x h images. That is the same work
with the same outputs under cache keys of their own, as long as h != w at
every stage; no other case uses non-square images.

Swapped geometry is not free on a GPU, though: the fixed shapes keep both
sides multiples of 32 (224 x 320 in `standard`), and an off/off control of the
two orientations measures what the swap alone is worth, one image more per
batch so that its shapes are its own too.

The user's model (--model) has no transposed twin: its fixed-shape case runs
each side in a fresh process of its own instead (optbench.techniques.
cudnn_benchmark_apart); the control and the varying shapes need the twin."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from fixtures.models import transposed
from optbench import Case, Close
from optbench.measuring.in_effect import SettingInside
from optbench.measuring.switches import Change, under
from optbench.measuring.workload import InferenceWorkload
from optbench.techniques.cudnn_benchmark import CUDNN_PLANS as CUDA
from optbench.techniques.cudnn_benchmark import TECHNIQUE, cudnn_benchmark_apart

pytestmark = pytest.mark.technique(TECHNIQUE)

BENCHMARK_OFF = ((torch.backends.cudnn, "benchmark", False),)
BENCHMARK_ON = ((torch.backends.cudnn, "benchmark", True),)
# Same numbers up to the algorithm's summation order, or no further from fp64 (convolutions are TF32 by default).
SAME_OUTPUTS = Close(rtol=1e-3, atol=1e-3)
# Not measured on a GPU yet: the first CUDA baseline replaces this guess.
FIXED_SHAPES_FLOOR = 1.02


def benchmark_read_inside(
    reference: nn.Module, optimized: nn.Module, flag: tuple[Change, ...]
) -> tuple[SettingInside, ...]:
    """The flag each side's ResNet runs under: off for the reference, `flag`'s value for the optimized one."""
    ((_, _, optimized_value),) = flag
    return (
        SettingInside(torch.backends.cudnn, "benchmark", False, "cudnn.benchmark", reference, "reference"),
        SettingInside(torch.backends.cudnn, "benchmark", optimized_value, "cudnn.benchmark", optimized),
    )


def fixed_shape(side: int) -> tuple[int, int]:
    """(h, w) of the fixed-shape cases: multiples of 32 where `side` is one (cuDNN tiles favour them), w - h of
    three total strides, and none of `non_square`'s shapes in either orientation."""
    return side, side + 96


def non_square(side: int, index: int) -> tuple[int, int]:
    """The `index`-th (h, w) near `side`, all distinct, w - h above the ResNet's total stride of 32."""
    return side + index % 64, side + 97 + index // 64


@pytest.fixture
def resnets(workload) -> tuple[nn.Module, nn.Module] | None:
    """The workload's ResNet and its transpose; None for the user's model, which has no transposed twin."""
    return None if workload.own_model else (workload.model(), transposed(workload.model()))


def twin(resnets, workload, device, profile) -> tuple[nn.Module, nn.Module]:
    """`resnets`, or for the user's model a skip with the reason (the CUDA one first)."""
    if resnets is None:
        pytest.skip(
            CUDA.unmet(device, profile.name)
            or f"not measured on {workload.name}: its two sides need input shapes of their own, which only a model "
            "that computes the same function on transposed images (the built-in ResNet) allows"
        )
    return resnets


def fixed_images(workload: InferenceWorkload, batch: int) -> torch.Tensor:
    """`batch` fixed images of `fixed_shape`; the transposed ResNet gets their transpose."""
    generator = torch.Generator().manual_seed(0)
    shape = (batch, 3, *fixed_shape(workload.inputs.shape[-1]))
    return torch.randn(shape, generator=generator).to(workload.inputs.device)


def fp64_output_of(workload: InferenceWorkload, images: torch.Tensor) -> Callable[[], torch.Tensor]:
    def fp64_output() -> torch.Tensor:
        with torch.inference_mode():
            return workload.model(torch.float64)(images.double())

    return fp64_output


@pytest.fixture
def images(workload) -> torch.Tensor | None:
    return None if workload.own_model else fixed_images(workload, workload.inputs.shape[0])


@pytest.fixture
def images_fp64_output(workload, images) -> Callable[[], torch.Tensor] | None:
    return None if images is None else fp64_output_of(workload, images)


def orientations(
    resnets: tuple[nn.Module, nn.Module],
    images: torch.Tensor,
    fp64_output: Callable[[], torch.Tensor],
    optimized_flag: tuple[Change, ...],
    **fields: Any,
) -> Case:
    """The ResNet on `images` with benchmark off vs its transpose on their transpose under `optimized_flag`."""
    model, mirrored = resnets
    images_mt = images.mT.contiguous()
    return Case(
        reference=under(BENCHMARK_OFF, lambda: model(images)),
        optimized=under(optimized_flag, lambda: mirrored(images_mt)),
        fp64_output=fp64_output,
        accuracy=SAME_OUTPUTS,
        requires=CUDA,
        in_effect=benchmark_read_inside(model, mirrored, optimized_flag),
        **fields,
    )


@pytest.mark.workloads("resnet")
def test_fixed_shapes(optbench, workload, profile, resnets, images, images_fp64_output):
    if resnets is None:  # the user's model: each side in a process of its own instead
        with cudnn_benchmark_apart(workload, profile.name, workload.floor(lambda: FIXED_SHAPES_FLOOR)) as case:
            optbench.run(case)
        return
    with torch.inference_mode():
        optbench.run(
            orientations(
                resnets,
                images,
                images_fp64_output,
                BENCHMARK_ON,
                floor=FIXED_SHAPES_FLOOR,
                names=("benchmark off", "benchmark on"),
                variant="benchmark",
            )
        )


@pytest.mark.workloads("resnet")
def test_orientation_control(optbench, workload, resnets, device, profile):
    """test_fixed_shapes with benchmark off on both sides: what its swapped geometry alone is worth.

    A bias towards the reference only makes test_fixed_shapes conservative; one towards the transposed side as
    large as its floor's margin would let the flag pass on geometry alone, so that is this control's ceiling.
    Not run on a GPU yet: docs/ci.md, "Check first on a new GPU runner".
    """
    resnets = twin(resnets, workload, device, profile)
    images = fixed_images(workload, workload.inputs.shape[0] + 1)
    with torch.inference_mode():
        optbench.run(
            orientations(
                resnets,
                images,
                fp64_output_of(workload, images),
                BENCHMARK_OFF,
                floor=0.0,
                ceiling=FIXED_SHAPES_FLOOR,
                names=("h x w, benchmark off", "w x h, benchmark off"),
                variant="orientation-control",
            )
        )


@pytest.mark.workloads("resnet")
def test_varying_shapes(optbench, workload, resnets, images, images_fp64_output, device, profile):
    """The seed's warning: with a new input size every call, benchmarking each one costs more than it saves."""
    model, mirrored = twin(resnets, workload, device, profile)
    batch, side, device = workload.inputs.shape[0], workload.inputs.shape[-1], workload.inputs.device
    reference_shapes = (non_square(side, index) for index in itertools.count(1))
    optimized_shapes = (non_square(side, index)[::-1] for index in itertools.count(1))

    def on_next_shape(resnet: nn.Module, shapes) -> torch.Tensor:
        return resnet(torch.randn(batch, 3, *next(shapes), device=device))

    images_mt = images.mT.contiguous()
    with torch.inference_mode():
        optbench.run(
            Case(
                reference=under(BENCHMARK_OFF, lambda: on_next_shape(model, reference_shapes)),
                optimized=under(BENCHMARK_ON, lambda: on_next_shape(mirrored, optimized_shapes)),
                reference_output=under(BENCHMARK_OFF, lambda: model(images)),
                optimized_output=under(BENCHMARK_ON, lambda: mirrored(images_mt)),
                fp64_output=images_fp64_output,
                accuracy=SAME_OUTPUTS,
                floor=0.0,  # any slowdown is what the seed predicts
                ceiling=1.0,
                requires=CUDA,
                names=("benchmark off", "benchmark on"),
                variant="benchmark",
                in_effect=benchmark_read_inside(model, mirrored, BENCHMARK_ON),
            )
        )
