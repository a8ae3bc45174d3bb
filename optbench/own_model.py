"""The user's own model as a workload: `--model SPEC --inputs SPEC`, loaded and checked before anything runs.

A SPEC is `package.module:function` or `path/to/file.py:function`. The model
function returns an `nn.Module` (on any device), the inputs function one batch
(a tensor, a tuple/list of positional arguments or a dict of keyword
arguments); either may take the device as its one argument. Everything that
can be wrong with them is found here and said in one line (`SpecError`), so a
run that cannot measure the model never starts and writes nothing.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from .accuracy import tensors
from .faults import first_lines
from .workload import Batch, InferenceWorkload, batch_to, forward

SEED = 0
NAME = re.compile(r"[A-Za-z0-9_.-]+")


class SpecError(Exception):
    """A SPEC that cannot be measured, in one line that names it and says what to fix."""


def load_function(spec: str, option: str) -> Callable[..., Any]:
    """The function `spec` names, imported from its module or file."""
    where, colon, name = spec.rpartition(":")
    if not colon or not where or not name.isidentifier():
        raise SpecError(f"{option} {spec!r}: expected package.module:function or path/to/file.py:function")
    if where.endswith(".py") or "/" in where:
        module = _module_from_file(Path(where), spec, option)
    else:
        try:
            module = importlib.import_module(where)
        except Exception as error:
            raise SpecError(
                f"{option} {spec!r} does not import: {type(error).__name__}: {first_lines(error, 1)}"
            ) from None
    function = getattr(module, name, None)
    if function is None:
        raise SpecError(f"{option} {spec!r} names no function: {where} has no attribute {name!r}")
    if not callable(function):
        raise SpecError(f"{option} {spec!r}: {name} is a {type(function).__name__}, not a function")
    return function


def _module_from_file(path: Path, spec: str, option: str) -> Any:
    if not path.is_file():
        raise SpecError(f"{option} {spec!r}: no such file {path}; give a path relative to where pytest runs")
    module_name = "optbench_own_" + re.sub(r"\W", "_", path.stem)
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    assert loader_spec is not None and loader_spec.loader is not None
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[module_name]
        raise SpecError(f"{option} {spec!r} does not import: {type(error).__name__}: {first_lines(error, 1)}") from None
    return module


def call_spec(function: Callable[..., Any], spec: str, option: str, device: torch.device) -> Any:
    """`function()`, or `function(device)` where it takes one argument; its own error is shown once, whole."""
    try:
        takes_device = any(
            parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
            for parameter in inspect.signature(function).parameters.values()
        )
    except (TypeError, ValueError):  # builtins without a signature
        takes_device = False
    try:
        torch.manual_seed(SEED)
        return function(device) if takes_device else function()
    except Exception as error:
        traceback.print_exc(file=sys.stderr)
        raise SpecError(
            f"{option} {spec!r} raised {type(error).__name__}: {first_lines(error, 1)} (traceback above)"
        ) from None


def _check_batch(batch: Any, spec: str) -> None:
    if not isinstance(batch, (torch.Tensor, tuple, list, dict)):
        raise SpecError(
            f"--inputs {spec!r} returned a {type(batch).__name__}: return one batch, as a tensor, a tuple/list "
            "(positional arguments) or a dict (keyword arguments)"
        )
    if not any(isinstance(leaf, torch.Tensor) for leaf in tree_leaves(batch)):
        raise SpecError(f"--inputs {spec!r} returned a batch with no tensor in it")


def load_workload(
    model_spec: str, inputs_spec: str | None, name: str | None, device: torch.device
) -> InferenceWorkload:
    """The user's model and inputs as a workload on `device`, after checking that its plain fp32 forward runs and
    repeats itself bitwise."""
    if inputs_spec is None:
        raise SpecError(f"--model {model_spec!r} needs --inputs SPEC: a function returning one batch for the model")
    if name is not None and not NAME.fullmatch(name):
        raise SpecError(f"--model-name {name!r}: use letters, digits, '_', '-' or '.' (it goes into test ids)")
    model = call_spec(load_function(model_spec, "--model"), model_spec, "--model", device)
    if not isinstance(model, nn.Module):
        raise SpecError(f"--model {model_spec!r} returned a {type(model).__name__}: return a torch.nn.Module")
    if model.training:
        raise SpecError(
            f"--model {model_spec!r} returned a model in training mode (dropout, batch-norm updates): "
            "return model.eval()"
        )
    batch = call_spec(load_function(inputs_spec, "--inputs"), inputs_spec, "--inputs", device)
    _check_batch(batch, inputs_spec)
    model, batch = model.to(device), batch_to(batch, device)
    _check_forward(model, batch, model_spec, inputs_spec)
    return InferenceWorkload(name or model_spec.rpartition(":")[2], lambda: copy.deepcopy(model), batch, own_model=True)


def _check_forward(model: nn.Module, batch: Batch, model_spec: str, inputs_spec: str) -> None:
    try:
        with torch.inference_mode():
            torch.manual_seed(SEED)
            first = tensors(forward(model, batch))
            torch.manual_seed(SEED + 1)
            second = tensors(forward(model, batch))
    except Exception as error:
        raise SpecError(
            f"--model {model_spec!r} rejects --inputs {inputs_spec!r} in its plain fp32 forward: "
            f"{type(error).__name__}: {first_lines(error, 1)}"
        ) from None
    if len(first) != len(second) or not all(
        a.shape == b.shape and torch.equal(a, b) for a, b in zip(first, second, strict=True)
    ):
        raise SpecError(
            f"--model {model_spec!r} gives different outputs for two identical calls: leave no randomness in "
            "its forward (dropout in train mode, sampling), so that a changed number means the technique changed it"
        )
