"""Seed 000, section 5: torch.compile on a Hugging Face causal LM's decoding (`fixtures.causal_lm` builds it)."""

from __future__ import annotations

from . import Technique

TECHNIQUE = Technique(
    "compile_causal_lm",
    "eager generate() vs its decoding step compiled over a static cache, and the seed's own code",
    "seed 000, section 5",
    order=220,
)
