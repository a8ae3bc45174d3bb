"""A pytest plugin, `-p planted_no_ops`: four optimizations made to silently do nothing, as a regression might.

Passed on the command line, so every pytest process of the run imports it and plants the same no-ops (the
harness may measure a case in a fresh process). Each one touches only its own technique, so one run can
plant all four and every catalogue case still fails for its own reason:

- autocast: `torch.autocast` enters and changes nothing;
- channels_last: `Module.to(memory_format=...)` and `Tensor.contiguous(memory_format=channels_last)` keep NCHW;
- set_to_none: `Optimizer.zero_grad` zero-fills whatever it is asked;
- bf16: `Module.to(torch.bfloat16)` keeps fp32, and the workload's inputs stay fp32 with it (a model fed bf16
  inputs would crash rather than pass, which is not the failure this plants).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch
from torch import nn

from optbench.measuring.workload import InferenceWorkload


class NoAutocast(contextlib.nullcontext):
    """Takes autocast's arguments and does nothing with them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()


def _without_channels_last_or_bf16(to: Any) -> Any:
    def planted_to(self: nn.Module, *args: Any, **kwargs: Any) -> nn.Module:
        kwargs.pop("memory_format", None)
        args = tuple(arg for arg in args if arg is not torch.bfloat16)
        if kwargs.get("dtype") is torch.bfloat16:
            del kwargs["dtype"]
        return to(self, *args, **kwargs) if args or kwargs else self

    return planted_to


def _contiguous_ignoring_channels_last(contiguous: Any) -> Any:
    def planted_contiguous(self: torch.Tensor, memory_format: torch.memory_format = torch.contiguous_format) -> Any:
        return (
            contiguous(self) if memory_format is torch.channels_last else contiguous(self, memory_format=memory_format)
        )

    return planted_contiguous


def _zero_filling(zero_grad: Any) -> Any:
    def planted_zero_grad(self: torch.optim.Optimizer, set_to_none: bool = True) -> None:
        zero_grad(self, set_to_none=False)

    return planted_zero_grad


def _inputs_not_in_bf16(inputs_as: Any) -> Any:
    def planted_inputs_as(
        self: InferenceWorkload, dtype: torch.dtype | None = None, memory_format: torch.memory_format | None = None
    ) -> torch.Tensor:
        return inputs_as(self, None if dtype is torch.bfloat16 else dtype, memory_format)

    return planted_inputs_as


def pytest_configure(config: pytest.Config) -> None:
    torch.autocast = NoAutocast  # type: ignore[misc,assignment]
    torch.amp.autocast = NoAutocast  # type: ignore[misc,assignment]
    nn.Module.to = _without_channels_last_or_bf16(nn.Module.to)  # type: ignore[method-assign]
    torch.Tensor.contiguous = _contiguous_ignoring_channels_last(torch.Tensor.contiguous)  # type: ignore[method-assign]
    torch.optim.Optimizer.zero_grad = _zero_filling(torch.optim.Optimizer.zero_grad)  # type: ignore[method-assign]
    InferenceWorkload.inputs_as = _inputs_not_in_bf16(InferenceWorkload.inputs_as)  # type: ignore[method-assign]
