"""A user's CNN with batch norm, as `--model`/`--inputs` and `--train` take it: a small image classifier for 64x64
images.

python -m optbench advise --model examples/cnn_bn.py:model --inputs examples/cnn_bn.py:inputs \
    --train examples/cnn_bn.py:train
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from optbench import TrainingSetup


def block(channels_in: int, channels_out: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(channels_in, channels_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(channels_out),
        nn.ReLU(inplace=True),
        nn.Conv2d(channels_out, channels_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(channels_out),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    )


def model() -> nn.Module:
    """Random weights; batch-norm statistics that are not the identity, as a trained model has."""
    torch.manual_seed(0)
    net = nn.Sequential(
        block(3, 32), block(32, 64), block(64, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)
    )
    for norm in net.modules():
        if isinstance(norm, nn.BatchNorm2d):
            norm.running_mean.uniform_(-0.1, 0.1)
            norm.running_var.uniform_(0.5, 1.5)
    return net.eval()


def inputs(device: torch.device) -> torch.Tensor:
    """One batch of 8 images, made on the device the run measures on."""
    return torch.randn(8, 3, 64, 64, generator=torch.Generator().manual_seed(0)).to(device)


def images(count: int, generator: torch.Generator) -> TensorDataset:
    """32x32 labelled images a CNN can learn: each class a smooth colour pattern, under noise twice as strong."""
    patterns = nn.functional.interpolate(torch.randn(10, 3, 4, 4, generator=generator), size=(32, 32), mode="bilinear")
    labels = torch.randint(10, (count,), generator=generator)
    return TensorDataset(patterns[labels] + 2 * torch.randn(count, 3, 32, 32, generator=generator), labels)


def train() -> TrainingSetup:
    """The CNN trained from scratch with AdamW on 96 images, 2 epochs of 12 batches; 64 more images held out."""
    dataset = images(160, torch.Generator().manual_seed(0))
    train_split, heldout = torch.utils.data.random_split(dataset, [96, 64], torch.Generator().manual_seed(1))
    return TrainingSetup(
        model=model().train(),
        loss=lambda logits, batch: nn.functional.cross_entropy(logits, batch[1]),
        optimizer=lambda parameters: torch.optim.AdamW(parameters, lr=1e-3),
        data=DataLoader(train_split, batch_size=8, shuffle=True, drop_last=True),
        epochs=2,
        heldout=DataLoader(heldout, batch_size=64),
    )
