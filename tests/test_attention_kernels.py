"""Attention cases: fp64 accuracy catches an unscaled attention and a mask off by one; SDPA proves its fused kernel
and FlexAttention its block sparsity, and neither passes when it falls back to dense work."""

import dataclasses
import math

import pytest
import torch
from torch import nn
from transformers import PreTrainedModel

from fixtures.models import inference_workload
from optbench.techniques.attention import (
    BLOCK,
    AttentionShape,
    BlockSparse,
    Flex,
    FusedKernel,
    HandWrittenAttention,
    attention_workload,
    causal,
    dense_mask,
    flex_case,
    implementation_case,
    sdpa_case,
    sliding_window,
)

CPU = torch.device("cpu")
SHAPE = AttentionShape(1, 2, 256, 32)


class Unscaled(HandWrittenAttention):
    """Forgets the 1/sqrt(d): the softmax sharpens."""

    def forward(self, q, k, v):
        return super().forward(q * math.sqrt(q.shape[-1]), k, v)


def one_ahead(batch, head, query, key):
    """The causal mask off by one: each position also sees the next."""
    return query + 1 >= key


def accuracy_with(case, optimized):
    with torch.inference_mode():
        return case.accuracy(case.reference(), optimized(), case.fp64_output())


def test_sdpa_matches_fp64_attention_and_planted_mistakes_fail_accuracy():
    case = sdpa_case(SHAPE, torch.float32, CPU, floor=1.0)
    q, k, v = attention_workload(SHAPE, CPU).inputs
    assert accuracy_with(case, case.optimized).passed
    assert not accuracy_with(case, lambda: Unscaled()(q, k, v)).passed
    assert not accuracy_with(case, lambda: HandWrittenAttention(one_ahead)(q, k, v)).passed


def test_sdpa_shows_its_fused_kernel_and_the_math_fallback_is_not_in_effect():
    case = sdpa_case(SHAPE, torch.float32, CPU, floor=1.0)
    seen = FusedKernel()(case)
    assert seen.in_effect and "_scaled_dot_product_flash_attention_for_cpu" in seen.evidence
    from torch.nn.attention import SDPBackend, sdpa_kernel

    optimized = case.optimized

    def on_math():
        with sdpa_kernel(SDPBackend.MATH):
            return optimized()

    fallback = FusedKernel()(dataclasses.replace(case, optimized=on_math))
    assert not fallback.in_effect and fallback.evidence == "ran no fused attention kernel"


def block_rows(counts: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """A block mask's (query block x key block) booleans from its per-row block counts and key block indices."""
    blocks = torch.zeros(len(counts), indices.shape[-1], dtype=torch.bool)
    for row, (count, keys) in enumerate(zip(counts.tolist(), indices, strict=True)):
        blocks[row, keys[:count]] = True
    return blocks


def test_a_sliding_window_mask_is_the_same_dense_and_as_blocks():
    """The dense matrix SDPA reads, and the BLOCK x BLOCK tiles Flex computes: a tile it skips holds no allowed
    pair, a tile it computes unmasked (a full block) holds only allowed pairs, a partial tile both. A window of
    two blocks has all three kinds, so neither a block mask of another mask or size nor one that calls every tile
    partial passes."""
    window = dense_mask(sliding_window(4), 8, CPU)
    assert window.sum(dim=1).tolist() == [1, 2, 3, 4, 4, 4, 4, 4]
    assert torch.equal(dense_mask(causal, 8, CPU), torch.ones(8, 8, dtype=torch.bool).tril())
    shape = AttentionShape(1, 1, 4 * BLOCK, 32)
    mask = sliding_window(2 * BLOCK)
    tiles = dense_mask(mask, shape.seq, CPU).view(4, BLOCK, 4, BLOCK).transpose(1, 2)
    block_mask = Flex(mask, shape, CPU).block_mask
    partial = block_rows(block_mask.kv_num_blocks[0, 0], block_mask.kv_indices[0, 0])
    full = block_rows(block_mask.full_kv_num_blocks[0, 0], block_mask.full_kv_indices[0, 0])
    touched, whole = tiles.any(dim=(2, 3)), tiles.all(dim=(2, 3))
    assert torch.equal(full, whole) and torch.equal(partial, touched & ~whole)
    assert full.any() and partial.any() and not touched.all()  # all three kinds of tile


@pytest.mark.parametrize("mask", [causal, sliding_window(64)], ids=["causal", "sliding_window"])
def test_flex_attention_matches_dense_sdpa_and_skips_blocks(mask):
    case = flex_case(SHAPE, "m", mask, CPU, floor=1.0)
    with torch.inference_mode():
        assert accuracy_with(case, case.optimized).passed
    seen = [observer(case) for observer in case.in_effect]
    assert seen[0].in_effect, seen[0].text()


def test_a_block_mask_that_allows_everything_is_not_in_effect():
    everything = Flex(lambda batch, head, query, key: query >= 0, SHAPE, CPU)
    seen = BlockSparse(everything)(None)
    assert not seen.in_effect and "skips 0%" in seen.evidence


@pytest.fixture(scope="module")
def qwen2():
    return inference_workload("qwen2", "smoke", CPU)


def test_a_hugging_face_model_runs_eager_attention_against_its_sdpa_implementation(qwen2):
    case = implementation_case(qwen2, "sdpa", floor=1.0)
    seen = [observer(case) for observer in case.in_effect]
    assert [observation.in_effect for observation in seen] == [True, True], [o.text() for o in seen]
    assert "_scaled_dot_product_flash_attention_for_cpu" in seen[0].text()
    assert seen[1].text() == "reference eager attention ran no fused attention kernel"
    assert accuracy_with(case, case.optimized).passed


def test_an_implementation_that_was_never_set_is_not_in_effect(qwen2, monkeypatch):
    # The model's default (sdpa) stays on both sides: the reference runs the fused kernel too.
    monkeypatch.setattr(PreTrainedModel, "set_attn_implementation", lambda self, implementation: None)
    case = implementation_case(qwen2, "sdpa", floor=1.0)
    reference = case.in_effect[1](case)
    assert not reference.in_effect
    assert "reference eager attention ran aten::_scaled_dot_product_flash_attention_for_cpu" in reference.text()


def test_a_model_that_is_not_from_hugging_face_skips_with_the_reason():
    workload = inference_workload("ln-mlp", "smoke", CPU)
    assert isinstance(workload.model(), nn.Module)
    with pytest.raises(pytest.skip.Exception, match="attn_implementation sdpa does not apply to ln-mlp: it is not a"):
        implementation_case(workload, "sdpa", floor=1.0)
