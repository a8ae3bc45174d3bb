"""Attention kernels: hand-written causal attention -> `scaled_dot_product_attention`, short and long sequences,
fp32 and bf16 (each SDPA backend forced on CUDA); and SDPA with a dense mask -> FlexAttention with the same mask
as a block mask, causal and a sliding window (see `optbench.techniques.attention`); and a Hugging Face model's attention
written out ("eager") against its `sdpa` implementation, on a random-weight Qwen2 or the user's --model.

Outputs are held against hand-written attention in float64. The peak-memory
column shows the score matrix the hand-written side materialises and the
dense mask SDPA reads.
"""

from __future__ import annotations

import pytest
import torch

from optbench.techniques.attention import (
    HF_IMPLEMENTATIONS,
    SDPA_BACKENDS,
    TECHNIQUE,
    AttentionShape,
    causal,
    flex_case,
    implementation_case,
    sdpa_case,
    sliding_window,
)

pytestmark = pytest.mark.technique(TECHNIQUE)

SHAPES = {
    "smoke": {"short": AttentionShape(1, 4, 128, 64), "long": AttentionShape(1, 4, 1024, 64)},
    "standard": {"short": AttentionShape(4, 16, 512, 64), "long": AttentionShape(4, 16, 4096, 64)},
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
FLOORS = {"short": 1.0, "long": 1.5}
IMPLEMENTATION_FLOOR = 1.0
MASKS = {"causal": (causal, 1.0), "sliding_window:256": (sliding_window(256), 1.5)}


@pytest.mark.parametrize("backend", [None, *SDPA_BACKENDS], ids=lambda backend: backend or "auto")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length", ["short", "long"])
def test_sdpa(optbench, profile, device, length, dtype, backend):
    shape = SHAPES[profile.name][length]
    optbench.run(sdpa_case(shape, DTYPES[dtype], device, FLOORS[length], backend))


# Smoke: the causal mask; the sliding window (the same block-mask path, more blocks skipped) in standard.
@pytest.mark.smoke("causal")
@pytest.mark.parametrize("mask", MASKS)
def test_flex_attention(optbench, profile, device, mask):
    mask_mod, floor = MASKS[mask]
    optbench.run(flex_case(SHAPES[profile.name]["long"], mask, mask_mod, device, floor))


@pytest.mark.workloads("qwen2")
@pytest.mark.parametrize("implementation", HF_IMPLEMENTATIONS)
def test_attention_implementation(optbench, workload, implementation):
    optbench.run(implementation_case(workload, implementation, workload.floor(lambda: IMPLEMENTATION_FLOOR)))
