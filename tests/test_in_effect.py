"""Every optimization proves it is in effect: observers on tiny models, then planted no-ops in real catalogue cases.

The planted runs are the point of the issue: with autocast, channels_last, set_to_none or the bf16 conversion
made a no-op, the catalogue case used to pass on a machine without history ("1.00x, does not pay here",
unchanged numbers). `planted_no_ops` is a `-p` plugin, so every pytest process of the run is planted.
"""

import contextlib
import os
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest
import torch
from torch import nn

from optbench import Case, Exact, internals
from optbench.measuring.accuracy import Accuracy, Check, TrainingOutcome
from optbench.measuring.in_effect import (
    Autocast,
    AutogradMode,
    ChangesNumbers,
    ChannelsLast,
    Converted,
    GradsCleared,
    InEffect,
    PinnedCopies,
    SettingInside,
)
from optbench.measuring.switches import settings, under
from optbench.storage.record import read_records
from optbench.verdict.gate import Floor, GateSettings, judge

ROOT = Path(__file__).resolve().parents[1]


def native_bf16() -> bool:
    """Whether this CPU runs bf16 natively (AVX512-BF16, AMX), read at call time, as the catalogue's own skip is."""
    return torch.backends.mkldnn.is_available() and internals.runs_natively_on_cpu(torch.bfloat16)


BF16 = pytest.mark.skipif(not native_bf16(), reason="needs native bf16 on this CPU")


def tiny_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


IMAGES = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))


def tiny_mlp() -> nn.Sequential:
    """Two Linear layers and no convolution: bf16 matmuls run on any CPU, natively or emulated."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))


VECTORS = torch.randn(2, 8, generator=torch.Generator().manual_seed(0))


def case_of(optimized, reference=lambda: torch.zeros(1), **fields) -> Case:
    return Case(reference=reference, optimized=optimized, accuracy=Exact(), floor=1.0, **fields)


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, set_to_none: bool, autocast=None):
    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=set_to_none)
        with torch.autocast("cpu", dtype=autocast, enabled=autocast is not None):
            loss = model(IMAGES).square().mean()
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


@BF16
def test_autocast_is_seen_in_the_dtype_of_every_matmul_and_convolution_forward_and_backward():
    model = tiny_cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = Autocast(torch.bfloat16)(case_of(train_step(model, optimizer, True, autocast=torch.bfloat16)))
    # Two convolutions and a linear, forward, and their backward: all in bf16.
    assert seen.in_effect and seen.text().startswith("autocast:bf16 ran ") and "in bfloat16" in seen.text()


@BF16
def test_autocast_is_seen_under_inference_mode_too():
    """inference_mode skips the autograd key that decomposes conv2d and linear: the mode meets them whole."""
    model = tiny_cnn()

    @torch.inference_mode()
    def call() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(IMAGES)

    assert Autocast(torch.bfloat16)(case_of(call)).evidence == "ran 3 of 3 matmul/conv in bfloat16"


def test_autocast_that_does_nothing_is_not_in_effect():
    model = tiny_cnn()
    seen = Autocast(torch.bfloat16)(case_of(lambda: model(IMAGES)))
    assert seen == InEffect("autocast:bf16", False, "ran no matmul/conv in bfloat16 (0 of 3 ops)")
    nothing = Autocast(torch.bfloat16)(case_of(lambda: IMAGES.relu()))
    assert not nothing.in_effect and "ran no matmul/conv at all" in nothing.evidence


def test_autocast_around_part_of_the_forward_is_not_in_effect():
    """Half done is not done: the last layer run outside autocast (its input cast back to fp32) leaves one of the
    two matmuls in fp32, and a technique that reached only part of the model must not pass as in effect."""
    model = tiny_mlp()

    def call() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            hidden = model[:2](VECTORS)
        return model[2](hidden.float())

    seen = Autocast(torch.bfloat16)(case_of(call))
    assert seen == InEffect("autocast:bf16", False, "ran 1 of 2 matmul/conv in bfloat16")


@pytest.mark.parametrize(
    ("model_dtype", "output", "in_effect", "evidence"),
    [
        (torch.bfloat16, lambda y: y, True, "has 4 of 4 parameters and 1 of 1 outputs in bfloat16"),
        (torch.bfloat16, lambda y: y.float(), False, "has 4 of 4 parameters and 0 of 1 outputs in bfloat16"),
        (torch.float32, lambda y: y.bfloat16(), False, "has 0 of 4 parameters and 1 of 1 outputs in bfloat16"),
        (torch.bfloat16, lambda y: y.argmax(dim=-1), False, "has 4 of 4 parameters and 0 of 0 outputs in bfloat16"),
    ],
    ids=["converted", "outputs-cast-back", "only-outputs-cast", "no-floating-output"],
)
def test_a_conversion_is_in_effect_only_with_its_parameters_and_some_output_in_the_dtype(
    model_dtype, output, in_effect, evidence
):
    """Each half alone is a conversion that did not happen: a converted model whose output is cast back to fp32
    shows nothing of bf16's numbers, an fp32 model whose output is cast to bf16 ran in fp32, and a call with no
    floating output shows no dtype at all."""
    model = tiny_mlp().to(model_dtype)
    seen = Converted(torch.bfloat16, model)(case_of(lambda: output(model(VECTORS.to(model_dtype)))))
    assert seen == InEffect("bf16", in_effect, evidence)


@BF16
def test_a_converted_model_has_its_parameters_and_outputs_in_the_dtype():
    model = tiny_cnn().to(torch.bfloat16)
    inputs = IMAGES.to(torch.bfloat16)
    assert Converted(torch.bfloat16, model)(case_of(lambda: model(inputs))).in_effect
    fp32 = tiny_cnn()
    skipped = Converted(torch.bfloat16, fp32)(case_of(lambda: fp32(IMAGES)))
    assert skipped == InEffect("bf16", False, "has 0 of 6 parameters and 0 of 1 outputs in bfloat16")


def test_channels_last_is_seen_on_every_convolutions_input_and_output():
    model = tiny_cnn().to(memory_format=torch.channels_last)
    inputs = IMAGES.contiguous(memory_format=torch.channels_last)
    assert ChannelsLast()(case_of(lambda: model(inputs))).in_effect
    # A model converted but fed NCHW images: the first convolution reads them as they are.
    half_done = ChannelsLast()(case_of(lambda: model(IMAGES)))
    assert not half_done.in_effect and half_done.evidence.startswith("ran 1 of 2 convolutions")
    assert not ChannelsLast()(case_of(lambda: tiny_cnn()(IMAGES))).in_effect
    with torch.inference_mode():  # where InferenceWorkload.case runs its calls
        assert ChannelsLast()(case_of(lambda: model(inputs))).evidence.startswith("ran 2 of 2 convolutions")


def test_a_convolution_that_writes_nchw_is_not_channels_last_whatever_its_input():
    """One-channel images are channels_last and NCHW at once, so the input alone says nothing; an unconverted
    model's convolution still writes NCHW activations for every layer after it."""
    grayscale = nn.Conv2d(1, 4, 3)
    images = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    seen = ChannelsLast()(case_of(lambda: grayscale(images)))
    assert seen == InEffect(
        "channels_last", False, "ran 0 of 1 convolutions on channels_last activations (input and output)"
    )


MODES = {"grad": contextlib.nullcontext, "no_grad": torch.no_grad, "inference_mode": torch.inference_mode}


@pytest.mark.parametrize("ran", list(MODES))
@pytest.mark.parametrize("declared", list(MODES))
def test_each_autograd_mode_is_told_apart_by_its_outputs(declared, ran):
    model = tiny_cnn()

    def call():
        with MODES[ran]():
            return model(IMAGES)

    seen = AutogradMode(declared)(case_of(call))
    assert seen.in_effect == (declared == ran), seen.text()
    reference = AutogradMode(declared, side="reference")(case_of(lambda: None, reference=call))
    assert reference.in_effect == (declared == ran) and reference.technique == f"reference {declared}"


def test_a_setting_is_read_inside_the_models_forward():
    model = tiny_cnn()
    change = (torch.backends.mkldnn.matmul, "fp32_precision", "bf16")
    observer = SettingInside(*change, "oneDNN matmul fp32_precision", model)
    set_around_the_call = observer(case_of(under((change,), lambda: model(IMAGES))))
    assert set_around_the_call.in_effect and "read 'bf16' inside the forward" in set_around_the_call.evidence
    # Set where the case meant to, but not around the call that ran: what a lost `under` looks like.
    with settings(change):
        pass
    lost = observer(case_of(lambda: model(IMAGES)))
    assert not lost.in_effect and lost.text().startswith("oneDNN matmul fp32_precision read 'none'")
    never = SettingInside(*change, "oneDNN matmul fp32_precision", tiny_cnn())(case_of(lambda: model(IMAGES)))
    assert not never.in_effect and never.evidence == "was never read: the model's forward did not run"


def test_host_to_device_copies_from_pageable_memory_are_not_pinned():
    """On CPU, a copy to the meta device stands in for host-to-device: seen, and not pinned."""
    batch = torch.ones(4, 3)
    seen = PinnedCopies(non_blocking=True)(case_of(lambda: batch.to("meta", non_blocking=True)))
    assert seen == InEffect(
        "pin_memory+non_blocking", False, "copied 0 of 1 host batches from pinned memory, 1 of them non_blocking"
    )
    none = PinnedCopies()(case_of(lambda: batch.to(torch.float64)))
    assert not none.in_effect and none.evidence.startswith("made no host-to-device copy")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs CUDA")
def test_pinned_non_blocking_copies_are_in_effect():
    pinned, pageable = torch.ones(4, 3).pin_memory(), torch.ones(4, 3)
    assert PinnedCopies(non_blocking=True)(case_of(lambda: pinned.to("cuda", non_blocking=True))).in_effect
    assert not PinnedCopies()(case_of(lambda: pageable.to("cuda"))).in_effect
    assert not PinnedCopies(non_blocking=True)(case_of(lambda: pinned.to("cuda"))).in_effect


@pytest.mark.parametrize("asked", [True, False])
@pytest.mark.parametrize("declared", [True, False])
def test_zero_grad_is_seen_leaving_gradients_none_or_zero_filled(declared, asked):
    model = tiny_cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = train_step(model, optimizer, set_to_none=asked)
    step()  # gradients exist from here on, as after a warm-up
    seen = GradsCleared(lambda: optimizer, set_to_none=declared)(case_of(step))
    assert seen.in_effect == (declared == asked), seen.text()
    assert seen.evidence == f"left {6 if asked else 0} of 6 gradients None"
    assert "zero_grad" not in vars(optimizer)  # the instance's wrapper is gone


class HalfCleared(torch.optim.SGD):
    """set_to_none done by halves: the first parameter group's gradients go to None, the rest are zero-filled."""

    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none=False)
        if set_to_none:
            for parameter in self.param_groups[0]["params"]:
                parameter.grad = None


@pytest.mark.parametrize("declared", [True, False])
def test_zero_grad_done_by_halves_is_in_effect_for_neither_setting(declared):
    """Some gradients None and some zero-filled is neither setting; and every zero_grad of the call must show the
    declared one, as a step that clears twice (once each way) may not pass on the one that matches."""
    model = tiny_cnn()
    first, *rest = model.parameters()
    half = HalfCleared([{"params": [first]}, {"params": rest}], lr=0.1)
    half_step = train_step(model, half, set_to_none=True)
    half_step()
    by_halves = GradsCleared(lambda: half, set_to_none=declared)(case_of(half_step))
    assert not by_halves.in_effect and by_halves.evidence == "left 1 of 6 gradients None"
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    cleared, filled = train_step(model, optimizer, set_to_none=True), train_step(model, optimizer, set_to_none=False)
    twice = GradsCleared(lambda: optimizer, set_to_none=declared)(case_of(lambda: (cleared(), filled())))
    assert not twice.in_effect and twice.evidence == f"left {0 if declared else 6} of 6 gradients None"


def test_zero_grad_never_called_is_not_in_effect():
    optimizer = torch.optim.SGD(tiny_cnn().parameters(), lr=0.1)
    assert GradsCleared(lambda: optimizer, set_to_none=True)(case_of(lambda: None)).evidence == "was never called"


@BF16
def test_a_precision_change_that_leaves_every_number_unchanged_is_suspicious():
    model, reduced = tiny_cnn(), tiny_cnn().to(torch.bfloat16)
    assert ChangesNumbers("bf16")(case_of(lambda: reduced(IMAGES.bfloat16()), lambda: model(IMAGES))).in_effect
    same = ChangesNumbers("bf16")(case_of(lambda: model(IMAGES), lambda: model(IMAGES)))
    assert same == InEffect("bf16", False, "left every number bitwise equal to the reference's")


def test_training_runs_are_compared_by_their_losses_and_parameters():
    run = TrainingOutcome(torch.tensor([2.0, 1.5]), 0.5, (torch.ones(3),))
    moved = TrainingOutcome(torch.tensor([2.0, 1.5]), 0.5, (torch.ones(3) + 1e-3,))
    assert not ChangesNumbers("autocast:bf16")(
        case_of(None, None, reference_output=lambda: run, optimized_output=lambda: run)
    ).in_effect
    assert ChangesNumbers("autocast:bf16")(
        case_of(None, None, reference_output=lambda: run, optimized_output=lambda: moved)
    ).in_effect


def test_the_gate_fails_what_is_not_in_effect_everywhere():
    accuracy = Accuracy((Check("max_abs_diff", 0.0, 0.0, lower_is_better=True),))
    gate = GateSettings(false_alarm_rate=0.02, min_effect=0.05, confirmations=2, accuracy_drift=0.5)
    seen = [InEffect("channels_last", True, "ran 2 of 2"), InEffect("autocast:bf16", False, "ran no matmul/conv")]
    verdict = judge([], accuracy, Floor(1.2, applies_here=False), None, None, gate, in_effect=seen)
    assert verdict.status == "fail" and verdict.failures == ["not in effect: autocast:bf16 ran no matmul/conv"]
    assert judge([], accuracy, Floor(1.2, applies_here=False), None, None, gate, in_effect=seen[:1]).status == "pass"


def test_accuracy_goes_unchecked_only_where_the_optimization_is_not_in_effect():
    gate = GateSettings(false_alarm_rate=0.02, min_effect=0.05, confirmations=2, accuracy_drift=0.5)
    floor = Floor(1.2, applies_here=False)
    seen = [InEffect("channels_last", True, "ran 2 of 2"), InEffect("autocast:bf16", False, "ran no matmul/conv")]
    verdict = judge([], None, floor, None, None, gate, in_effect=seen)
    assert verdict.failures == ["not in effect: autocast:bf16 ran no matmul/conv"]
    assert "accuracy not checked: the optimization is not in effect" in verdict.notes
    with pytest.raises(ValueError, match="only where the optimization is not in effect"):
        judge([], None, floor, None, None, gate, in_effect=seen[:1])


NOT_IN_EFFECT = """
import torch
from optbench import Case, Exact
from optbench.measuring.in_effect import InEffect


def test_a_no_op(optbench):
    x = torch.ones(4)
    optbench.run(Case(reference=lambda: x + 1, optimized=lambda: x + 1, accuracy=Exact(), floor=1.2,
                      in_effect=(lambda case: InEffect("planted", False, "did nothing"),)))
"""


def test_a_case_not_in_effect_fails_in_its_summary_and_is_never_stored_as_a_baseline(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    pytester.makeconftest('pytest_plugins = ["optbench.plugin"]\n')
    pytester.makepyfile(test_no_op=NOT_IN_EFFECT)
    result = pytester.runpytest_subprocess(
        "--update-baselines", "--case-budget", "0.5", "--block-target", "0.01", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["test_a_no_op *fail 1,*", "1. not in effect: planted did nothing (test_a_no_op)"])
    assert not list((pytester.path / "baselines").glob("*.json"))
    # Failed on being a no-op, before its accuracy runs: the record says accuracy was not checked, and why.
    (record,) = read_records(pytester.path / ".optbench")
    assert record.accuracy is None and "accuracy" not in record.phases_s and "in effect" in record.phases_s
    assert "accuracy not checked: the optimization is not in effect" in record.verdict.notes


# (catalogue case, what its planted no-op fails as). Autocast is caught in test_amp[bf16-resnet], the case that
# passed with it planted before, and in the training stack, where the set_to_none no-op is caught too.
PLANTED = {
    "test_amp.py::test_amp[bf16-resnet]": "not in effect: autocast:bf16 ran no matmul/conv in bf*",
    "test_training_stack.py::test_training_stack[ln-mlp]": "not in effect: autocast:bf16 ran no matmul/conv in bf*",
    "test_channels_last.py::test_channels_last[fp32-resnet]": "not in effect: channels_last ran 0 of * convolutions*",
    "test_zero_grad.py::test_zero_grad[wide-mlp]": "not in effect: zero_grad(set_to_none=True) left 0 of * None",
    "test_reduced_precision.py::test_reduced_precision[bf16-resnet]": "not in effect: bf16 has 0 of * parameters*",
}
NEEDS_BF16 = frozenset(
    {
        "test_amp.py::test_amp[bf16-resnet]",
        "test_training_stack.py::test_training_stack[ln-mlp]",
        "test_reduced_precision.py::test_reduced_precision[bf16-resnet]",
    }
)
"""The planted cases that skip on a CPU without native bf16 (or, the training stack, leave autocast out there)."""


def planted_here() -> dict[str, str]:
    """The planted cases this CPU runs: the channels_last and set_to_none no-ops are caught on every CPU, so only
    the bf16 ones are left out where bf16 is not native, never the whole run."""
    bf16 = native_bf16()
    return {node: failure for node, failure in PLANTED.items() if bf16 or node not in NEEDS_BF16}


def test_a_cpu_without_native_bf16_still_plants_the_no_ops_that_need_no_bf16(monkeypatch):
    monkeypatch.setattr(internals, "runs_natively_on_cpu", lambda dtype: False)
    assert set(planted_here()) == set(PLANTED) - NEEDS_BF16 != set()
    monkeypatch.setattr(internals, "runs_natively_on_cpu", lambda dtype: True)
    assert planted_here() == PLANTED


def test_planted_no_ops_in_real_catalogue_cases_fail_as_not_in_effect_without_history(tmp_path):
    """Every no-op this CPU can run planted in one run (each touches only its own technique), against an empty
    history; without native bf16 the bf16 cases skip, and the channels_last and set_to_none no-ops are still caught.

    Untimed (--benchmark-disable): what is observed does not depend on the timing, which on a machine without
    history gates nothing anyway; the harness's own test above shows a timed case failing the same way.
    """
    planted = planted_here()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    command = [sys.executable, "-m", "pytest", *(f"benchmarks/{node}" for node in planted), "-p", "planted_no_ops"]
    command += ["--profile", "smoke", "--baselines-dir", str(tmp_path / "empty"), "--results-dir", str(tmp_path)]
    command += ["--update-baselines", "--benchmark-disable", "-p", "no:cacheprovider"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output
    failures = {record.node_id: record.verdict.failures for record in read_records(tmp_path)}
    for node, failure in planted.items():
        assert any(fnmatch(line, failure) for line in failures[f"benchmarks/{node}"]), (node, failures)
    assert all(record.accuracy is None for record in read_records(tmp_path))  # failed before their accuracy ran
    assert f"{len(planted)} failed" in output
    # --update-baselines, and still nothing stored: a case not in effect is never anyone's baseline.
    assert not list((tmp_path / "empty").glob("*.json"))
