"""Advice: one word per technique measured on the user's model, and the recipe those words choose.

A row's word follows from its record alone:

- **does not work**: the technique raised on the model (the case ended with "does not work on this model"), or
  did not act (an in-effect observer saw no change: a no-op measured as a speedup would be a lie);
- **breaks accuracy**: its outputs failed the accuracy comparison;
- **use**: the speedup's whole 95% interval is above 1;
- **use for memory**: a memory technique (activation checkpointing) whose peak-memory ratio's whole interval
  reaches its floor at no more than its allowed slowdown: worth it where memory, not time, is short;
- **hurts**: the whole interval is below 1;
- **skip**: otherwise: no gain this measurement can tell from none.

The recipe takes every *use* that composes: the fastest reduced dtype, channels_last in that dtype, the fastest
compile mode, the autograd mode, and (staying in fp32) the fp32 precision switches. Where training was measured,
its training part takes zero_grad(set_to_none=True), the fastest autocast dtype, the fastest compile mode of the
training step, channels_last, the faster pinned-memory variant, the faster optimizer implementation and the
compiled optimizer step, each where it was marked *use*.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..reporting.report import case_label, markdown_table, text_table
from ..running.runner import DOES_NOT_WORK
from ..storage.record import Record, read_records
from ..techniques import Used, registered
from ..verdict.stats import Interval
from .recipe import Recipe, TrainingRecipe

HEADERS = ("technique", "speedup [95% CI]", "accuracy (limit)", "peak mem", "compile", "advice")
WORDS = ("use", "use for memory", "skip", "hurts", "breaks accuracy", "does not work")


@dataclass(frozen=True)
class Advice:
    technique: str
    """The case's test and parameters without the model's name, e.g. `reduced_precision[bf16]`."""
    word: str
    reason: str = ""
    record: Record | None = None

    @property
    def speedup(self) -> Interval | None:
        return self.record.speedup if self.record else None

    def row(self, metric: bool = False) -> list[str]:
        """The table row; with `metric`, the accuracy cell names its check (the page has the width for it)."""
        record = self.record
        speedup = self.speedup
        accuracy = record.accuracy if record else None
        memory = record.memory if record else None
        compiled = record.compile if record else None
        headline = accuracy.headline if accuracy else None
        sign = "<=" if headline and headline.lower_is_better else ">="
        return [
            self.technique,
            f"{speedup.point:.2f}x [{speedup.low:.2f}, {speedup.high:.2f}]" if speedup else "-",
            f"{f'{headline.metric} ' if metric else ''}{headline.value:.2g} ({sign}{headline.limit:.2g})"
            if headline
            else "-",
            f"{memory.optimized_bytes / memory.reference_bytes:.2f}x"
            if memory and memory.reference_bytes and memory.optimized_bytes is not None
            else "-",
            f"{compiled.first_call_s:.1f} s" if compiled else "-",
            self.word,
        ]


def technique_label(case: str, model_name: str) -> str:
    """`smoke:benchmarks/test_compile.py::test_compile[default-cnn]` -> `compile[default]`."""
    label = case_label(case).removeprefix("test_")
    return re.sub(rf"-?{re.escape(model_name)}\]$", "]", label).replace("[]", "")


ORDER_CHECK = "convert-after-compile"
"""The variant of seed 004's order check: its optimized side is the wrong order, so it gets no word of advice."""


def order_note(record: Record) -> str:
    """What seed 004's order check found: does converting the model after compiling it cost anything here?"""
    speedup = record.speedup
    if speedup is None:
        return "order (convert, then compile): not timed"
    measured = (
        f"compile, run, convert vs convert, compile: {speedup.point:.2f}x [{speedup.low:.2f}, {speedup.high:.2f}]"
    )
    if speedup.high < 1:
        return f"order: convert before compile, as the recipe does ({measured})"
    if speedup.low > 1:
        return f"order: the wrong order was faster here ({measured}); the recipe keeps seed 004's order"
    return f"order: no difference here ({measured}); the recipe keeps seed 004's order"


def advice_of(record: Record, model_name: str) -> Advice:
    technique = technique_label(record.case, model_name)
    idle = [seen for seen in record.in_effect if not seen.in_effect]
    if idle:
        return Advice(technique, "does not work", f"not in effect: {idle[0].technique} {idle[0].evidence}", record)
    if record.accuracy is not None and not record.accuracy.passed:
        return Advice(technique, "breaks accuracy", "; ".join(record.verdict.failures), record)
    if record.speedup is None:
        return Advice(technique, "does not work", "; ".join(record.verdict.failures) or "not timed", record)
    if (memory := record.memory_payoff) is not None:
        pays = memory.ratio is not None and memory.ratio.low >= memory.floor
        affordable = record.speedup.high >= 1 / memory.max_slowdown
        reason = f"peak memory {memory.ratio.text()} lower" if memory.ratio else "peak memory not measured"
        if not affordable:
            reason += f", at {record.speedup.point:.2f}x the speed: more than its bound {memory.max_slowdown:g}x slower"
        return Advice(technique, "use for memory" if pays and affordable else "skip", reason, record)
    if record.speedup.low > 1:
        return Advice(technique, "use", "", record)
    if record.speedup.high < 1:
        return Advice(technique, "hurts", "", record)
    return Advice(technique, "skip", "", record)


def skipped_cases(junit_xml: Path, model_name: str) -> tuple[list[Advice], list[tuple[str, str]]]:
    """From pytest's JUnit XML: the techniques that do not work on the model, and those not measured here (each
    with its reason: needs CUDA, does not apply to this model)."""
    broken, unmeasured = [], []
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        skipped = case.find("skipped")
        if skipped is None:
            continue
        technique = technique_label(case.get("name", ""), model_name)
        reason = skipped.get("message", "").removeprefix("Skipped: ")
        if reason.startswith(DOES_NOT_WORK):
            broken.append(Advice(technique, "does not work", reason.removeprefix(DOES_NOT_WORK)))
        else:
            unmeasured.append((technique, reason))
    return broken, unmeasured


def choose_recipe(advice: Sequence[Advice], training: bool = False) -> Recipe:
    """The recipe of every *use* that composes (see the module's docstring); with `training`, its training part.

    Each registered technique's rule adds what it contributes, in seed 004's order (`Technique.order`)."""
    used = [a.record for a in advice if a.word == "use" and a.record]
    recipe = Recipe(training=TrainingRecipe() if training else None)
    for technique in registered():
        if technique.recipe is not None and (training or not technique.training):
            recipe = technique.recipe(recipe, Used(tuple(r for r in used if r.technique == technique.name)))
    return recipe


def advice_table(advice: Sequence[Advice], markdown: bool = False) -> str:
    """The advice as a table: in markdown with each accuracy figure's check named, as text within 120 columns."""
    rows = [a.row(metric=markdown) for a in advice]
    return markdown_table(rows, HEADERS) if markdown else text_table(rows, HEADERS)


def reasons(advice: Sequence[Advice], unmeasured: Sequence[tuple[str, str]]) -> list[str]:
    """One line per reason to say: does not work, breaks accuracy, not measured here (techniques that share a
    reason on one line)."""
    lines = [f"{a.technique}: {a.word}: {a.reason}" for a in advice if a.reason]
    sharing: dict[str, list[str]] = {}
    for technique, why in unmeasured:
        sharing.setdefault(why, []).append(technique)
    return lines + [f"{', '.join(techniques)}: not measured here: {why}" for why, techniques in sharing.items()]


@dataclass
class AdviceRun:
    """What one pytest session of `advise` left: records, skips, or the one-line usage error that stopped it."""

    records: list[Record]
    broken: list[Advice]
    unmeasured: list[tuple[str, str]]
    usage_error: str | None = None
    exit_code: int = 0


NODE = re.compile(r"^\S+::(\S+)")
OUTCOME = re.compile(r"\b(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b")
SELECTED = re.compile(r"collected \d+ items?(?: / (\d+) deselected / (\d+) selected)?")


def run_cases(root: Path, arguments: Sequence[str], results: Path, model_name: str, phase: str) -> AdviceRun:
    """One pytest session over the catalogue with `arguments`, its progress printed as it goes: which technique,
    its outcome, how many are left."""
    junit = results / "cases.xml"
    command = [sys.executable, "-m", "pytest", "benchmarks", *arguments, "--results-dir", str(results)]
    command += ["--junitxml", str(junit), "-v", "--tb=line", "-p", "no:cacheprovider", "-W", "ignore::Warning"]
    start = time.monotonic()
    output: list[str] = []
    total, done, line = 0, 0, ""
    with subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
        assert process.stdout is not None
        announced = False
        while chunk := process.stdout.read1(4096).decode(errors="replace"):  # type: ignore[attr-defined]
            for character in chunk:
                if character != "\n":
                    line += character
                    node = NODE.match(line)
                    # Only while cases are left: a failure's report after the last one names a case too.
                    if node and not announced and line.endswith(" ") and (not total or done < total):
                        announced = True
                        label = technique_label(node.group(1), model_name)
                        print(f"  {phase} [{done + 1}/{total or '?'}] measuring {label} ...", flush=True)
                    continue
                output.append(line)
                selected = SELECTED.search(line)
                if selected:
                    total = int(selected.group(2) or line.split()[1])
                node, outcome = NODE.match(line), OUTCOME.search(line)
                if node and outcome:
                    done += 1
                    minutes = (time.monotonic() - start) / 60
                    label = technique_label(node.group(1), model_name)
                    print(f"  {phase} [{done}/{total}] {label}: {outcome.group(1).lower()} ({minutes:.1f} min)")
                announced, line = False, ""
    if process.returncode == 4 or not junit.exists():  # pytest's usage error: the run never started
        errors = [text.removeprefix("ERROR: ") for text in output if text.startswith("ERROR: ")]
        return AdviceRun([], [], [], errors[-1] if errors else "\n".join(output[-5:]), process.returncode)
    broken, unmeasured = skipped_cases(junit, model_name)
    return AdviceRun(read_records(results), broken, unmeasured, None, process.returncode)


def recipe_header(name: str, recipe: Recipe) -> str:
    applied = ", ".join(recipe.techniques) or "nothing: no technique was measured to pay, so this is the plain model"
    paragraphs = [
        f"optbench recipe for {name}, written by `python -m optbench advise` ({datetime.date.today()}, torch "
        f"{torch.__version__}).",
        f"Applies, in seed 004's order (dtype and memory format before torch.compile): {applied}.",
        "Use: `model = apply(model)`, then `run(model, prepare(batch))`. MEASURED at the end holds the numbers this "
        "was chosen from.",
    ]
    if recipe.training is not None:
        trained = ", ".join(recipe.training_techniques) or "nothing: no training technique was measured to pay"
        paragraphs.append(
            f"Training: `step = training_step(model, optimizer, loss, forward)`, then `step(batch)` "
            f"per batch; applies {trained}."
        )
    return "\n\n".join(textwrap.fill(paragraph, 100) for paragraph in paragraphs)


def advice_page(
    name: str,
    advice: Sequence[Advice],
    unmeasured: Sequence[tuple[str, str]],
    notes: Sequence[str],
    recipe: Recipe,
    command: str,
) -> str:
    """NAME.md: where it ran, the table, the reasons and `notes`, and what the recipe applies."""
    environments = sorted({a.record.environment_key for a in advice if a.record})
    lines = [
        f"# {name}: which techniques pay",
        "",
        f"Measured {datetime.date.today()} on {', '.join(environments) or 'this machine'} with torch "
        f"{torch.__version__}. Reproduce: `{command}`",
        "",
        advice_table(advice, markdown=True),
        "",
        *(f"- {line}" for line in [*reasons(advice, unmeasured), *notes]),
        "",
        f"Recipe ({name}_recipe.py): {', '.join(recipe.techniques) or 'the plain model (nothing pays)'}.",
    ]
    if recipe.training is not None:
        lines.append(f"Training step: {', '.join(recipe.training_techniques) or 'the plain step (nothing pays)'}.")
    return "\n".join(lines) + "\n"


def end_to_end_text(record: Record | None, techniques: Sequence[str], what: str = "Recipe") -> str:
    """A recipe's measured headline, and whether it agrees in direction with its parts (all marked *use*)."""
    if not techniques:
        return f"{what}: nothing was marked use, so it is the plain model and there is nothing to measure end to end."
    if record is None or record.speedup is None:
        # A record without a speedup and without failures was not timed (e.g. --benchmark-disable), as advice_of says.
        failures = ("; ".join(record.verdict.failures) or "not timed") if record else "its case did not run"
        return f"{what} end to end ({' + '.join(techniques)}): not measured: {failures}"
    speedup = record.speedup
    agrees = "agrees with its parts (each faster)" if speedup.low > 1 else "does NOT agree with its parts"
    accuracy = "accuracy passed" if record.accuracy and record.accuracy.passed else "accuracy FAILED"
    return (
        f"{what} end to end ({' + '.join(techniques)}) vs the plain fp32 model: {speedup.point:.2f}x "
        f"[{speedup.low:.2f}, {speedup.high:.2f}], {accuracy}; {agrees}"
    )


def write_atomically(path: Path, text: str) -> None:
    """`text` into `path` whole or not at all: a run stopped midway leaves no half-written file."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)
