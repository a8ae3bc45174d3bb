"""The training techniques of the catalogue, applied to any training setup: the built-in workloads' or the user's.

A `TrainingSetup` is what a training loop needs: a model, a loss from its
outputs and the batch, an optimizer factory, and data (a `DataLoader` or any
iterable of batches). `Tricks` names the techniques seed 000 switches on
(zero_grad(set_to_none=True), autocast with a GradScaler for fp16, a compiled
forward and loss, channels_last, pinned memory with non_blocking copies), and a
`Trainer` trains one copy of the setup's model with one set of them. Its timed
call is `steps_per_call` steps on fixed batches already on the device (or a
slice of an epoch through a DataLoader with worker processes, where pinned
memory is what is measured); its `train()` restarts from the initial weights
and runs the setup's epochs in a fixed order, returning the loss path (and
held-out accuracy where the setup has held-out data) for the accuracy check. A
learning-rate schedule steps once per epoch: the seed stepped its StepLR every
batch, which froze learning and left its accuracies at chance.

Data loading (PyTorch's tuning guide: worker processes, persistent workers,
prefetching) is timed over an epoch window instead: one pass from the
loader's `iter()` to its last batch (at most `WINDOW_BATCHES`), so a
non-persistent loader's worker start-up is in every call, and nothing is
loaded off the clock (workers idle between epochs). What is compared there is
the batches themselves, exactly: a loader with workers must deliver the same
batches as one without.

`TrainingWorkload.case` turns a setup and the tricks to compare into a `Case`,
for the files in `benchmarks/` and for `--train`. The trainer knows no trick:
each is a `TrainingTrick` registered with its technique (`optbench.techniques`),
whose hooks it composes; what stays here is the loop, its data paths (batches
on the device, a slice of an epoch through a pinned loader, an epoch window
through workers) and the training runs the accuracy check compares.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import functools
import itertools
import os
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, Sampler

from ..internals import (
    shut_down_workers,
)
from ..techniques import registered
from .accuracy import Comparator, Deviation, TrainingAgreement, TrainingOutcome, parameter_deviation
from .case import Case
from .hardware import HardwareClass, Requires, cuda_capability, dtype_name, dtype_unsupported_reason
from .in_effect import (
    Observer,
)
from .memory_payoff import MemoryPayoff
from .shared import RunShared
from .workload import OWN_MODEL_FLOOR, Batch, batch_to, not_applicable, operations_of

SEED = 0
FIXED_BATCHES = 64
"""At most this many batches are kept on the device for the timed steps (the built-in workloads' whole epoch)."""
WINDOW_BATCHES = 64
"""A data-loading case's timed epoch is at most this many batches of the setup's epoch."""


def training_forward(model: nn.Module, batch: Batch) -> Any:
    """The model's outputs on a training batch: a dict as keyword arguments (labels included, as Hugging Face
    models take them), a tuple/list as positional arguments without its last element (the target), a tensor
    as the one argument."""
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch[:-1])
    return model(batch)


def top1_correct(outputs: Any, batch: Batch) -> torch.Tensor:
    """Per example, whether the largest logit is the label, the batch's last element."""
    return outputs.argmax(dim=-1) == batch[-1]


@dataclass(frozen=True)
class TrainingSetup:
    """A training loop's parts, as `--train SPEC`'s function returns them (`from optbench import TrainingSetup`).

    The model is copied for every variant measured, so each starts from its weights; `optimizer` and
    `scheduler` build a fresh optimizer (from the parameters) and schedule (from the optimizer) for each copy.
    `data` is iterated once per epoch, in the same order every time (the global seed and a DataLoader's own
    generator are reset before each epoch)."""

    model: nn.Module
    loss: Callable[[Any, Batch], torch.Tensor]
    """The scalar loss from the model's outputs and the batch, e.g. `lambda logits, batch: cross_entropy(logits,
    batch[1])`, or `lambda outputs, batch: outputs.loss` for a Hugging Face model given labels."""
    optimizer: Callable[[Iterator[nn.Parameter]], torch.optim.Optimizer]
    data: Iterable[Batch]
    """A DataLoader, or any re-iterable collection of batches (tensors, tuples/lists or dicts)."""
    forward: Callable[[nn.Module, Batch], Any] = training_forward
    scheduler: Callable[[torch.optim.Optimizer], torch.optim.lr_scheduler.LRScheduler] | None = None
    """Stepped once per epoch."""
    epochs: int = 1
    """Epochs over `data` in the training run whose loss path is compared."""
    steps_per_call: int = 1
    """Training steps in one timed call."""
    heldout: Iterable[Batch] | None = None
    """Batches to score after training; without them only the loss path is compared."""
    correct: Callable[[Any, Batch], torch.Tensor] = top1_correct
    """Per example of a held-out batch, whether the outputs got it right."""


@dataclass(frozen=True)
class Loading:
    """How a DataLoader loads the setup's batches (PyTorch's tuning guide: asynchronous data loading)."""

    num_workers: int = 0
    persistent_workers: bool = False
    """Workers kept between epochs, so an epoch does not start new processes."""
    prefetch_factor: int | None = None
    """Batches each worker loads ahead; None is DataLoader's default (2 with workers)."""

    @property
    def label(self) -> str:
        """e.g. `workers:2+persistent+prefetch:4`."""
        parts = [f"workers:{self.num_workers}"]
        parts += ["persistent"] if self.persistent_workers else []
        parts += [f"prefetch:{self.prefetch_factor}"] if self.prefetch_factor is not None else []
        return "+".join(parts)


PINNED_LOADING = Loading(num_workers=2, persistent_workers=True)
"""Pinned memory is measured through workers, as the seed's loader had them."""


@dataclass(frozen=True)
class Tricks:
    """The speed tricks of seed 000 (and channels_last); all off is the common reference."""

    set_to_none: bool = False
    compile_mode: str | None = None
    autocast: torch.dtype | None = None
    channels_last: bool = False
    pin_memory: bool = False
    non_blocking: bool = False
    optimizer_impl: str | None = None
    """The optimizer's implementation (PyTorch's tuning guide): "for-loop", "foreach" or "fused"; None keeps
    whatever the setup's optimizer chose."""
    compile_optimizer: bool = False
    """torch.compile on the optimizer step (PyTorch's "Compiling the optimizer" recipe)."""
    loading: Loading | None = None
    """The DataLoader's worker settings; None: the setup's data as it is, and the training step timed alone."""
    checkpointing: bool = False
    """torch.utils.checkpoint (non-reentrant) around each of the model's repeated blocks
    (`optbench.measuring.checkpointing`)."""
    memory_budget: float | None = None
    """torch.compile's activation memory budget (0-1: the share of activations its partitioner may save for
    backward, recomputing the rest); with `compile_mode` only."""
    debug: str | None = None
    """A debug mode left on, which PyTorch's tuning guide says to turn off (one of DEBUG_MODES): the reference
    of the debug-mode cases, never a trick."""
    log_loss_every: int | None = None
    """Steps between reads of the running loss on the host (`.item()`, which waits for everything queued on the
    device): 1 is the read every step PyTorch's tuning guide warns about; N keeps the sum on the device and reads
    it once per N steps; None logs nothing."""
    new_tensors: str | None = None
    """Where the tensor each step makes for itself (a mask of ones over the batch's first input, as a loop builds
    an attention mask) is created: "host" (then copied with `.to(device)`) or "device" (`device=` at creation);
    None makes none."""

    def __post_init__(self) -> None:
        if self.debug is not None and self.debug not in DEBUG_MODES:
            raise ValueError(f"unknown debug mode {self.debug!r}; choose one of {', '.join(DEBUG_MODES)}")
        if self.log_loss_every is not None and self.log_loss_every < 1:
            raise ValueError(f"log_loss_every must be a number of steps >= 1, not {self.log_loss_every}")
        if self.new_tensors not in (None, *NEW_TENSOR_PLACES):
            raise ValueError(f"new_tensors is one of {', '.join(NEW_TENSOR_PLACES)}, not {self.new_tensors!r}")

    @property
    def label(self) -> str:
        """The tricks switched on, e.g. `set_to_none+compile:default+autocast:bf16`, or `all off`."""
        switched_on = {
            "set_to_none": self.set_to_none,
            f"compile:{self.compile_mode}": self.compile_mode is not None,
            f"autocast:{self.autocast and dtype_name(self.autocast)}": self.autocast is not None,
            "channels_last": self.channels_last,
            "pinned": self.pin_memory,
            "non_blocking": self.non_blocking,
            f"optimizer:{self.optimizer_impl}": self.optimizer_impl is not None,
            "compiled_optimizer_step": self.compile_optimizer,
            self.loading.label if self.loading else "": self.loading is not None,
            "checkpointing": self.checkpointing,
            f"memory_budget:{self.memory_budget}": self.memory_budget is not None,
            f"debug:{self.debug}": self.debug is not None,
            f"log_loss_every:{self.log_loss_every}": self.log_loss_every is not None,
            f"new_tensors:{self.new_tensors}": self.new_tensors is not None,
        }
        return "+".join(name for name, on in switched_on.items() if on) or "all off"


NEW_TENSOR_PLACES = ("host", "device")
OFF = Tricks()
DEBUG_MODES = ("anomaly_detection", "profiler", "fp64")
"""torch.autograd's anomaly detection around every step (it records each op's stack for backward and checks every
gradient for NaN); torch.profiler recording every step (entered around each, as a `with profile()` inside the
loop is, so its start and stop count too: the profiler is process-wide, and one left running across calls would
slow the other side as well); and the model and batches in float64, as torch.autograd.gradcheck needs them."""

# fp32 reordering (fusion, another memory layout) keeps a fixed limit in the style of PyTorch's dynamo
# benchmark: compiling the smoke ResNet moved its loss path by 0.12 of its mean and its held-out accuracy
# by 2 points; a run that stops learning moves the path by over 0.5. Autocast's limit is three times the
# fp32 reference's own spread under jitter the size of bf16's unit roundoff (2^-8), which also covers
# fp16's finer 2^-11 (see TrainingAgreement for the measurements).
REORDERED_FP32 = TrainingAgreement(loss_tolerance=0.25, max_accuracy_drop=0.1)
MIXED_PRECISION = TrainingAgreement(loss_tolerance=0.4, max_accuracy_drop=0.15, jitter=2**-8)
SPREAD_SEEDS = (1, 2, 3, 4, 5)
OPTIMIZER_ROUNDING = TrainingAgreement(
    loss_tolerance=0, max_accuracy_drop=0.05, jitter=2**-24, jitter_every_step=True, deviation=parameter_deviation
)
"""For techniques that reorder an optimizer's floating-point work (foreach, fused, compiled): the trained
parameters within three times how far fp32's own rounding moves the reference's: its weights jittered by the
unit roundoff after every step, as a step that rounds differently moves them (a one-time jitter at the start
moved a smoke AdamW run 2 ulps, every step 6-7; inductor's compiled AdamW step, 8), or another thread count."""


class Loaded(NamedTuple):
    """A batch as `with_loading`'s loader delivers it: with the id of the process that collated it."""

    pid: int
    batch: Batch


@dataclass(frozen=True)
class _Tagged:
    """`collate_fn`, tagging each batch with the collating process (a class, so spawned workers can pickle it)."""

    collate_fn: Callable[[list[Any]], Batch]

    def __call__(self, samples: list[Any]) -> Loaded:
        return Loaded(os.getpid(), self.collate_fn(samples))


class FirstBatches(Sampler[list[Any]]):
    """The first `count` batches of each of `batch_sampler`'s epochs."""

    def __init__(self, batch_sampler: Iterable[list[Any]], count: int) -> None:
        self.batch_sampler = batch_sampler
        self.count = count

    def __iter__(self) -> Iterator[list[Any]]:
        return itertools.islice(iter(self.batch_sampler), self.count)

    def __len__(self) -> int:
        return min(self.count, len(self.batch_sampler))  # type: ignore[arg-type]


def with_loading(data: DataLoader, loading: Loading, *, pin_memory: bool) -> DataLoader:
    """`data`'s batches in its order (each epoch its first `WINDOW_BATCHES`), loaded as `loading` says, into pinned
    memory or not; each arrives as a `Loaded`."""
    batching = (
        {"batch_size": data.batch_size, "drop_last": data.drop_last}
        if isinstance(data.dataset, IterableDataset)
        else {"batch_sampler": FirstBatches(data.batch_sampler, WINDOW_BATCHES)}
        if data.batch_sampler is not None
        else {"batch_size": None, "sampler": data.sampler}
    )
    prefetch = {"prefetch_factor": loading.prefetch_factor} if loading.prefetch_factor is not None else {}
    return DataLoader(
        data.dataset,
        **batching,
        collate_fn=_Tagged(data.collate_fn),
        num_workers=loading.num_workers,
        persistent_workers=loading.persistent_workers,
        pin_memory=pin_memory,
        worker_init_fn=data.worker_init_fn,
        multiprocessing_context=data.multiprocessing_context,
        generator=data.generator,
        **prefetch,
    )


class TrainingTrick:
    """One training technique's part in a `Trainer`, registered as its `Technique.trick` (`optbench.techniques`).

    A trick's hooks run only where it is `on` in a trainer's `Tricks`, and each leaves what it is given as it
    is unless it overrides it. The Trainer applies the registered tricks in the registry's order, so a wrapper
    registered later wraps an earlier one: autocast (seed 000, section 3) inside torch.compile (section 4)."""

    def on(self, tricks: Tricks) -> bool:
        """Whether `tricks` switch this trick on."""
        raise NotImplementedError

    def misfit(self, workload: TrainingWorkload, tricks: Tricks) -> str | None:
        """Why the trick cannot act on the workload's setup (nothing for it to change); None where it can."""
        return None

    def model(self, model: nn.Module, trainer: Trainer) -> nn.Module:
        """The trainer's copy of the model, on the device, before its optimizer is made."""
        return model

    def batch(self, batch: Batch, trainer: Trainer) -> Batch:
        """A batch just moved to the device."""
        return batch

    def optimizer(self, optimizer: torch.optim.Optimizer, trainer: Trainer) -> torch.optim.Optimizer:
        return optimizer

    def grad_scaler(self, trainer: Trainer) -> torch.amp.GradScaler | None:
        """The loss scaler the step needs; None for none."""
        return None

    def forward_loss(self, forward_loss: ForwardLoss, trainer: Trainer) -> ForwardLoss:
        """The step's forward and loss, from a batch on the device to the scalar loss."""
        return forward_loss

    def optimizer_step(self, step: Callable[[], None], trainer: Trainer) -> Callable[[], None]:
        return step

    def around_step(self, trainer: Trainer) -> contextlib.AbstractContextManager[Any]:
        """A context each training step runs in."""
        return contextlib.nullcontext()

    def in_step(self, batch: Batch, trainer: Trainer) -> Batch:
        """The batch inside the step, after the gradients are cleared and before the forward."""
        return batch

    def after_step(self, loss: torch.Tensor, trainer: Trainer) -> None:
        """Called with each step's detached loss."""

    def observers(self, reference: Trainer, optimized: Trainer) -> tuple[Observer, ...]:
        """What shows the trick acting where the optimized trainer switches it on (or, for a habit, off) against the
        reference: a no-op must fail the case as not in effect."""
        return ()


ForwardLoss = Callable[[Batch], torch.Tensor]


def registered_tricks() -> tuple[TrainingTrick, ...]:
    """Every registered training technique's trick, in the registry's order."""
    return tuple(technique.trick for technique in registered() if isinstance(technique.trick, TrainingTrick))


def tricks_on(tricks: Tricks) -> tuple[TrainingTrick, ...]:
    return tuple(trick for trick in registered_tricks() if trick.on(tricks))


class Trainer:
    """One copy of a setup's model trained with one set of tricks; see the module docstring."""

    def __init__(self, workload: TrainingWorkload, tricks: Tricks) -> None:
        self.workload = workload
        self.setup = workload.setup
        self.tricks = tricks
        self.hooks = tricks_on(tricks)
        model = copy.deepcopy(self.setup.model).to(workload.device).train()
        for trick in self.hooks:
            model = trick.model(model, self)
        self.model = model
        self.initial_state = {name: value.clone() for name, value in self.model.state_dict().items()}
        self.optimizer, self.scaler = self._optimizer()
        forward_loss: ForwardLoss = self._forward_loss
        # Through self.optimizer at each call: train() makes a new optimizer, whose step a schedule wraps.
        optimizer_step: Callable[[], None] = self._optimizer_step
        for trick in self.hooks:
            forward_loss = trick.forward_loss(forward_loss, self)
            optimizer_step = trick.optimizer_step(optimizer_step, self)
        self.forward_loss, self.optimizer_step = forward_loss, optimizer_step
        self.batches = [self.to_device(batch) for batch in workload.fixed_batches()]
        self._calls = 0
        self._host_batches: Generator[Batch, None, None] | None = None
        self._loader: DataLoader | None = None
        self.loaded_by: list[int] = []
        """The processes that collated the batches of the last timed call through a loader."""
        self._running_loss: torch.Tensor | None = None
        self._steps_unlogged = 0
        self.logged_loss: float | None = None
        """The mean loss of the last `log_loss_every` steps, as the host last read it."""

    def _optimizer(self) -> tuple[torch.optim.Optimizer, torch.amp.GradScaler | None]:
        optimizer = self.setup.optimizer(self.model.parameters())
        for trick in self.hooks:
            optimizer = trick.optimizer(optimizer, self)
        scalers = [trick.grad_scaler(self) for trick in self.hooks]
        return optimizer, next((scaler for scaler in scalers if scaler is not None), None)

    def _optimizer_step(self) -> None:
        self.optimizer.step()

    def _forward_loss(self, batch: Batch) -> torch.Tensor:
        return self.setup.loss(self.setup.forward(self.model, batch), batch)

    def to_device(self, batch: Batch) -> Batch:
        batch = batch_to(batch, self.workload.device, non_blocking=self.tricks.non_blocking)
        for trick in self.hooks:
            batch = trick.batch(batch, self)
        return batch

    def step(self, batch: Batch) -> torch.Tensor:
        with contextlib.ExitStack() as contexts:
            for trick in self.hooks:
                contexts.enter_context(trick.around_step(self))
            return self._step(batch)

    def _step(self, batch: Batch) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=self.tricks.set_to_none)
        for trick in self.hooks:
            batch = trick.in_step(batch, self)
        loss = self.forward_loss(batch)
        if self.scaler is None:
            loss.backward()
            self.optimizer_step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        for trick in self.hooks:
            trick.after_step(loss.detach(), self)
        return loss.detach()

    def log_loss(self, loss: torch.Tensor) -> None:
        """Sums `loss` on the device; every `log_loss_every` steps, reads the sum on the host (a plain
        `loss.item()` when that is every step) and logs the mean."""
        self._running_loss = loss if self._running_loss is None else self._running_loss + loss
        self._steps_unlogged += 1
        if self._steps_unlogged == self.tricks.log_loss_every:
            self.logged_loss = self._running_loss.item() / self._steps_unlogged
            self._running_loss, self._steps_unlogged = None, 0

    def _steps(self, batches: Iterable[Batch]) -> list[torch.Tensor]:
        return [self.step(batch) for batch in batches]

    def timed_steps(self) -> list[torch.Tensor]:
        """`steps_per_call` steps on batches already on the device: the training step alone."""
        count = self.setup.steps_per_call
        start = self._calls * count
        self._calls += 1
        return self._steps(self.batches[(start + i) % len(self.batches)] for i in range(count))

    def loader(self) -> DataLoader:
        """The setup's data loaded as the tricks say (with workers for pinned memory); one per trainer, so that
        persistent workers live across calls."""
        if self._loader is None:
            self._loader = self.workload.loading(self.tricks.loading or PINNED_LOADING, self.tricks.pin_memory)
        return self._loader

    def close(self) -> None:
        """Stops the worker processes of the trainer's loaders now.

        Left to the garbage collector, a DataLoader iterator in a reference cycle (the trainer and its batch
        generator make one) waits for each worker: the collector runs the weakref finalizers first, which queue
        each index queue's close sentinel (seen in the queue's buffer when `__del__` begins), so the stop signal
        `__del__` then sends comes after it and is never fed to the workers, and each is joined until
        DataLoader's 5 s status interval runs out and then terminated. Measured (2-core AMD EPYC, torch
        2.14.1): a `gc.collect()` after a case of 2 persistent workers took 10.3 s, and a harness test that happened
        to collect two such cases' garbage 20.7 s."""
        if self._host_batches is not None:
            self._host_batches.close()  # the chain it holds drops its iterator, which stops that epoch's workers
            self._host_batches = None
        if self._loader is not None:
            shut_down_workers(self._loader)

    def _unwrapped(self, loaded: Iterable[Loaded]) -> Generator[Batch, None, None]:
        for pid, batch in loaded:
            self.loaded_by.append(pid)
            yield batch

    def epoch_slice(self) -> list[torch.Tensor]:
        """`steps_per_call` steps fed by a DataLoader with worker processes, host-to-device copies included."""
        if self._host_batches is None:
            # One iterator across calls, a new epoch only when one ends: each iter() of a DataLoader with
            # persistent workers drops the batches its workers prefetched and restarts the epoch.
            self._host_batches = self._unwrapped(itertools.chain.from_iterable(itertools.repeat(self.loader())))
        self.loaded_by = []
        host_batches = itertools.islice(self._host_batches, self.setup.steps_per_call)
        return self._steps(self.to_device(batch) for batch in host_batches)

    def epoch_pass(self) -> list[torch.Tensor]:
        """One epoch window through the trainer's loader, from its iter() to its last batch."""
        self.loaded_by = []
        return self._steps(self.to_device(batch) for batch in self._unwrapped(self.loader()))

    def batches_seen(self, epochs: int = 2) -> list[Batch]:
        """The host batches of the first `epochs` epoch windows through the trainer's loader, in order."""
        loader = self.loader()
        return [batch for epoch in range(epochs) for _, batch in self.workload.epoch(epoch, loader)]

    def epoch_starts(self) -> list[float]:
        """Seconds from iter() to the first batch, for a new loader's first epoch and its second: worker
        start-up, which persistent workers pay once."""
        loader = self.workload.loading(self.tricks.loading or PINNED_LOADING, self.tricks.pin_memory)
        starts = []
        for _ in range(2):
            start = time.perf_counter()
            batches = iter(loader)
            next(batches)
            starts.append(time.perf_counter() - start)
            # Drained, so that no worker is still loading when the next epoch's clock starts.
            collections.deque(batches, maxlen=0)
        return starts

    def train(self, jitter: float = 0.0, seed: int = 0, every_step: bool = False) -> TrainingOutcome:
        """From the initial weights (each scaled by 1 + jitter * N(0, 1) from `seed`, and again after every
        optimizer step with `every_step`): the setup's epochs over its data, then held-out accuracy."""
        self.model.load_state_dict(self.initial_state)
        noise = torch.Generator().manual_seed(seed)
        if jitter:
            self._jitter(jitter, noise)
        self.model.zero_grad(set_to_none=True)
        self._running_loss, self._steps_unlogged = None, 0
        self.optimizer, self.scaler = self._optimizer()
        scheduler = self.setup.scheduler(self.optimizer) if self.setup.scheduler else None
        pinned = self.workload.loading(Loading(), pin_memory=True) if self.tricks.pin_memory else None
        losses: list[torch.Tensor] = []
        for epoch in range(self.setup.epochs):
            batches = self.workload.epoch(epoch, pinned)
            for batch in self._unwrapped(batches) if pinned else batches:
                losses.append(self.step(self.to_device(batch)))
                if jitter and every_step:
                    self._jitter(jitter, noise)
            if scheduler is not None:
                scheduler.step()
        return TrainingOutcome(
            losses=torch.stack(losses).float().cpu(),
            heldout_accuracy=self.heldout_accuracy(),
            parameters=tuple(p.detach().clone() for p in self.model.parameters()),
        )

    @torch.no_grad()
    def _jitter(self, jitter: float, noise: torch.Generator) -> None:
        for parameter in self.model.parameters():
            parameter.mul_(1 + jitter * torch.randn(parameter.shape, generator=noise).to(parameter))

    @torch.no_grad()
    def heldout_accuracy(self) -> float | None:
        if self.setup.heldout is None:
            return None
        self.model.eval()
        try:
            right = [
                self.setup.correct(self.setup.forward(self.model, batch), batch)
                for batch in map(self.to_device, self.setup.heldout)
            ]
        finally:
            self.model.train()
        return float(torch.cat([r.flatten() for r in right]).float().mean())


@dataclass
class TrainingWorkload:
    """A training setup on a device, and the training runs its cases share."""

    name: str
    setup: TrainingSetup
    device: torch.device
    data_name: str = "own"
    """Which data the setup trains on (synthetic, cifar10): part of what a shared training run is keyed by."""
    own_model: bool = False
    """The user's setup (--train): floors are not promises there, and a technique that raises on it is a finding
    ("does not work on this model"), not a harness failure."""
    outcomes: RunShared = field(default_factory=RunShared)
    """Training runs already made in this run: the all-off reference is shared by every case of a workload."""
    spreads: RunShared = field(default_factory=RunShared)
    """Natural spreads already measured this run, by workload, data, reference tricks and jitter."""
    rebuild: Callable[[], TrainingWorkload] | None = None
    """Builds this workload again in a new process, picklable (a partial of a module-level function): what DDP's
    spawned ranks on GPUs run."""

    def epoch(self, epoch: int, data: Iterable[Batch] | None = None) -> Iterator[Batch]:
        """Epoch `epoch` of `data` (default: the setup's), in the same order in every run."""
        data = self.setup.data if data is None else data
        torch.manual_seed(SEED + epoch)
        # The setup's own loader too: a loader `with_loading` made draws from its generator and sampler.
        for loader in (self.setup.data, data):
            if isinstance(loader, DataLoader) and loader.generator is not None:
                loader.generator.manual_seed(SEED + epoch)
            if isinstance(loader, DataLoader) and hasattr(loader.sampler, "set_epoch"):
                loader.sampler.set_epoch(epoch)  # DistributedSampler's convention, SeededSampler's too
        return iter(data)

    def fixed_batches(self) -> list[Batch]:
        return list(itertools.islice(self.epoch(0), FIXED_BATCHES))

    def loading(self, loading: Loading, pin_memory: bool) -> DataLoader:
        assert isinstance(self.setup.data, DataLoader), "loading is only measured through a DataLoader"
        return with_loading(self.setup.data, loading, pin_memory=pin_memory)

    def trainer(self, tricks: Tricks) -> Trainer:
        return Trainer(self, tricks)

    def outcome(self, trainer: Trainer) -> TrainingOutcome:
        return self.outcomes.get((self.name, self.data_name, trainer.tricks), trainer.train)

    def rerun(self, trainer: Trainer) -> TrainingOutcome:
        """A second training run of `trainer`'s tricks, made once per run: whether a reference repeats itself
        is a property of the workload and its tricks, not of the case comparing against it."""
        return self.outcomes.get((self.name, self.data_name, trainer.tricks, "rerun"), trainer.train)

    def natural_spread(self, tricks: Tricks, jitter: float, deviation: Deviation, every_step: bool = False) -> float:
        """How far the `tricks` run moves by `deviation` (its loss path, its trained parameters) under
        rounding-sized changes: weights jittered by `jitter` under `SPREAD_SEEDS` (at the start, or after every
        step too), and another thread count (1, or 2 where this run has 1)."""
        key = (self.name, self.data_name, tricks, jitter, deviation.__name__, every_step)
        return self.spreads.get(key, lambda: self._spread(tricks, jitter, deviation, every_step))

    def _spread(self, tricks: Tricks, jitter: float, deviation: Deviation, every_step: bool) -> float:
        trainer = self.trainer(tricks)
        reference = self.outcome(trainer)
        moved = [trainer.train(jitter, seed, every_step) for seed in SPREAD_SEEDS]
        threads = torch.get_num_threads()
        torch.set_num_threads(2 if threads == 1 else 1)
        try:
            moved.append(trainer.train())
        finally:
            torch.set_num_threads(threads)
        return max(deviation(run, reference) for run in moved)

    @functools.cached_property
    def operations(self) -> frozenset[str]:
        """The convolution and matmul ATen ops one plain forward and loss on the first batch runs."""
        model, batch = copy.deepcopy(self.setup.model).to(self.device), batch_to(self.first_batch(), self.device)
        return operations_of(lambda: self.setup.loss(self.setup.forward(model, batch), batch))

    def first_batch(self) -> Batch:
        return next(self.epoch(0))

    def floor(self, declared: Callable[[], float]) -> float:
        """The catalogue's `declared` floor for a built-in workload; for the user's setup, any gain."""
        return OWN_MODEL_FLOOR if self.own_model else declared()

    def misfit(self, tricks: Tricks) -> str | None:
        """Why `tricks` cannot act on this setup (a trick with nothing to change); None where they can."""
        return next(filter(None, (trick.misfit(self, tricks) for trick in tricks_on(tricks))), None)

    def case(
        self,
        optimized: Tricks,
        *,
        accuracy: Comparator,
        floor: float,
        names: tuple[str, str],
        variant: str = "",
        requires: Requires | None = None,
        reference: Tricks = OFF,
        floor_applies_on: tuple[HardwareClass, ...] = (),
        memory_payoff: MemoryPayoff | None = None,
    ) -> Case:
        """`reference` vs `optimized` training; through a DataLoader when the optimized run pins memory. On the
        user's setup, floors promise nothing, there is no chance level to beat, and a technique that raises is
        that case's outcome."""
        if misfit := self.misfit(optimized):
            not_applicable(self.name, optimized.label, misfit)
        slow, fast = self.trainer(reference), self.trainer(optimized)
        if isinstance(accuracy, TrainingAgreement):
            if accuracy.jitter is not None:
                accuracy = replace(accuracy, natural_spread=partial(self.natural_spread, reference))
            if self.own_model:
                accuracy = replace(accuracy, min_accuracy=None)
        loads = optimized.loading is not None
        timed: Callable[[Trainer], Callable[[], list[torch.Tensor]]] = (
            (lambda trainer: trainer.epoch_pass)
            if loads
            else (lambda trainer: trainer.epoch_slice)
            if optimized.pin_memory
            else (lambda trainer: trainer.timed_steps)
        )
        return Case(
            reference=timed(slow),
            optimized=timed(fast),
            reference_output=slow.batches_seen if loads else lambda: self.outcome(slow),
            reference_rerun=slow.batches_seen if loads else lambda: self.rerun(slow),
            optimized_output=fast.batches_seen if loads else lambda: self.outcome(fast),
            details=partial(epoch_starts, slow, fast) if loads else None,
            accuracy=accuracy,
            floor=floor,
            floor_applies_on=() if self.own_model else floor_applies_on,
            requires=requires or Requires(),
            names=names,
            variant=variant,
            workload=self.name if self.own_model else "",
            expect_compiled=(optimized.compile_mode is not None and reference.compile_mode is None)
            or (optimized.compile_optimizer and not reference.compile_optimizer),
            in_effect=in_effect(slow, fast),
            memory_payoff=memory_payoff,
            model_may_break=self.own_model,
            close=partial(close_trainers, slow, fast),
        )


def close_trainers(*trainers: Trainer) -> None:
    for trainer in trainers:
        trainer.close()


def epoch_starts(reference: Trainer, optimized: Trainer) -> dict[str, Any]:
    """Each side's seconds from a new loader's iter() to its first batch, in its first epoch and its second."""
    return {"epoch_start_s": {"reference": reference.epoch_starts(), "optimized": optimized.epoch_starts()}}


def in_effect(reference: Trainer, optimized: Trainer) -> tuple[Observer, ...]:
    """What shows each trick the optimized trainer switches on (and the reference leaves off) acting, or each
    habit it leaves off: every registered trick's observers. Compile is proven by the case's `expect_compiled`."""
    return tuple(observer for trick in registered_tricks() for observer in trick.observers(reference, optimized))


def stack(workload: TrainingWorkload) -> Tricks:
    """Every trick whose hardware this device has and that acts on the workload: seed 000's "all at once"."""
    device = workload.device
    cuda = device.type == "cuda"
    if dtype_unsupported_reason(torch.bfloat16, device) is None:
        autocast = torch.bfloat16
    elif cuda and cuda_capability(device) >= (7, 0):
        autocast = torch.float16
    else:
        autocast = None
    tricks = Tricks(
        set_to_none=True,
        compile_mode="default",
        autocast=autocast,
        # NHWC pays where tensor cores read it; on CPUs it measured slower (see test_channels_last_training).
        channels_last=cuda and cuda_capability(device) >= (7, 0),
        pin_memory=cuda,
        non_blocking=cuda,
    )
    if tricks.channels_last and workload.misfit(replace(OFF, channels_last=True)):
        tricks = replace(tricks, channels_last=False)
    if tricks.pin_memory and workload.misfit(replace(OFF, pin_memory=True)):
        tricks = replace(tricks, pin_memory=False, non_blocking=False)
    return tricks


AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def recipe_tricks(training: dict[str, Any] | None) -> Tricks:
    """The tricks a recipe's TRAINING settings name (`optbench.advise.recipe.TrainingRecipe`); all off for None."""
    if not training:
        return OFF
    return Tricks(**{**training, "autocast": AUTOCAST_DTYPES.get(training["autocast"])})
