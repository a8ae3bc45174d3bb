"""PyTorch's tuning guide: avoid needless CPU-GPU synchronization. The reference is a training loop with the
habit, the optimized side the same loop without it; both change no number (losses compared bitwise).

- `.item()` on the loss every step, to log it, makes the host wait for the step's last kernel before it can
  queue the next step: the GPU idles while the host launches. The optimized loop sums the loss on the device
  and reads the sum once per `LOG_EVERY` steps.
- A tensor the step makes for itself (here a mask of ones over the input, as loops build attention masks)
  created on the host and moved with `.to(device)`: a copy from pageable memory, which waits. The optimized
  loop creates it on the device (`device=` at creation).

Each side's reads and host-to-device copies are counted in one observed stretch of calls, so a loop that still
syncs (or still copies) fails as not in effect. CUDA only: on a CPU the host is the device.
"""

from __future__ import annotations

import pytest

from optbench import Requires
from optbench.measuring.accuracy import TrainingAgreement
from optbench.measuring.training import Tricks
from optbench.techniques.host_sync import TECHNIQUE

pytestmark = pytest.mark.technique(TECHNIQUE)

CUDA = Requires(cuda=True, why="on a CPU the host is the device: .item() waits for no queue and .to() copies nothing")
LOG_EVERY = 16
# (reference, optimized): the habit and the loop without it.
VARIANTS = {
    "loss read every step": (Tricks(log_loss_every=1), Tricks(log_loss_every=LOG_EVERY)),
    "tensors made on the host": (Tricks(new_tensors="host"), Tricks(new_tensors="device")),
}
# Not measured on a GPU yet: ln-mlp's step is a few hundred small kernels, launch-bound, where a wait per step
# shows; the first CUDA baseline replaces this guess.
GPU_FLOOR = 1.05


@pytest.mark.trainings("ln-mlp")
@pytest.mark.parametrize("habit", list(VARIANTS))
def test_host_sync(optbench, training, habit):
    reference, optimized = VARIANTS[habit]
    optbench.run(
        training.case(
            optimized,
            reference=reference,
            accuracy=TrainingAgreement(loss_tolerance=0),
            floor=training.floor(lambda: GPU_FLOOR),
            requires=CUDA,
            names=(reference.label, optimized.label),
            variant=habit,
        )
    )
