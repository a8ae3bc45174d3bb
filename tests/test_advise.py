"""`python -m optbench advise`: words from records, the recipe they choose, and the whole command on an example."""

import copy
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch
from torch import nn

from optbench import TrainingSetup
from optbench.advise.advice import Advice, advice_of, choose_recipe, end_to_end_text, order_note, technique_label
from optbench.advise.own_model import load_training
from optbench.advise.recipe import Recipe, TrainingRecipe, load_recipe
from optbench.measuring.accuracy import Close, ReducedPrecision
from optbench.measuring.hardware import dtype_name
from optbench.measuring.in_effect import InEffect
from optbench.measuring.training import Tricks, recipe_tricks
from optbench.storage.record import AccuracySummary, Record, Variants, VerdictSummary
from optbench.verdict.stats import Interval

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import cnn_bn  # noqa: E402

HERE = Path(__file__).resolve()


class WithAutogradExtras(nn.Module):
    """cnn_bn's CNN that, with autograd on, also runs its network once more and drops the result, as a model
    computing training-only extras would: inference_mode pays about 2x on any CPU, so `advise` marks it *use* and
    always has a recipe to measure end to end (the cnn example alone pays for nothing on some CPUs)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = cnn_bn.model()

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            self.net(images)
        return self.net(images)


def autograd_heavy_model() -> nn.Module:
    """`--model tests/test_advise.py:autograd_heavy_model`."""
    return WithAutogradExtras().eval()


ZERO_FILL_S = 0.01


class CostlyZeroFill(torch.optim.AdamW):
    """AdamW whose zero-filling of gradients takes ZERO_FILL_S longer, as gradients far larger than the model's
    would: set_to_none, which skips the fill, pays on any CPU, so `advise` always has a training recipe to
    measure end to end."""

    def zero_grad(self, set_to_none: bool = True) -> None:
        if not set_to_none:
            time.sleep(ZERO_FILL_S)
        super().zero_grad(set_to_none=set_to_none)


def costly_zero_fill_training() -> TrainingSetup:
    """`--train tests/test_advise.py:costly_zero_fill_training`: cnn_bn's training setup with one of its blocks for
    a model, whose step computes for a few milliseconds, and CostlyZeroFill, so that set_to_none pays several times
    over whatever else runs on the machine (with the whole CNN, one second of rounds read 1.28x [0.75, 2.19])."""
    torch.manual_seed(0)
    model = nn.Sequential(cnn_bn.block(3, 8), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    return replace(cnn_bn.train(), model=model, optimizer=lambda parameters: CostlyZeroFill(parameters, lr=1e-3))


def record(technique, variant, speedup, accuracy_passed=True, in_effect=True, optimized="x"):
    return Record(
        case=f"smoke:benchmarks/test_{technique}.py::test_{technique}[{variant}-cnn]",
        technique=technique,
        variant=variant,
        variants=Variants("reference", optimized),
        profile="smoke",
        device="cpu",
        environment_key="cpu-test",
        speedup=Interval(*speedup),
        accuracy=AccuracySummary(accuracy_passed, True, []),
        in_effect=[InEffect(variant, in_effect, "saw it")],
        verdict=VerdictSummary("pass", [] if accuracy_passed else ["accuracy: cosine 0.5"], [], []),
    )


@pytest.mark.parametrize(
    ("speedup", "accuracy_passed", "in_effect", "word"),
    [
        ((1.2, 1.1, 1.3), True, True, "use"),
        ((0.99, 0.95, 1.03), True, True, "skip"),
        ((0.8, 0.7, 0.9), True, True, "hurts"),
        ((1.5, 1.4, 1.6), False, True, "breaks accuracy"),
        ((1.5, 1.4, 1.6), True, False, "does not work"),
    ],
)
def test_each_word_follows_from_the_record(speedup, accuracy_passed, in_effect, word):
    assert advice_of(record("compile", "default", speedup, accuracy_passed, in_effect), "cnn").word == word


def test_the_technique_label_drops_the_model_name():
    assert technique_label("smoke:b/test_compile.py::test_compile[default-cnn]", "cnn") == "compile[default]"
    assert technique_label("test_conv_precision[cnn]", "cnn") == "conv_precision"


def test_the_recipe_takes_the_fastest_dtype_its_layout_the_compile_mode_and_the_autograd_mode():
    advice = [
        advice_of(record(technique, variant, speedup), "cnn")
        for technique, variant, speedup in [
            ("reduced_precision", "bf16", (1.3, 1.2, 1.4)),
            ("reduced_precision", "fp16", (1.5, 1.4, 1.6)),
            ("channels_last", "channels_last:fp16", (1.1, 1.05, 1.15)),
            ("channels_last", "channels_last:bf16", (1.5, 1.4, 1.6)),
            ("compile", "compile:default", (1.2, 1.1, 1.3)),
            ("compile", "compile:max-autotune", (1.3, 1.2, 1.4)),
            ("compile", "compile:reduce-overhead", (1.5, 0.8, 2.0)),  # not "use": its interval reaches below 1
            ("inference_mode", "grad->inference_mode", (1.05, 1.02, 1.08)),
        ]
    ]
    recipe = choose_recipe(advice)
    assert recipe == Recipe(dtype="fp16", channels_last=True, compile_mode="max-autotune", autograd="inference_mode")


def test_fp32_precision_switches_are_taken_only_when_the_recipe_stays_in_fp32():
    tf32 = record("tf32", "bf16", (1.2, 1.1, 1.3), optimized="oneDNN bf16")
    assert choose_recipe([advice_of(tf32, "cnn")]).fp32_precision == (("mkldnn.matmul", "bf16"),)
    bf16 = record("reduced_precision", "bf16", (1.3, 1.2, 1.4))
    assert choose_recipe([advice_of(tf32, "cnn"), advice_of(bf16, "cnn")]).fp32_precision == ()
    assert choose_recipe([Advice("compile[default]", "does not work", "raised")]) == Recipe()


def test_the_training_part_takes_each_trick_that_paid_and_only_when_training_was_measured():
    advice = [
        advice_of(record(technique, variant, speedup), "cnn")
        for technique, variant, speedup in [
            ("zero_grad", "set_to_none", (1.1, 1.05, 1.15)),
            ("amp", "autocast:bf16", (1.3, 1.2, 1.4)),
            ("amp", "autocast:fp16", (0.7, 0.6, 0.8)),
            ("compile_training", "compile:default", (1.0, 0.9, 1.1)),  # skip: no gain shown
            ("channels_last_training", "channels_last", (1.2, 1.1, 1.3)),
            ("pin_memory", "pinned", (1.1, 1.05, 1.15)),
            ("pin_memory", "pinned+non_blocking", (1.3, 1.2, 1.4)),
            ("optimizer_impl", "foreach", (1.2, 1.1, 1.3)),
            ("optimizer_impl", "fused", (1.4, 1.3, 1.5)),
            ("compiled_optimizer", "compiled-step", (1.2, 1.1, 1.3)),
        ]
    ]
    assert choose_recipe(advice).training is None
    assert choose_recipe(advice, training=True).training == TrainingRecipe(
        set_to_none=True,
        autocast="bf16",
        channels_last=True,
        pin_memory=True,
        non_blocking=True,
        optimizer_impl="fused",
        compile_optimizer=True,
    )


def test_a_recipe_s_training_step_gives_the_numbers_of_the_tricks_it_names(tmp_path, monkeypatch):
    """The recipe file's standalone training_step against the catalogue's trainer with the same tricks (the
    training recipe's end-to-end case measures the trainer): bitwise the same losses, and not the same as the
    trainer's when the recipe names other tricks."""
    monkeypatch.chdir(ROOT)
    workload = load_training("examples/cnn_bn.py:train", None, torch.device("cpu"))
    tricks = Tricks(set_to_none=True, autocast=torch.bfloat16, channels_last=True, optimizer_impl="fused")

    def losses_of(training_recipe):
        recipe = write_recipe(tmp_path, Recipe(training=training_recipe))
        model = copy.deepcopy(workload.setup.model)
        step = recipe.training_step(model, workload.setup.optimizer(model.parameters()), workload.setup.loss,
                                    workload.setup.forward)  # fmt: skip
        return torch.stack([step(batch) for batch in workload.fixed_batches()[:3]])

    trainer = workload.trainer(tricks)
    expected = torch.stack([trainer.timed_steps()[0] for _ in range(3)])
    recipe = TrainingRecipe(set_to_none=True, autocast="bf16", channels_last=True, optimizer_impl="fused")
    assert recipe_tricks(asdict(recipe)) == tricks
    assert torch.equal(losses_of(recipe), expected)
    assert not torch.equal(losses_of(replace(recipe, autocast=None)), expected)


def write_recipe(tmp_path, recipe):
    path = tmp_path / "cnn_recipe.py"
    path.write_text(recipe.source("A test recipe.", "| table |"))
    return load_recipe(str(path))


def test_a_written_recipe_imports_applies_in_order_and_keeps_the_numbers(tmp_path):
    recipe = write_recipe(tmp_path, Recipe(dtype="bf16", channels_last=True, autograd="inference_mode"))
    plain, batch = cnn_bn.model(), cnn_bn.inputs(torch.device("cpu"))
    applied = recipe.apply(cnn_bn.model())
    conv = applied[0][0]
    assert conv.weight.dtype == torch.bfloat16 and conv.weight.is_contiguous(memory_format=torch.channels_last)
    output = recipe.run(applied, recipe.prepare(batch))
    assert output.dtype == torch.bfloat16 and output.is_inference()
    with torch.inference_mode():
        reference = plain(batch)
    assert ReducedPrecision()(reference, output).passed


def test_a_recipe_s_precision_switches_hold_only_during_its_calls(tmp_path):
    recipe = write_recipe(tmp_path, Recipe(fp32_precision=(("mkldnn.matmul", "bf16"),), compile_mode="default"))
    seen = []
    model = torch.nn.Linear(4, 4)
    model.register_forward_pre_hook(lambda *_: seen.append(torch.backends.mkldnn.matmul.fp32_precision))
    before = torch.backends.mkldnn.matmul.fp32_precision
    recipe.run(recipe.apply(model), torch.randn(2, 4))
    assert seen == ["bf16"] and torch.backends.mkldnn.matmul.fp32_precision == before


def advise(*arguments, cwd):
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "optbench", "advise", *arguments]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False, env=environment)


MEASURED_END_TO_END = (
    r"{what} end to end \({techniques}\) vs the plain fp32 model: \d+\.\d\dx \[\d+\.\d\d, \d+\.\d\d\], "
    r"accuracy passed; (agrees with its parts \(each faster\)|does NOT agree with its parts)"
)
"""A measured recipe's headline. Whether it agrees with its parts is the timing's to say: one second of a training
step on a busy 2-core machine read [0.37, 3.52]; which words each interval gets is
test_the_end_to_end_headline_says_what_the_recipe_s_record_shows's to pin."""


def end_to_end_headline(run: subprocess.CompletedProcess, page: str) -> str:
    """The page's end-to-end headline, checked to be what the run printed (wrapped there to the terminal)."""
    headline = page.split("\n## End to end\n\n", 1)[1].strip()
    printed = run.stdout[run.stdout.index("\nwrote ") :].split("\n", 2)[2]
    assert " ".join(printed.split()) == headline, printed
    return headline


def test_advise_on_the_cnn_example_writes_a_table_a_recipe_and_measures_it_end_to_end(tmp_path):
    """On the cnn example's CNN with autograd extras (WithAutogradExtras), so that the recipe always holds
    inference_mode and is measured end to end, whether or not a reduced dtype pays on this CPU."""
    example = ROOT / "examples" / "cnn_bn.py"
    # The profile's 24 rounds, not --min-rounds 4: the advice word is the interval's to say, and with 4 rounds on a
    # CI worker sharing the CPU inference_mode read 2.13x [0.93, 4.90] and was advised "skip" (2026-12-06).
    run = advise(
        "--model", f"{HERE}:autograd_heavy_model", "--inputs", f"{example}:inputs", "--model-name", "cnn",
        "--", "-k", "reduced_precision or (grad-vs-inference_mode and not no_grad)", "--case-budget", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    total = int(re.search(r"phase 1 \[1/(\d+)\] measuring", run.stdout).group(1))
    assert total >= 3 and f"phase 1 [{total}/{total}]" in run.stdout  # which case, how many left
    printed = lines[lines.index(next(line for line in lines if line.startswith("technique"))) :]
    assert max(len(line) for line in printed) <= 120
    page = (tmp_path / "optbench-advice" / "cnn.md").read_text()
    recipe = load_recipe(str(tmp_path / "optbench-advice" / "cnn_recipe.py"))
    assert recipe.TRAINING is None and "Training" not in page  # training was not asked for
    assert recipe.AUTOGRAD == "inference_mode", run.stdout[-3000:]
    assert not recipe.CHANNELS_LAST and recipe.COMPILE_MODE is None  # not measured
    assert "phase 2 [1/1] recipe: passed" in run.stdout, run.stdout[-3000:]
    techniques = " + ".join([*([dtype_name(recipe.DTYPE)] if recipe.DTYPE is not None else []), "inference_mode"])
    expected = MEASURED_END_TO_END.format(what="Recipe", techniques=re.escape(techniques))
    assert re.fullmatch(expected, end_to_end_headline(run, page))
    inputs = cnn_bn.inputs(torch.device("cpu"))
    output = recipe.run(recipe.apply(autograd_heavy_model()), recipe.prepare(inputs))
    with torch.inference_mode():
        reference = autograd_heavy_model()(inputs)
    comparison = ReducedPrecision() if recipe.DTYPE is not None else Close(rtol=1e-3, atol=1e-3)
    assert comparison(reference, output).passed


def test_advise_on_a_training_setup_advises_its_tricks_and_measures_its_training_recipe(tmp_path):
    """On the cnn example's training setup with a costly zero-fill (CostlyZeroFill), so that the training recipe
    always holds set_to_none and is measured end to end."""
    run = advise(
        "--train", f"{HERE}:costly_zero_fill_training", "--model-name", "cnn",
        "--", "-k", "zero_grad or channels_last_training", "--case-budget", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "phase 1 [2/2]" in run.stdout and "Recipe end to end" not in run.stdout  # no --model: no inference
    table = run.stdout[run.stdout.index("\ntechnique") :]
    assert "zero_grad " in table and "channels_last_training " in table
    recipe = load_recipe(str(tmp_path / "optbench-advice" / "cnn_recipe.py"))
    assert recipe.DTYPE is None and recipe.TRAINING["set_to_none"], run.stdout[-3000:]
    assert "phase 2 [1/1] training_recipe: passed" in run.stdout, run.stdout[-3000:]
    techniques = re.escape(" + ".join(TrainingRecipe(**recipe.TRAINING).techniques))
    page = (tmp_path / "optbench-advice" / "cnn.md").read_text()
    expected = MEASURED_END_TO_END.format(what="Training recipe", techniques=techniques)
    assert re.fullmatch(expected, end_to_end_headline(run, page))


def test_advise_with_a_broken_spec_says_one_line_and_writes_nothing(tmp_path):
    run = advise("--model", "examples/nothing.py:model", "--inputs", "examples/cnn_bn.py:inputs", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1].startswith("error: --model")
    assert "no such file" in run.stderr
    assert not any((tmp_path / "optbench-advice").iterdir())


@pytest.mark.parametrize(
    ("speedup", "says"),
    [((0.8, 0.75, 0.85), "convert before compile, as the recipe does"), ((1.0, 0.97, 1.03), "no difference here")],
)
def test_the_order_check_is_a_note_not_advice(speedup, says):
    assert says in order_note(record("load_model_stack", "convert-after-compile", speedup))


@pytest.mark.parametrize(
    ("measured", "says"),
    [
        (
            record("recipe", "recipe", (1.31, 1.2, 1.4)),
            "Recipe end to end (bf16 + inference_mode) vs the plain fp32 model: 1.31x [1.20, 1.40], accuracy passed; "
            "agrees with its parts (each faster)",
        ),
        (
            record("recipe", "recipe", (1.05, 0.98, 1.12), accuracy_passed=False),
            "Recipe end to end (bf16 + inference_mode) vs the plain fp32 model: 1.05x [0.98, 1.12], accuracy FAILED; "
            "does NOT agree with its parts",
        ),
        (
            replace(
                record("recipe", "recipe", (1.0, 1.0, 1.0)),
                speedup=None,
                verdict=VerdictSummary("fail", ["timed out", "raised"], [], []),
            ),
            "Recipe end to end (bf16 + inference_mode): not measured: timed out; raised",
        ),
        (
            replace(record("recipe", "recipe", (1.0, 1.0, 1.0)), speedup=None),
            "Recipe end to end (bf16 + inference_mode): not measured: not timed",
        ),
        (None, "Recipe end to end (bf16 + inference_mode): not measured: its case did not run"),
    ],
    ids=["agrees", "point-above-1-interval-not", "failed", "untimed", "did-not-run"],
)
def test_the_end_to_end_headline_says_what_the_recipe_s_record_shows(measured, says):
    """Agreement with the parts is the whole interval above 1 (a point above 1 is not), accuracy is the record's."""
    assert end_to_end_text(measured, ["bf16", "inference_mode"]) == says


def test_a_recipe_with_nothing_marked_use_has_no_end_to_end_measurement():
    assert end_to_end_text(None, [], "Training recipe") == (
        "Training recipe: nothing was marked use, so it is the plain model and there is nothing to measure end to end."
    )


def test_the_recipe_case_proves_its_autograd_mode_and_switches_are_in_effect(tmp_path):
    from optbench.measuring.workload import InferenceWorkload
    from optbench.techniques.recipe import recipe as recipe_case

    recipe = write_recipe(tmp_path, Recipe(autograd="inference_mode", fp32_precision=(("mkldnn.matmul", "bf16"),)))
    model = torch.nn.Sequential(torch.nn.Linear(8, 8)).eval()
    case = recipe_case(InferenceWorkload("mlp", lambda: copy.deepcopy(model), torch.randn(4, 8)), recipe)
    assert all(observer(case).in_effect for observer in case.in_effect)
    # Planted no-ops: the recipe's run forgets its autograd mode and its switches.
    recipe.run = lambda model, batch: model(batch)
    seen = [observer(case) for observer in case.in_effect]
    assert [s.technique for s in seen if not s.in_effect] == ["inference_mode", "mkldnn.matmul fp32_precision"]
