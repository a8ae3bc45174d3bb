"""torchao weight quantization on the Linear layers: the fp32 model compiled -> quantized and compiled (torchao's
recommended use), int8 dynamic-activation and int8 weight-only on every device, int4 weight-only and float8 on
the CUDA capabilities that have them (see `optbench.techniques.quantization` for each scheme's accuracy limit).

The record's details give the state dict's bytes before and after. On the
user's model (--model) every Linear layer is quantized; a model without one
skips with that reason.
"""

from __future__ import annotations

import pytest

from optbench.techniques.quantization import SCHEMES, TECHNIQUE, quantized

pytestmark = pytest.mark.technique(TECHNIQUE)

FLOORS = {"int8-dynamic": 1.0, "int8-weight-only": 1.0, "int4-weight-only": 1.0, "float8-dynamic": 1.0}


# Smoke: the int8 schemes once each, on different workloads (the other pairing in standard); the CUDA-only schemes
# on both.
CUDA_ONLY = [
    f"{scheme}-{workload}" for scheme in SCHEMES if not scheme.startswith("int8") for workload in ("ln-mlp", "vit")
]


@pytest.mark.smoke("int8-dynamic-ln-mlp", "int8-weight-only-vit", *CUDA_ONLY)
@pytest.mark.workloads("ln-mlp", "vit")
@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_quantization(optbench, workload, profile, scheme):
    optbench.run(quantized(workload, scheme, workload.floor(lambda: FLOORS[scheme]), profile.name))
