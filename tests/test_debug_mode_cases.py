"""Debug-mode cases: each side shows its mode inside the forward, a mode left on globally is caught, and the numbers
agree as each case's accuracy check says."""

from dataclasses import replace

import pytest
import torch

from fixtures.data import synthetic_split
from fixtures.training import PatchMLP, TrainingSpec, training_workload
from optbench.measuring.accuracy import TrainingAgreement
from optbench.measuring.training import OFF, REORDERED_FP32, Tricks

SPEC = TrainingSpec(lambda: PatchMLP(8, 2), 4, 4, 1, 16)
# Four steps of a tiny model learn nothing: agreement with the reference is what is checked here.
BITWISE = TrainingAgreement(loss_tolerance=0, min_accuracy=None)


@pytest.fixture
def workload():
    return training_workload("tiny", SPEC, torch.device("cpu"), synthetic_split(16, 16, 0))


def debug_case(workload, mode, accuracy):
    return workload.case(OFF, reference=Tricks(debug=mode), accuracy=accuracy, floor=1.1, names=(mode, "off"))


def seen(case):
    return [(observer(case).in_effect, observer(case).text()) for observer in case.in_effect]


def test_anomaly_detection_is_read_on_in_the_reference_and_off_in_the_optimized_step(workload):
    case = debug_case(workload, "anomaly_detection", BITWISE)
    observed = seen(case)
    assert [ok for ok, _ in observed] == [True, True], observed
    assert "reference autograd anomaly detection read True" in observed[0][1]
    assert case.accuracy(case.reference_output(), case.optimized_output()).passed


def test_anomaly_detection_left_on_for_the_whole_process_is_not_turned_off(workload):
    case = debug_case(workload, "anomaly_detection", BITWISE)
    with torch.autograd.set_detect_anomaly(True):
        observed = seen(case)
    assert [ok for ok, _ in observed] == [True, False]
    assert "autograd anomaly detection read True inside the forward (expected False)" in observed[1][1]


def test_fp64_trains_in_float64_and_the_fp32_run_stays_within_reordering(workload):
    case = debug_case(workload, "fp64", replace(REORDERED_FP32, min_accuracy=None))
    observed = seen(case)
    assert [ok for ok, _ in observed] == [True, True], observed
    assert "torch.float64" in observed[0][1] and "torch.float32" in observed[1][1]
    reference = case.reference_output()
    assert reference.parameters[0].dtype == torch.float64
    assert case.accuracy(reference, case.optimized_output()).passed


def test_an_unknown_debug_mode_is_a_one_line_error():
    with pytest.raises(ValueError, match="unknown debug mode 'profile'; choose one of anomaly_detection, profiler"):
        Tricks(debug="profile")


def test_the_profiler_is_read_recording_in_the_reference_step_only(workload):
    case = debug_case(workload, "profiler", BITWISE)
    observed = seen(case)
    assert [ok for ok, _ in observed] == [True, True], observed
    assert "reference the profiler recording read True" in observed[0][1]
    assert case.accuracy(case.reference_output(), case.optimized_output()).passed
