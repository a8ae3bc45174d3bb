"""Comparators: does the optimized output still give the right numbers?

Each comparator returns an `Accuracy`: a list of checks, the first being the
headline figure that is reported, stored in baselines and watched for drift.

Every figure is invariant to the scale of the outputs: multiplying both sides
(and the fp64 truth) by any c > 0 changes no verdict. A model of the user's,
built with random weights, may give outputs of 1e-10 or 1e6; an absolute
tolerance of 1e-3 passes any answer at the first, and torch's
`cosine_similarity`, which clamps each norm to at least eps = 1e-8, read
0.029 for two bitwise-equal outputs of about 5e-10 (issue 33). So cosines
and RMS are computed on values divided by their largest magnitude, with no
epsilon, and every absolute tolerance is taken relative to the reference's
RMS. Zero has a defined answer, never a silent 0 or pass: an all-zero output
equals an all-zero one (relative error 0, cosine 1), and nothing else is
close to zero (relative error inf, cosine 0).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch.overrides import TorchFunctionMode

from ..internals import tree_leaves, tree_map


@dataclass(frozen=True)
class Check:
    metric: str
    value: float
    limit: float
    lower_is_better: bool

    @property
    def passed(self) -> bool:
        if math.isnan(self.value):
            return False
        return self.value <= self.limit if self.lower_is_better else self.value >= self.limit

    def text(self) -> str:
        sign = "<=" if self.lower_is_better else ">="
        return f"{self.metric} {self.value:.4g} (limit {sign} {self.limit:.4g})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "value": self.value,
            "limit": self.limit,
            "lower_is_better": self.lower_is_better,
            "passed": self.passed,
        }


@dataclass(frozen=True)
class Accuracy:
    checks: tuple[Check, ...]

    @property
    def headline(self) -> Check:
        return self.checks[0]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [check for check in self.checks if not check.passed]

    @property
    def pair_failures(self) -> list[Check]:
        """The failures that compare the two outputs, without those that hold the first output (or the format
        it is rounded to) against the fp64 truth: comparing a reference with its own seeded rerun, those read
        the reference, not whether it repeats. (fp16 underflows on MobileNetV3 with random weights, whose
        outputs are about 1e-9: the format's own error is 1, and two bitwise-equal runs read "not deterministic".)"""
        return [check for check in self.failures if check.metric not in OF_THE_REFERENCE]


FORMAT_ERROR, REFERENCE_ERROR = "format_rel_rmse_vs_fp64", "fp32_rel_rmse_vs_fp64"
OF_THE_REFERENCE = frozenset({FORMAT_ERROR, REFERENCE_ERROR})
"""Checks of ReducedPrecision that read the reference output or its format against fp64, not the pair."""


class Comparator(Protocol):
    def __call__(self, reference: Any, optimized: Any, fp64: Any | None = None) -> Accuracy: ...


def as_containers(output: Any) -> Any:
    """`output` with dataclasses (transformers' ModelOutput among them) turned into tuples of their fields that are
    set, so that pytree sees every tensor inside them."""
    if hasattr(output, "to_tuple"):
        return tuple(as_containers(value) for value in output.to_tuple())
    if dataclasses.is_dataclass(output) and not isinstance(output, type):
        return tuple(as_containers(getattr(output, f.name)) for f in dataclasses.fields(output))
    if isinstance(output, (tuple, list)):
        return tuple(as_containers(value) for value in output)
    if isinstance(output, dict):
        return {key: as_containers(value) for key, value in output.items()}
    return output


def tensors(output: Any) -> list[torch.Tensor]:
    """The tensors of a model output (a tensor, or tuples, lists, dicts and dataclasses of them, such as a
    transformers ModelOutput), in order."""
    # Detached: a grad-enabled reference's outputs carry autograd history the comparison must not touch.
    leaves = [leaf.detach() for leaf in tree_leaves(as_containers(output)) if isinstance(leaf, torch.Tensor)]
    if not leaves:
        raise TypeError(f"output of type {type(output).__name__} holds no tensors to compare")
    return leaves


def _paired(reference: Any, optimized: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    ref, opt = tensors(reference), tensors(optimized)
    if len(ref) != len(opt):
        raise ValueError(f"reference gives {len(ref)} tensors, optimized gives {len(opt)}")
    for r, o in zip(ref, opt, strict=True):
        if r.shape != o.shape:
            raise ValueError(f"shape mismatch: reference {tuple(r.shape)} vs optimized {tuple(o.shape)}")
    return list(zip(ref, opt, strict=True))


def _flat64(values: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([v.detach().to("cpu", torch.float64).flatten() for v in values])


def _max_abs_diff(reference: Any, optimized: Any) -> float:
    return max(
        float((r.detach().double() - o.detach().to(r.device).double()).abs().max()) if r.numel() else 0.0
        for r, o in _paired(reference, optimized)
    )


def relative(value: float, scale: float) -> float:
    """`value` in units of `scale`; against a scale of zero, 0 stays 0 and anything else is inf (module docstring)."""
    if scale:
        return value / scale
    return 0.0 if value == 0 else math.inf


def _largest(values: torch.Tensor) -> float:
    return float(values.abs().max()) if values.numel() else 0.0


def _rms(values: torch.Tensor) -> float:
    """Root mean square, computed on the values divided by the largest: their squares neither underflow nor overflow
    fp64 at any scale."""
    largest = _largest(values)
    if largest == 0 or not math.isfinite(largest):
        return largest
    return largest * float(torch.sqrt(torch.mean((values / largest) ** 2)))


def rmse(output: Any, target: Any) -> float:
    pairs = _paired(target, output)
    return _rms(_flat64([o for _, o in pairs]) - _flat64([t for t, _ in pairs]))


def _direction(values: torch.Tensor) -> torch.Tensor:
    """`values` scaled to unit length, by way of the largest magnitude (no epsilon, no underflow)."""
    scaled = values / _largest(values)
    return scaled / torch.linalg.vector_norm(scaled)


def cosine_similarity(reference: Any, optimized: Any) -> float:
    """Cosine between all the outputs of each side, flattened; 1 for two all-zero outputs, 0 for one of them."""
    pairs = _paired(reference, optimized)
    ref, opt = _flat64([r for r, _ in pairs]), _flat64([o for _, o in pairs])
    ref_zero, opt_zero = _largest(ref) == 0, _largest(opt) == 0
    if ref_zero or opt_zero:
        return 1.0 if ref_zero and opt_zero else 0.0
    return float(torch.clamp(_direction(ref) @ _direction(opt), -1.0, 1.0))


def top1_agreement(reference: Any, optimized: Any) -> float:
    """Share of rows whose argmax over the last dimension agrees (the logits are the first output)."""
    ref, opt = _paired(reference, optimized)[0]
    return float((ref.argmax(dim=-1) == opt.to(ref.device).argmax(dim=-1)).float().mean())


def has_class_scores(output: Any) -> bool:
    """Whether the first output reads as scores over classes in its last dimension: [rows, classes] or [batch,
    tokens, vocabulary]. Maps of four or more dimensions are channel-first ([N, C, H, W]: a segmentation head's
    classes are its dimension 1), where an argmax over the last dimension picks a column, not a class: on
    torchvision's LR-ASPP with random weights it read 0.51 "top-1 agreement" for bf16 outputs of cosine 0.999997."""
    first = tensors(output)[:1]
    return bool(first) and first[0].is_floating_point() and first[0].dim() in (2, 3)


@dataclass(frozen=True)
class Exact:
    """Bitwise-identical outputs: for optimizations that must not change a single number."""

    def __call__(self, reference: Any, optimized: Any, fp64: Any | None = None) -> Accuracy:
        pairs = _paired(reference, optimized)
        identical = all(torch.equal(r, o.to(r.device)) and r.dtype == o.dtype for r, o in pairs)
        diff = 0.0 if identical else max(_max_abs_diff(reference, optimized), math.ulp(0.0))
        return Accuracy((Check("max_abs_diff", diff, 0.0, lower_is_better=True),))


def _identical(reference: Any, optimized: Any) -> bool:
    ref, opt = tensors(reference), tensors(optimized)
    return len(ref) == len(opt) and all(
        r.dtype == o.dtype and r.shape == o.shape and torch.equal(r, o) for r, o in zip(ref, opt, strict=True)
    )


@dataclass(frozen=True)
class SameBatches:
    """The same batches in the same order, bitwise: for how data is loaded, which must not change what is loaded."""

    def __call__(self, reference: list[Any], optimized: list[Any], fp64: Any | None = None) -> Accuracy:
        unmatched = abs(len(reference) - len(optimized))
        differing = unmatched + sum(not _identical(r, o) for r, o in zip(reference, optimized, strict=False))
        return Accuracy((Check("batches_differing", differing, 0, lower_is_better=True),))


@dataclass(frozen=True)
class Close:
    """Same numbers up to reordering of floating-point work, as in PyTorch's dynamo benchmark `same()`.

    Passes when allclose(rtol, atol); otherwise, given an fp64 reference, when
    the optimized output's RMSE against it is within `multiplier` times the
    reference's own RMSE (plus atol/10). `atol` is in units of the reference
    output's RMS, not absolute (module docstring): `allclose_excess` is the
    largest `|optimized - reference| - rtol |reference|` divided by that RMS.
    """

    rtol: float = 1e-4
    atol: float = 1e-4
    multiplier: float = 2.0

    def __call__(self, reference: Any, optimized: Any, fp64: Any | None = None) -> Accuracy:
        pairs = _paired(reference, optimized)
        worst = max(
            float(((o.to(r.device).double() - r.double()).abs() - self.rtol * r.double().abs()).max()) for r, o in pairs
        )
        scale = _rms(_flat64([r for r, _ in pairs]))
        allclose = Check("allclose_excess", relative(worst, scale), self.atol, lower_is_better=True)
        if allclose.passed or fp64 is None:
            return Accuracy((allclose,))
        ref_error = rmse(reference, fp64)
        limit = self.multiplier * ref_error + self.atol / 10 * scale
        return Accuracy((Check("rmse_vs_fp64", rmse(optimized, fp64), limit, lower_is_better=True),))


REORDERED = Close(rtol=1e-3, atol=1e-3)
"""Same numbers up to summation order (fusion, another layout or algorithm), or no further from fp64."""
TF32_MAX_RELATIVE_RMSE = 0.02
"""ReducedPrecision's fp64 limit for TF32: fp16's 10 mantissa bits, rounded only at matmul and conv inputs, so
no worse than fp16's calibrated 0.004-0.006 (see ReducedPrecision), with the same 3-4x headroom."""


def relative_rmse(output: Any, target: Any) -> float:
    """RMSE of `output` against `target`, relative to the RMS of `target`."""
    return relative(rmse(output, target), _rms(_flat64(tensors(target))))


class FormatRounding(TorchFunctionMode):
    """Rounds the floating-point result of every torch function to `dtype` and back: the format's own error.

    A model run in fp64 under this mode, from weights and inputs rounded to
    `dtype`, stores every intermediate as the reduced format would while
    computing each operation exactly; what it loses against plain fp64 is the
    error the format itself costs, with no kernel involved. Real reduced
    precision kernels accumulate in fp32 and store in `dtype`, so their error
    is of the same size: on CPU (bf16, random weights) 0.89x, 1.08x and 1.13x
    of it for the smoke ResNet, ViT and one-image ViT.
    """

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def _round(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.to(self.dtype).to(value.dtype)
        return value

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        return tree_map(self._round, func(*args, **(kwargs or {})))


@dataclass(frozen=True)
class ReducedPrecision:
    """Outputs computed in fewer bits: cosine to the reference, relative RMSE against fp64, top-1 agreement.

    With `format_output` (the model run under `FormatRounding` for the
    optimized dtype), the fp64 limit is `format_multiplier` times the format's
    own error, as PyTorch's dynamo harness holds a result to a multiple of its
    reference's error against fp64. Measured on CPU against fp64 (bf16, random
    weights, 1 and 2 threads alike): kernels 0.89-1.13x of the format's error,
    the same outputs 1% off (scaled by 1.01) 1.54-1.95x; 1.5 passes the first
    and fails the second. `max_relative_rmse` stays as a ceiling and is the
    limit where no format output is given (TF32, whose rounding sits inside
    the kernels). Without it, the bf16 figures were: CIFAR ResNet18 (64
    images) 0.0057, ResNet50 at 224 0.0053, ViT smoke 0.011, ViT-B/16 0.013;
    fp16 0.0039-0.0061; fp32 itself about 1e-6. The cosine limit is the one
    the seed's readers use; 0.75 top-1 allows two flipped rows of eight, where
    the flip rate measured was at most one row in 64.
    """

    min_cosine: float = 0.99
    max_relative_rmse: float = 0.05
    min_top1: float | None = 0.75
    format_output: Callable[[], Any] | None = None
    format_multiplier: float = 1.5

    def __call__(self, reference: Any, optimized: Any, fp64: Any | None = None) -> Accuracy:
        checks = [Check("cosine", cosine_similarity(reference, optimized), self.min_cosine, lower_is_better=False)]
        if fp64 is not None:
            limit = self.max_relative_rmse
            if self.format_output is not None:
                # Its floating leaves: the format's rounding leaves integer outputs (argmax, ids) where they were.
                format_error = relative_rmse([t for t in tensors(self.format_output()) if t.is_floating_point()], fp64)
                checks.append(Check(FORMAT_ERROR, format_error, self.max_relative_rmse, True))
                limit = min(limit, self.format_multiplier * format_error)
            checks.insert(1, Check("rel_rmse_vs_fp64", relative_rmse(optimized, fp64), limit, True))
            checks.append(Check(REFERENCE_ERROR, relative_rmse(reference, fp64), self.max_relative_rmse, True))
        if self.min_top1 is not None and has_class_scores(reference):
            checks.append(Check("top1_agreement", top1_agreement(reference, optimized), self.min_top1, False))
        return Accuracy(tuple(checks))


@dataclass(frozen=True)
class Leaves:
    """Outputs of any structure compared leaf by leaf, for models the suite did not write: integer leaves (token
    ids, argmax, masks) must be equal, floating leaves are held to `floating`, and where a floating leaf is 2-d
    (logits) and `floating` does not already report it, top-1 agreement over its rows is a check as well."""

    floating: Comparator
    min_top1: float = 0.75

    def __call__(self, reference: Any, optimized: Any, fp64: Any | None = None) -> Accuracy:
        ref, opt = tensors(reference), tensors(optimized)
        if len(ref) != len(opt):
            raise ValueError(f"reference gives {len(ref)} tensors, optimized gives {len(opt)}")
        exact = [(r, o) for r, o in zip(ref, opt, strict=True) if not r.is_floating_point()]
        ref_float, opt_float = [r for r in ref if r.is_floating_point()], [o for o in opt if o.is_floating_point()]
        checks: list[Check] = []
        if ref_float:
            truth = [t for t in tensors(fp64) if t.is_floating_point()] if fp64 is not None else None
            checks.extend(self.floating(ref_float, opt_float, truth).checks)
        if exact:
            differing = sum(not (r.shape == o.shape and torch.equal(r, o.to(r.device))) for r, o in exact)
            checks.append(Check("integer_leaves_differing", differing, 0, lower_is_better=True))
        logits = [(r, o) for r, o in zip(ref_float, opt_float, strict=True) if r.dim() == 2 and r.shape == o.shape]
        if logits and not any(check.metric == "top1_agreement" for check in checks):
            agreement = min(top1_agreement(r, o) for r, o in logits)
            checks.append(Check("top1_agreement", agreement, self.min_top1, lower_is_better=False))
        return Accuracy(tuple(checks))


@dataclass(frozen=True)
class TrainingOutcome:
    """What a short training run from a fixed seed produced."""

    losses: torch.Tensor
    """Training loss at every step, in order."""
    heldout_accuracy: float | None
    """None for a setup without held-out data."""
    parameters: tuple[torch.Tensor, ...]
    """The trained parameters, compared bitwise where the optimization must not change a number."""


def loss_path_deviation(optimized: TrainingOutcome, reference: TrainingOutcome) -> float:
    """The largest gap between two loss trajectories, relative to the reference's mean loss."""
    gap = float((optimized.losses.double() - reference.losses.double()).abs().max())
    return relative(gap, float(reference.losses.double().abs().mean()))


def parameter_deviation(optimized: TrainingOutcome, reference: TrainingOutcome) -> float:
    """The largest gap between two runs' trained parameters, relative to the reference's largest parameter."""
    gap = max(
        float((o.double() - r.double()).abs().max())
        for o, r in zip(optimized.parameters, reference.parameters, strict=True)
    )
    return relative(gap, max(float(r.double().abs().max()) for r in reference.parameters))


Deviation = Callable[[TrainingOutcome, TrainingOutcome], float]


@dataclass(frozen=True)
class TrainingAgreement:
    """Two training runs from one seed: the losses follow the same path and the optimized run learns as well.

    The loss path's limit bounds `loss_path_deviation`. With `jitter`, it is
    `spread_multiplier` times the reference's natural spread: how far the
    reference's own path moves when its initial weights are perturbed by
    `jitter` (relatively, under a few seeds) or it runs on another thread
    count, the largest of these, measured by `natural_spread` (bound by the
    training fixture). Rounding differences grow chaotically over a run, so a
    fixed limit is too tight for one workload or thread count and meaningless
    for another. Measured on the smoke ResNet (AVX512-BF16 CPU, 2 threads /
    1 thread): the fp32 path moved 0.05-0.28 / 0.07-0.21 under six seeds of
    2^-8 jitter and 0.09 between thread counts; autocast-bf16 moved it 0.25 /
    0.16, once-only jitter perturbing less than rounding at every step. Three
    times the largest of six draws leaves room for that and for a machine
    whose kernels round differently (0.37 / 0.47 on an AMX CPU against the
    old fixed 0.4); a run that stops learning also fails the held-out checks.
    On the smoke LN-MLP everything is 100x smaller (0.004 vs 0.002) and the
    limit follows it. Without a bound spread the fixed `loss_tolerance` is
    the limit; 0 demands bitwise-identical losses and parameters instead.
    `deviation` says what is compared: the loss path, or (for techniques that
    only reorder an optimizer's floating-point work, with a jitter of fp32's
    own unit roundoff) `parameter_deviation`, the trained parameters.
    Both runs must reach `min_accuracy` on held-out data (well over chance,
    or the comparison proves nothing), and the optimized one may trail the
    reference by at most `max_accuracy_drop`.
    """

    loss_tolerance: float
    max_accuracy_drop: float = 0.05
    min_accuracy: float | None = 0.25
    """2.5x chance on 10 classes: over 5 standard deviations above what guessing scores on 160 images. None where
    no chance level is known (the user's setup)."""
    jitter: float | None = None
    spread_multiplier: float = 3.0
    jitter_every_step: bool = False
    """Jitter the weights after every optimizer step too, not only at the start: rounding that differs in each
    step, as an optimizer that reorders its arithmetic does."""
    natural_spread: Callable[[float, Deviation, bool], float] | None = None
    """The reference's spread under `jitter`, by `deviation` (bound by the training workload)."""
    max_spread: float = 1.0
    """A reference whose path moves by its mean loss under rounding-sized jitter is chaos: nothing to compare."""
    deviation: Deviation = loss_path_deviation

    def _loss_path(self, reference: TrainingOutcome, optimized: TrainingOutcome) -> list[Check]:
        if self.loss_tolerance == 0 and self.jitter is None:
            identical = Exact()(
                (reference.losses, *reference.parameters), (optimized.losses, *optimized.parameters)
            ).headline
            return [identical]
        metric = self.deviation.__name__
        deviation = self.deviation(optimized, reference)
        if self.jitter is None or self.natural_spread is None:
            return [Check(metric, deviation, self.loss_tolerance, True)]
        spread = self.natural_spread(self.jitter, self.deviation, self.jitter_every_step)
        return [
            Check(metric, deviation, self.spread_multiplier * spread, True),
            Check(f"reference_{metric.removesuffix('_deviation')}_spread", spread, self.max_spread, True),
        ]

    def __call__(self, reference: TrainingOutcome, optimized: TrainingOutcome, fp64: Any | None = None) -> Accuracy:
        path, *spread = self._loss_path(reference, optimized)
        return Accuracy((path, *self._heldout(reference, optimized), *spread))

    def _heldout(self, reference: TrainingOutcome, optimized: TrainingOutcome) -> list[Check]:
        if reference.heldout_accuracy is None or optimized.heldout_accuracy is None:
            return []
        drop = reference.heldout_accuracy - optimized.heldout_accuracy
        checks = [Check("heldout_accuracy_drop", drop, self.max_accuracy_drop, lower_is_better=True)]
        if self.min_accuracy is not None:
            checks += [
                Check("heldout_accuracy", optimized.heldout_accuracy, self.min_accuracy, lower_is_better=False),
                Check("reference_heldout_accuracy", reference.heldout_accuracy, self.min_accuracy, False),
            ]
        return checks


@dataclass(frozen=True)
class TokenAgreement:
    """Greedy generations: the same tokens come out, and the logits that chose them agree.

    Outputs are `(tokens, logits)`: generated ids `[batch, steps]` and the
    logits of every step `[batch, steps, vocab]`, step 0 being the prefill's.
    The headline is the share of generated tokens inside each row's common
    prefix: once a near-tie flips one token everything after it differs, so
    matching positions past the flip would prove nothing. Logit gaps are taken
    relative to the largest reference logit, so one limit fits random and
    trained weights: at the prefill step (with cosine), and at every step whose
    preceding tokens agree, where both runs saw the same context.
    """

    min_agreement: float = 1.0
    max_logit_diff: float = 1e-4
    min_logit_cosine: float = 0.9999

    def __call__(
        self,
        reference: tuple[torch.Tensor, torch.Tensor],
        optimized: tuple[torch.Tensor, torch.Tensor],
        fp64: Any | None = None,
    ) -> Accuracy:
        (ref_tokens, opt_tokens), (ref_logits, opt_logits) = _paired(reference, optimized)
        prefix = common_prefix_lengths(ref_tokens, opt_tokens)
        steps = ref_tokens.shape[-1]
        same_context = torch.arange(steps, device=prefix.device) <= prefix[:, None]
        opt_logits = opt_logits.to(ref_logits.device)
        agreement = float(prefix.sum()) / (prefix.numel() * steps)
        prefill_diff = _relative_max_diff(ref_logits[:, 0], opt_logits[:, 0])
        prefill_cosine = cosine_similarity(ref_logits[:, 0], opt_logits[:, 0])
        agreed_diff = _relative_max_diff(ref_logits[same_context], opt_logits[same_context])
        return Accuracy(
            (
                Check("token_agreement", agreement, self.min_agreement, lower_is_better=False),
                Check("prefill_logit_rel_diff", prefill_diff, self.max_logit_diff, lower_is_better=True),
                Check("prefill_logit_cosine", prefill_cosine, self.min_logit_cosine, lower_is_better=False),
                Check("agreed_logit_rel_diff", agreed_diff, self.max_logit_diff, lower_is_better=True),
            )
        )


def common_prefix_lengths(reference: torch.Tensor, optimized: torch.Tensor) -> torch.Tensor:
    """Per row of `[batch, steps]` token ids, how many leading tokens agree."""
    return (reference == optimized.to(reference.device)).long().cumprod(dim=-1).sum(dim=-1)


def _relative_max_diff(reference: torch.Tensor, optimized: torch.Tensor) -> float:
    return relative(_max_abs_diff(reference, optimized), _largest(reference.detach().double()))
