import torch

from fixtures.models import SPECS, inference_workload, transposed
from optbench.measuring.switches import settings

CPU = torch.device("cpu")


def test_vit_builds_the_same_weights_every_call_with_a_live_head():
    workload = inference_workload("vit", "smoke", CPU)
    first, second = workload.model(), workload.model()
    assert all(
        torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True)
    )
    with torch.inference_mode():
        logits = first(workload.inputs)
    assert logits.shape == (8, 10) and logits.std() > 0.1  # torchvision's zero-initialised head would give zeros


def test_one_image_variant_is_the_same_model_at_batch_one():
    for profile in ("smoke", "standard"):
        assert SPECS["vit-b1"][profile].input_shape == (1, *SPECS["vit"][profile].input_shape[1:])
    assert inference_workload("vit-b1", "smoke", CPU).inputs.shape == (1, 3, 32, 32)


def test_fp64_output_is_the_workload_in_double_precision():
    workload = inference_workload("resnet", "smoke", CPU)
    truth = workload.fp64_output()
    with torch.inference_mode():
        fp32 = workload.model()(workload.inputs)
    assert truth.dtype == torch.float64 and torch.allclose(truth.float(), fp32, atol=1e-4)


def test_transposed_cnn_on_transposed_images_gives_the_same_outputs():
    workload = inference_workload("resnet", "smoke", CPU)
    images = torch.randn(2, 3, 32, 72, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        direct = workload.model()(images)
        mirrored = transposed(workload.model())(images.mT.contiguous())
    assert torch.allclose(direct, mirrored, rtol=1e-4, atol=1e-5)


def test_settings_are_restored_and_leave_the_legacy_api_readable():
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    before = (matmul.fp32_precision, conv.fp32_precision, torch.backends.cudnn.benchmark)
    with settings(
        (matmul, "fp32_precision", "tf32"), (conv, "fp32_precision", "ieee"), (torch.backends.cudnn, "benchmark", True)
    ):
        assert (matmul.fp32_precision, conv.fp32_precision, torch.backends.cudnn.benchmark) == ("tf32", "ieee", True)
    assert (matmul.fp32_precision, conv.fp32_precision, torch.backends.cudnn.benchmark) == before
    # Recent PyTorch raises here when a new-API precision was left set.
    assert torch.get_float32_matmul_precision() == "highest"
    assert isinstance(torch.backends.cudnn.allow_tf32, bool)
