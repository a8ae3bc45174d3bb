"""--model/--inputs: the user's model loaded, checked and measured by the catalogue's own techniques."""

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from transformers.modeling_outputs import BaseModelOutput

from optbench.advise.own_model import SpecError, load_workload
from optbench.measuring.accuracy import Close, Leaves
from optbench.measuring.case import Observed
from optbench.measuring.compilation import CompileActivity
from optbench.measuring.hardware import Requires, dtype_unsupported_reason
from optbench.running.runner import raised_by_harness
from optbench.storage.record import read_records
from optbench.techniques.cudnn_benchmark import cudnn_benchmark_apart
from optbench.techniques.reduced_precision import reduced_precision
from tests import own_models
from tests.catalogue_run import catalogue

ROOT = Path(__file__).resolve().parent.parent
MODELS = "tests/own_models.py"
CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("model", "inputs", "says"),
    [
        ("own_models", f"{MODELS}:features", "expected package.module:function or path/to/file.py:function"),
        ("no_such_package.models:model", f"{MODELS}:features", "does not import: ModuleNotFoundError"),
        ("tests/missing.py:model", f"{MODELS}:features", "no such file tests/missing.py"),
        (f"{MODELS}:absent", f"{MODELS}:features", "names no function: tests/own_models.py has no attribute 'absent'"),
        (f"{MODELS}:NOT_CALLABLE", f"{MODELS}:features", "NOT_CALLABLE is a int, not a function"),
        (f"{MODELS}:not_a_model", f"{MODELS}:features", "returned a str: return a torch.nn.Module"),
        (f"{MODELS}:breaks_in_bf16", f"{MODELS}:not_a_batch", "returned a str: make it one batch"),
        (f"{MODELS}:breaks_in_bf16", f"{MODELS}:wrong_width", "rejects --inputs 'tests/own_models.py:wrong_width'"),
        (f"{MODELS}:in_training_mode", f"{MODELS}:features", "in training mode (dropout, batch-norm updates)"),
        (f"{MODELS}:samples", f"{MODELS}:features", "different outputs for two identical calls"),
        (f"{MODELS}:breaks_in_bf16", None, "needs --inputs SPEC"),
    ],
)
def test_a_spec_that_cannot_be_measured_is_one_line_naming_it(model, inputs, says, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SpecError) as error:
        load_workload(model, inputs, None, CPU)
    assert says in str(error.value)
    assert "\n" not in str(error.value)


def test_a_function_that_raises_shows_its_traceback_once_then_one_line(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SpecError, match=r"'tests/own_models.py:raises' raised RuntimeError: weights file missing"):
        load_workload(f"{MODELS}:raises", f"{MODELS}:features", None, CPU)
    assert capsys.readouterr().err.count("Traceback (most recent call last)") == 1


def test_the_model_function_may_take_the_device_and_inputs_may_be_positional(monkeypatch):
    monkeypatch.chdir(ROOT)
    workload = load_workload(f"{MODELS}:tagger", f"{MODELS}:sentences", "tagger-gru", CPU)
    assert workload.name == "tagger-gru" and workload.own_model
    assert workload.model() is not workload.model()  # each variant gets its own copy
    assert not workload.convolves() and workload.multiplies_matrices()
    # Token ids stay integers when the floating inputs are converted.
    assert all(t.dtype == torch.long for t in workload.inputs_as(torch.bfloat16))


@dataclass
class Prediction:
    scores: torch.Tensor
    label: torch.Tensor


def test_leaves_compares_integer_leaves_exactly_and_logits_by_top1():
    logits = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    same = Leaves(Close())(Prediction(logits, logits.argmax(-1)), Prediction(logits + 1e-6, logits.argmax(-1)))
    assert same.passed
    assert {check.metric for check in same.checks} == {"allclose_excess", "integer_leaves_differing", "top1_agreement"}
    flipped = Leaves(Close(atol=10, rtol=0))(
        Prediction(logits, torch.tensor([1, 0])), Prediction(logits.flip(1), torch.tensor([0, 1]))
    )
    assert [check.metric for check in flipped.failures] == ["integer_leaves_differing", "top1_agreement"]


def test_leaves_reads_model_outputs_and_nested_dicts():
    hidden = torch.randn(2, 3, 4)
    output = BaseModelOutput(last_hidden_state=hidden)
    assert Leaves(Close())(output, {"out": [hidden * 1.5]}).failures[0].metric == "allclose_excess"
    assert Leaves(Close())(output, BaseModelOutput(last_hidden_state=hidden.clone())).passed


def test_an_error_inside_optbench_is_not_blamed_on_the_model():
    from optbench.measuring.workload import forward

    with pytest.raises(RuntimeError) as in_torch:
        torch.linalg.inv(torch.zeros(2, 2, dtype=torch.bfloat16))
    with pytest.raises(TypeError) as in_optbench:
        forward(lambda: None, torch.zeros(1))  # a call optbench gets wrong
    assert not raised_by_harness(in_torch.value)
    assert raised_by_harness(in_optbench.value)


def test_calls_that_differ_by_rounding_are_the_same_model_and_random_ones_are_not(monkeypatch):
    """The two calls of the spec check differ on a model whose sums change order (a loaded machine's threads): that
    is not randomness and the model loads; noise added in the forward is, and the error says how far apart."""
    monkeypatch.chdir(ROOT)
    model = own_models.reorders_its_sums()
    with torch.inference_mode():
        assert not torch.equal(model(own_models.features()), model(own_models.features()))  # the calls do differ
    load_workload(f"{MODELS}:reorders_its_sums", f"{MODELS}:features", "sums", CPU)
    with pytest.raises(SpecError, match=r"two identical calls \(RMS difference 0\.\d+ of the outputs' RMS\)"):
        load_workload(f"{MODELS}:samples", f"{MODELS}:features", "noise", CPU)


def test_a_model_that_cannot_run_stops_the_run_before_anything_is_written(tmp_path):
    results = tmp_path / "results"
    run = catalogue("--model", f"{MODELS}:samples", "--inputs", f"{MODELS}:features", results=results)
    assert run.returncode == 4
    errors = [line for line in run.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "different outputs for two identical calls" in errors[0]
    assert not results.exists()


def test_a_technique_that_breaks_the_model_is_that_case_s_outcome_and_the_run_goes_on(tmp_path):
    unsupported = [dtype_unsupported_reason(dtype, CPU) for dtype in (torch.bfloat16, torch.float16)]
    if all(unsupported):
        pytest.skip(f"the reduced dtypes this model breaks in are not measured on this CPU: {unsupported[0]}")
    results = tmp_path / "results"
    run = catalogue(
        "--model",
        f"{MODELS}:breaks_in_bf16",
        "--inputs",
        f"{MODELS}:features",
        results=results,
        select="reduced_precision or grad-vs-no_grad or channels_last",
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert "does not work on this model: RuntimeError during first calls (compilation)" in run.stdout
    assert "channels_last does not apply to breaks_in_bf16: it runs no convolution" in run.stdout
    (record,) = read_records(results)
    assert record.case.endswith("test_inference_mode[grad-vs-no_grad-breaks_in_bf16]")
    assert not record.verdict.failures  # measured and judged like any case (pass, or inconclusive at this budget)


def test_a_recurrent_model_with_dict_outputs_runs_through_compile(tmp_path):
    results = tmp_path / "results"
    run = catalogue(
        "--model",
        f"{MODELS}:tagger",
        "--inputs",
        f"{MODELS}:sentences",
        results=results,
        select="compile and default",
    )
    records = {record.variant: record for record in read_records(results)}
    assert run.returncode == 0, run.stdout[-3000:]
    compiled = records["compile:default"]
    assert compiled.compile is not None and compiled.compile.graphs >= 1
    assert any(check.metric == "integer_leaves_differing" for check in compiled.accuracy.checks)


def test_the_hugging_face_example_takes_a_dict_and_its_model_output_is_compared_leaf_by_leaf(monkeypatch):
    """examples/hf_encoder.py through a technique's case, untimed: no special case for transformers."""
    monkeypatch.chdir(ROOT)
    workload = load_workload("examples/hf_encoder.py:model", "examples/hf_encoder.py:inputs", None, CPU)
    case = reduced_precision(workload, torch.bfloat16, floor=1.0, pays_on=())
    reference, optimized = case.reference(), case.optimized()
    assert type(optimized).__name__ == "BaseModelOutputWithPoolingAndCrossAttentions"
    accuracy = case.accuracy(reference, optimized, case.fp64_output())
    assert accuracy.passed, accuracy.checks
    assert {check.metric for check in accuracy.checks} >= {"cosine", "rel_rmse_vs_fp64", "format_rel_rmse_vs_fp64"}
    # The same comparison catches outputs an optimization got wrong.
    broken = type(optimized)(
        last_hidden_state=optimized.last_hidden_state.flip(0), pooler_output=optimized.pooler_output
    )
    assert not case.accuracy(reference, broken, case.fp64_output()).passed


def test_cudnn_benchmark_on_the_user_s_model_needs_cuda_and_says_so(monkeypatch):
    monkeypatch.chdir(ROOT)
    workload = load_workload("examples/cnn_bn.py:model", "examples/cnn_bn.py:inputs", "cnn", CPU)
    with pytest.raises(pytest.skip.Exception, match=r"needs a CUDA device: cudnn\.benchmark chooses among cuDNN"):
        with cudnn_benchmark_apart(workload, "smoke", 1.0):
            pass


def test_cudnn_benchmark_on_the_user_s_model_sets_the_flag_before_each_side_s_process_meets_a_shape(monkeypatch):
    """The CUDA path on the CPU, its requirement lifted: each side a fresh worker that builds the user's model from
    its SPECs with the flag set first, read back from inside the model's forward."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr("optbench.techniques.cudnn_benchmark.CUDNN_PLANS", Requires())
    workload = load_workload("examples/cnn_bn.py:model", "examples/cnn_bn.py:inputs", "cnn", CPU)
    with cudnn_benchmark_apart(workload, "smoke", 1.0) as case:
        case.reference(), case.optimized()
        assert case.accuracy(case.reference_output(), case.optimized_output(), case.fp64_output()).passed
        details = case.details()
    assert (details["reference"]["cudnn_benchmark"], details["optimized"]["cudnn_benchmark"]) == (False, True)
    observed = Observed(details, CompileActivity())
    assert all(check(observed).passed for check in case.checks)
    # A worker that never set the flag (a planted no-op) fails the optimized side's check.
    details["optimized"]["cudnn_benchmark"] = False
    assert [check(observed).passed for check in case.checks] == [True, False]
