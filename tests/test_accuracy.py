import pytest
import torch

from optbench.accuracy import Close, Exact, ReducedPrecision, tensors


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
