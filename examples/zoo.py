"""Model families none of the catalogue's workloads was tuned for, each at smoke size with random weights (built
from its public config, nothing downloaded), as `--model`/`--inputs` take them:

    pytest benchmarks --model examples/zoo.py:mobilenet --inputs examples/zoo.py:mobilenet_inputs

- `mobilenet`: torchvision's MobileNetV3-Small: depthwise convolutions, hardswish, squeeze-excite; outputs of
  about 1e-9 with random weights, where a comparator that is not scale-free reads garbage.
- `vit`: Hugging Face's ViT classifier: its own attention, a `ModelOutput`.
- `segmentation`: torchvision's LR-ASPP head on MobileNetV3-Large: a dict of per-pixel maps.
- `encoder`: Hugging Face's DistilBERT: dict inputs with a padding mask, a `ModelOutput`.
- `decoder`: Hugging Face's GPT-2 language model: logits and its key/value cache.

`tests/test_zoo.py` runs a subset of the catalogue on each in CI; the closing notes of issue 33 and docs/own-model.md
("A zoo of model families") hold what the whole catalogue does on each.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

BATCH = 4


def _seeded(build: Callable[[], nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return build().eval()


def _images(size: int, channels: int = 3) -> torch.Tensor:
    return torch.randn(BATCH, channels, size, size, generator=torch.Generator().manual_seed(0))


def _tokens(vocabulary: int, length: int) -> dict[str, torch.Tensor]:
    """Token ids with the second half of the batch padded over its last quarter, and their attention mask."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, vocabulary, (BATCH, length), generator=generator)
    attention_mask = torch.ones(BATCH, length, dtype=torch.long)
    attention_mask[BATCH // 2 :, -length // 4 :] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def mobilenet() -> nn.Module:
    from torchvision.models import mobilenet_v3_small

    return _seeded(lambda: mobilenet_v3_small(num_classes=10))


def mobilenet_inputs() -> torch.Tensor:
    return _images(96)


def vit() -> nn.Module:
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(
        image_size=64, patch_size=8, hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
        intermediate_size=512, num_labels=10,
    )  # fmt: skip
    return _seeded(lambda: ViTForImageClassification(config))


def vit_inputs() -> dict[str, torch.Tensor]:
    return {"pixel_values": _images(64)}


def segmentation() -> nn.Module:
    from torchvision.models.segmentation import lraspp_mobilenet_v3_large

    return _seeded(lambda: lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4))


def segmentation_inputs() -> torch.Tensor:
    return _images(96)


def encoder() -> nn.Module:
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(vocab_size=8192, dim=128, n_layers=4, n_heads=4, hidden_dim=512)
    return _seeded(lambda: DistilBertModel(config))


def encoder_inputs() -> dict[str, torch.Tensor]:
    return _tokens(8192, 64)


def decoder() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=8192, n_positions=256, n_embd=128, n_layer=4, n_head=4, bos_token_id=0, eos_token_id=0
    )
    return _seeded(lambda: GPT2LMHeadModel(config))


def decoder_inputs() -> dict[str, torch.Tensor]:
    return _tokens(8192, 64)


FAMILIES = ("mobilenet", "vit", "segmentation", "encoder", "decoder")
"""Each family's model is `zoo.<name>` and its inputs `zoo.<name>_inputs`."""
