import dataclasses

import pytest

from optbench.measuring.accuracy import Check
from optbench.reporting.recommendation import device_class, is_recommended, recommendation_markdown
from tests.records import CPU_KEY, make_record

AMPERE_KEY = "cuda-nvidia-a100-sxm4-80gb-sm80-torch2.14"


def record(technique, params, variant, names, speedup=(1.0, 0.95, 1.05), passed=True, key=CPU_KEY):
    return make_record(
        f"smoke:benchmarks/test_{technique}.py::test_{technique}[{params}]",
        speedup,
        technique=technique,
        variant=variant,
        names=names,
        environment_key=key,
        accuracy=Check("cosine", 0.9999 if passed else 0.9, 0.99, lower_is_better=False),
    )


@pytest.mark.parametrize(
    ("speedup", "passed", "expected"),
    [
        ((1.2, 1.1, 1.3), True, True),
        ((1.2, 0.99, 1.4), True, False),  # a gain the interval does not exclude from 1.0x
        ((1.5, 1.4, 1.6), False, False),  # faster, but the numbers are wrong
        (None, True, False),  # not timed
    ],
)
def test_recommended_only_when_faster_beyond_the_interval_and_accurate(speedup, passed, expected):
    assert (
        is_recommended(
            record("compile", "default-vit", "compile:default", ("eager", "compile:default"), speedup, passed)
        )
        is expected
    )


def test_device_class_reads_the_environment_key():
    assert device_class(AMPERE_KEY) == ("CUDA compute capability 8.0", (8, 0))
    assert device_class("cuda-tesla-t4-sm75-torch2.14") == ("CUDA compute capability 7.5", (7, 5))
    assert device_class(CPU_KEY) == ("CPU (no native bf16)", None)
    assert device_class("cpu-intel-xeon-avx512-bf16-t8-torch2.14")[0] == "CPU (native bf16)"


def test_cpu_run_fills_the_cpu_row_with_its_own_numbers():
    records = [
        record(
            "inference_mode",
            "grad-vs-inference_mode-tiny-mlp",
            "grad->inference_mode",
            ("grad", "inference_mode"),
            (1.12, 1.08, 1.16),
        ),
        record("compile", "default-vit-b1", "compile:default", ("eager", "compile:default"), (1.83, 1.75, 1.90)),
        record("compile", "default-resnet", "compile:default", ("eager", "compile:default"), (0.97, 0.93, 1.01)),
        record(
            "channels_last",
            "fp32-resnet",
            "channels_last:fp32",
            ("fp32 NCHW", "fp32 channels_last"),
            (0.88, 0.85, 0.91),
        ),
    ]
    text = recommendation_markdown(records)
    assert "cpu, CPU (no native bf16), profile smoke" in text
    assert (
        "| compile | default-vit-b1 | eager -> compile:default | 1.83x [1.75, 1.90] | cosine 0.9999 (ok) | yes |"
        in text
    )
    assert "| channels_last | fp32-resnet | fp32 NCHW -> fp32 channels_last | 0.88x [0.85, 0.91]" in text
    assert "no: slower" in text and "no: no gain beyond the interval" in text
    assert "Recommended here: compile (default-vit-b1), inference_mode (grad-vs-inference_mode-tiny-mlp)" in text
    cpu_row = next(line for line in text.splitlines() if line.startswith("| this device: CPU"))
    assert "inference_mode + torch.compile" in cpu_row and "BF16" not in cpu_row
    assert "torch.compile: default-vit-b1 1.83x [1.75, 1.90] yes; default-resnet 0.97x" in cpu_row
    volta_row = next(line for line in text.splitlines() if line.startswith("| Volta"))
    assert volta_row.endswith("| not this device |")


def test_ampere_run_fills_the_ampere_row_and_reports_unmeasured_ingredients():
    records = [
        record("reduced_precision", "bf16-resnet", "bf16", ("fp32", "bf16"), (2.4, 2.3, 2.5), key=AMPERE_KEY),
        record("tf32", "high-vit", "tf32", ("cuBLAS ieee", "cuBLAS tf32"), (3.1, 3.0, 3.2), key=AMPERE_KEY),
    ]
    text = recommendation_markdown(records)
    ampere_row = next(line for line in text.splitlines() if line.startswith("| Ampere"))
    assert "BF16: bf16-resnet 2.40x [2.30, 2.50] yes" in ampere_row
    assert "TF32: high-vit 3.10x [3.00, 3.20] yes" in ampere_row
    assert "load_model stack: not measured" in ampere_row
    assert "torch.compile: not measured" in ampere_row
    assert "| this device: CPU" not in text
    turing_row = next(line for line in text.splitlines() if line.startswith("| Turing"))
    assert turing_row.endswith("| not this device |")


def test_best_stack_is_the_recommended_one_with_the_highest_interval():
    stack = "seed stack bf16"
    records = [
        record(
            "load_model_stack",
            "mixed-precision-resnet",
            "seed-stack",
            ("fp32 eager", stack),
            (2.0, 1.6, 2.4),
            key=AMPERE_KEY,
        ),
        record(
            "load_model_stack",
            "mixed-precision-vit",
            "seed-stack",
            ("fp32 eager", stack),
            (1.9, 1.8, 2.0),
            key=AMPERE_KEY,
        ),
        record(
            "load_model_stack",
            "fp32-vit",
            "seed-stack",
            ("fp32 eager", "seed stack fp32"),
            (3.0, 2.9, 3.1),
            False,
            AMPERE_KEY,
        ),
    ]
    best = recommendation_markdown(records).split("### Best measured stack")[1]
    assert "test_load_model_stack[mixed-precision-vit]: seed stack bf16 vs fp32 eager, 1.90x [1.80, 2.00]" in best


def test_no_stack_beating_plain_eager_is_said_so():
    records = [
        record("load_model_stack", "fp32-resnet", "seed-stack", ("fp32 eager", "seed stack fp32"), (1.0, 0.9, 1.1))
    ]
    assert "No measured stack beat plain fp32 eager" in recommendation_markdown(records)


def test_runs_without_seed_004_cases_give_no_recommendation():
    assert (
        recommendation_markdown(
            [record("zero_grad", "resnet", "set_to_none", ("zero", "set_to_none"), (1.1, 1.05, 1.2))]
        )
        == ""
    )
    assert recommendation_markdown([]) == ""


def test_ingredients_are_found_by_declared_variant_not_by_display_label():
    relabelled = record("compile", "default-vit", "compile:default", ("eager", "inductor, default"), (1.5, 1.4, 1.6))
    lookalike = record("compile", "max-autotune-vit", "compile:max-autotune", ("eager", "compile:default"))
    text = recommendation_markdown([relabelled, lookalike])
    cpu_row = next(line for line in text.splitlines() if line.startswith("| this device: CPU"))
    assert "torch.compile: default-vit 1.50x [1.40, 1.60] yes" in cpu_row
    assert "max-autotune-vit" not in cpu_row


def test_the_cpu_row_lists_each_allocator_measured_and_gpu_rows_leave_it_out():
    records = [
        record(
            "allocator",
            "jemalloc-compile",
            "jemalloc",
            ("compile system malloc", "compile jemalloc"),
            (1.1, 1.05, 1.15),
        ),
        record("allocator", "tcmalloc-eager", "tcmalloc", ("eager system malloc", "eager tcmalloc"), (1.0, 0.97, 1.03)),
    ]
    text = recommendation_markdown(records)
    assert "| allocator | jemalloc-compile | compile system malloc -> compile jemalloc | 1.10x [1.05, 1.15]" in text
    cpu_row = next(line for line in text.splitlines() if line.startswith("| this device: CPU"))
    assert "inference_mode + torch.compile + jemalloc or tcmalloc" in cpu_row
    assert "jemalloc or tcmalloc: jemalloc-compile 1.10x [1.05, 1.15] yes; tcmalloc-eager 1.00x" in cpu_row
    assert "Recommended here: allocator (jemalloc-compile)" in text
    gpu_text = recommendation_markdown([dataclasses.replace(r, environment_key=AMPERE_KEY) for r in records])
    ampere_row = next(line for line in gpu_text.splitlines() if line.startswith("| Ampere"))
    assert "jemalloc" not in ampere_row
