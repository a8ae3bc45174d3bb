"""The training techniques' observers (`optbench.measuring.in_effect`) on stand-in cases, each verdict and its words
exact.

The catalogue's own tests (test_data_loading, test_optimizer_tricks, test_memory_payoff, test_host_sync_cases)
show each observer on the real technique, in worker processes and real training steps: seconds each. These
run in milliseconds, so that mutation testing can hold every branch and every word of the evidence: an
observer's sentence is what a user reads when a case fails "not in effect".
"""

import os
import re
from types import SimpleNamespace

import pytest
import torch

from optbench.measuring import in_effect
from optbench.measuring.accuracy import TrainingOutcome
from optbench.measuring.in_effect import (
    HOST_READS,
    HOST_TO_DEVICE_COPIES,
    Autocast,
    AutogradMode,
    ChangesNumbers,
    ChannelsLast,
    Converted,
    GradsCleared,
    HostTraffic,
    InEffect,
    LessMemory,
    LoaderWorkers,
    OpCall,
    OptimizerKernels,
    PinnedCopies,
    Recomputes,
    SettingInside,
    _host_to_device,
    _is_host_read,
)

HERE = os.getpid()


def case(reference=lambda: None, optimized=lambda: None):
    """What an observer uses of a Case: its two sides."""
    return SimpleNamespace(reference=reference, optimized=optimized)


def loader_workers(batches, num_workers, persistent=False, prefetch_factor=None, read=2, side="optimized"):
    """LoaderWorkers over a case whose every call loads the next of `batches` (the process ids that collated it)."""
    loaded = iter(batches)
    last = []

    def one_call():
        last[:] = next(loaded)

    observed = case(reference=one_call, optimized=one_call)
    loader = SimpleNamespace(prefetch_factor=read)
    observer = LoaderWorkers(lambda: loader, lambda: list(last), num_workers, persistent, prefetch_factor, side)
    return observer(observed)


def test_persistent_prefetching_workers_are_seen_by_their_process_ids_and_the_loader_s_setting():
    seen = loader_workers([[101, 102], [102, 101]], 2, persistent=True, prefetch_factor=4, read=4)
    assert seen == InEffect(
        "optimized DataLoader(num_workers=2, persistent_workers=True, prefetch_factor=4)",
        True,
        "collated batches in 2 and 2 worker processes in two epochs, the same ones in the second; prefetch_factor 4",
    )


def test_workers_started_anew_each_epoch_are_what_non_persistent_workers_do():
    seen = loader_workers([[101, 102], [103, 104]], 2)
    assert seen == InEffect(
        "optimized DataLoader(num_workers=2)",
        True,
        "collated batches in 2 and 2 worker processes in two epochs, new ones in the second; prefetch_factor 2",
    )


@pytest.mark.parametrize(
    ("batches", "persistent", "prefetch", "read", "evidence"),
    [
        # persistent workers that restart every epoch
        ([[101, 102], [103, 104]], True, None, 2, "in 2 and 2 worker processes in two epochs, new ones in"),
        # non-persistent workers that were kept
        ([[101, 102], [101, 102]], False, None, 2, "in 2 and 2 worker processes in two epochs, the same ones in"),
        # one worker where two were asked for, in either epoch
        ([[101], [101]], True, None, 2, "in 1 and 1 worker processes"),
        ([[101, 102], [101]], False, None, 2, "in 2 and 1 worker processes"),
        ([[101, 102, 103], [104, 105, 106]], False, None, 2, "in 3 and 3 worker processes"),
        # this process collating beside the workers
        ([[HERE, 101, 102], [HERE, 103, 104]], False, None, 2, "in 2 and 2 worker processes in two epochs (this"),
        ([[101, 102], [HERE, 103, 104]], False, None, 2, "(this process too), new ones"),
        # a prefetch factor the loader does not hold
        ([[101, 102], [103, 104]], False, 4, 2, "prefetch_factor 2"),
        ([[101, 102], [103, 104]], False, None, 4, "prefetch_factor 4"),
    ],
)
def test_workers_that_do_not_do_what_was_asked_are_not_in_effect(batches, persistent, prefetch, read, evidence):
    seen = loader_workers(batches, 2, persistent=persistent, prefetch_factor=prefetch, read=read)
    assert not seen.in_effect and evidence in seen.evidence, seen


def test_loading_in_this_process_is_what_num_workers_0_asks_for():
    assert loader_workers([[HERE], [HERE]], 0) == InEffect(
        "optimized DataLoader(num_workers=0)", True, f"collated in processes [{HERE}]"
    )
    elsewhere = loader_workers([[HERE], [HERE, 101]], 0)
    assert elsewhere == InEffect(
        "optimized DataLoader(num_workers=0)", False, f"collated in processes {sorted([HERE, 101])}"
    )
    assert not loader_workers([[101], [HERE]], 0).in_effect


@pytest.mark.parametrize("batches", [[[], []], [[101, 102], []], [[], [101, 102]]])
def test_a_loader_that_loads_nothing_in_either_call_shows_no_workers(batches):
    assert loader_workers(batches, 2, side="reference") == InEffect(
        "reference DataLoader(num_workers=2)", False, "loaded no batch, so nothing shows who loads them"
    )


def test_the_reference_side_is_the_one_called_when_asked_for():
    calls = []
    observed = case(reference=lambda: calls.append("reference"), optimized=lambda: calls.append("optimized"))
    loader = SimpleNamespace(prefetch_factor=2)
    LoaderWorkers(lambda: loader, lambda: [HERE], 0, False, None, "reference")(observed)
    assert calls == ["reference", "reference"]


def peaks(monkeypatch, *bytes_):
    """LessMemory's reading of peak memory replaced by `bytes_`, in the order of the calls (reference first)."""
    readings = iter(bytes_)
    monkeypatch.setattr(in_effect, "peak_memory_bytes", lambda call, device: (call(), next(readings))[1])


def test_less_peak_memory_is_in_effect_and_equal_or_more_is_not(monkeypatch):
    observer = LessMemory("activation checkpointing", torch.device("cpu"))
    peaks(monkeypatch, 3 * 2**20, 2**20 + 2**19)
    assert observer(case()) == InEffect(
        "activation checkpointing", True, "needed 1.5 MiB at peak in a call against the reference's 3.0 MiB"
    )
    peaks(monkeypatch, 2**20, 2**20)
    assert not observer(case()).in_effect
    peaks(monkeypatch, 2**20, 2**20 + 1)
    assert not observer(case()).in_effect


@pytest.mark.parametrize("readings", [(None, 2**20), (2**20, None)])
def test_a_device_without_peak_memory_leaves_nothing_to_compare(monkeypatch, readings):
    peaks(monkeypatch, *readings)
    assert LessMemory("x", torch.device("cpu"))(case()) == InEffect(
        "x", False, "left no peak memory to compare on this device"
    )


def test_less_memory_is_measured_on_each_side_s_own_call():
    """No stand-in: the CPU profiler's allocator events, 8 MiB held by the reference's call and 1 by the other's."""
    observed = case(reference=lambda: torch.ones(2 * 2**20).sum(), optimized=lambda: torch.ones(2**18).sum())
    seen = LessMemory("x", torch.device("cpu"))(observed)
    reference, optimized = (
        float(value)
        for value in re.fullmatch(
            r"needed (.*) MiB at peak in a call against the reference's (.*) MiB", seen.evidence
        ).groups()[::-1]
    )
    assert seen.in_effect and abs(reference - 8) < 0.5 and abs(optimized - 1) < 0.5, seen


def test_a_checkpointed_step_is_seen_running_more_matmuls():
    a = torch.randn(4, 4)
    once, twice = (lambda: a @ a), (lambda: (a @ a) @ a)
    assert Recomputes()(case(once, twice)) == InEffect(
        "activation checkpointing", True, "ran 2 matmuls in a step against the reference's 1"
    )
    assert Recomputes()(case(twice, twice)) == InEffect(
        "activation checkpointing", False, "ran 2 matmuls in a step against the reference's 2"
    )
    assert not Recomputes()(case(twice, once)).in_effect


def step(**implementation):
    parameter = torch.nn.Parameter(torch.ones(3))
    parameter.grad = torch.ones(3)
    optimizer = torch.optim.SGD([parameter], lr=0.1, **implementation)
    return optimizer.step


FOR_LOOP, FOREACH, FUSED = step(foreach=False), step(foreach=True), step(fused=True)


def both_kernels():
    FOREACH()
    FUSED()


@pytest.mark.parametrize(
    ("implementation", "call", "in_effect", "evidence"),
    [
        ("foreach", FOREACH, True, "dispatched foreach kernels"),
        ("foreach", FOR_LOOP, False, "dispatched neither foreach nor fused kernels"),
        ("foreach", both_kernels, False, "dispatched foreach and fused kernels"),
        ("fused", FUSED, True, "dispatched fused kernels"),
        ("fused", both_kernels, True, "dispatched foreach and fused kernels"),
        ("fused", FOREACH, False, "dispatched foreach kernels"),
        ("for-loop", FOR_LOOP, True, "dispatched neither foreach nor fused kernels"),
        ("for-loop", FOREACH, False, "dispatched foreach kernels"),
        ("for-loop", FUSED, False, "dispatched fused kernels"),
    ],
)
def test_each_implementation_is_told_by_the_kernels_its_step_dispatched(implementation, call, in_effect, evidence):
    assert OptimizerKernels(implementation)(case(optimized=call)) == InEffect(
        f"optimizer:{implementation}", in_effect, evidence
    )


def test_the_reference_s_implementation_is_named_as_the_reference_s():
    assert OptimizerKernels("for-loop", "reference")(case(reference=FOR_LOOP, optimized=FOREACH)) == InEffect(
        "reference optimizer:for-loop", True, "dispatched neither foreach nor fused kernels"
    )


CPU = torch.zeros(2)
DEVICE = torch.empty(2, device="meta")
"""A tensor on another device than the host's: `meta` stands in for a GPU on a machine without one."""


@pytest.mark.parametrize(
    ("call", "copy"),
    [
        (OpCall("aten._to_copy", (CPU,), {}, (DEVICE,)), (CPU, False)),
        (OpCall("aten._to_copy", (CPU,), {"non_blocking": True}, (DEVICE,)), (CPU, True)),
        (OpCall("aten.copy_", (DEVICE, CPU), {}, (DEVICE,)), (CPU, False)),
        (OpCall("aten.copy_", (DEVICE, CPU, True), {}, (DEVICE,)), (CPU, True)),
        (OpCall("aten.copy_", (DEVICE, CPU, False), {"non_blocking": True}, (DEVICE,)), (CPU, True)),
        (OpCall("aten._to_copy", (CPU,), {}, (CPU,)), None),  # host to host
        (OpCall("aten._to_copy", (DEVICE,), {}, (CPU,)), None),  # device to host
        (OpCall("aten.copy_", (CPU, DEVICE), {}, (CPU,)), None),
        (OpCall("aten.copy_", (DEVICE, 1.0), {}, (DEVICE,)), None),  # a fill, not a copy of a tensor
    ],
)
def test_a_host_to_device_copy_is_told_from_other_copies(call, copy):
    found = _host_to_device(call)
    assert (found if found is None else (found[0] is copy[0], found[1])) == (copy if copy is None else (True, copy[1]))


@pytest.mark.parametrize(
    ("call", "read"),
    [
        (OpCall("aten._local_scalar_dense", (CPU,), {}, ()), True),
        (OpCall("aten._to_copy", (DEVICE,), {}, (CPU,)), True),
        (OpCall("aten._to_copy", (CPU,), {}, (CPU,)), False),
        (OpCall("aten._to_copy", (CPU,), {}, (DEVICE,)), False),
        (OpCall("aten.copy_", (CPU, DEVICE), {}, (CPU,)), False),
    ],
)
def test_a_host_read_is_a_scalar_read_or_a_copy_back_to_the_host(call, read):
    assert _is_host_read(call) is read


def copies_to_meta(count, non_blocking=False):
    def call():
        for _ in range(count):
            torch.zeros(2).to("meta", non_blocking=non_blocking)

    return call


def pinned(monkeypatch, value):
    """Pinned host memory without a GPU: what `is_pinned()` answers for every host tensor."""
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self: value)


def test_pinned_copies_are_seen_in_every_host_to_device_copy(monkeypatch):
    pinned(monkeypatch, True)
    assert PinnedCopies()(case(optimized=copies_to_meta(2))) == InEffect(
        "pin_memory", True, "copied 2 of 2 host batches from pinned memory"
    )
    assert PinnedCopies(non_blocking=True)(case(optimized=copies_to_meta(3, non_blocking=True))) == InEffect(
        "pin_memory+non_blocking", True, "copied 3 of 3 host batches from pinned memory, 3 of them non_blocking"
    )
    assert PinnedCopies(non_blocking=True)(case(optimized=copies_to_meta(2))) == InEffect(
        "pin_memory+non_blocking", False, "copied 2 of 2 host batches from pinned memory, 0 of them non_blocking"
    )
    waiting_once = case(optimized=lambda: (copies_to_meta(1, non_blocking=True)(), copies_to_meta(1)()))
    assert not PinnedCopies(non_blocking=True)(waiting_once).in_effect
    assert PinnedCopies(side="reference")(case(reference=copies_to_meta(1))).in_effect


def test_copies_from_pageable_memory_or_no_copy_at_all_are_not_pinned_copies(monkeypatch):
    pinned(monkeypatch, False)
    assert PinnedCopies()(case(optimized=copies_to_meta(2))) == InEffect(
        "pin_memory", False, "copied 0 of 2 host batches from pinned memory"
    )
    assert PinnedCopies(non_blocking=True)(case(optimized=lambda: None)) == InEffect(
        "pin_memory+non_blocking", False, "made no host-to-device copy, so nothing shows pinned memory"
    )


def reads(count):
    def call():
        for _ in range(count):
            torch.ones(1).item()

    return call


@pytest.mark.parametrize(
    ("calls", "reference", "optimized", "in_effect"),
    [(1, 4, 2, True), (1, 4, 3, False), (1, 2, 2, False), (1, 2, 3, False), (2, 4, 3, True)],
)
def test_host_reads_removed_are_counted_over_the_calls_of_both_sides(calls, reference, optimized, in_effect):
    seen = HostTraffic("reads", HOST_READS, calls=calls, fewer=2)(case(reads(reference), reads(optimized)))
    expected = f"made {calls * optimized} host reads in {calls} call(s) against the reference's {calls * reference}"
    assert seen == InEffect("reads", in_effect, f"{expected} (expected at least 2 fewer)")


def test_host_to_device_copies_removed_are_counted_as_copies_not_reads():
    seen = HostTraffic("masks", HOST_TO_DEVICE_COPIES, calls=1, fewer=1)(case(copies_to_meta(3), copies_to_meta(1)))
    assert seen == InEffect(
        "masks", True, "made 1 host-to-device copies in 1 call(s) against the reference's 3 (expected at least 1 fewer)"
    )
    # A host read is not a copy to the device, nor the other way round.
    assert HostTraffic("m", HOST_TO_DEVICE_COPIES, 1, 1)(case(reads(3), reads(0))).evidence.startswith("made 0 ")
    assert HostTraffic("r", HOST_READS, 1, 1)(case(copies_to_meta(3), reads(0))).evidence.startswith("made 0 ")


def convolutions(*layouts):
    """One 2-d convolution per layout, each on an input and with weights in that layout (its output follows)."""
    weight = torch.randn(2, 3, 1, 1)
    images = torch.randn(1, 3, 4, 4)

    def call():
        for layout in layouts:
            torch.nn.functional.conv2d(images.to(memory_format=layout), weight.to(memory_format=layout))

    return call


CHANNELS_LAST, CONTIGUOUS = torch.channels_last, torch.contiguous_format


def test_channels_last_counts_the_convolutions_that_read_and_wrote_it():
    assert ChannelsLast()(case(optimized=convolutions(CHANNELS_LAST, CHANNELS_LAST))) == InEffect(
        "channels_last", True, "ran 2 of 2 convolutions on channels_last activations (input and output)"
    )
    assert ChannelsLast("reference")(case(reference=convolutions(CHANNELS_LAST, CONTIGUOUS))) == InEffect(
        "channels_last", False, "ran 1 of 2 convolutions on channels_last activations (input and output)"
    )
    assert ChannelsLast()(case(optimized=lambda: torch.ones(3) * 2)) == InEffect(
        "channels_last", False, "ran no convolution, so nothing shows the layout"
    )


def test_a_tensor_without_four_dimensions_has_no_layout_to_get_wrong():
    signal = torch.randn(1, 3, 8)
    conv1d = case(optimized=lambda: torch.nn.functional.conv1d(signal, torch.randn(2, 3, 1)))
    assert ChannelsLast()(conv1d).in_effect


def matmuls(*dtypes):
    a = torch.randn(4, 4)

    def call():
        for dtype in dtypes:
            a.to(dtype) @ a.to(dtype)

    return call


def test_autocast_counts_the_matmuls_in_its_dtype_and_a_half_done_run_is_not_in_effect():
    bf16 = torch.bfloat16
    assert Autocast(bf16)(case(optimized=matmuls(bf16, bf16))) == InEffect(
        "autocast:bf16", True, "ran 2 of 2 matmul/conv in bfloat16"
    )
    assert Autocast(bf16)(case(optimized=matmuls(bf16, torch.float32))) == InEffect(
        "autocast:bf16", False, "ran 1 of 2 matmul/conv in bfloat16"
    )
    assert Autocast(bf16, "reference")(case(reference=matmuls(torch.float32))) == InEffect(
        "autocast:bf16", False, "ran no matmul/conv in bfloat16 (0 of 1 ops)"
    )
    assert Autocast(bf16)(case(optimized=lambda: torch.ones(2) + 1)) == InEffect(
        "autocast:bf16", False, "ran no matmul/conv at all, so nothing shows it acting"
    )


def test_a_conversion_is_the_model_s_parameters_and_the_call_s_outputs_all_in_the_dtype():
    model = torch.nn.Linear(2, 2)
    half = torch.float16
    outputs = {"fp16": lambda: (torch.ones(2, dtype=half), torch.ones(2, dtype=half)), "none": lambda: ()}
    assert Converted(half, model.half())(case(optimized=outputs["fp16"])) == InEffect(
        "fp16", True, "has 2 of 2 parameters and 2 of 2 outputs in float16"
    )
    mixed = lambda: (torch.ones(2, dtype=half), torch.ones(2))  # noqa: E731
    assert Converted(half, model)(case(optimized=mixed)) == InEffect(
        "fp16", False, "has 2 of 2 parameters and 1 of 2 outputs in float16"
    )
    model.bias.data = model.bias.data.float()
    assert Converted(half, model, "reference")(case(reference=outputs["fp16"])) == InEffect(
        "fp16", False, "has 1 of 2 parameters and 2 of 2 outputs in float16"
    )
    # Integer outputs (token ids) are not what a conversion changes; a call with no floating output shows nothing.
    tokens = lambda: (torch.ones(2, dtype=torch.long),)  # noqa: E731
    assert not Converted(half, model.half())(case(optimized=tokens)).in_effect


def forward(mode):
    linear = torch.nn.Linear(2, 2)
    contexts = {"grad": torch.enable_grad, "no_grad": torch.no_grad, "inference_mode": torch.inference_mode}

    def call():
        with contexts[mode]():
            return linear(torch.ones(1, 2)), linear(torch.ones(1, 2))

    return call


@pytest.mark.parametrize("mode", ["grad", "no_grad", "inference_mode"])
def test_each_autograd_mode_is_told_by_the_marks_its_outputs_carry(mode):
    marks = {"grad": (0, 2), "no_grad": (0, 0), "inference_mode": (2, 0)}
    for other in ("grad", "no_grad", "inference_mode"):
        inference, history = marks[other]
        seen = AutogradMode(mode)(case(optimized=forward(other)))
        assert seen == InEffect(
            mode, other == mode, f"gave {inference} of 2 outputs as inference tensors, {history} with autograd history"
        )


def test_the_reference_s_autograd_mode_is_named_so_and_a_call_without_outputs_shows_nothing():
    assert AutogradMode("grad", "reference")(case(reference=forward("grad"))).technique == "reference grad"
    assert AutogradMode("no_grad")(case(optimized=lambda: [])) == InEffect(
        "no_grad", False, "gave 0 of 0 outputs as inference tensors, 0 with autograd history"
    )


def test_a_setting_is_read_inside_the_forward_at_every_call():
    model = torch.nn.Linear(2, 2)
    switch = SimpleNamespace(value=1)

    def flips():
        model(torch.ones(2))
        switch.value = 2
        model(torch.ones(2))
        switch.value = 1

    observer = SettingInside(switch, "value", 1, "the switch", model)
    assert observer(case(optimized=lambda: model(torch.ones(2)))) == InEffect(
        "the switch", True, "read 1 inside the forward (expected 1)"
    )
    assert observer(case(optimized=flips)) == InEffect("the switch", False, "read 1, 2 inside the forward (expected 1)")
    reference = SettingInside(switch, "value", 2, "the switch", model, "reference")
    assert reference(case(reference=lambda: None)) == InEffect(
        "reference the switch", False, "was never read: the model's forward did not run"
    )
    assert not model._forward_pre_hooks  # the hook is gone after the call


def zero_grad_case(set_to_none, steps=1, clears=True):
    parameters = [torch.nn.Parameter(torch.ones(2)) for _ in range(3)]
    optimizer = torch.optim.SGD(parameters, lr=0.1)

    def call():
        for _ in range(steps):
            for parameter in parameters:
                parameter.grad = torch.ones(2)
            if clears:
                optimizer.zero_grad(set_to_none=set_to_none)

    return optimizer, call


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_is_seen_doing_what_it_was_asked_after_every_call(set_to_none):
    optimizer, call = zero_grad_case(set_to_none, steps=2)
    left = 3 if set_to_none else 0
    assert GradsCleared(lambda: optimizer, set_to_none)(case(optimized=call)) == InEffect(
        f"zero_grad(set_to_none={set_to_none})", True, f"left {left} of 3 gradients None"
    )
    wrong = GradsCleared(lambda: optimizer, not set_to_none, "reference")(case(reference=call))
    assert wrong == InEffect(
        f"reference zero_grad(set_to_none={not set_to_none})", False, f"left {left} of 3 gradients None"
    )
    assert optimizer.zero_grad.__func__ is torch.optim.SGD.zero_grad  # unwrapped again


def test_zero_grad_never_called_shows_nothing_and_one_step_of_the_other_kind_is_caught():
    optimizer, call = zero_grad_case(True, clears=False)
    assert GradsCleared(lambda: optimizer, True)(case(optimized=call)) == InEffect(
        "zero_grad(set_to_none=True)", False, "was never called"
    )
    optimizer, _ = zero_grad_case(True)

    def one_of_each():
        for set_to_none in (True, False):
            for parameter in optimizer.param_groups[0]["params"]:
                parameter.grad = torch.ones(2)
            optimizer.zero_grad(set_to_none=set_to_none)

    assert GradsCleared(lambda: optimizer, True)(case(optimized=one_of_each)) == InEffect(
        "zero_grad(set_to_none=True)", False, "left 0 of 3 gradients None"
    )
    assert GradsCleared(lambda: optimizer, False)(case(optimized=one_of_each)) == InEffect(
        "zero_grad(set_to_none=False)", False, "left 3 of 3 gradients None"
    )


def outputs(reference, optimized, **declared):
    return SimpleNamespace(
        reference=lambda: reference,
        optimized=lambda: optimized,
        reference_output=declared.get("reference_output"),
        optimized_output=declared.get("optimized_output"),
    )


@pytest.mark.parametrize(
    ("reference", "optimized", "changed"),
    [
        (torch.ones(3), torch.ones(3, dtype=torch.bfloat16), False),  # equal once converted back
        (torch.ones(3), torch.ones(3) + 2**-20, True),
        ((torch.ones(3), torch.ones(3)), (torch.ones(3),), True),  # fewer outputs
        (torch.ones(4), torch.ones(2, 2), True),  # another shape
    ],
)
def test_a_precision_change_is_seen_changing_some_number(reference, optimized, changed):
    words = {
        False: "left every number bitwise equal to the reference's",
        True: "changed the numbers, as reduced precision must",
    }
    assert ChangesNumbers("bf16")(outputs(reference, optimized)) == InEffect("bf16", changed, words[changed])


def test_declared_accuracy_outputs_are_compared_and_a_training_run_by_its_losses_and_parameters():
    run = TrainingOutcome(torch.ones(3), None, (torch.ones(2),))
    moved = TrainingOutcome(torch.ones(3), None, (torch.ones(2) * 1.5,))
    declared = outputs(torch.zeros(1), torch.zeros(1), reference_output=lambda: run, optimized_output=lambda: moved)
    assert ChangesNumbers("amp")(declared).in_effect
    same = outputs(torch.zeros(1), torch.ones(1), reference_output=lambda: run, optimized_output=lambda: run)
    assert not ChangesNumbers("amp")(same).in_effect


def test_zero_grad_called_with_its_argument_by_position_is_seen_doing_what_it_was_asked():
    optimizer, _ = zero_grad_case(False)

    def keeps_them():
        for parameter in optimizer.param_groups[0]["params"]:
            parameter.grad = torch.ones(2)
        optimizer.zero_grad(False)

    assert GradsCleared(lambda: optimizer, False)(case(optimized=keeps_them)).in_effect


def test_outputs_are_compared_in_the_reference_s_dtype_not_a_promoted_one():
    """A bf16 reference's output against an fp32 one that rounds to it: equal in bf16, unequal in fp32."""
    rounds_to_one = torch.ones(3) + 2**-20
    assert not ChangesNumbers("x")(outputs(torch.ones(3, dtype=torch.bfloat16), rounds_to_one)).in_effect
