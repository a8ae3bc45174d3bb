import math

import pytest
import torch

from fixtures.models import inference_workload
from optbench.measuring.accuracy import (
    Check,
    Close,
    Exact,
    FormatRounding,
    Leaves,
    ReducedPrecision,
    SameBatches,
    TokenAgreement,
    TrainingAgreement,
    TrainingOutcome,
    common_prefix_lengths,
    has_class_scores,
    loss_path_deviation,
    parameter_deviation,
    relative_rmse,
    tensors,
    top1_agreement,
)


def test_exact_passes_identical_and_fails_one_ulp():
    x = torch.randn(4, 10)
    assert Exact()(x, x.clone()).passed
    nudged = x.clone()
    nudged[0, 0] = torch.nextafter(nudged[0, 0], torch.tensor(float("inf")))
    result = Exact()(x, nudged)
    assert not result.passed and result.headline.value > 0


def test_exact_fails_on_dtype_change():
    x = torch.ones(3)
    assert not Exact()(x, x.double()).passed


def test_close_accepts_reordering_noise_and_rejects_real_error():
    x = torch.randn(64, 64, dtype=torch.float64)
    reference = (x @ x).float()
    assert Close()(reference, reference + 1e-6).passed
    assert not Close()(reference, reference * 1.1).passed


def test_close_falls_back_to_rmse_against_fp64():
    truth = torch.randn(1000, dtype=torch.float64)
    reference = truth + 1e-2 * torch.randn(1000, dtype=torch.float64)
    optimized = truth + 1.2e-2 * torch.randn(1000, dtype=torch.float64)  # no worse than 2x the reference's error
    result = Close(rtol=1e-6, atol=1e-6)(reference.float(), optimized.float(), truth)
    assert result.headline.metric == "rmse_vs_fp64" and result.passed
    worse = truth + 0.1 * torch.randn(1000, dtype=torch.float64)
    assert not Close(rtol=1e-6, atol=1e-6)(reference.float(), worse.float(), truth).passed


def test_reduced_precision_checks_cosine_fp64_and_top1():
    torch.manual_seed(0)
    truth = torch.randn(32, 10, dtype=torch.float64) * 5
    fp32 = truth.float()
    bf16 = truth.to(torch.bfloat16)
    result = ReducedPrecision()(fp32, bf16, truth)
    assert result.passed
    assert result.headline.metric == "cosine"
    shuffled = bf16[torch.randperm(32)]
    assert not ReducedPrecision()(fp32, shuffled, truth).passed


def test_tensors_flattens_nested_outputs():
    a, b = torch.ones(2), torch.zeros(3)
    assert len(tensors({"logits": a, "hidden": (b, None)})) == 2
    with pytest.raises(TypeError, match="no tensors"):
        tensors({"text": "hi"})


def test_shape_mismatch_is_an_error_not_a_pass():
    with pytest.raises(ValueError, match="shape mismatch"):
        Exact()(torch.ones(2, 3), torch.ones(3, 2))


def test_format_rounding_stores_every_result_in_the_format():
    a, b = torch.randn(16, 16, dtype=torch.float64), torch.randn(16, 16, dtype=torch.float64)
    with FormatRounding(torch.bfloat16):
        product = torch.relu(a @ b)
    assert product.dtype == torch.float64
    assert torch.equal(product, torch.relu((a @ b).to(torch.bfloat16).double()))
    assert not torch.equal(product, torch.relu(a @ b))


@pytest.mark.parametrize("threads", [1, 2])
def test_bf16_passes_its_format_limit_and_a_one_percent_miscompile_fails(threads):
    """The real bf16 ResNet against 1.5x the error bf16 costs by itself, at 1 and 2 threads."""
    workload = inference_workload("resnet", "smoke", torch.device("cpu"))
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            fp32 = workload.model()(workload.inputs)
            bf16 = workload.model(torch.bfloat16)(workload.inputs_as(torch.bfloat16))
        fp64 = workload.fp64_output()
        comparator = ReducedPrecision(format_output=workload.format_output(torch.bfloat16))
        result = comparator(fp32, bf16, fp64)
        miscompiled = comparator(fp32, bf16.double() * 1.01, fp64)
    finally:
        torch.set_num_threads(previous)
    assert result.passed, result.checks
    limit = next(check for check in result.checks if check.metric == "rel_rmse_vs_fp64").limit
    assert limit < ReducedPrecision().max_relative_rmse / 4  # the format's limit, not the old fixed ceiling
    assert [check.metric for check in miscompiled.failures] == ["rel_rmse_vs_fp64"]


# The comparators and limits, each on small hand-made outputs whose right answer is known (docs/mutation.md).


def test_a_check_passes_on_its_own_side_of_the_limit_and_never_on_nan():
    assert Check("rmse", 0.1, 0.1, lower_is_better=True).passed
    assert not Check("rmse", 0.11, 0.1, lower_is_better=True).passed
    assert Check("cosine", 0.99, 0.99, lower_is_better=False).passed
    assert not Check("cosine", 0.98, 0.99, lower_is_better=False).passed
    assert not Check("cosine", math.nan, 0.99, lower_is_better=False).passed
    assert Check("rmse", 0.12345, 0.1, True).text() == "rmse 0.1235 (limit <= 0.1)"
    assert Check("cosine", 0.95, 0.99, False).text() == "cosine 0.95 (limit >= 0.99)"


def test_a_check_is_stored_with_its_verdict():
    """The baselines and the run's record keep the headline check as a dict; `passed` is its verdict, not a copy."""
    assert Check("cosine", 0.95, 0.99, False).as_dict() == {
        "metric": "cosine",
        "value": 0.95,
        "limit": 0.99,
        "lower_is_better": False,
        "passed": False,
    }
    assert Check("rmse", 0.01, 0.1, True).as_dict()["passed"] is True


def test_exact_reports_the_largest_difference_and_a_dtype_change_as_at_least_one_ulp():
    x = torch.zeros(2, 3)
    result = Exact()(x, x + torch.tensor([[0.0, 0.5, 0.0], [0.0, 0.0, -2.0]]))
    assert result.headline.value == 2.0 and result.headline.limit == 0.0 and result.headline.lower_is_better
    assert Exact()(x, x.double()).headline.value == math.ulp(0.0)
    assert Exact()((x, torch.ones(0)), (x.clone(), torch.ones(0))).headline.value == 0.0


def test_close_holds_the_excess_over_the_relative_tolerance_to_atol_times_the_references_rms():
    reference = torch.full((4,), 100.0)
    # rtol 1e-4 of 100 is 0.01, and atol 1e-4 of the RMS 100 is 0.01 more: 0.015 exceeds rtol by 0.005, 5e-5 of
    # the RMS; 0.0202 exceeds it by 1.02e-4 of the RMS.
    within = Close()(reference, reference + 0.015)
    assert within.passed and within.headline.metric == "allclose_excess"
    assert within.headline.value == pytest.approx(5e-5, rel=0.01)
    assert not Close()(reference, reference - 0.0202).passed
    # An element near zero is held to atol of the output's RMS (70.7 here), not excused by the rtol of a large one.
    mixed = torch.tensor([100.0, 0.0])
    assert Close()(mixed, mixed + torch.tensor([0.0, 0.007])).passed
    assert not Close()(mixed, mixed + torch.tensor([0.0, 0.0071])).passed


def test_close_against_fp64_allows_twice_the_references_own_error_plus_a_tenth_of_atol():
    truth = torch.zeros(100, dtype=torch.float64)
    reference = torch.full((100,), 0.01, dtype=torch.float64)  # RMSE 0.01 against the truth, RMS 0.01
    comparator = Close(rtol=0, atol=1e-3)
    limit = 2 * 0.01 + 1e-4 * 0.01
    result = comparator(reference, torch.full((100,), 0.02, dtype=torch.float64), truth)
    assert result.headline.metric == "rmse_vs_fp64"
    assert result.headline.limit == pytest.approx(limit) and result.headline.value == pytest.approx(0.02)
    assert result.passed
    assert not comparator(reference, torch.full((100,), -0.0201, dtype=torch.float64), truth).passed


def test_reduced_precision_without_fp64_or_top1_checks_only_the_cosine():
    x = torch.randn(8, 4)
    result = ReducedPrecision(min_top1=None)(x, x * 2)
    assert [(c.metric, c.value) for c in result.checks] == [("cosine", pytest.approx(1.0))]
    assert not ReducedPrecision(min_top1=None)(x, -x).passed
    with_top1 = ReducedPrecision(min_top1=0.75)(x, x * 2)
    assert [c.metric for c in with_top1.checks] == ["cosine", "top1_agreement"]


def test_reduced_precision_holds_the_output_to_a_multiple_of_the_formats_own_error():
    """With the model run under the format's rounding, the fp64 limit is 1.5x that rounding's error."""
    torch.manual_seed(0)
    truth = torch.randn(64, 10, dtype=torch.float64)
    formatted = truth.to(torch.bfloat16).double()
    format_error = (formatted - truth).pow(2).mean().sqrt() / truth.pow(2).mean().sqrt()
    ids = truth.argmax(-1)  # an integer output the rounding leaves alone, not part of the error
    comparator = ReducedPrecision(format_output=lambda: (formatted, ids))
    result = comparator(truth.float(), formatted.float(), truth)
    metrics = [c.metric for c in result.checks]
    assert metrics == [
        "cosine",
        "rel_rmse_vs_fp64",
        "format_rel_rmse_vs_fp64",
        "fp32_rel_rmse_vs_fp64",
        "top1_agreement",
    ]
    checks = {c.metric: c for c in result.checks}
    assert checks["format_rel_rmse_vs_fp64"].value == pytest.approx(float(format_error))
    assert checks["rel_rmse_vs_fp64"].limit == pytest.approx(1.5 * float(format_error))
    assert checks["fp32_rel_rmse_vs_fp64"].value < 1e-6 and checks["fp32_rel_rmse_vs_fp64"].limit == 0.05
    assert result.passed
    off_by_a_percent = comparator(truth.float(), formatted.float() * 1.01, truth)
    assert [c.metric for c in off_by_a_percent.failures] == ["rel_rmse_vs_fp64"]
    # Without a format output the fixed ceiling is the limit: the same 1% error passes it.
    assert ReducedPrecision()(truth.float(), formatted.float() * 1.01, truth).passed


def test_relative_rmse_is_relative_to_the_targets_scale_and_against_zero_zero_or_infinite():
    target = torch.full((10,), 4.0, dtype=torch.float64)
    assert relative_rmse(target + 1.0, target) == pytest.approx(0.25)
    zeros = torch.zeros(10, dtype=torch.float64)
    assert relative_rmse(target, zeros) == math.inf and relative_rmse(zeros, zeros) == 0.0


def test_top1_agreement_is_the_share_of_rows_whose_argmax_agrees():
    logits = torch.eye(4)
    flipped = logits.clone()
    flipped[3] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    assert top1_agreement(logits, logits * 3) == 1.0
    assert top1_agreement((logits, torch.ones(2)), (flipped, torch.zeros(2))) == 0.75


def outputs(token_rows, logits):
    return torch.tensor(token_rows), logits


def test_token_agreement_counts_tokens_only_up_to_each_rows_first_flip():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 5)
    reference = outputs([[1, 2, 3, 4], [1, 2, 3, 4]], logits)
    assert TokenAgreement()(reference, outputs([[1, 2, 3, 4], [1, 2, 3, 4]], logits.clone())).passed
    # Row 0 flips at step 1, then agrees again at steps 2-3: those count for nothing. 1 + 4 of 8 tokens agree.
    flipped = TokenAgreement()(reference, outputs([[1, 9, 3, 4], [1, 2, 3, 4]], logits.clone()))
    assert flipped.headline.metric == "token_agreement" and flipped.headline.value == 5 / 8
    assert [c.metric for c in flipped.failures] == ["token_agreement"]
    assert common_prefix_lengths(
        torch.tensor([[1, 2, 3], [1, 5, 3]]), torch.tensor([[1, 2, 3], [1, 2, 3]])
    ).tolist() == [
        3,
        1,
    ]


def test_token_agreement_compares_logits_only_where_both_runs_saw_the_same_context():
    logits = torch.zeros(1, 4, 5)
    logits[..., 0] = 10.0  # largest reference logit: 10
    reference = outputs([[0, 0, 0, 0]], logits)
    tokens = [[0, 3, 0, 0]]  # a flip at step 1: steps 0 and 1 had the same context, 2 and 3 did not
    late = logits.clone()
    late[0, 2:, 1] += 5.0
    after_the_flip = TokenAgreement(min_agreement=0)(reference, outputs(tokens, late))
    assert after_the_flip.passed
    early = logits.clone()
    early[0, 1, 1] += 0.01  # 1e-3 of the largest logit, at the step that chose the flipped token
    at_the_flip = TokenAgreement(min_agreement=0)(reference, outputs(tokens, early))
    assert [(c.metric, c.value) for c in at_the_flip.failures] == [("agreed_logit_rel_diff", pytest.approx(1e-3))]


def test_token_agreement_judges_the_prefill_logits_by_size_and_direction():
    logits = torch.zeros(2, 3, 4)
    logits[:, :, 0] = 10.0
    tokens = [[0, 0, 0], [0, 0, 0]]
    nudged = logits.clone()
    nudged[1, 0, 2] = 0.002  # 2e-4 of the largest logit, at the prefill
    result = TokenAgreement()(outputs(tokens, logits), outputs(tokens, nudged))
    checks = {c.metric: c for c in result.checks}
    assert checks["prefill_logit_rel_diff"].value == pytest.approx(2e-4) and not checks["prefill_logit_rel_diff"].passed
    assert checks["agreed_logit_rel_diff"].value == pytest.approx(2e-4)
    assert checks["prefill_logit_cosine"].passed
    scaled = TokenAgreement(max_logit_diff=1.0)(outputs(tokens, logits), outputs(tokens, logits * 1.5))
    assert scaled.checks[2].metric == "prefill_logit_cosine" and scaled.checks[2].value == pytest.approx(1.0)
    # All-zero logits equal all-zero ones; against any others they are off by the whole of them.
    zeros = outputs(tokens, torch.zeros(2, 3, 4))
    assert TokenAgreement()(zeros, outputs(tokens, torch.zeros(2, 3, 4))).passed
    assert [c.metric for c in TokenAgreement()(zeros, outputs(tokens, logits)).failures] == [
        "prefill_logit_rel_diff",
        "prefill_logit_cosine",
        "agreed_logit_rel_diff",
    ]


def test_leaves_hold_floating_leaves_to_the_comparator_integers_to_equality_and_logits_to_top1():
    logits = torch.eye(4)
    ids = torch.arange(4)
    same = Leaves(Close())({"logits": logits, "ids": ids}, {"logits": logits.clone(), "ids": ids.clone()})
    assert [(c.metric, c.value) for c in same.checks] == [
        ("allclose_excess", 0.0),  # the zeros of eye(4): no tolerance to subtract
        ("integer_leaves_differing", 0),
        ("top1_agreement", 1.0),
    ]
    assert same.passed
    changed = Leaves(Close())((logits, ids, ids), (logits, torch.tensor([0, 1, 2, 0]), ids[:3]))
    assert [(c.metric, c.value) for c in changed.failures] == [("integer_leaves_differing", 2)]


def test_leaves_report_top1_once_over_the_worst_logits_and_skip_what_is_not_logits():
    logits = torch.eye(4)
    half = logits.clone()
    half[2:] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    loose = Close(atol=10)
    worst = Leaves(loose)((logits, logits), (logits, half))
    assert [(c.metric, c.value) for c in worst.checks] == [
        ("allclose_excess", pytest.approx(2.0)),  # 1.0 off, in units of the references' RMS, 0.5
        ("top1_agreement", 0.5),
    ]
    assert not worst.passed
    assert Leaves(loose, min_top1=0.5)((logits, logits), (logits, half)).passed
    own_top1 = Leaves(ReducedPrecision())(logits, logits.clone())
    assert [c.metric for c in own_top1.checks] == ["cosine", "top1_agreement"]
    vector = torch.ones(4)
    assert [c.metric for c in Leaves(Close())(vector, vector).checks] == ["allclose_excess"]
    assert [c.metric for c in Leaves(Close())(torch.arange(3), torch.arange(3)).checks] == ["integer_leaves_differing"]
    with pytest.raises(ValueError, match="reference gives 2 tensors, optimized gives 1"):
        Leaves(Close())((vector, vector), vector)


def test_leaves_give_the_comparator_the_floating_leaves_of_the_fp64_output():
    truth = torch.zeros(10, dtype=torch.float64)
    ids = torch.arange(10)
    reference = (torch.full((10,), 0.01, dtype=torch.float64), ids)
    better = (torch.full((10,), 0.005, dtype=torch.float64), ids)
    result = Leaves(Close(rtol=0, atol=1e-6))(reference, better, (truth, ids))
    assert result.checks[0].metric == "rmse_vs_fp64" and result.passed


def test_same_batches_counts_each_batch_that_differs_or_is_missing():
    batches = [(torch.ones(2), torch.tensor([1])), (torch.zeros(2), torch.tensor([0]))]
    same = [tuple(t.clone() for t in batch) for batch in batches]
    assert SameBatches()(batches, same).passed
    assert SameBatches()(batches, same).headline.value == 0

    def differing(optimized):
        return SameBatches()(batches, optimized).headline.value

    assert differing(same[:1]) == 1
    assert differing([*same, same[0]]) == 1
    assert differing([(torch.ones(2).double(), torch.tensor([1])), same[1]]) == 1  # same numbers, another dtype
    assert differing([(torch.ones(1, 2), torch.tensor([1])), same[1]]) == 1  # same numbers, another shape
    assert differing([(torch.ones(2),), (torch.ones(2), torch.tensor([0]))]) == 2  # a tensor missing; a value changed


def outcome(losses, heldout=0.9, parameters=None):
    return TrainingOutcome(torch.tensor(losses), heldout, tuple(parameters or (torch.ones(3),)))


def test_training_with_no_tolerance_demands_bitwise_losses_and_parameters():
    reference = outcome([2.0, 1.0])
    bitwise = TrainingAgreement(loss_tolerance=0)
    assert bitwise(reference, outcome([2.0, 1.0])).passed
    assert bitwise(reference, outcome([2.0, 1.0])).headline.metric == "max_abs_diff"
    assert not bitwise(reference, outcome([2.0, 1.0], parameters=(torch.tensor([1.0, 1.0, 1.5]),))).passed
    assert not bitwise(reference, outcome([2.0, 1.25])).passed


def test_the_loss_path_is_held_to_the_tolerance_relative_to_the_mean_loss():
    # Largest gap 0.3 over a mean reference loss of 1.5: a deviation of 0.2.
    reference, optimized = outcome([2.0, 1.0]), outcome([2.0, 1.3])
    assert loss_path_deviation(optimized, reference) == pytest.approx(0.2)
    assert loss_path_deviation(outcome([2.0, 0.7]), reference) == pytest.approx(0.2)
    assert loss_path_deviation(optimized, outcome([0.0, 0.0])) == math.inf
    result = TrainingAgreement(loss_tolerance=0.25, jitter=2**-8)(reference, optimized)  # no spread bound: fixed
    assert result.headline.metric == "loss_path_deviation" and result.headline.limit == 0.25 and result.passed
    assert not TrainingAgreement(loss_tolerance=0.1)(reference, optimized).passed


def test_parameter_deviation_is_the_largest_gap_relative_to_the_largest_reference_parameter():
    reference = outcome([1.0], parameters=(torch.tensor([1.0, -4.0]), torch.tensor([2.0])))
    optimized = outcome([1.0], parameters=(torch.tensor([1.0, -4.0]), torch.tensor([3.0])))
    assert parameter_deviation(optimized, reference) == pytest.approx(0.25)
    assert parameter_deviation(reference, optimized) == pytest.approx(0.25)
    zero = outcome([1.0], parameters=(torch.zeros(2), torch.zeros(1)))
    assert parameter_deviation(optimized, zero) == math.inf


def test_with_jitter_the_limit_is_a_multiple_of_the_references_own_spread():
    calls = []

    def natural_spread(jitter, deviation, every_step):
        calls.append((jitter, deviation, every_step))
        return 0.1

    reference, optimized = outcome([2.0, 1.0]), outcome([2.0, 1.3])  # deviation 0.2
    agreement = TrainingAgreement(loss_tolerance=0.01, jitter=2**-8, natural_spread=natural_spread)
    result = agreement(reference, optimized)
    assert calls == [(2**-8, loss_path_deviation, False)]
    assert [(c.metric, c.limit) for c in result.checks] == [
        ("loss_path_deviation", pytest.approx(0.3)),
        ("heldout_accuracy_drop", 0.05),
        ("heldout_accuracy", 0.25),
        ("reference_heldout_accuracy", 0.25),
        ("reference_loss_path_spread", 1.0),
    ]
    assert result.passed
    assert not TrainingAgreement(0.01, jitter=2**-8, natural_spread=natural_spread, spread_multiplier=1.5)(
        reference, optimized
    ).passed
    chaotic = TrainingAgreement(0.01, jitter=2**-8, natural_spread=natural_spread, max_spread=0.05)
    assert [c.metric for c in chaotic(reference, optimized).failures] == ["reference_loss_path_spread"]
    by_parameters = TrainingAgreement(
        0.01, jitter=2**-24, natural_spread=natural_spread, jitter_every_step=True, deviation=parameter_deviation
    )
    assert [c.metric for c in by_parameters(reference, optimized).checks][::4] == [
        "parameter_deviation",
        "reference_parameter_spread",
    ]
    assert calls[-1] == (2**-24, parameter_deviation, True)


def test_held_out_accuracy_may_drop_by_the_allowance_and_both_runs_must_learn():
    agreement = TrainingAgreement(loss_tolerance=1.0)
    reference = outcome([1.0], heldout=0.8)
    checks = {c.metric: c for c in agreement(reference, outcome([1.0], heldout=0.76)).checks}
    assert checks["heldout_accuracy_drop"].value == pytest.approx(0.04) and checks["heldout_accuracy_drop"].passed
    assert checks["heldout_accuracy"].value == 0.76 and checks["reference_heldout_accuracy"].value == 0.8
    assert not agreement(reference, outcome([1.0], heldout=0.7)).passed
    assert agreement(reference, outcome([1.0], heldout=0.95)).passed  # learning better is no failure
    chance = TrainingAgreement(loss_tolerance=1.0)(outcome([1.0], heldout=0.1), outcome([1.0], heldout=0.1))
    assert [c.metric for c in chance.failures] == ["heldout_accuracy", "reference_heldout_accuracy"]
    unknown_chance = TrainingAgreement(loss_tolerance=1.0, min_accuracy=None)
    assert [c.metric for c in unknown_chance(reference, outcome([1.0], heldout=0.1)).checks] == [
        "loss_path_deviation",
        "heldout_accuracy_drop",
    ]
    no_heldout = agreement(outcome([1.0], heldout=None), outcome([1.0], heldout=0.5))
    assert [c.metric for c in no_heldout.checks] == ["loss_path_deviation"]
    assert len(agreement(reference, outcome([1.0], heldout=None)).checks) == 1


def test_one_differing_integer_leaf_or_batch_fails():
    ids = torch.arange(4)
    one_off = Leaves(Close())((torch.ones(2), ids), (torch.ones(2), torch.tensor([0, 1, 2, 0])))
    assert [(c.metric, c.value, c.limit) for c in one_off.failures] == [("integer_leaves_differing", 1, 0)]
    batches = [torch.ones(2), torch.zeros(2)]
    one_batch = SameBatches()(batches, [torch.ones(2), torch.ones(2)])
    assert [(c.metric, c.value, c.limit) for c in one_batch.failures] == [("batches_differing", 1, 0)]


def test_every_comparators_checks_say_their_direction_as_a_boolean():
    """Baselines store `lower_is_better` and read it back as a bool: a None would not round-trip."""
    logits = torch.eye(4)
    tokens = torch.zeros(2, 3, dtype=torch.long)
    accuracies = [
        Exact()(logits, logits),
        Close()(logits, logits + 1, logits.double()),
        ReducedPrecision(format_output=lambda: logits.double())(logits, logits, logits.double()),
        Leaves(Close())((logits, torch.arange(4)), (logits, torch.arange(4))),
        SameBatches()([logits], [logits]),
        TokenAgreement()((tokens, torch.randn(2, 3, 5)), (tokens, torch.randn(2, 3, 5))),
        TrainingAgreement(loss_tolerance=0.1)(outcome([1.0]), outcome([1.0])),
        TrainingAgreement(loss_tolerance=0.1, jitter=0.1, natural_spread=lambda *_: 0.1)(
            outcome([1.0]), outcome([1.0])
        ),
    ]
    directions = [check.as_dict()["lower_is_better"] for accuracy in accuracies for check in accuracy.checks]
    # 1 + 1 + 5 (cosine, three fp64 figures, top-1) + 3 + 1 + 4 + 4 (path, three held-out) + 5 (and the spread)
    assert len(directions) == 24 and all(isinstance(direction, bool) for direction in directions)


def test_format_rounding_leaves_integer_results_and_keyword_arguments_alone():
    """Only floating results are rounded: an index past bf16's 256 exact integers stays exact; `dim=` still acts."""
    with FormatRounding(torch.bfloat16):
        indices = torch.arange(300) + 1
        size = torch.ones(3, 2).size(0)
        column_sums = torch.sum(torch.ones(3, 2, dtype=torch.float64), dim=0)
    assert torch.equal(indices, torch.arange(1, 301)) and size == 3
    assert column_sums.tolist() == [3.0, 3.0]


def test_training_runs_with_different_parameter_counts_are_an_error():
    one = outcome([1.0], parameters=(torch.ones(2),))
    two = outcome([1.0], parameters=(torch.ones(2), torch.ones(3)))
    with pytest.raises(ValueError):
        parameter_deviation(one, two)


def test_exact_skips_empty_outputs_when_reporting_the_largest_difference():
    x, empty = torch.zeros(3), torch.ones(0)
    assert Exact()((x, empty), (x + 0.5, empty.clone())).headline.value == 0.5


def test_top1_agreement_reads_the_last_dimension_of_sequence_logits():
    """Logits of a sequence model are [batch, positions, vocabulary]: the argmax is over the vocabulary."""
    logits = torch.zeros(2, 3, 4)
    logits[..., 1] = 1.0
    other = logits.clone()
    other[0, 0] = torch.tensor([0.0, 0.0, 0.0, 2.0])  # one position of six picks another token
    assert top1_agreement(logits, other) == pytest.approx(5 / 6)


def test_a_channel_first_map_gets_no_top1_check_and_logits_keep_theirs():
    """A segmentation head's [N, C, H, W]: an argmax over its last dimension would pick a column, not a class."""
    generator = torch.Generator().manual_seed(0)
    segmentation = torch.randn(2, 4, 8, 8, generator=generator)
    moved = segmentation + 1e-3 * torch.randn(2, 4, 8, 8, generator=generator)
    assert "top1_agreement" not in [check.metric for check in ReducedPrecision()(segmentation, moved).checks]
    assert not has_class_scores({"out": segmentation}) and not has_class_scores(torch.arange(3))
    logits = torch.randn(8, 10, generator=generator)
    assert has_class_scores(logits) and has_class_scores((logits[None], segmentation))
    flipped = ReducedPrecision()(logits, -logits)
    assert "top1_agreement" in [check.metric for check in flipped.failures]


def test_a_reference_repeat_is_judged_by_the_pair_not_by_how_far_its_format_is_from_fp64():
    """fp16 underflows on outputs of 1e-9 (its format's own error is 1): two bitwise-equal reference runs still
    repeat, and an optimized output that differs from the reference is still a failure of the pair."""
    tiny = 1e-9 * torch.randn(8, 10, generator=torch.Generator().manual_seed(0))
    comparator = ReducedPrecision(format_output=lambda: tiny.half().float())
    repeat = comparator(tiny, tiny.clone(), tiny.double())
    assert [check.metric for check in repeat.failures] == ["format_rel_rmse_vs_fp64"]
    assert repeat.pair_failures == []
    moved = comparator(tiny, -tiny, tiny.double())
    assert {check.metric for check in moved.pair_failures} == {"cosine", "rel_rmse_vs_fp64", "top1_agreement"}
