"""PyTorch's tuning guide: turn debug modes off for training. The reference leaves one on, the optimized side is
the same training with it off, and the floor holds on every device.

Anomaly detection (`torch.autograd.set_detect_anomaly(True)` around each
step) records every op's stack for backward and checks every gradient for
NaN; the profiler (`torch.profiler.profile` around each step) records every
op. Neither changes a number: losses and parameters are compared bitwise. fp64
(the model and batches in float64, as `torch.autograd.gradcheck` needs them)
does the same arithmetic in twice the bytes: the fp32 run is held to the fp32
reordering limit of the loss path against it. Each side proves its mode inside
the model's forward, so a mode left on where it should be off (set globally at
import, say) fails the case as not in effect.
"""

from __future__ import annotations

import pytest

from optbench.measuring.accuracy import TrainingAgreement
from optbench.measuring.hardware import ANY_DEVICE
from optbench.measuring.training import DEBUG_MODES, OFF, REORDERED_FP32, Tricks
from optbench.techniques.debug_modes import TECHNIQUE

pytestmark = pytest.mark.technique(TECHNIQUE)

ACCURACY = {
    "anomaly_detection": TrainingAgreement(loss_tolerance=0),
    "profiler": TrainingAgreement(loss_tolerance=0),
    "fp64": REORDERED_FP32,
}
# Measured on the 2-core EPYC (ln-mlp): 3.16x for anomaly detection off, 2.01x for fp32 over fp64; GPUs run fp64 at
# 1/2 (data centre) to 1/64 (consumer) of fp32's rate.
FLOORS = {"anomaly_detection": 1.5, "profiler": 1.5, "fp64": 1.3}


@pytest.mark.trainings("ln-mlp")
@pytest.mark.parametrize("mode", DEBUG_MODES)
def test_debug_modes(optbench, training, mode):
    optbench.run(
        training.case(
            OFF,
            reference=Tricks(debug=mode),
            accuracy=ACCURACY[mode],
            floor=training.floor(lambda: FLOORS[mode]),
            floor_applies_on=(ANY_DEVICE,),
            names=(f"debug:{mode}", "debug off"),
            variant=f"{mode} off",
        )
    )
