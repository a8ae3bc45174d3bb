"""PyTorch's tuning guide: asynchronous data loading: worker processes, persistent, prefetching (`Tricks.loading`)."""

from __future__ import annotations

from torch.utils.data import DataLoader, IterableDataset

from ..measuring.in_effect import LoaderWorkers, Observer
from ..measuring.training import Trainer, TrainingTrick, TrainingWorkload, Tricks
from . import Technique


class Workers(TrainingTrick):
    """The setup's DataLoader rebuilt with `Tricks.loading`'s workers (the trainer's data path)."""

    def on(self, tricks: Tricks) -> bool:
        return tricks.loading is not None

    def misfit(self, workload: TrainingWorkload, tricks: Tricks) -> str | None:
        if not isinstance(workload.setup.data, DataLoader):
            return "its data is not a DataLoader, whose worker processes are what is measured"
        if isinstance(workload.setup.data.dataset, IterableDataset):
            return "its DataLoader reads an IterableDataset, which each worker reads whole unless it splits it itself"
        return None

    def observers(self, reference: Trainer, optimized: Trainer) -> tuple[Observer, ...]:
        on, off = optimized.tricks.loading, reference.tricks.loading
        if on is None or on == off:
            return ()
        return tuple(
            LoaderWorkers(
                trainer.loader, lambda trainer=trainer: trainer.loaded_by, loading.num_workers,
                loading.persistent_workers, loading.prefetch_factor, side,
            )
            for trainer, loading, side in ((optimized, on, "optimized"), (reference, off, "reference"))
            if loading is not None
        )  # fmt: skip


TECHNIQUE = Technique(
    "dataloader_workers",
    "loading in the training process vs DataLoader worker processes",
    "PyTorch's tuning guide",
    order=370,
    training=True,
    trick=Workers(),
)
