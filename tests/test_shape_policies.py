"""Shape policies on a stream of sizes: what each compiles, the planted recompile-every-size fault, padding's
accuracy, and each side's automatic-dynamic state kept to itself."""

from typing import ClassVar

import pytest
import torch
from torch import nn

from optbench.measuring.case import Observed
from optbench.measuring.compilation import CompileActivity
from optbench.measuring.workload import InferenceWorkload
from optbench.techniques.dynamic_shapes import (
    POLICIES,
    CompiledStream,
    ShapePolicy,
    SizeStream,
    bucket,
    dynamic_shapes,
    range_guard_only,
)

STREAM = SizeStream.up_to(1, 32)
NOTHING_OBSERVED = Observed(None, CompileActivity())


class Tokenwise(nn.Module):
    """Acts on each position alone, so a padded position changes no other."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x))


class SizeGuarded(Tokenwise):
    """Looks its sequence length up in a dict (a cache keyed by length, as rotary embeddings often keep): dynamo
    guards on the exact size, so every size recompiles."""

    SCALES: ClassVar[dict[int, float]] = {length: 1.0 + length / 100 for length in range(64)}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * self.SCALES[x.shape[1]]


class RangeSpecialized(Tokenwise):
    """Takes another path past length 24: a symbolic graph holds for lengths up to 24 and compiles again once for
    those above, under every policy that keeps the length symbolic (the model's specialisation, not the policy's)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * 2 if x.shape[1] > 24 else super().forward(x)


class SeesLaterPositions(Tokenwise):
    """Each position's output depends on the positions after it: padding changes the real ones."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).flip(1).cumsum(1).flip(1)


def workload_of(model_class: type[nn.Module]) -> InferenceWorkload:
    def build() -> nn.Module:
        torch.manual_seed(0)
        return model_class().eval()

    inputs = torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(0))
    return InferenceWorkload(model_class.__name__, build, inputs)


def first_pass(case):
    """The runner's first calls, then the case's extra checks, in-effect observers and accuracy."""
    with torch.inference_mode():
        reference, optimized = case.reference(), case.optimized()
    checks = {check.metric: check for check in (extra(NOTHING_OBSERVED) for extra in case.checks)}
    seen = [observer(case) for observer in case.in_effect]
    return checks, seen, case.accuracy(reference, optimized, case.fp64_output())


def test_the_stream_has_distinct_sizes_cut_from_the_inputs_repeated():
    assert STREAM.sizes == (20, 12, 32, 9, 26, 17, 14, 24)
    assert [bucket(size) for size in (9, 16, 17, 32)] == [16, 16, 32, 32]
    inputs = torch.arange(2 * 4 * 3.0).reshape(2, 4, 3)
    mask = torch.ones(2, 4, dtype=torch.long)
    cuts = STREAM.batches({"x": inputs, "mask": mask, "scale": torch.ones(3)}, bucket)
    assert [(size, cut["x"].shape[1], cut["mask"].shape[1]) for size, cut in cuts][:2] == [(20, 32, 32), (12, 16, 16)]
    assert torch.equal(cuts[0][1]["x"], torch.cat([inputs] * 8, 1)) and cuts[0][1]["scale"].shape == (3,)
    assert cuts[1][1]["x"].is_contiguous()
    assert SizeStream.up_to(3, 32).misfit(inputs) == "none of its input tensors has a dimension 3 to vary"


@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_compiles_what_it_declares_and_gives_the_eager_outputs(policy):
    case = dynamic_shapes(workload_of(Tokenwise), STREAM, ShapePolicy(policy), floor=1.0)
    checks, seen, accuracy = first_pass(case)
    assert checks["reference_compiles"].value == 2 and checks["reference_compiles"].passed
    expected = {"automatic": 2, "dynamic": 1, "mark_dynamic": 1, "buckets": 2}[policy]
    assert checks["optimized_compiles"].value == expected and checks["optimized_compiles"].passed
    assert seen[0].in_effect, seen[0].text()
    assert accuracy.passed, accuracy
    details = case.details()
    assert details["compiled_at_sizes"]["reference"] == [20, 12] and details["first_pass_s"]["optimized"] > 0


def test_a_model_that_guards_on_its_size_recompiles_at_every_size_and_fails_its_declared_count():
    case = dynamic_shapes(workload_of(SizeGuarded), STREAM, ShapePolicy("dynamic"), floor=1.0)
    checks, seen, _ = first_pass(case)
    assert checks["optimized_compiles"].value == len(STREAM.sizes) and not checks["optimized_compiles"].passed
    assert not checks["reference_compiles"].passed
    assert not seen[0].in_effect and "for a stream of 8 sizes" in seen[0].evidence


@pytest.mark.parametrize(("policy", "compiled_at"), [("automatic", [20, 12, 32]), ("mark_dynamic", [20, 32])])
def test_a_model_whose_graph_specializes_on_a_range_is_not_the_policy_s_fault(policy, compiled_at):
    case = dynamic_shapes(workload_of(RangeSpecialized), STREAM, ShapePolicy(policy), floor=1.0)
    checks, seen, accuracy = first_pass(case)
    assert case.details()["compiled_at_sizes"]["optimized"] == compiled_at
    (guard,) = case.details()["model_specialized_at"]["optimized"].values()
    assert range_guard_only(guard) and "24" in guard, guard
    assert checks["optimized_compiles"].value == len(compiled_at) - 1 and checks["optimized_compiles"].passed
    assert checks["reference_compiles"].value == 2 and checks["reference_compiles"].passed
    assert seen[0].in_effect and accuracy.passed


def test_only_a_failure_on_ranges_alone_is_the_model_s_specialization():
    source = "  # if isinstance(batch, dict):  # (user code shown...; to avoid specialization try mark_unbacked)"
    assert range_guard_only(f"0/1: 2 <= batch.size()[0] <= 15{source}")
    assert range_guard_only("1/2: 25 <= L['x'].size()[1]; L['x'].size()[1] <= 64")
    assert not range_guard_only("0/0: tensor 'batch' size mismatch at index 0. expected 10, actual 6")
    assert not range_guard_only("0/3: L['x'].size()[1] == 20")
    assert not range_guard_only("0/1: 2 <= s0 <= 15; L['x'].size()[1] == 20")
    assert not range_guard_only("0/1: ")


def test_mark_dynamic_on_a_model_that_guards_on_its_size_is_torch_s_error_naming_the_dimension():
    case = dynamic_shapes(workload_of(SizeGuarded), STREAM, ShapePolicy("mark_dynamic"), floor=1.0)
    with pytest.raises(Exception, match=r"Constraints violated \(L\['batch'\]\.size\(\)\[1\]\)"):
        first_pass(case)


def test_mark_dynamic_that_marks_nothing_is_the_default_and_fails_its_count(monkeypatch):
    monkeypatch.setattr("optbench.techniques.dynamic_shapes.mark_dynamic", lambda tensor, dim: None)
    case = dynamic_shapes(workload_of(Tokenwise), STREAM, ShapePolicy("mark_dynamic"), floor=1.0)
    checks, _, _ = first_pass(case)
    assert checks["optimized_compiles"].value == 2 and not checks["optimized_compiles"].passed


def test_padding_a_model_whose_positions_see_later_ones_fails_accuracy():
    case = dynamic_shapes(workload_of(SeesLaterPositions), STREAM, ShapePolicy("buckets"), floor=1.0)
    assert not first_pass(case)[2].passed
    unpadded = dynamic_shapes(workload_of(SeesLaterPositions), STREAM, ShapePolicy("dynamic"), floor=1.0)
    assert first_pass(unpadded)[2].passed


def test_each_side_learns_its_own_sizes_though_both_compile_the_same_forward():
    model = workload_of(Tokenwise).model()
    inputs = workload_of(Tokenwise).inputs
    for name in ("first", "second"):
        side = CompiledStream(model, STREAM, inputs, ShapePolicy("automatic"), name)
        with torch.inference_mode():
            side()
        assert side.compiled_at == [20, 12], name


def test_an_unknown_policy_is_a_one_line_error():
    with pytest.raises(ValueError, match="unknown shape policy 'static'; choose one of automatic, dynamic"):
        ShapePolicy("static")
