"""The user's own model as a workload: `--model SPEC --inputs SPEC` and `--train SPEC`, loaded and checked before
anything runs.

A SPEC is `package.module:function` or `path/to/file.py:function`. The model
function returns an `nn.Module` (on any device), the inputs function one batch
(a tensor, a tuple/list of positional arguments or a dict of keyword
arguments), the training function an `optbench.TrainingSetup`; each may take
the device as its one argument. Everything that can be wrong with them is
found here and said in one line (`SpecError`), so a run that cannot measure
the model never starts and writes nothing.
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
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import first_lines
from ..internals import tree_leaves
from ..measuring.accuracy import relative_rmse, tensors
from ..measuring.training import TrainingSetup, TrainingWorkload
from ..measuring.workload import Batch, InferenceWorkload, batch_to, forward

SEED = 0
SUMMATION_ORDER = 1e-5
"""Largest RMS difference between two identical calls of the user's model, relative to their outputs' RMS, that is
taken for a kernel adding up in another order from one call to the next (a multithreaded reduction that splits its
work by the threads free at the time; fp32 rounds at 6e-8 per operation) rather than randomness in its forward
(noise or dropout moves outputs by about their own size)."""
NAME = re.compile(r"[A-Za-z0-9_.-]+")


class SpecError(Exception):
    """A SPEC that cannot be measured, in one line that names it and says what to fix."""


def absolute_spec(spec: str) -> str:
    """`spec` with its file path, if it names one, made absolute: `path/to/file.py:function` or `file.py`."""
    where, colon, name = spec.rpartition(":")
    if not colon:
        return str(Path(spec).resolve()) if spec.endswith(".py") else spec
    if where.endswith(".py") or "/" in where:
        return f"{Path(where).resolve()}:{name}"
    return spec


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


def _check_batch(batch: Any, spec: str, option: str = "--inputs", what: str = "returned") -> None:
    if not isinstance(batch, (torch.Tensor, tuple, list, dict)):
        raise SpecError(
            f"{option} {spec!r} {what} a {type(batch).__name__}: make it one batch, a tensor, a tuple/list "
            "(positional arguments) or a dict (keyword arguments)"
        )
    if not any(isinstance(leaf, torch.Tensor) for leaf in tree_leaves(batch)):
        raise SpecError(f"{option} {spec!r} {what} a batch with no tensor in it")


def _check_name(name: str | None) -> None:
    if name is not None and not NAME.fullmatch(name):
        raise SpecError(f"--model-name {name!r}: use letters, digits, '_', '-' or '.' (it goes into test ids)")


def load_workload(
    model_spec: str, inputs_spec: str | None, name: str | None, device: torch.device
) -> InferenceWorkload:
    """The user's model and inputs as a workload on `device`, after checking that its plain fp32 forward runs and
    repeats itself bitwise."""
    if inputs_spec is None:
        raise SpecError(f"--model {model_spec!r} needs --inputs SPEC: a function returning one batch for the model")
    _check_name(name)
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
    return InferenceWorkload(
        name or model_spec.rpartition(":")[2],
        lambda: copy.deepcopy(model),
        batch,
        own_model=True,
        specs=(absolute_spec(model_spec), absolute_spec(inputs_spec)),
    )


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
    same_shapes = len(first) == len(second) and all(a.shape == b.shape for a, b in zip(first, second, strict=True))
    apart = relative_rmse(second, first) if same_shapes else float("inf")
    if not apart <= SUMMATION_ORDER:  # NaN outputs too
        raise SpecError(
            f"--model {model_spec!r} gives different outputs for two identical calls (RMS difference {apart:.2g} of "
            "the outputs' RMS): leave no randomness in its forward (dropout in train mode, sampling), so that a "
            "changed number means the technique changed it"
        )


def load_training(spec: str, name: str | None, device: torch.device) -> TrainingWorkload:
    """The user's training setup as a workload on `device`, after checking that one training step of its plain
    fp32 model runs (on a copy: the setup's model keeps its weights) and gives a scalar loss."""
    _check_name(name)
    setup = call_spec(load_function(spec, "--train"), spec, "--train", device)
    if not isinstance(setup, TrainingSetup):
        raise SpecError(
            f"--train {spec!r} returned a {type(setup).__name__}: return optbench.TrainingSetup(model=..., "
            "loss=..., optimizer=..., data=...)"
        )
    if not isinstance(setup.model, nn.Module):
        raise SpecError(f"--train {spec!r}: its model is a {type(setup.model).__name__}, not a torch.nn.Module")
    if setup.epochs < 1 or setup.steps_per_call < 1:
        raise SpecError(f"--train {spec!r}: epochs and steps_per_call must be at least 1")
    rebuild = partial(load_training, spec, name, device)
    workload = TrainingWorkload(name or spec.rpartition(":")[2], setup, device, own_model=True, rebuild=rebuild)
    try:
        batch = workload.first_batch()
    except StopIteration:
        raise SpecError(f"--train {spec!r}: its data gave no batch; give at least one") from None
    except Exception as error:
        raise SpecError(f"--train {spec!r}: its data raised {type(error).__name__}: {first_lines(error, 1)}") from None
    _check_batch(batch, spec, "--train", "gave data whose first batch is")
    _check_step(setup, batch_to(batch, device), spec, device)
    return workload


def _check_step(setup: TrainingSetup, batch: Batch, spec: str, device: torch.device) -> None:
    model = copy.deepcopy(setup.model).to(device).train()
    try:
        loss = setup.loss(setup.forward(model, batch), batch)
        if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.is_floating_point()):
            got = (
                f"a {loss.dtype} tensor of shape {tuple(loss.shape)}"
                if isinstance(loss, torch.Tensor)
                else f"a {type(loss).__name__}"
            )
            raise SpecError(
                f"--train {spec!r}: its loss gave {got}: return one floating-point number as a tensor "
                "(reduce a per-example loss with .mean())"
            )
        loss.backward()
        setup.optimizer(model.parameters()).step()
    except SpecError:
        raise
    except Exception as error:
        raise SpecError(
            f"--train {spec!r}: one plain fp32 training step fails: {type(error).__name__}: {first_lines(error, 1)}"
        ) from None
