"""A user's CNN with batch norm, as `--model`/`--inputs` take it: a small image classifier for 64x64 images.

python -m optbench advise --model examples/cnn_bn.py:model --inputs examples/cnn_bn.py:inputs
"""

import torch
from torch import nn


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
