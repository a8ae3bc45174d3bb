"""torchao cases: each CPU scheme quantizes the Linear layers within its limit, a wrong scale fails accuracy, an
unquantized model is not in effect, and a missing or other torchao skips with the reason."""

import pytest
import torch
from torch import nn

from optbench.measuring.in_effect import InEffect
from optbench.measuring.workload import InferenceWorkload
from optbench.techniques.quantization import (
    SCHEMES,
    TORCHAO,
    QuantizedLinears,
    quantize,
    quantized,
    state_bytes,
    torchao_problem,
)

CPU_SCHEMES = ["int8-dynamic", "int8-weight-only"]


def mlp_workload() -> InferenceWorkload:
    def build():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10)).eval()

    return InferenceWorkload("mlp", build, torch.randn(32, 64, generator=torch.Generator().manual_seed(0)))


def checked(case, optimized=None):
    with torch.inference_mode():
        return case.accuracy(case.reference(), (optimized or case.optimized)(), case.fp64_output())


@pytest.mark.parametrize("scheme", CPU_SCHEMES)
def test_each_cpu_scheme_quantizes_every_linear_within_its_limit_and_shrinks_the_state(scheme):
    case = quantized(mlp_workload(), scheme, floor=1.0, profile="smoke")
    assert checked(case).passed
    seen = case.in_effect[0](case)
    assert seen.in_effect and seen.evidence.startswith("3 of 3 Linear layers hold torchao weights"), seen.text()
    assert case.details()["size_ratio"] > 3


def test_a_layer_quantized_with_a_wrong_scale_fails_accuracy():
    case = quantized(mlp_workload(), "int8-weight-only", floor=1.0, profile="smoke")
    model = case.in_effect[0].model
    with torch.no_grad():
        model[2].weight.scale.mul_(1.5)
    accuracy = checked(case)
    assert not accuracy.passed and "rel_rmse_vs_fp64" in [check.metric for check in accuracy.failures]


def test_a_model_left_unquantized_is_not_in_effect():
    model = mlp_workload().model()
    seen = QuantizedLinears(model)(None)
    assert not seen.in_effect and seen.evidence.startswith("0 of 3 Linear layers")


def test_a_model_quantized_in_part_is_in_effect_and_says_how_much():
    """A user may keep the classifier in fp32, the layer most sensitive to rounding: the layers quantized still
    show torchao acting, and the evidence counts the plain one left out of it."""
    workload = mlp_workload()
    model = quantize(workload.model(), SCHEMES["int8-weight-only"])
    model[4] = workload.model()[4]
    seen = QuantizedLinears(model)(None)
    kind = type(model[0].weight).__name__  # Int8Tensor in both torchao releases of tox.ini
    assert seen == InEffect("torchao quantization", True, f"2 of 3 Linear layers hold torchao weights ({kind})")


def test_state_bytes_count_the_quantized_storage():
    model = mlp_workload().model()
    assert state_bytes(quantize(model, SCHEMES["int8-weight-only"])) < state_bytes(model) / 3


def test_another_torchao_release_is_named_with_the_one_to_install(monkeypatch):
    assert torchao_problem() is None
    monkeypatch.setattr("importlib.metadata.version", lambda package: "0.9.0")
    tested = TORCHAO[".".join(torch.__version__.split(".")[:2])]
    assert torchao_problem() == (
        f"torchao 0.9.0 is installed; with torch {torch.__version__} this suite uses {tested}"
        f" (pip install torchao=={tested})"
    )


def test_cuda_schemes_skip_on_a_cpu_before_quantizing():
    with pytest.raises(pytest.skip.Exception, match="needs a CUDA device: float8 matmuls need Ada or Hopper"):
        quantized(mlp_workload(), "float8-dynamic", floor=1.0, profile="smoke")
