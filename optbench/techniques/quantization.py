"""Weight quantization with torchao, compiled as torchao recommends, against the fp32 model compiled the same way.

torchao's `quantize_` swaps each `nn.Linear` weight for a tensor subclass
(int8 values and a scale per output channel, int4 in groups of 128, float8),
whose matmul dequantizes on the fly (weight-only) or quantizes the activation
too and multiplies in int8 or float8 (dynamic activation). The schemes, where
each runs, and the accuracy limit each is held to:

| scheme            | runs on                         | limit: relative RMSE vs fp64 |
|-------------------|---------------------------------|------------------------------|
| int8-dynamic      | CPU, CUDA                       | 0.05                         |
| int8-weight-only  | CPU, CUDA                       | 0.02                         |
| int4-weight-only  | CUDA, capability >= 8.0 (bf16)  | 0.10                         |
| float8-dynamic    | CUDA, capability >= 8.9         | 0.05                         |

The int8 limits are about twice the worst measured on the smoke workloads
(2-core EPYC, torch 2.14.1, torchao 0.18.0: int8-dynamic 0.0067 on ln-mlp and
0.024 on the ViT, weight-only 0.0028 and 0.0095); int4 and float8 have not run
on a GPU here and start from the errors torchao's own benchmarks report. The
fp32 output must also keep its cosine (0.99) and top-1 agreement (0.75), as the
reduced-precision cases do. What a scheme saves in memory is reported as the
bytes `torch.save` writes for the state dict, before and after.
"""

from __future__ import annotations

import copy
import importlib.metadata
import io
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from torch import nn

from ..measuring.accuracy import ReducedPrecision
from ..measuring.case import Case
from ..measuring.hardware import Requires
from ..measuring.in_effect import InEffect, Sides
from ..measuring.workload import InferenceWorkload, not_applicable
from . import Technique

TORCHAO = {"2.14": "0.18.0", "2.9": "0.15.0"}
"""The torchao release for each torch of tox.ini, by torch's major.minor: 0.18.0, tested here with torch 2.14.1
(constraints.txt; it loads its C++ kernels from torch 2.11 on), and 0.15.0, the release torchao's own
compatibility table lists as built against torch 2.9.1."""


@dataclass(frozen=True)
class Scheme:
    config: str
    """The torchao config class, built with `options`."""
    max_relative_rmse: float
    requires: Requires = field(default_factory=Requires)
    dtype: torch.dtype | None = None
    """The dtype the model is converted to before quantizing (int4's kernels take bf16)."""
    options: tuple[tuple[str, Any], ...] = ()


# torchao's int8 configs default to their version 1 (AffineQuantizedTensor, deprecated) in 0.15.0 and to version 2
# (Int8Tensor) in 0.18.0: named, so both releases quantize to the same tensor subclass.
INT8_TENSOR = (("version", 2),)
SCHEMES = {
    "int8-dynamic": Scheme("Int8DynamicActivationInt8WeightConfig", 0.05, options=INT8_TENSOR),
    "int8-weight-only": Scheme("Int8WeightOnlyConfig", 0.02, options=INT8_TENSOR),
    "int4-weight-only": Scheme(
        "Int4WeightOnlyConfig",
        0.10,
        Requires(cuda=True, min_capability=(8, 0), why="torchao's int4 weight-only kernels are CUDA kernels"),
        dtype=torch.bfloat16,
        options=(("group_size", 128),),
    ),
    "float8-dynamic": Scheme(
        "Float8DynamicActivationFloat8WeightConfig",
        0.05,
        Requires(cuda=True, min_capability=(8, 9), why="float8 matmuls need Ada or Hopper tensor cores"),
    ),
}


def torchao_problem() -> str | None:
    """Why torchao cannot quantize here (not installed, or built for another torch); None where it can."""
    try:
        import torchao.quantization  # noqa: F401
    except (ImportError, RuntimeError, OSError) as error:
        return f"torchao is not importable with torch {torch.__version__}: {str(error).splitlines()[0]}"
    installed = importlib.metadata.version("torchao")
    tested = TORCHAO.get(".".join(torch.__version__.split(".")[:2]))
    if tested is not None and installed != tested:
        return (
            f"torchao {installed} is installed; with torch {torch.__version__} this suite uses {tested}"
            f" (pip install torchao=={tested})"
        )
    return None


def state_bytes(model: nn.Module) -> int:
    """What `torch.save` writes for the model's state dict: a quantized tensor's real storage, scales included."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getbuffer().nbytes


def quantize(model: nn.Module, scheme: Scheme) -> nn.Module:
    """`model` (copied) with every Linear weight quantized by torchao under `scheme`."""
    from torchao import quantization

    quantized = copy.deepcopy(model)
    if scheme.dtype is not None:
        quantized = quantized.to(scheme.dtype)
    quantization.quantize_(quantized, getattr(quantization, scheme.config)(**dict(scheme.options)))
    return quantized


@dataclass(frozen=True)
class QuantizedLinears:
    """In effect: the model's Linear layers hold torchao tensors, not plain weights."""

    model: nn.Module

    def __call__(self, case: Sides) -> InEffect:
        from torchao.utils import TorchAOBaseTensor

        linears = [module for module in self.model.modules() if isinstance(module, nn.Linear)]
        quantized = [linear for linear in linears if isinstance(linear.weight, TorchAOBaseTensor)]
        kinds = sorted({type(linear.weight).__name__ for linear in quantized})
        evidence = f"{len(quantized)} of {len(linears)} Linear layers hold torchao weights ({', '.join(kinds)})"
        return InEffect("torchao quantization", bool(quantized), evidence)


def quantized(workload: InferenceWorkload, scheme_name: str, floor: float, profile: str) -> Case:
    """The fp32 model compiled vs its Linear layers quantized under `scheme_name`, compiled."""
    scheme = SCHEMES[scheme_name]
    # Before quantizing: a scheme's kernels may not exist on this device at all.
    if why := scheme.requires.unmet(workload.device, profile) or torchao_problem():
        pytest.skip(why)
    fp32 = workload.model()
    if not any(isinstance(module, nn.Linear) for module in fp32.modules()):
        not_applicable(workload.name, f"torchao {scheme_name}", "it has no nn.Linear layer to quantize")
    model = quantize(fp32, scheme)
    inputs = workload.inputs_as(scheme.dtype)
    sizes = (state_bytes(fp32), state_bytes(model))

    def details() -> dict[str, Any]:
        return {"state_dict_bytes": {"fp32": sizes[0], scheme_name: sizes[1]}, "size_ratio": sizes[0] / sizes[1]}

    return workload.case(
        workload.call(torch.compile(fp32)),
        workload.call(torch.compile(model), inputs),
        accuracy=ReducedPrecision(max_relative_rmse=scheme.max_relative_rmse),
        floor=floor,
        requires=scheme.requires,
        names=("fp32 compiled", f"{scheme_name} compiled"),
        variant=scheme_name,
        expect_compiled=True,
        details=details,
        in_effect=(QuantizedLinears(model),),
    )


TECHNIQUE = Technique(
    "quantization",
    "torchao quantization (int8 dynamic, weight-only, fp8) vs the fp32 or bf16 model",
    "torchao",
    order=200,
)
