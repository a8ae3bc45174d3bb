"""Activation checkpointing on any model: `torch.utils.checkpoint` (non-reentrant) around each of its repeated blocks.

A deep model is a stack of blocks of one class (transformer layers, residual
stages' blocks, feed-forward blocks) held in an `nn.Sequential` or
`nn.ModuleList`. Checkpointing each block keeps only its input for backward
and recomputes its activations there: peak memory falls to about one block's
activations plus the blocks' inputs, for one more forward of each block. The
stack is found by its shape, so a user's model needs no annotation: the
container with the most children of one class, at least two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn
from torch.utils.checkpoint import checkpoint


class Checkpointed:
    """A block's forward, run under non-reentrant checkpointing (PyTorch's recommended variant: it supports
    keyword arguments and inputs that need no gradient, and preserves the RNG state for dropout)."""

    def __init__(self, forward: Callable[..., Any]) -> None:
        self.forward = forward

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return checkpoint(self.forward, *args, use_reentrant=False, **kwargs)


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """The children of the `nn.Sequential` or `nn.ModuleList` in `model` holding the most modules of one class
    (at least two); empty where there is none."""
    best: list[nn.Module] = []
    for container in model.modules():
        if not isinstance(container, nn.Sequential | nn.ModuleList):
            continue
        children = list(container.children())
        for kind in {type(child) for child in children}:
            same = [child for child in children if type(child) is kind]
            if len(same) >= 2 and len(same) > len(best):
                best = same
    return best


def checkpoint_blocks(model: nn.Module, wrap: Callable[[Callable[..., Any]], Callable[..., Any]] = Checkpointed) -> int:
    """Run each of `model`'s repeated blocks under checkpointing, in place; returns how many."""
    blocks = repeated_blocks(model)
    for block in blocks:
        block.forward = wrap(block.forward)  # type: ignore[method-assign]
    return len(blocks)
