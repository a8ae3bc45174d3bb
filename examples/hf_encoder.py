"""A Hugging Face encoder as `--model`/`--inputs` take it: BERT built from its config (random weights, no download),
called with a dict of inputs and returning a `ModelOutput`. Pass a local directory in OPTBENCH_BERT to load real
weights from it instead.

    python -m optbench advise --model examples/hf_encoder.py:model --inputs examples/hf_encoder.py:inputs \
        --train examples/hf_encoder.py:train
"""

import os

import torch
from transformers import BertConfig, BertForSequenceClassification, BertModel

from optbench import TrainingSetup

SEQUENCE = 64
BATCH = 4


def config() -> BertConfig:
    """BERT-mini's shape (4 layers, width 256): a size a 2-core CPU measures in minutes."""
    return BertConfig(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024, vocab_size=30522
    )


def model() -> torch.nn.Module:
    local = os.environ.get("OPTBENCH_BERT")
    if local:
        return BertModel.from_pretrained(local).eval()
    torch.manual_seed(0)
    return BertModel(config()).eval()


def inputs() -> dict[str, torch.Tensor]:
    """Token ids with padding at the end of the second half of the batch, and its attention mask."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1000, config().vocab_size, (BATCH, SEQUENCE), generator=generator)
    attention_mask = torch.ones(BATCH, SEQUENCE, dtype=torch.long)
    attention_mask[BATCH // 2 :, SEQUENCE // 2 :] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def train() -> TrainingSetup:
    """Fine-tuning for two-class sequence classification: dict batches with `labels`, so the model's own
    `ModelOutput.loss` is the loss; a class is whether a sequence's first token id is even."""
    torch.manual_seed(0)
    classifier = BertForSequenceClassification(config())
    generator = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(6):
        input_ids = torch.randint(1000, config().vocab_size, (BATCH, SEQUENCE), generator=generator)
        batches.append({"input_ids": input_ids, "labels": input_ids[:, 0] % 2})
    return TrainingSetup(
        model=classifier.train(),
        loss=lambda outputs, batch: outputs.loss,
        optimizer=lambda parameters: torch.optim.AdamW(parameters, lr=5e-5),
        data=batches[:4],
        heldout=batches[4:],
        correct=lambda outputs, batch: outputs.logits.argmax(-1) == batch["labels"],
    )
