"""Values shared by a run's case processes: computed once, by whichever process needs them first."""

import subprocess
import sys

import torch

from optbench.measuring.accuracy import TrainingOutcome
from optbench.measuring.shared import RunShared

KEY = ("resnet", "synthetic", ("Tricks", None))


def test_a_value_is_computed_once_per_run_across_processes(tmp_path):
    calls = []

    def train():
        calls.append(1)
        return TrainingOutcome(torch.arange(3.0), 0.5, (torch.ones(2),))

    first = RunShared(tmp_path).get(KEY, train)
    # Another process of the same run reads it instead of training again.
    program = (
        "import torch; from optbench.measuring.shared import RunShared; "
        f"value = RunShared({str(tmp_path)!r}).get({KEY!r}, lambda: 1 / 0); print(value.losses.tolist())"
    )
    finished = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert finished.stdout.strip().endswith("[0.0, 1.0, 2.0]")
    again = RunShared(tmp_path).get(KEY, train)
    assert calls == [1] and torch.equal(again.parameters[0], first.parameters[0])
    assert not list(tmp_path.glob("*.part"))


def test_without_a_folder_values_stay_in_memory_and_other_keys_compute_their_own():
    shared = RunShared()
    assert shared.get(KEY, lambda: 0.25) == 0.25
    assert shared.get(KEY, lambda: 1 / 0) == 0.25
    assert shared.get((*KEY, 2**-8), lambda: 0.5) == 0.5
