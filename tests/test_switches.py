"""Process-wide switches a case flips are restored after it, whatever it does."""

import subprocess
import sys

import pytest
import torch

from optbench.measuring.switches import intra_op_threads, preserved_global_state, settings, under


@pytest.mark.parametrize("flag", ["enabled", "deterministic"])
def test_a_case_that_flips_a_mkldnn_flag_leaves_it_as_it_was(flag):
    before = getattr(torch.backends.mkldnn, flag)
    with pytest.raises(RuntimeError, match="case failed"), preserved_global_state():
        setattr(torch.backends.mkldnn, flag, not before)
        raise RuntimeError("case failed")
    assert getattr(torch.backends.mkldnn, flag) is before


def test_a_case_that_sets_a_mkldnn_precision_leaves_it_as_it_was():
    with preserved_global_state():
        torch.backends.mkldnn.conv.fp32_precision = "bf16"
    assert torch.backends.mkldnn.conv.fp32_precision == "none"


def test_under_applies_its_changes_around_each_call_only():
    benchmark = torch.backends.cudnn.benchmark
    seen = under(((torch.backends.cudnn, "benchmark", not benchmark),), lambda: torch.backends.cudnn.benchmark)
    assert seen() is not benchmark
    assert torch.backends.cudnn.benchmark is benchmark
    enabled = torch.backends.mkldnn.enabled
    with settings((torch.backends.mkldnn, "enabled", not enabled)):
        assert torch.backends.mkldnn.enabled is not enabled
    assert torch.backends.mkldnn.enabled is enabled


def test_intra_op_threads_are_restored():
    threads = torch.get_num_threads()
    with intra_op_threads(threads + 1):
        assert torch.get_num_threads() == threads + 1
    assert torch.get_num_threads() == threads


NEVER_COMPILES = """
import sys
import torch
from optbench.internals import reset_compiler
from optbench.measuring.switches import deterministic_settings

reset_compiler()
with deterministic_settings():
    inside = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
print(inside, torch.are_deterministic_algorithms_enabled(), "torch._dynamo" in sys.modules)
if sys.argv[1] == "compiled":
    import torch._inductor.config as inductor
    with deterministic_settings():
        print(inductor.deterministic, end=" ")
    print(inductor.deterministic)
"""


def test_a_case_that_never_compiles_never_imports_the_compiler_and_still_runs_deterministic():
    """Importing dynamo and inductor costs a case's process 1.8 s; once they are loaded, inductor's own
    deterministic flag is set with the eager one."""
    never, compiled = (
        subprocess.run([sys.executable, "-c", NEVER_COMPILES, side], capture_output=True, text=True, check=True)
        for side in ("never", "compiled")
    )
    assert never.stdout.split("\n")[0] == "(True, True) False False"
    assert compiled.stdout.split("\n")[1] == "True False"
