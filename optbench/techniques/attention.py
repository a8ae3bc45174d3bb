"""Attention kernels: hand-written attention against `scaled_dot_product_attention`, and FlexAttention's block masks
against SDPA with the same mask dense.

Written by hand, causal attention is

    softmax(q k^T / sqrt(d) + M) v,    M[i, j] = 0 where j <= i, -inf elsewhere,

which holds the (seq x seq) score matrix of every head: batch * heads * seq^2
floats, written once, read by softmax, written again and read by the second
matmul. `torch.nn.functional.scaled_dot_product_attention` computes the same
in tiles (flash-style kernels: `_scaled_dot_product_flash_attention_for_cpu`
on CPUs; flash, memory-efficient and cuDNN kernels on CUDA), keeping a running
maximum and sum per row so the matrix never exists, and under `is_causal` it
skips the tiles above the diagonal. The longer the sequence, the more that
saves, in time and in peak memory. FlexAttention (`flex_attention`, compiled)
takes the mask as a function of (batch, head, query, key) and keeps one bit per
128 x 128 block (`create_block_mask`), so a sliding window skips every block
outside it, where SDPA given the same mask as a dense boolean matrix reads all
seq^2 entries and computes every tile.

Accuracy is held against the hand-written attention in float64; on CUDA each
SDPA backend can be forced (`torch.nn.attention.sdpa_kernel`), and one that
cannot run the shape or dtype is a skip naming torch's reason.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch import nn

from ..measuring.accuracy import REORDERED
from ..measuring.case import Case
from ..measuring.hardware import Requires, dtype_name
from ..measuring.in_effect import InEffect, Side, Sides
from ..measuring.workload import InferenceWorkload, not_applicable
from . import Technique

FUSED_ATTENTION = frozenset(
    {
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_scaled_dot_product_fused_attention_overrideable",
    }
)
"""SDPA's fused kernels as the profiler names them; its math fallback runs matmuls and a softmax instead. (A
dispatch mode meets `scaled_dot_product_attention` whole, before it chooses.)"""
SDPA_BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}
"""The `torch.nn.attention.SDPBackend` member a CUDA case may force, by the name its case id uses."""
BLOCK = 128
"""FlexAttention's block size: one mask bit per BLOCK x BLOCK tile."""


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    heads: int
    seq: int
    head_dim: int

    @property
    def name(self) -> str:
        return f"seq{self.seq}"

    def describe(self) -> str:
        return f"attention: batch {self.batch}, {self.heads} heads, seq {self.seq}, head dim {self.head_dim}"


def causal(batch: Any, head: Any, query: Any, key: Any) -> Any:
    return query >= key


def sliding_window(width: int) -> Callable[..., Any]:
    """Causal attention to the `width` most recent positions, the query's own included."""

    def mask(batch: Any, head: Any, query: Any, key: Any) -> Any:
        return (query >= key) & (query - key < width)

    return mask


@functools.cache
def dense_mask(mask: Callable[..., Any], seq: int, device: torch.device) -> torch.Tensor:
    """`mask` evaluated on every (query, key) pair: the boolean (seq x seq) matrix SDPA's `attn_mask` takes.
    Built once per mask and length, as a model keeps it in a buffer: building it is no part of either timed side
    (FlexAttention's block mask is built once too)."""
    positions = torch.arange(seq, device=device)
    return mask(None, None, positions[:, None], positions[None, :])


class HandWrittenAttention(nn.Module):
    """softmax(q k^T / sqrt(d) + mask) v with the score matrix materialised, as models wrote it before SDPA."""

    def __init__(self, mask: Callable[..., Any] = causal) -> None:
        super().__init__()
        self.mask = mask

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        allowed = dense_mask(self.mask, q.shape[-2], q.device)
        return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ v


class Sdpa(nn.Module):
    """`scaled_dot_product_attention`, causal, or with `mask` given dense; on `backend` when one is forced."""

    def __init__(self, mask: Callable[..., Any] | None = None, backend: str | None = None) -> None:
        super().__init__()
        self.mask = mask
        self.backend = backend

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.backend is None:
            return self._attention(q, k, v)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[self.backend])):
            return self._attention(q, k, v)

    def _attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.mask is None:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        allowed = dense_mask(self.mask, q.shape[-2], q.device)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


class Flex(nn.Module):
    """Compiled `flex_attention` with `mask` as a block mask built once for the shape."""

    def __init__(self, mask: Callable[..., Any], shape: AttentionShape, device: torch.device) -> None:
        super().__init__()
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        self.block_mask = create_block_mask(mask, None, None, shape.seq, shape.seq, device=str(device))
        self.attention = torch.compile(flex_attention)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.attention(q, k, v, block_mask=self.block_mask)


def attention_workload(
    shape: AttentionShape, device: torch.device, mask: Callable[..., Any] = causal
) -> InferenceWorkload:
    """q, k and v of `shape` (seeded), and the hand-written attention as the model whose fp64 run is the truth."""
    generator = torch.Generator().manual_seed(0)
    size = (shape.batch, shape.heads, shape.seq, shape.head_dim)
    q, k, v = (torch.randn(size, generator=generator).to(device) for _ in range(3))
    return InferenceWorkload(f"attention-{shape.name}", lambda: HandWrittenAttention(mask).to(device), (q, k, v))


@dataclass(frozen=True)
class FusedKernel:
    """In effect: one call of `side` ran a fused attention kernel (`fused`), or none (the reference of a case
    whose optimized side is what brings it), as the profiler saw it."""

    side: Side = "optimized"
    fused: bool = True
    technique: str = "scaled_dot_product_attention"

    def __call__(self, case: Sides) -> InEffect:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as recorded:
            case.optimized() if self.side == "optimized" else case.reference()
        fused = sorted({event.name for event in recorded.events()} & FUSED_ATTENTION)
        evidence = f"ran {', '.join(fused)}" if fused else "ran no fused attention kernel"
        technique = self.technique if self.side == "optimized" else f"reference {self.technique}"
        return InEffect(technique, bool(fused) == self.fused, evidence)


@dataclass(frozen=True)
class BlockSparse:
    """In effect: the block mask skips blocks (a mask that allows every block makes FlexAttention dense)."""

    flex: Flex

    def __call__(self, case: Sides) -> InEffect:
        sparsity = float(self.flex.block_mask.sparsity())
        evidence = f"skips {sparsity:.0f}% of the {BLOCK}x{BLOCK} blocks"
        return InEffect("FlexAttention block mask", sparsity > 0, evidence)


def backend_misfit(sdpa: Sdpa, inputs: tuple[torch.Tensor, ...]) -> str | None:
    """torch's reason why the forced backend cannot run these inputs; None where it can."""
    try:
        with torch.inference_mode():
            sdpa(*inputs)
    except RuntimeError as error:
        return str(error).splitlines()[0]
    return None


def sdpa_case(
    shape: AttentionShape, dtype: torch.dtype, device: torch.device, floor: float, backend: str | None = None
) -> Case:
    """Hand-written causal attention vs `scaled_dot_product_attention` (on `backend` where one is forced)."""
    workload = attention_workload(shape, device)
    inputs = workload.inputs_as(dtype)
    sdpa = Sdpa(backend=backend)
    if backend is not None and device.type == "cuda" and (why := backend_misfit(sdpa, inputs)):
        pytest.skip(f"SDPA backend {backend} cannot run {shape.name} in {dtype_name(dtype)}: {why}")
    return workload.case(
        workload.call(workload.model(dtype), inputs),
        workload.call(sdpa, inputs),
        accuracy=REORDERED,
        floor=floor,
        requires=Requires(dtype=dtype, cuda=backend is not None, why="SDPA's backends are CUDA kernels"),
        names=(f"hand-written {dtype_name(dtype)}", f"sdpa:{backend or 'auto'} {dtype_name(dtype)}"),
        variant=f"sdpa:{backend or 'auto'}",
        workload=shape.describe(),
        in_effect=() if backend == "math" else (FusedKernel(),),
    )


HF_IMPLEMENTATIONS = ("sdpa",)
"""Hugging Face attention implementations measured against the model's "eager" one (matmuls and a softmax)."""


def implementation_case(workload: InferenceWorkload, implementation: str, floor: float) -> Case:
    """A Hugging Face model's attention written out ("eager") vs `implementation`, chosen with
    `set_attn_implementation` on two copies of the workload's model."""
    technique = f"attn_implementation {implementation}"
    models = [workload.model(), workload.model()]
    if not all(callable(getattr(model, "set_attn_implementation", None)) for model in models):
        not_applicable(workload.name, technique, "it is not a Hugging Face model, whose attention can be chosen")
    for model, chosen in zip(models, ("eager", implementation), strict=True):
        try:
            model.set_attn_implementation(chosen)
        except (ValueError, ImportError) as error:
            not_applicable(workload.name, technique, str(error).splitlines()[0])
    eager, optimized = models
    return workload.case(
        workload.call(eager),
        workload.call(optimized),
        accuracy=REORDERED,
        floor=floor,
        names=("attn_implementation eager", technique),
        variant=technique,
        in_effect=(
            FusedKernel(technique=technique),
            FusedKernel("reference", fused=False, technique="eager attention"),
        ),
    )


def flex_case(
    shape: AttentionShape, mask_name: str, mask: Callable[..., Any], device: torch.device, floor: float
) -> Case:
    """SDPA with `mask` as a dense boolean matrix vs FlexAttention with it as a block mask, both fp32."""
    workload = attention_workload(shape, device, mask)
    flex = Flex(mask, shape, device)
    return workload.case(
        workload.call(Sdpa(mask)),
        workload.call(flex),
        accuracy=REORDERED,
        floor=floor,
        names=("sdpa dense mask", f"flex_attention {mask_name}"),
        variant=f"flex:{mask_name}",
        workload=shape.describe(),
        expect_compiled=True,
        in_effect=(BlockSparse(flex),),
    )


TECHNIQUE = Technique(
    "attention",
    "attention kernels: SDPA backends, FlexAttention's block masks, a Hugging Face model's attn_implementation",
    "PyTorch's SDPA and FlexAttention tutorials",
    order=90,
    recommended=True,
)
