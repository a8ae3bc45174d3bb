"""Every comparator's verdict is the same at any output scale, and zero has a defined answer (issue 33).

A user's model built with random weights gave outputs of about 5e-10: torch's
cosine (its norms clamped to eps = 1e-8) read 0.029 for two bitwise-equal
outputs, and an absolute tolerance of 1e-3 would pass any answer at all. The
property below multiplies the same outputs by 2^-40 ... 2^40 (about 1e-12 to
1e12): a power of two scales every floating-point value exactly, so a verdict
that moves is the comparator's doing, never rounding.
"""

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from optbench.measuring.accuracy import (
    Close,
    Comparator,
    Exact,
    Leaves,
    ReducedPrecision,
    TokenAgreement,
    TrainingAgreement,
    TrainingOutcome,
    cosine_similarity,
    loss_path_deviation,
    parameter_deviation,
    relative_rmse,
)


def scaled(output: Any, factor: float) -> Any:
    """`output` with every floating tensor multiplied by `factor`; integer leaves (token ids) and held-out accuracy
    (a share of images) are not outputs of a scale."""
    if isinstance(output, torch.Tensor):
        return output * factor if output.is_floating_point() else output
    if isinstance(output, TrainingOutcome):
        return dataclasses.replace(
            output, losses=output.losses * factor, parameters=tuple(p * factor for p in output.parameters)
        )
    if isinstance(output, dict):
        return {key: scaled(value, factor) for key, value in output.items()}
    if isinstance(output, (tuple, list)):
        return type(output)(scaled(value, factor) for value in output)
    return output


Outputs = tuple[Any, Any, Any]
"""reference, optimized, fp64 truth (or None)."""


def logits(generator: torch.Generator, error: float) -> Outputs:
    """fp64 truth; the reference off it by fp32's rounding, the optimized one by `error` (relative)."""
    truth = torch.randn(8, 10, generator=generator, dtype=torch.float64)
    reference = truth * (1 + 6e-8 * torch.randn(8, 10, generator=generator, dtype=torch.float64))
    optimized = truth * (1 + error * torch.randn(8, 10, generator=generator, dtype=torch.float64))
    return reference, optimized, truth


def structured(generator: torch.Generator, error: float) -> Outputs:
    reference, optimized, truth = logits(generator, error)
    ids = reference.argmax(dim=-1)
    return {"logits": reference, "ids": ids}, {"logits": optimized, "ids": ids}, {"logits": truth, "ids": ids}


def generations(generator: torch.Generator, error: float) -> Outputs:
    truth = torch.randn(2, 4, 16, generator=generator, dtype=torch.float64)
    optimized = truth * (1 + error * torch.randn(2, 4, 16, generator=generator, dtype=torch.float64))
    return (truth.argmax(dim=-1), truth), (optimized.argmax(dim=-1), optimized), None


def training(generator: torch.Generator, error: float) -> Outputs:
    losses = 2 + torch.rand(6, generator=generator, dtype=torch.float64)
    parameters = (torch.randn(5, 3, generator=generator, dtype=torch.float64),)

    def run(off: float) -> TrainingOutcome:
        wobble = 1 + off * torch.randn(6, generator=generator, dtype=torch.float64)
        return TrainingOutcome(losses * wobble, 0.6, tuple(p * (1 + off) for p in parameters))

    return run(0.0), run(error), None


FORMAT_ERROR = 4e-3
"""A bf16-sized error of the format's own, for ReducedPrecision's limit."""


def with_format_output(generator: torch.Generator, error: float) -> tuple[Comparator, Outputs]:
    reference, optimized, truth = logits(generator, error)
    formatted = truth * (1 + FORMAT_ERROR * torch.randn(8, 10, generator=generator, dtype=torch.float64))
    return ReducedPrecision(format_output=lambda: formatted), (reference, optimized, truth)


CASES: dict[str, tuple[Comparator, Callable[[torch.Generator, float], Outputs]]] = {
    "close": (Close(), logits),
    "close-loose-with-fp64": (Close(rtol=1e-3, atol=1e-3), logits),
    "reduced-precision": (ReducedPrecision(), logits),
    "leaves": (Leaves(Close()), structured),
    "exact": (Exact(), logits),
    "tokens": (TokenAgreement(), generations),
    "loss-path": (TrainingAgreement(loss_tolerance=0.05, min_accuracy=None), training),
    "parameters": (TrainingAgreement(loss_tolerance=1e-4, deviation=parameter_deviation), training),
}


def verdicts(comparator: Comparator, outputs: Outputs) -> list[tuple[str, bool]]:
    return [(check.metric, check.passed) for check in comparator(*outputs).checks]


SCALES = st.integers(min_value=-40, max_value=40).filter(bool)
ERRORS = st.floats(min_value=-9, max_value=-0.5).map(lambda exponent: 10**exponent)


@pytest.mark.parametrize("name", [*CASES, "reduced-precision-with-format"])
@settings(max_examples=60, deadline=None)
@given(exponent=SCALES, seed=st.integers(min_value=0, max_value=2**16), error=ERRORS)
def test_every_comparator_gives_the_same_verdicts_at_any_output_scale(name, exponent, seed, error):
    generator, factor = torch.Generator().manual_seed(seed), 2.0**exponent
    if name == "reduced-precision-with-format":
        comparator, outputs = with_format_output(generator, error)
        formatted = scaled(comparator.format_output(), factor)
        rescaled = ReducedPrecision(format_output=lambda: formatted)
    else:
        comparator, build = CASES[name]
        outputs, rescaled = build(generator, error), comparator
    assert verdicts(rescaled, tuple(scaled(output, factor) for output in outputs)) == verdicts(comparator, outputs)


def test_the_property_can_fail_both_ways_at_scale_one():
    """The errors drawn above both pass and fail each comparator that tolerates any error, so a verdict that
    followed the scale (everything passing at 1e-12, or failing) would be seen."""
    for name, (comparator, build) in CASES.items():
        small, large = build(torch.Generator().manual_seed(0), 1e-9), build(torch.Generator().manual_seed(0), 0.3)
        assert comparator(*large).failures, name
        if name != "exact":
            assert comparator(*small).passed, name


def test_bitwise_equal_outputs_of_1e_minus_10_read_cosine_1_and_pass():
    """The model of issue 33: random weights, outputs of about 5e-10 (a norm of 3e-9, below torch's eps), two
    seeded runs bitwise equal."""
    output = torch.randn(4, 10, generator=torch.Generator().manual_seed(0)) * 5e-10
    again = output.clone()
    assert cosine_similarity(output, again) == pytest.approx(1.0, abs=1e-12)
    assert ReducedPrecision()(output, again, output.double()).passed
    assert Close()(output, again).passed
    # And an answer that is wrong at that scale fails: an absolute tolerance would have passed it.
    assert not Close()(output, output * 1.1).passed
    assert not ReducedPrecision(min_top1=None)(output, -output).passed


def test_outputs_near_the_ends_of_fp64_compare_as_at_one():
    tiny = torch.randn(100, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for factor in (1e-300, 1e300):
        assert cosine_similarity(tiny * factor, tiny * factor) == pytest.approx(1.0, abs=1e-12)
        assert relative_rmse(tiny * factor * 1.01, tiny * factor) == pytest.approx(0.01, rel=1e-9)


def test_zero_equals_zero_and_nothing_else_is_close_to_it():
    zeros, ones = torch.zeros(3, 4), torch.ones(3, 4)
    assert cosine_similarity(zeros, zeros) == 1.0
    assert cosine_similarity(zeros, ones) == cosine_similarity(ones, zeros) == 0.0
    assert Close()(zeros, zeros.clone()).passed
    off = Close()(zeros, zeros + 1e-30)
    assert not off.passed and off.headline.value == math.inf
    assert ReducedPrecision(min_top1=None)(zeros, zeros.clone(), zeros.double()).passed
    assert not ReducedPrecision(min_top1=None)(ones, zeros).passed
    flat = TrainingOutcome(torch.zeros(4), None, (torch.zeros(2),))
    moved = TrainingOutcome(torch.full((4,), 1e-30), None, (torch.full((2,), 1e-30),))
    assert loss_path_deviation(flat, flat) == parameter_deviation(flat, flat) == 0.0
    assert loss_path_deviation(moved, flat) == parameter_deviation(moved, flat) == math.inf


def test_a_nan_or_an_infinity_fails_every_comparator_at_every_scale():
    reference = torch.randn(8, 10, generator=torch.Generator().manual_seed(2))
    for bad in (math.nan, math.inf):
        optimized = reference.clone()
        optimized[0, 0] = bad
        for comparator in (Close(), ReducedPrecision(min_top1=None), Leaves(Close())):
            assert not comparator(reference, optimized).passed, (comparator, bad)
            assert not comparator(reference * 2.0**-40, optimized * 2.0**-40).passed, (comparator, bad)
