"""Catalogue cases that need a GPU, declared as their files say: a runner that keeps each Case instead of running it."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn

import benchmarks.test_cudnn_benchmark as cudnn_benchmark
import benchmarks.test_load_model_stack as load_model_stack
from optbench.measuring.workload import InferenceWorkload
from optbench.techniques.load_model_stack import CUDNN_BENCHMARK_UNUSED


class KeepCases:
    def __init__(self):
        self.cases = []

    def run(self, case):
        self.cases.append(case)


def test_cudnn_benchmark_fixed_shapes_and_their_control_time_the_flag_alone():
    """Sides that are multiples of 32; the control swaps the same geometry with the flag off on both sides; and no
    shape meets both flags, since cuDNN's plan cache keys on the shape, not on the flag."""
    runs = []

    def resnet(images):
        runs.append((tuple(images.shape), torch.backends.cudnn.benchmark))
        return images.sum()

    runner, resnets = KeepCases(), (resnet, resnet)
    workload = SimpleNamespace(inputs=torch.zeros(64, 3, 224, 224), own_model=False)  # the `standard` ResNet's
    images = cudnn_benchmark.fixed_images(workload, 64)
    cuda = torch.device("cuda")
    cudnn_benchmark.test_fixed_shapes(runner, workload, None, resnets, images, images_fp64_output=None)
    cudnn_benchmark.test_orientation_control(runner, workload, resnets, cuda, None)
    for case in runner.cases:
        case.reference()
        case.optimized()
    assert runs == [
        ((64, 3, 224, 320), False),
        ((64, 3, 320, 224), True),
        ((65, 3, 224, 320), False),
        ((65, 3, 320, 224), False),
    ]


@pytest.mark.parametrize(("device", "notes"), [("cuda", (CUDNN_BENCHMARK_UNUSED,)), ("cpu", ())])
def test_load_model_stack_says_where_cudnn_benchmark_is_set_but_not_measured(device, notes):
    runner = KeepCases()
    workload = InferenceWorkload("resnet", nn.Identity, torch.zeros(1))
    load_model_stack.test_load_model_stack(runner, workload, "fp32", torch.device(device))
    (case,) = runner.cases
    assert case.notes == notes
