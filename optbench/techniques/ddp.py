"""DistributedDataParallel's settings (PyTorch's tuning guide), on any training setup over ranks of torch.distributed.

Each case runs the setup on `WORLD` ranks (`optbench.running.distributed.Ranks`: this
process is rank 0, the others forked from it; gloo on CPUs, NCCL with one GPU
per rank). Every rank holds one DDP copy of the setup's model per side of the
case, and its shard of each batch: the batch split along its first dimension,
so that the ranks together see what one process would. An optimizer step
accumulates gradients over `MICRO_BATCHES` consecutive batches of the setup.
The timed call is one such step on every rank, from rank 0's command broadcast
to a barrier after the optimizer step, so rank 0's clock holds the slowest
rank's step; the harness pairs and interleaves the two sides like any case.

What is compared, from the tuning guide's DDP advice:
- `no_sync`: the first M-1 micro-batches' backward inside `model.no_sync()`,
  so gradients are all-reduced once per step instead of M times;
- `gradient_as_bucket_view`: gradients are views into DDP's communication
  buckets, which saves copying them in and out (and their memory);
- `static_graph`: DDP told the graph never changes, so it stops checking for
  unused parameters and can plan bucket order once;
- `bucket_cap_mb`: the size at which a bucket of gradients is all-reduced;
  smaller ones start communicating earlier in backward, larger ones make
  fewer calls.

Accuracy. After `steps` optimizer steps from the initial weights, the ranks'
parameters must be bitwise equal (DDP hands every rank the same averaged
gradient), and rank 0's must be within `OPTIMIZER_ROUNDING` of one process
training on the same micro-batches whole. For a loss that is a mean over the
batch and equal shards, the mean of the ranks' gradients is the whole
micro-batch's gradient; the differences are the order of floating-point
additions, which the reference's own natural spread under per-step rounding
jitter bounds. A loss that sums over the batch, or BatchNorm statistics taken
per rank, make the DDP run differ for real, and the check says so.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..internals import ddp_logging_data, tree_leaves, tree_map
from ..measuring.accuracy import Check, TrainingOutcome
from ..measuring.case import Case, Observed
from ..measuring.hardware import HardwareClass, Requires
from ..measuring.in_effect import InEffect, Side, Sides
from ..measuring.training import OFF, OPTIMIZER_ROUNDING, TrainingSetup, TrainingWorkload
from ..measuring.workload import Batch, batch_to, not_applicable
from ..running.distributed import Ranks, world_size_misfit
from . import Technique

WORLD = 2
MICRO_BATCHES = 4
"""Micro-batches per optimizer step, in every variant: gradient accumulation is where no_sync matters."""
ACCURACY_STEPS = 4
"""Optimizer steps from the initial weights whose parameters are compared."""
RANK_TIMEOUT_S = 120.0
"""A rank that does not answer a collective within this fails the case (its first step may compile nothing, but a
2-core machine shared by the ranks and a busy harness can be slow)."""
ALL_REDUCE_EVENT = ":all_reduce"
"""The profiler names a process group's all-reduce `gloo:all_reduce` or `nccl:all_reduce`."""
DEFAULT_BUCKET_CAP_MB = 25


@dataclass(frozen=True)
class DdpSettings:
    """The options of one side: DistributedDataParallel's own, and whether accumulation skips the all-reduce."""

    no_sync: bool = False
    gradient_as_bucket_view: bool = False
    static_graph: bool = False
    bucket_cap_mb: float | None = None
    """None: DDP's default (25 MB)."""

    @property
    def label(self) -> str:
        """The options set, e.g. `no_sync+bucket_cap_mb:1`, or `DDP defaults`."""
        switched_on = {
            "no_sync": self.no_sync,
            "gradient_as_bucket_view": self.gradient_as_bucket_view,
            "static_graph": self.static_graph,
            f"bucket_cap_mb:{self.bucket_cap_mb:g}" if self.bucket_cap_mb else "": self.bucket_cap_mb is not None,
        }
        return "+".join(name for name, on in switched_on.items() if on) or "DDP defaults"

    def wrap(self, model: nn.Module, device: torch.device) -> DistributedDataParallel:
        options = {} if self.bucket_cap_mb is None else {"bucket_cap_mb": self.bucket_cap_mb}
        return DistributedDataParallel(
            model,
            device_ids=[device] if device.type == "cuda" else None,
            gradient_as_bucket_view=self.gradient_as_bucket_view,
            static_graph=self.static_graph,
            **options,
        )


@dataclass(frozen=True)
class Trained:
    """One side's training run on the ranks, as rank 0 saw it."""

    outcome: TrainingOutcome
    rank_gap: float
    """The largest difference of any parameter between rank 0 and another rank."""


def shard(batch: Batch, rank: int, world: int) -> Batch:
    """Rank `rank`'s part of `batch`: each tensor's `rank`-th of `world` equal slices along its first dimension."""
    return tree_map(lambda leaf: leaf.chunk(world)[rank] if isinstance(leaf, torch.Tensor) else leaf, batch)


def shard_misfit(batch: Batch, world: int) -> str | None:
    """Why `batch` cannot be split evenly over `world` ranks; None where it can."""
    sizes = {leaf.shape[0] if leaf.dim() else 0 for leaf in tree_leaves(batch) if isinstance(leaf, torch.Tensor)}
    if len(sizes) != 1 or (size := sizes.pop()) % world:
        return f"its batches ({', '.join(map(str, sorted(sizes)))} rows) do not split evenly over {world} ranks"
    return None if size else "its batches are scalars, which do not split over ranks"


class Replica:
    """One side's DDP model and optimizer on one rank."""

    def __init__(self, setup: TrainingSetup, settings: DdpSettings, device: torch.device) -> None:
        self.setup = setup
        self.settings = settings
        self.model = settings.wrap(copy.deepcopy(setup.model).to(device).train(), device)
        self.initial_state = {name: value.clone() for name, value in self.model.module.state_dict().items()}
        self.optimizer = setup.optimizer(self.model.parameters())

    def step(self, micro_batches: list[Batch]) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        losses = []
        for index, batch in enumerate(micro_batches):
            last = index == len(micro_batches) - 1
            skip = self.settings.no_sync and not last
            with self.model.no_sync() if skip else contextlib.nullcontext():
                loss = self.setup.loss(self.setup.forward(self.model, batch), batch)
                loss.backward()
            losses.append(loss.detach())
        self.optimizer.step()
        return torch.stack(losses).sum()

    def train(self, steps: list[list[Batch]]) -> TrainingOutcome:
        self.model.module.load_state_dict(self.initial_state)
        self.optimizer = self.setup.optimizer(self.model.parameters())
        losses = torch.stack([self.step(step) for step in steps])
        parameters = tuple(p.detach().clone() for p in self.model.module.parameters())
        return TrainingOutcome(losses=losses.float().cpu(), heldout_accuracy=None, parameters=parameters)


class DdpProgram:
    """What every rank runs: commands 0/1 time one step of the reference/optimized side, 2/3 train that side from
    its initial weights and return rank 0's `Trained`."""

    def __init__(self, workload: TrainingWorkload, sides: tuple[DdpSettings, DdpSettings], rank: int) -> None:
        device = workload.device
        if device.type == "cuda":
            device = torch.device("cuda", rank)
        micro = [batch_to(shard(batch, rank, WORLD), device) for batch in workload.fixed_batches()]
        self.steps = [micro[i : i + MICRO_BATCHES] for i in range(0, len(micro) - MICRO_BATCHES + 1, MICRO_BATCHES)]
        self.sides = [Replica(workload.setup, settings, device) for settings in sides]
        self._calls = 0

    def run(self, command: int) -> Any:
        side = self.sides[command % 2]
        if command < 2:
            side.step(self.steps[self._calls % len(self.steps)])
            self._calls += 1
            dist.barrier()
            return None
        outcome = side.train(self.steps[:ACCURACY_STEPS])
        return Trained(outcome, rank_gap(outcome.parameters))


def spawned_program(
    rebuild: Callable[[], TrainingWorkload], sides: tuple[DdpSettings, DdpSettings], rank: int
) -> DdpProgram:
    """A rank's program in a spawned process, from the workload built again there (same seeds, same batches)."""
    return DdpProgram(rebuild(), sides, rank)


def rank_gap(parameters: tuple[torch.Tensor, ...]) -> float:
    """The largest difference between this rank's parameters and any other rank's (a collective)."""
    flat = torch.cat([p.detach().flatten().float() for p in parameters])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    return max(float((other - flat).abs().max()) for other in gathered)


def single_process(workload: TrainingWorkload, steps: int) -> TrainingWorkload:
    """The setup trained in one process on the same micro-batches whole: the truth DDP is compared with. One
    "batch" of it is a step's micro-batches, whose losses are summed, so one backward accumulates their gradients
    as the ranks' backward calls do."""
    fixed = workload.fixed_batches()
    setup = workload.setup
    grouped = [fixed[i : i + MICRO_BATCHES] for i in range(0, MICRO_BATCHES * steps, MICRO_BATCHES)]
    whole = replace(
        setup,
        data=grouped,
        forward=lambda model, micro: [setup.forward(model, batch) for batch in micro],
        loss=lambda outputs, micro: sum(setup.loss(o, b) for o, b in zip(outputs, micro, strict=True)),
        epochs=1,
        heldout=None,
        steps_per_call=1,
    )
    return replace(workload, name=f"{workload.name} (one process)", setup=whole)


def misfit(workload: TrainingWorkload) -> str | None:
    """Why DDP cannot run `workload` on this machine; None where it can."""
    if why := world_size_misfit(workload.device.type, WORLD):
        return why
    if workload.device.type == "cuda" and workload.rebuild is None:
        return "its ranks on GPUs are spawned, and this workload has no way to rebuild itself in a new process"
    if len(workload.fixed_batches()) < MICRO_BATCHES * ACCURACY_STEPS:
        needed = MICRO_BATCHES * ACCURACY_STEPS
        return f"its data has fewer than {needed} batches ({ACCURACY_STEPS} steps of {MICRO_BATCHES} micro-batches)"
    return shard_misfit(workload.first_batch(), WORLD)


@dataclass(frozen=True, eq=False)
class DdpInEffect:
    """One timed step of a side, on rank 0 under the profiler: the all-reduces that ran (once per bucket per
    synchronizing backward), and the options DDP's reducer reports (its logging data) and the module holds."""

    ranks: Ranks
    model: Callable[[], DistributedDataParallel]
    settings: DdpSettings
    side: Side

    def __call__(self, case: Sides) -> InEffect:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            self.ranks.call(0 if self.side == "reference" else 1)
        reduces = sum(event.name.endswith(ALL_REDUCE_EVENT) for event in profile.events())
        model = self.model()
        technique = f"{self.side} DDP({self.settings.label})"
        logged = ddp_logging_data(model)
        if logged is None:
            return InEffect(technique, False, "gave no reducer logging data to read its options from")
        sizes = logged["rebuilt_bucket_sizes"] if logged.get("has_rebuilt_buckets") else logged["bucket_sizes"]
        buckets = len(str(sizes).split(","))
        cap_mb = logged["bucket_cap_bytes"] / 2**20
        expected = {
            "all-reduces": buckets * (1 if self.settings.no_sync else MICRO_BATCHES),
            "gradient_as_bucket_view": self.settings.gradient_as_bucket_view,
            "static_graph": self.settings.static_graph,
            "bucket cap MB": self.settings.bucket_cap_mb or DEFAULT_BUCKET_CAP_MB,
        }
        seen = {
            "all-reduces": reduces,
            "gradient_as_bucket_view": bool(logged["gradient_as_bucket_view"]),
            "static_graph": model.static_graph,
            "bucket cap MB": round(cap_mb, 3),
        }
        evidence = (
            f"all-reduced {reduces} times in a step of {MICRO_BATCHES} micro-batches over {buckets} buckets; "
            + ", ".join(f"{name} {value}" for name, value in list(seen.items())[1:])
        )
        acted = all(seen[name] == value for name, value in expected.items() if name != "bucket cap MB")
        return InEffect(technique, acted and abs(cap_mb - expected["bucket cap MB"]) < 1e-3, evidence)


@contextlib.contextmanager
def ddp_case(
    workload: TrainingWorkload,
    optimized: DdpSettings,
    *,
    reference: DdpSettings | None = None,
    floor: float,
    names: tuple[str, str],
    variant: str,
    floor_applies_on: tuple[HardwareClass, ...] = (),
) -> Iterator[Case]:
    """`reference` vs `optimized` DDP settings on the workload's setup, as a case whose ranks live for the `with`."""
    reference = reference or DdpSettings()
    if why := misfit(workload):
        not_applicable(workload.name, f"DDP {optimized.label}", why)
    whole = single_process(workload, ACCURACY_STEPS)
    truth = functools.cache(partial(whole.trainer, OFF))  # built when first compared, after the timed rounds
    trained: dict[int, Trained] = {}
    sides = (reference, optimized)
    start = "fork"
    build: Callable[[int], DdpProgram] = partial(DdpProgram, workload, sides)
    if workload.device.type == "cuda":
        # This process has used CUDA, which a forked rank cannot: spawned ranks rebuild the workload instead.
        assert workload.rebuild is not None  # misfit() said so otherwise
        start, build = "spawn", partial(spawned_program, workload.rebuild, sides)
    with Ranks(build, WORLD, device_type=workload.device.type, timeout_s=RANK_TIMEOUT_S, start_method=start) as ranks:
        program = ranks.program
        assert isinstance(program, DdpProgram)

        def train(command: int) -> Trained:
            if command not in trained:
                trained[command] = ranks.call(command)
            return trained[command]

        yield Case(
            reference=lambda: ranks.call(0),
            optimized=lambda: ranks.call(1),
            reference_output=lambda: whole.outcome(truth()),
            reference_rerun=lambda: whole.rerun(truth()),
            optimized_output=lambda: train(3).outcome,
            accuracy=replace(OPTIMIZER_ROUNDING, natural_spread=partial(whole.natural_spread, OFF)),
            floor=floor,
            floor_applies_on=() if workload.own_model else floor_applies_on,
            requires=Requires(),
            names=names,
            variant=variant,
            workload=workload.name if workload.own_model else "",
            details=lambda: {"rank_gap": {"reference": train(2).rank_gap, "optimized": train(3).rank_gap}},
            checks=(ranks_agree,),
            in_effect=tuple(
                DdpInEffect(ranks, lambda side=side: program.sides[side].model, settings, label)
                for side, settings, label in ((0, reference, "reference"), (1, optimized, "optimized"))
            ),
            model_may_break=workload.own_model,
        )


def ranks_agree(observed: Observed) -> Check:
    """Every rank ends each side's training run with rank 0's parameters, bitwise."""
    gaps = observed.details["rank_gap"] if observed.details else {"missing": float("nan")}
    return Check("rank_parameter_gap", max(gaps.values()), 0.0, lower_is_better=True)


TECHNIQUE = Technique(
    "ddp",
    "DistributedDataParallel's options (no_sync, gradient_as_bucket_view, static_graph, bucket size) vs its defaults",
    "PyTorch's tuning guide",
    order=400,
    training=True,
)
