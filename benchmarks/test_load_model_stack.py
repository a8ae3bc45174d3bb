"""Seed 004, "適用タイミング": the seed's `load_model()` + `inference()` stack vs the plain fp32 eager model.

On CUDA, `load_model(use_mixed_precision)` turns cudnn.benchmark on (fixed
input sizes), converts to bf16 on compute capability >= 8.0 or fp16 on 7.x
when mixed precision is used, and sets TF32 fp32 matmuls when it is not
(`set_float32_matmul_precision("high")`, here as the new API spells it);
torch.compile comes after the precision change; `inference()` runs under
torch.inference_mode. On a CPU the applicable subset: inference_mode and
compile, plus bf16 where the CPU has it natively.

The seed insists on converting before compiling. torch.compile is lazy, so
"compile, then convert" only differs once the model has run: the wrong order
is measured as it bites in practice, compiled, called once in fp32, then
converted, and dynamo recompiles for the new dtype.
"""

from __future__ import annotations

import pytest

from optbench.techniques.load_model_stack import TECHNIQUE, convert_before_compile, seed_stack

pytestmark = pytest.mark.technique(TECHNIQUE)

MIXED_PRECISION = {"mixed-precision": True, "fp32": False}
FLOORS = {
    # Runs only where the reduced format is native, where it is the larger share of the gain.
    "mixed-precision": {"resnet": 1.2, "vit": 1.3},
    # Measured on this CPU, uncontended: ResNet 1.1x, ViT 1.16x (inference_mode and compile).
    "fp32": {"resnet": 0.9, "vit": 1.05},
}
WORKLOADS = ["resnet", "vit"]


# Smoke: each stack once, on different workloads; the other pairing in standard.
@pytest.mark.smoke("mixed-precision-resnet", "fp32-vit")
@pytest.mark.workloads(*WORKLOADS)
@pytest.mark.parametrize("precision", list(MIXED_PRECISION))
def test_load_model_stack(optbench, workload, precision, device):
    floor = workload.floor(lambda: FLOORS[precision][workload.name])
    optbench.run(seed_stack(workload, MIXED_PRECISION[precision], device, floor))


@pytest.mark.smoke("resnet")  # the order's effect once; the ViT in standard
@pytest.mark.workloads(*WORKLOADS)
def test_compile_before_conversion(optbench, workload, device):
    """Right order (convert, compile) vs wrong order (compile, run, convert): does the order matter?"""
    optbench.run(convert_before_compile(workload, device, workload.floor(lambda: 0.9)))
