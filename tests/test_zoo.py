"""The catalogue on model families no workload was tuned for (examples/zoo.py): each case passes, skips with its
reason, or fails for the optimization's own fault, never for the harness's (determinism, scale, limits fitted to
another model).

A subset per family, untimed (`--benchmark-disable`: first calls, compile counts, accuracy and in-effect checks,
the verdict without speed), chosen so that across the zoo each kind of comparison (bitwise, allclose at outputs of
1e-9, reduced precision against fp64 on dicts and ModelOutputs, int8's limits) and each kind of evidence that a
technique is in effect (memory format, a switch read inside the call, compile counts, quantized layers) runs,
within about a minute of CI. Every family also runs a case that needs neither bf16 nor fp16, so that on a CPU
without them (a 2-core AMD EPYC with AVX2 only), where the reduced-precision cases skip, each family still has a
case measured beside its planted one. The whole catalogue on each family, timed, is in docs/own-model.md ("A zoo of
model families") with its command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from fnmatch import fnmatch

import pytest
import torch

from optbench.advise.own_model import load_workload
from optbench.advise.recipe import load_recipe
from optbench.measuring.accuracy import Close, ReducedPrecision
from optbench.measuring.hardware import dtype_unsupported_reason
from optbench.storage.record import read_records
from optbench.techniques.reduced_precision import reduced_precision
from tests.catalogue_run import ROOT, catalogue

sys.path.insert(0, str(ROOT / "examples"))
import zoo

SPEC = "examples/zoo.py"
SUBSETS = {
    # outputs of 1e-9: memory format and a switch read inside the call, held at that scale; channels_last planted
    "mobilenet": "(test_channels_last and fp32) or conv_precision or grad-vs-no_grad",
    # compile counts of a shape policy through Hugging Face attention, and Exact once autograd is off
    "vit": "mark_dynamic or (grad-vs-inference_mode and not no_grad)",
    # a dict of per-pixel maps, each leaf compared; half precision and channels_last on a segmentation head
    "segmentation": "(test_reduced_precision and fp16) or (test_channels_last and (bf16 or fp32))",
    # dict inputs with padding; torchao's int8 on Linear layers (compiled), the matmul precision switch
    "encoder": "int8-weight-only or matmul_precision",
    # logits beside a key/value cache: bf16 against fp64, Exact between two autograd modes
    "decoder": "(test_reduced_precision and bf16) or no_grad-vs-inference_mode",
}


PLANTED = {"mobilenet": ("test_channels_last[fp32-mobilenet]", "not in effect: channels_last ran * of * convolutions*")}
"""Families run with tests/planted_no_ops.py: that case must fail for its planted no-op, the others still pass.
(MobileNet's squeeze-excite convolutions see [N, C, 1, 1] tensors, which are channels_last whatever is asked:
with the no-op planted, 18 of its 52 convolutions still read as channels_last, and the case still fails.)"""


@pytest.mark.parametrize("family", zoo.FAMILIES)
def test_each_case_on_a_zoo_family_passes_or_skips_with_its_reason(family, tmp_path):
    planted_case, planted_failure = PLANTED.get(family, (None, None))
    run = catalogue(
        "--model", f"{SPEC}:{family}", "--inputs", f"{SPEC}:{family}_inputs", "--model-name", family,
        "--benchmark-disable", "--baselines-dir", str(tmp_path / "baselines"),
        *(("-p", "tests.planted_no_ops") if planted_case else ()),
        results=tmp_path, select=SUBSETS[family],
    )  # fmt: skip
    output = run.stdout + run.stderr
    expected = pytest.ExitCode.TESTS_FAILED if planted_case else pytest.ExitCode.OK
    assert run.returncode == expected, output[-4000:]
    records = read_records(tmp_path)
    assert any(not record.case.endswith(f"::{planted_case}") for record in records), output[-2000:]  # not all skipped
    for record in records:
        assert record.workload == family, record.case
        if record.case.endswith(f"::{planted_case}"):
            assert any(fnmatch(failure, planted_failure) for failure in record.verdict.failures), record.verdict
        else:
            assert record.verdict.status != "fail", (record.case, record.verdict)
    skipped = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    hardware_or_technique = (" needs ", "not applicable", "runs only", "has no native")
    assert all(any(reason in line for reason in hardware_or_technique) for line in skipped), skipped


@pytest.mark.skipif(dtype_unsupported_reason(torch.bfloat16, torch.device("cpu")) is not None, reason="no native bf16")
@pytest.mark.parametrize("family", zoo.FAMILIES)
def test_a_one_percent_miscompile_fails_on_every_family_at_its_own_scale(family, monkeypatch):
    """bf16 passes against fp64 on each family (MobileNet's outputs are about 1e-9, the others' about 1); the
    same outputs moved by 1% do not: the limits follow the model's scale, not a constant."""
    monkeypatch.chdir(ROOT)
    workload = load_workload(f"{SPEC}:{family}", f"{SPEC}:{family}_inputs", family, torch.device("cpu"))
    case = reduced_precision(workload, torch.bfloat16, floor=1.0, pays_on=())
    reference, optimized, fp64 = case.reference(), case.optimized(), case.fp64_output()
    assert case.accuracy(reference, optimized, fp64).passed
    miscompiled = torch.utils._pytree.tree_map(
        lambda leaf: leaf * 1.01 if torch.is_tensor(leaf) and leaf.is_floating_point() else leaf, optimized
    )
    assert not case.accuracy(reference, miscompiled, fp64).passed


ADVISED = "segmentation"
"""The family `advise` runs on: a torchvision head whose output is a dict of per-pixel maps."""


def test_advise_on_a_zoo_family_writes_a_recipe_that_runs_on_it_within_its_limits(tmp_path):
    """`advise` on a model no example was written for: a row of advice for each technique asked, none broken by the
    harness, and a recipe that, applied to the family's model, gives the model's outputs: up to reordering where it
    chose no dtype, within the reduced-precision limits where it chose one (which, is the CPU's to say)."""
    command = [sys.executable, "-m", "optbench", "advise", "--model", f"{ROOT / SPEC}:{ADVISED}"]
    command += ["--inputs", f"{ROOT / SPEC}:{ADVISED}_inputs", "--model-name", ADVISED, "--"]
    command += ["-k", "(grad-vs-inference_mode and not no_grad) or (test_reduced_precision and bf16)"]
    command += ["--case-budget", "1", "--min-rounds", "4"]
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False, env=environment)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    table = run.stdout[run.stdout.index("\ntechnique") :].splitlines()
    rows = [line for line in table if line.startswith(("inference_mode[", "reduced_precision["))]
    assert any(row.startswith("inference_mode[") for row in rows) and not any("does not work" in row for row in rows), (
        table
    )
    recipe = load_recipe(str(tmp_path / "optbench-advice" / f"{ADVISED}_recipe.py"))
    inputs = getattr(zoo, f"{ADVISED}_inputs")()
    output = recipe.run(recipe.apply(getattr(zoo, ADVISED)()), recipe.prepare(inputs))
    with torch.inference_mode():
        reference = getattr(zoo, ADVISED)()(inputs)
    comparison = ReducedPrecision() if recipe.DTYPE is not None else Close()
    assert comparison(reference, output).passed, (recipe.DTYPE, run.stdout[-2000:])
