"""channels_last (NHWC) training of the seed's CNN: not in the seeds, a standard trick for tensor cores.

On GPUs cuDNN's tensor-core convolutions want NHWC; on a CPU without them it
measured about 0.9x for a CIFAR ResNet18 step, and the record says so.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from optbench.measuring.training import OFF, REORDERED_FP32
from optbench.techniques.channels_last_training import TECHNIQUE

pytestmark = pytest.mark.technique(TECHNIQUE)


@pytest.mark.trainings("resnet")
def test_channels_last_training(optbench, training):
    optbench.run(
        training.case(
            replace(OFF, channels_last=True),
            accuracy=REORDERED_FP32,
            floor=training.floor(lambda: 0.75),
            names=("contiguous", "channels_last"),
            variant="channels_last",
        )
    )
