"""Seed 004's recommendation for the device a run measured, built from that run's records only.

A technique is recommended here when its whole 95% speedup interval lies above
1.0x and its accuracy checks passed. The seed's per-GPU-generation table is
filled in with the measurements of the row this device belongs to; nothing in
it comes from a fixed table of numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..storage.record import Record
from ..techniques import registered
from ..verdict.stats import speedup_text
from .report import case_label, markdown_table


def recommended_techniques() -> tuple[str, ...]:
    """The registered techniques the recommendation has rows for, in the seed's order (`Technique.order`); records
    of the others are left to the summary table. Not all the seed's: the allocator (PyTorch's CPU tuning guide; it
    applies to CPUs only), the attention kernel and compile on inputs of many sizes (where user code meets its
    commonest compile regression) come from PyTorch's tuning guide and tutorials."""
    return tuple(technique.name for technique in registered() if technique.recommended)


def is_recommended(record: Record) -> bool:
    """Faster beyond the interval (its low end above 1.0x) and within the accuracy tolerance."""
    return bool(record.speedup and record.accuracy) and record.speedup.low > 1.0 and record.accuracy.passed


def recommendation_text(record: Record) -> str:
    speedup = record.speedup
    if not (record.accuracy and record.accuracy.passed):
        return "no: accuracy out of tolerance"
    if not speedup:
        return "not timed"
    if speedup.low > 1.0:
        return "yes"
    if record.gate and record.gate.does_not_pay:
        return "no: does not pay here (below its floor)"
    if speedup.high < 1.0:
        return "no: slower"
    return "no: no gain beyond the interval"


def accuracy_text(record: Record) -> str:
    if record.accuracy is None:
        return "not checked"
    headline = record.accuracy.headline
    mark = "ok" if record.accuracy.passed else "FAIL"
    return f"{headline.metric} {headline.value:.4g} ({mark})"


def case_params(record: Record) -> str:
    """`test_x[bf16-resnet]` -> `bf16-resnet`: the workload and variant a record measured."""
    label = case_label(record.case)
    return label[label.index("[") + 1 : -1] if label.endswith("]") else label


@dataclass(frozen=True)
class Ingredient:
    """One technique of the seed's recipe, found among the records by its declared technique and variant."""

    name: str
    technique: str
    variant: str | None
    """`Case.variant` of the cases that measure it; None for any variant of the technique (alternatives, such as
    the allocators, of which one is used)."""

    def measures(self, record: Record) -> bool:
        return record.technique == self.technique and self.variant in (None, record.variant)


INFERENCE_MODE = Ingredient("inference_mode", "inference_mode", "grad->inference_mode")
FP16 = Ingredient("FP16", "reduced_precision", "fp16")
BF16 = Ingredient("BF16", "reduced_precision", "bf16")
COMPILE = Ingredient("torch.compile", "compile", "compile:default")
TF32 = Ingredient("TF32", "tf32", "tf32")
STACK = Ingredient("load_model stack", "load_model_stack", "seed-stack")
ALLOCATOR = Ingredient("jemalloc or tcmalloc", "allocator", None)


@dataclass(frozen=True)
class Generation:
    name: str
    capabilities: Callable[[tuple[int, int]], bool]
    recipe: tuple[Ingredient, ...]
    note: str


GENERATIONS = (
    Generation("Volta (V100, 7.0)", lambda cc: cc == (7, 0), (INFERENCE_MODE, FP16), "no TF32, no BF16"),
    Generation("Turing (T4, RTX 20xx, 7.5)", lambda cc: cc == (7, 5), (INFERENCE_MODE, FP16), "no TF32, no BF16"),
    Generation(
        "Ampere and later (A100, RTX 30xx, >= 8.0)",
        lambda cc: cc >= (8, 0),
        (INFERENCE_MODE, BF16, COMPILE, TF32),
        "TF32 when not using mixed precision",
    ),
)


def device_class(environment_key: str) -> tuple[str, tuple[int, int] | None]:
    """(description, compute capability) of the device an environment key names; capability None for CPUs."""
    match = re.search(r"-sm(\d)(\d+)-", environment_key)
    if match:
        capability = (int(match.group(1)), int(match.group(2)))
        return f"CUDA compute capability {capability[0]}.{capability[1]}", capability
    native = "native bf16" if "-bf16-" in environment_key else "no native bf16"
    return f"CPU ({native})", None


def cpu_recipe(environment_key: str) -> tuple[Ingredient, ...]:
    """The seed's Ampere recipe as far as a CPU can follow it, and the allocator (preloaded at start), which a
    CPU's speed depends on and a GPU's does not (its tensors come from PyTorch's caching allocator)."""
    if "-bf16-" in environment_key:
        return (INFERENCE_MODE, BF16, COMPILE, ALLOCATOR)
    return (INFERENCE_MODE, COMPILE, ALLOCATOR)


def measured_ingredient(ingredient: Ingredient, records: Sequence[Record]) -> str:
    found = [record for record in records if ingredient.measures(record)]
    if not found:
        return f"{ingredient.name}: not measured"
    cases = "; ".join(
        f"{case_params(record)} {speedup_text(record.speedup)} {recommendation_text(record)}" for record in found
    )
    return f"{ingredient.name}: {cases}"


def _technique_rows(records: Sequence[Record]) -> list[list[str]]:
    ordered = sorted(records, key=lambda r: (recommended_techniques().index(r.technique), r.case))
    return [
        [
            record.technique,
            case_params(record),
            f"{record.variants.reference} -> {record.variants.optimized}",
            speedup_text(record.speedup),
            accuracy_text(record),
            recommendation_text(record),
        ]
        for record in ordered
    ]


def _best_stack(records: Sequence[Record]) -> str:
    stacks = [record for record in records if STACK.measures(record)]
    if not stacks:
        return "No load_model stack was measured in this run."
    recommended = [record for record in stacks if is_recommended(record)]
    if not recommended:
        return "No measured stack beat plain fp32 eager beyond its interval with accuracy in tolerance here."
    best = max(recommended, key=lambda record: record.speedup.low if record.speedup else 0.0)
    return (
        f"{case_label(best.case)}: {best.variants.optimized} vs {best.variants.reference}, "
        f"{speedup_text(best.speedup)}, {accuracy_text(best)}."
    )


def _measured_recipe(recipe: tuple[Ingredient, ...], records: Sequence[Record]) -> str:
    """Each ingredient's measurements, then the seed's load_model stack that combines them."""
    return "<br>".join(measured_ingredient(ingredient, records) for ingredient in (*recipe, STACK))


def _generation_rows(records: Sequence[Record], environment_key: str) -> list[list[str]]:
    description, capability = device_class(environment_key)
    rows = []
    for generation in GENERATIONS:
        applies = capability is not None and generation.capabilities(capability)
        recipe = " + ".join(ingredient.name for ingredient in generation.recipe)
        measured = _measured_recipe(generation.recipe, records) if applies else "not this device"
        rows.append([generation.name, f"{recipe} ({generation.note})", measured])
    if capability is None:
        recipe = cpu_recipe(environment_key)
        rows.append(
            [
                f"this device: {description}",
                " + ".join(ingredient.name for ingredient in recipe) + " (the subset a CPU can follow)",
                _measured_recipe(recipe, records),
            ]
        )
    return rows


def recommendation_markdown(records: Sequence[Record]) -> str:
    """The seed-004 recommendation for this run's device as markdown; empty when no seed-004 case ran."""
    # Fault records (time-out, OOM, compiler error) measured nothing to recommend from.
    relevant = [record for record in records if record.technique in recommended_techniques() and record.accuracy]
    if not relevant:
        return ""
    first = relevant[0]
    environment_key = first.environment_key
    description, _ = device_class(environment_key)
    recommended = sorted(
        {f"{record.technique} ({case_params(record)})" for record in relevant if is_recommended(record)}
    )
    return "\n".join(
        [
            f"## Seed 004 recommendation: {first.device}, {description}, profile {first.profile}",
            "",
            f"Environment `{environment_key}`. Recommended means faster beyond the 95% interval (its low end "
            "above 1.00x) with accuracy in tolerance, as measured in this run.",
            "",
            "### Per technique",
            "",
            markdown_table(
                _technique_rows(relevant),
                headers=("technique", "case", "reference -> optimized", "speedup [95% CI]", "accuracy", "recommended"),
            ),
            "",
            "Recommended here: " + (", ".join(recommended) if recommended else "nothing measured beat its reference."),
            "",
            "### Best measured stack",
            "",
            _best_stack(relevant),
            "",
            "### The seed's GPU-generation table, measured",
            "",
            markdown_table(
                _generation_rows(relevant, environment_key), headers=("generation", "seed recommends", "measured here")
            ),
        ]
    )
