"""The logit-lens equivalence test (BlockLLM §4.1): is a fine-tuned block
replaceable by the base's block of the same name?

On calibration sequences, the variant's chain runs up to the block; the block's
output with the variant's own block and with the base's in its place (same input)
are each read through the variant's final norm and lm_head as vocabulary
distributions, and their cosine similarity is averaged over the positions that
predict plan tokens. A block equal to the base's scores exactly 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from robot_models.dataset import Example
from robot_models.training.batches import encode_example, encode_prefix
from robot_models.training.model import DecoderLayer, TinyLlama, rope_tables


@dataclass(frozen=True)
class CalibrationSequence:
    ids: torch.Tensor  # [1, T]: prefix, request, plan, eos
    positions: torch.Tensor  # the positions whose next token is a plan token or eos


def calibration_set(
    tokenizer: Tokenizer, examples: Sequence[Example], eos_id: int
) -> list[CalibrationSequence]:
    """Each example as its full served sequence (the robot's prefix first)."""
    out = []
    for example in examples:
        prefix = encode_prefix(tokenizer, example.robot_type)[0]
        encoded = encode_example(tokenizer, example, eos_id)
        ids = torch.cat((prefix, torch.tensor(encoded.suffix_ids)))[None]
        start = len(prefix) + encoded.request_len - 1
        out.append(CalibrationSequence(ids, torch.arange(start, ids.shape[1] - 1)))
    return out


class _Lens:
    """Vocabulary distributions of hidden states through the variant's head."""

    def __init__(self, variant: TinyLlama, positions: torch.Tensor) -> None:
        self.norm, self.head, self.positions = variant.model.norm, variant.lm_head, positions

    def __call__(
        self,
        hidden: torch.Tensor,
        norm: torch.nn.Module | None = None,
        head: torch.nn.Module | None = None,
    ) -> torch.Tensor:
        picked = hidden[0, self.positions]
        return F.softmax((head or self.head)((norm or self.norm)(picked)), dim=-1)


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.cosine_similarity(a.double(), b.double(), dim=-1)


def block_similarities(
    variant: TinyLlama,
    base: TinyLlama,
    calibration: Sequence[CalibrationSequence],
    blocks: Sequence[str],
) -> dict[str, float]:
    """Mean logit-lens cosine similarity per named block (the zoo's block names)."""
    wanted = set(blocks)
    sums: dict[str, float] = dict.fromkeys(blocks, 0.0)
    count = 0
    with torch.no_grad():
        for sequence in calibration:
            for name, value in _one_sequence(variant, base, sequence, wanted).items():
                sums[name] += float(value.sum())
            count += len(sequence.positions)
    return {name: total / max(1, count) for name, total in sums.items()}


def _layers(model: TinyLlama) -> list[DecoderLayer]:
    return [cast(DecoderLayer, layer) for layer in model.model.layers]


def _one_sequence(
    variant: TinyLlama, base: TinyLlama, sequence: CalibrationSequence, wanted: set[str]
) -> dict[str, torch.Tensor]:
    lens = _Lens(variant, sequence.positions)
    out: dict[str, torch.Tensor] = {}
    ids = sequence.ids
    cos, sin = rope_tables(variant.shape, torch.arange(ids.shape[1]))
    x = variant.model.embed_tokens(ids)
    if "embedding" in wanted:
        out["embedding"] = _cosine(lens(x), lens(base.model.embed_tokens(ids)))
    for i, (mine, theirs) in enumerate(zip(_layers(variant), _layers(base), strict=True)):
        name = f"layers.{i}."
        normed = mine.input_layernorm(x)
        middle = x + mine.self_attn(normed, cos, sin, None)[0]
        if name + "input_norm" in wanted:
            other = x + mine.self_attn(theirs.input_layernorm(x), cos, sin, None)[0]
            out[name + "input_norm"] = _cosine(lens(middle), lens(other))
        if name + "attention" in wanted:
            other = x + theirs.self_attn(normed, cos, sin, None)[0]
            out[name + "attention"] = _cosine(lens(middle), lens(other))
        normed = mine.post_attention_layernorm(middle)
        after = middle + mine.mlp(normed)
        if name + "post_attention_norm" in wanted:
            other = middle + mine.mlp(theirs.post_attention_layernorm(middle))
            out[name + "post_attention_norm"] = _cosine(lens(after), lens(other))
        if name + "ffn" in wanted:
            other = middle + theirs.mlp(normed)
            out[name + "ffn"] = _cosine(lens(after), lens(other))
        x = after
    if "norm" in wanted:
        out["norm"] = _cosine(lens(x), lens(x, norm=base.model.norm))
    if "lm_head" in wanted:
        out["lm_head"] = _cosine(lens(x), lens(x, head=base.lm_head))
    unknown = wanted - set(out)
    if unknown:
        raise ValueError(
            f"no such block in a {len(variant.model.layers)}-layer model: {sorted(unknown)}"
        )
    return out
