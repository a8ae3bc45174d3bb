"""What the user brought, checked when the run starts: one line saying what to do, before anything is measured."""

import pytest
import torch

from optbench.advise.own_inputs import OwnInputs, load_own_inputs
from optbench.advise.own_model import SpecError
from optbench.running.allocator import AllocatorFixed, AllocatorNotFound, detect_allocator, measuring_allocator

CPU = torch.device("cpu")


def test_nothing_given_is_no_own_workload():
    assert load_own_inputs(None, None, None, None, None, CPU) == OwnInputs()
    assert OwnInputs().fixtures == frozenset()


def test_inputs_without_a_model_says_to_give_the_model():
    with pytest.raises(SpecError, match=r"^--inputs is for --model: give the model function too"):
        load_own_inputs(None, "inputs.py:batch", None, None, None, CPU)


def test_a_recipe_without_a_model_or_setup_says_what_it_is_measured_on():
    with pytest.raises(SpecError, match=r"^--recipe is measured on your model: give --model and --inputs"):
        load_own_inputs(None, None, None, "recipe.py", None, CPU)


def test_without_a_request_a_run_in_its_own_process_measures_what_it_started_with():
    own = detect_allocator()
    allocator, environment = measuring_allocator(None, isolates=False, environ={"PYTEST_XDIST_WORKER": "gw0"})
    assert allocator == own and environment == {}


def test_another_allocator_cannot_be_chosen_for_a_process_that_already_started():
    if detect_allocator().name == "jemalloc":
        pytest.skip("this process was started with jemalloc preloaded")
    try:
        measuring_allocator("jemalloc", isolates=False, environ={})
    except AllocatorNotFound:
        pytest.skip("libjemalloc2 is not installed here")
    except AllocatorFixed as error:
        assert "an allocator is chosen when a process starts" in str(error)
    else:
        pytest.fail("a jemalloc request in a process started without it was accepted")
