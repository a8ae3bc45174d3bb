"""A recipe: the techniques measured to pay on one model, as a standalone Python file that applies them.

`advise` chooses a `Recipe` from the run's advice and writes its `source()`:
a file with no optbench import, so it can be copied into the user's code. It
applies the techniques in seed 004's order (dtype and memory format before
torch.compile, since compile specializes on both) and runs the model under the
autograd mode and fp32 precision settings that were measured to pay. Where the
training techniques were measured too (`--train`), its `training_step` makes
an optimizer step with those of seed 000's tricks that paid (`TRAINING`).
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field, replace
from types import ModuleType

from ..measuring.training import recipe_tricks
from .own_model import load_function

DTYPES = {"bf16": "torch.bfloat16", "fp16": "torch.float16"}
BACKENDS = {"oneDNN": "mkldnn", "cuBLAS": "cuda", "cuDNN": "cudnn"}
"""Display name of an fp32_precision backend -> its `torch.backends` attribute."""


@dataclass(frozen=True)
class TrainingRecipe:
    """Seed 000's training tricks that paid, as `optbench.measuring.training.Tricks` names them."""

    set_to_none: bool = False
    autocast: str | None = None
    """"bf16" or "fp16" (with a GradScaler)."""
    compile_mode: str | None = None
    channels_last: bool = False
    pin_memory: bool = False
    non_blocking: bool = False
    optimizer_impl: str | None = None
    """"foreach" or "fused": set on the optimizer's parameter groups, which torch.optim reads at every step."""
    compile_optimizer: bool = False

    @property
    def techniques(self) -> list[str]:
        """The tricks switched on, as the catalogue labels them (`optbench.measuring.training.Tricks.label`)."""
        return [] if self == TrainingRecipe() else recipe_tricks(asdict(self)).label.split("+")


@dataclass(frozen=True)
class Recipe:
    dtype: str | None = None
    """"bf16" or "fp16": model and floating inputs converted."""
    channels_last: bool = False
    compile_mode: str | None = None
    autograd: str | None = None
    """"inference_mode" or "no_grad"; None leaves autograd as the caller has it."""
    fp32_precision: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """(`torch.backends` path such as "mkldnn.matmul", value such as "bf16"), set around each call."""
    training: TrainingRecipe | None = None
    """The training tricks that paid; None where training was not measured."""

    @property
    def techniques(self) -> list[str]:
        """What the recipe applies, in its order."""
        applied = [self.dtype] if self.dtype else []
        applied += ["channels_last"] if self.channels_last else []
        applied += [f"compile:{self.compile_mode}"] if self.compile_mode else []
        applied += [self.autograd] if self.autograd else []
        applied += [f"{path} fp32_precision={value}" for path, value in self.fp32_precision]
        return applied

    def with_training(self, **changes: object) -> Recipe:
        """The recipe with its training part changed; unchanged where training was not measured."""
        return self if self.training is None else replace(self, training=replace(self.training, **changes))

    @property
    def training_techniques(self) -> list[str]:
        return self.training.techniques if self.training else []

    def source(self, header: str, measured: str) -> str:
        """The recipe file: `header` as its docstring, `measured` (the advice table) as its trailer."""
        precision = ", ".join(f'"{path}": "{value}"' for path, value in self.fp32_precision)
        return TEMPLATE.format(
            docstring=header.strip(),
            dtype=DTYPES[self.dtype] if self.dtype else "None",
            channels_last=self.channels_last,
            compile_mode=repr(self.compile_mode),
            autograd=repr(self.autograd),
            precision=precision,
            training=repr(asdict(self.training)) if self.training else "None",
            measured=measured.replace('"""', "'''"),
        )


TEMPLATE = '''"""{docstring}
"""

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_map

DTYPE = {dtype}
CHANNELS_LAST = {channels_last}
COMPILE_MODE = {compile_mode}
AUTOGRAD = {autograd}
FP32_PRECISION = {{{precision}}}
"""`torch.backends` path -> fp32_precision, set around each call and restored after it."""


def apply(model: torch.nn.Module) -> torch.nn.Module:
    """The model with the recipe applied: dtype and memory format first, then torch.compile (seed 004's order)."""
    if DTYPE is not None:
        model = model.to(DTYPE)
    if CHANNELS_LAST:
        model = model.to(memory_format=torch.channels_last)
    if COMPILE_MODE is not None:
        model = torch.compile(model, mode=COMPILE_MODE)
    return model


def prepare(batch: Any) -> Any:
    """One batch (tensor, tuple/list or dict) as the recipe's model takes it: floating tensors in DTYPE, 4-d ones
    in channels_last. Integer tensors (token ids, masks) are left as they are."""

    def convert(leaf: Any) -> Any:
        if not isinstance(leaf, torch.Tensor):
            return leaf
        if DTYPE is not None and leaf.is_floating_point():
            leaf = leaf.to(DTYPE)
        if CHANNELS_LAST and leaf.dim() == 4:
            leaf = leaf.contiguous(memory_format=torch.channels_last)
        return leaf

    return tree_map(convert, batch)


def backend(path: str) -> Any:
    """The `torch.backends` object at `path`, e.g. \"mkldnn.matmul\"."""
    owner = torch.backends
    for name in path.split("."):
        owner = getattr(owner, name)
    return owner


@contextlib.contextmanager
def settings() -> Iterator[None]:
    """The recipe's process-wide switches, set for the duration of a call."""
    saved = {{path: backend(path).fp32_precision for path in FP32_PRECISION}}
    try:
        for path, value in FP32_PRECISION.items():
            backend(path).fp32_precision = value
        yield
    finally:
        for path, value in saved.items():
            backend(path).fp32_precision = value


def run(model: torch.nn.Module, batch: Any) -> Any:
    """One forward of an `apply`-ed model on a `prepare`-d batch, under the recipe's settings."""
    autograd = {{"inference_mode": torch.inference_mode, "no_grad": torch.no_grad}}.get(AUTOGRAD)
    with settings(), autograd() if autograd else contextlib.nullcontext():
        if COMPILE_MODE == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        if isinstance(batch, dict):
            return model(**batch)
        if isinstance(batch, (tuple, list)):
            return model(*batch)
        return model(batch)


TRAINING = {training}
"""Seed 000's training tricks that paid (None: training was not measured): what `training_step` applies."""


def training_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: Callable[[Any, Any], torch.Tensor],
    forward: Callable[[torch.nn.Module, Any], Any],
) -> Callable[[Any], torch.Tensor]:
    """`step(batch)`: one optimizer step on a batch with TRAINING's tricks; returns the loss. `forward(model, batch)`
    gives the outputs and `loss(outputs, batch)` the scalar loss, as in your training loop. Load batches with
    `DataLoader(..., pin_memory=TRAINING["pin_memory"])` and move them with `non_blocking=TRAINING["non_blocking"]`."""
    tricks = TRAINING or {{}}
    device_type = next(model.parameters()).device.type
    dtype = {{"bf16": torch.bfloat16, "fp16": torch.float16}}.get(tricks.get("autocast"))
    # fp16 gradients underflow without loss scaling; bf16 has fp32's exponent range and needs none.
    scaler = torch.amp.GradScaler(device_type) if dtype == torch.float16 else None
    if tricks.get("channels_last"):
        model.to(memory_format=torch.channels_last)  # in place: the optimizer keeps its parameters

    def forward_loss(batch: Any) -> torch.Tensor:
        with torch.autocast(device_type, dtype=dtype, enabled=dtype is not None):
            return loss(forward(model, batch), batch)

    if tricks.get("compile_mode"):
        forward_loss = torch.compile(forward_loss, mode=tricks["compile_mode"])
    implementation = {{"foreach": {{"foreach": True, "fused": False}}, "fused": {{"foreach": False, "fused": True}}}}
    for group in optimizer.param_groups:
        group.update(implementation.get(tricks.get("optimizer_impl"), {{}}))

    def optimizer_step() -> None:
        optimizer.step()  # looked up at each call: a schedule attached later wraps it

    if tricks.get("compile_optimizer"):
        optimizer_step = torch.compile(optimizer_step)

    def step(batch: Any) -> torch.Tensor:
        if tricks.get("channels_last"):
            batch = tree_map(
                lambda leaf: leaf.contiguous(memory_format=torch.channels_last)
                if isinstance(leaf, torch.Tensor) and leaf.dim() == 4
                else leaf,
                batch,
            )
        optimizer.zero_grad(set_to_none=tricks.get("set_to_none", False))
        value = forward_loss(batch)
        if scaler is None:
            value.backward()
            optimizer_step()
        else:
            scaler.scale(value).backward()
            scaler.step(optimizer)
            scaler.update()
        return value.detach()

    return step


MEASURED = """
{measured}
"""
'''


def load_recipe(path: str) -> ModuleType:
    """The recipe file `path` (written by `advise`), imported; a `SpecError` where it is not one."""
    return sys.modules[load_function(f"{path}:apply", "--recipe").__module__]
