"""User-style models for the --model tests: written as a user would, not tuned for the suite."""

from dataclasses import replace

import torch
from torch import nn

from optbench import TrainingSetup


class Inverts(nn.Module):
    """Whitens its features with a matrix inverse: linalg has no bf16/fp16 kernels on CPU, so converting breaks it."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.linear(x)
        gram = features.mT @ features + torch.eye(16, dtype=x.dtype)
        return features @ torch.linalg.inv(gram)


def breaks_in_bf16() -> nn.Module:
    torch.manual_seed(0)
    return Inverts().eval()


def features() -> torch.Tensor:
    return torch.randn(32, 16, generator=torch.Generator().manual_seed(0))


class Tagger(nn.Module):
    """A GRU tagger returning a dict: logits, and the tags as integers (argmax), which must match exactly."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.gru = nn.GRU(32, 32, batch_first=True)
        self.head = nn.Linear(32, 5)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> dict[str, torch.Tensor]:
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(tokens), lengths, batch_first=True, enforce_sorted=False)
        hidden, _ = self.gru(packed)
        padded, _ = nn.utils.rnn.pad_packed_sequence(hidden, batch_first=True)
        logits = self.head(padded[:, -1])
        return {"logits": logits, "tags": logits.argmax(-1)}


def tagger(device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    return Tagger().to(device).eval()


def sentences() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, 100, (8, 12), generator=generator), torch.tensor([12, 11, 10, 9, 12, 8, 7, 12])


def in_training_mode() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5))


class Samples(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.randn_like(x)


def samples() -> nn.Module:
    return Samples().eval()


class ReordersItsSums(nn.Module):
    """A linear layer that adds its products up in another order on every call, as a multithreaded reduction may
    when other work takes some of its threads: two calls differ by fp32 rounding, not by randomness."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 16, generator=torch.Generator().manual_seed(0)))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        products = x.unsqueeze(-1) * self.weight
        total = torch.zeros(x.shape[0], 16)
        for row in torch.randperm(16, generator=torch.Generator().manual_seed(self.calls)):
            total = total + products[:, row, :]
        return total


def reorders_its_sums() -> nn.Module:
    return ReordersItsSums().eval()


def raises() -> nn.Module:
    raise RuntimeError("weights file missing")


def not_a_model() -> str:
    return "resnet18"


def not_a_batch() -> str:
    return "an image"


def wrong_width() -> torch.Tensor:
    return torch.randn(4, 7)


NOT_CALLABLE = 3


def tagged_sentences(count: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Batches of (tokens, lengths, tag): a plain list, no DataLoader."""
    generator = torch.Generator().manual_seed(0)
    tokens, lengths = sentences()
    return [
        (tokens.roll(i, 0), lengths.roll(i, 0), torch.randint(0, 5, (8,), generator=generator)) for i in range(count)
    ]


def tagger_training() -> TrainingSetup:
    """The GRU tagger trained on its dict output's logits: no convolution, data as a list, nothing held out."""
    return TrainingSetup(
        model=tagger(torch.device("cpu")).train(),
        loss=lambda outputs, batch: nn.functional.cross_entropy(outputs["logits"], batch[-1]),
        optimizer=lambda parameters: torch.optim.SGD(parameters, lr=0.1),
        data=tagged_sentences(6),
    )


def not_a_setup() -> nn.Module:
    return tagger(torch.device("cpu"))


def no_batches() -> TrainingSetup:
    return replace(tagger_training(), data=[])


def per_example_loss() -> TrainingSetup:
    return replace(
        tagger_training(),
        loss=lambda outputs, batch: nn.functional.cross_entropy(outputs["logits"], batch[-1], reduction="none"),
    )


def wrong_targets() -> TrainingSetup:
    return replace(
        tagger_training(), loss=lambda outputs, batch: nn.functional.cross_entropy(outputs["logits"], batch[0])
    )
