"""What the user brought to a run: their model (--model/--inputs), training setup (--train) and recipe (--recipe).

Loaded and checked when the run starts, so that one that cannot run stops the run with one line saying what to
do, before anything is measured or written.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import torch

from ..measuring.training import TrainingWorkload
from ..measuring.workload import InferenceWorkload
from .own_model import SpecError, load_training, load_workload
from .recipe import load_recipe


@dataclass(frozen=True)
class OwnInputs:
    workload: InferenceWorkload | None = None
    """The user's model as the workload every inference technique runs on."""
    training: TrainingWorkload | None = None
    """The user's setup as the workload every training technique runs on."""
    recipe: ModuleType | None = None
    """A recipe `advise` wrote, measured end to end on the model or setup."""

    @property
    def fixtures(self) -> frozenset[str]:
        """The workload fixtures the user's model or setup stands in for: only their techniques run."""
        return frozenset(
            fixture for fixture, own in (("workload", self.workload), ("training", self.training)) if own is not None
        )


def load_own_inputs(
    model: str | None,
    inputs: str | None,
    train: str | None,
    recipe: str | None,
    name: str | None,
    device: torch.device,
) -> OwnInputs:
    """The specs the options give, each loaded and checked on `device`; a `SpecError` for the first that fails."""
    if model is None and inputs is not None:
        raise SpecError("--inputs is for --model: give the model function too (--model SPEC)")
    own = OwnInputs(
        load_workload(model, inputs, name, device) if model is not None else None,
        load_training(train, name, device) if train is not None else None,
    )
    if recipe is None:
        return own
    if not own.fixtures:
        raise SpecError("--recipe is measured on your model: give --model and --inputs, or --train, too")
    return OwnInputs(own.workload, own.training, load_recipe(recipe))
