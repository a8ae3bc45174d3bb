import pytest
import torch

from fixtures.models import inference_workload
from optbench.accuracy import Close, Exact, FormatRounding, ReducedPrecision, tensors


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
