"""PyTorch's tuning guide, DistributedDataParallel: no_sync accumulation, gradient_as_bucket_view, static_graph, and
the bucket size, on 2 ranks of torch.distributed (gloo on CPUs, NCCL with a GPU per rank).

Each case starts its ranks (this process is rank 0) and tears them down when
it ends, passing or failing. A timed call is one optimizer step of 4
micro-batches on both ranks; after 4 steps from the initial weights, the ranks'
parameters must be equal and within rounding of one process training on the
whole micro-batches (see `optbench.techniques.ddp`).
"""

from __future__ import annotations

import pytest

from optbench.measuring.hardware import VOLTA
from optbench.techniques.ddp import TECHNIQUE, DdpSettings, ddp_case

pytestmark = pytest.mark.technique(TECHNIQUE)

# (optimized settings, floor on a GPU runner): not measured on GPUs yet, the first CUDA baseline replaces these.
VARIANTS = {
    "no_sync": (DdpSettings(no_sync=True), 1.0),
    "gradient_as_bucket_view": (DdpSettings(gradient_as_bucket_view=True), 1.0),
    "static_graph": (DdpSettings(static_graph=True), 1.0),
    "bucket_cap_mb:0.25": (DdpSettings(bucket_cap_mb=0.25), 0.9),
    "bucket_cap_mb:100": (DdpSettings(bucket_cap_mb=100), 0.9),
}


# Smoke: one accumulation setting and one graph setting; the bucket sizes and the bucket view run in standard.
@pytest.mark.smoke("no_sync-ddp-mlp", "static_graph-ddp-mlp")
@pytest.mark.trainings("ddp-mlp")
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_ddp(optbench, training, variant):
    settings, gpu_floor = VARIANTS[variant]
    with ddp_case(
        training,
        settings,
        floor=training.floor(lambda: gpu_floor),
        floor_applies_on=(VOLTA,),
        names=("DDP defaults", settings.label),
        variant=variant,
    ) as case:
        optbench.run(case)
