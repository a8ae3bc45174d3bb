"""PyTorch's tuning guide, asynchronous data loading: DataLoader worker processes, persistent, prefetching.

A training epoch fed by a loader that does real CPU work per sample (decoding
JPEG bytes, a `transforms.v2` augmentation chain), against the same epoch
loaded in the training process (num_workers=0). Each timed call is one epoch
window from the loader's iter() to its last batch, so a non-persistent
loader's worker start-up is paid in every epoch, as a user pays it; each side's
start-up alone (iter() to first batch, first and second epoch) is reported in
the case's details. Workers change where batches are made, never what they
are: the batches of two epochs are compared bitwise, which is what seeding each
sample's augmentation (not each worker) guarantees.
"""

from __future__ import annotations

import pytest

from optbench.measuring.accuracy import SameBatches
from optbench.measuring.hardware import VOLTA
from optbench.measuring.training import Loading, Tricks
from optbench.techniques.dataloader_workers import TECHNIQUE

pytestmark = pytest.mark.technique(TECHNIQUE)

IN_PROCESS = Tricks(loading=Loading(num_workers=0))
WORKERS = 2
# (optimized loading, floor on a GPU runner): there the step leaves the CPU free, and hiding the loader behind it
# is the guide's main claim; not measured on a GPU yet, so the first CUDA baseline replaces these guesses.
VARIANTS = {
    "workers": (Loading(WORKERS), 1.0),
    "workers+persistent": (Loading(WORKERS, persistent_workers=True), 1.1),
    "workers+persistent+prefetch:4": (Loading(WORKERS, persistent_workers=True, prefetch_factor=4), 1.1),
}


# Smoke: the variant that sets every loader option; each option alone runs in standard.
@pytest.mark.smoke("workers+persistent+prefetch:4-jpeg-mlp")
@pytest.mark.trainings("jpeg-mlp")
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_dataloader_workers(optbench, training, variant):
    loading, gpu_floor = VARIANTS[variant]
    optbench.run(
        training.case(
            Tricks(loading=loading),
            reference=IN_PROCESS,
            accuracy=SameBatches(),
            floor=training.floor(lambda: gpu_floor),
            floor_applies_on=(VOLTA,),
            names=("num_workers=0", loading.label),
            variant=loading.label,
        )
    )
