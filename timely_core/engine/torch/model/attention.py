"""Attention of one iteration's tokens over the paged KV cache.

The tokens of an iteration are flattened into one sequence so every projection is
a single matmul. Decodes come first (one token each, batched into one padded
attention call); prefill chunks follow (one attention call per chunk, causal
within the chunk and over the generation's cached context), except chunks that
open with the same cached blocks: those attend them together (`prefill_cascade`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from timely_core.engine.torch.model.decode_attention import DecodeGroup, decode_attention, gather
from timely_core.engine.torch.model.prefill_cascade import SharedPrefill, shared_prefill_attention


@dataclass(frozen=True)
class PrefillSpan:
    """A chunk of one generation's prompt: tokens [start, start + length) of the
    flattened batch, attending to `context_slots` (cached tokens, then the chunk)."""

    start: int
    length: int
    context_slots: torch.Tensor | None  # [context] flat slots; None: no cached context
    context_start: int | None  # first slot when the context slots are one run
    mask: torch.Tensor | None  # [length, context] bool; None: causal without context,
    # attend-to-all with context (a single-token chunk)


@dataclass(frozen=True)
class AttentionBatch:
    """Where each token's K/V goes and what each token attends to."""

    slot_mapping: torch.Tensor  # [tokens] flat slot written by each token
    decode: DecodeGroup | None
    spans: tuple[PrefillSpan, ...]  # chunks attended one by one
    shared: tuple[SharedPrefill, ...] = ()  # chunks attended as cascades, one per prefix


def paged_attention(
    q: torch.Tensor,
    kv: torch.Tensor,
    cache: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    batch: AttentionBatch,
) -> torch.Tensor:
    """Store this iteration's k/v in the cache (one copy for both), then attend.

    q: [T, heads, d]; kv: [T, 2 (k, v), kv_heads, d]; cache: the layer's
    [2, kv_heads, slots, d] and its k and v views. Returns [T, heads, d].
    """
    both, k_cache, v_cache = cache
    both.index_copy_(2, batch.slot_mapping, kv.permute(1, 2, 0, 3))
    group = batch.decode
    if group is not None and not batch.spans and not batch.shared:
        return decode_attention(q, k_cache, v_cache, group)
    out = torch.empty_like(q)
    if group is not None:
        out[: group.size] = decode_attention(q[: group.size], k_cache, v_cache, group)
    for shared in batch.shared:
        out[shared.start : shared.end] = shared_prefill_attention(q, k_cache, v_cache, shared)
    for span in batch.spans:
        end = span.start + span.length
        sq = q[span.start : end].transpose(0, 1).unsqueeze(0)  # [1, heads, len, d]
        if span.context_slots is None:
            sk = kv[span.start : end, 0].transpose(0, 1).unsqueeze(0)
            sv = kv[span.start : end, 1].transpose(0, 1).unsqueeze(0)
        else:
            context = span.context_slots.shape[0]
            sk = gather(k_cache, span.context_slots, span.context_start, context).unsqueeze(0)
            sv = gather(v_cache, span.context_slots, span.context_start, context).unsqueeze(0)
        attn = F.scaled_dot_product_attention(
            sq, sk, sv, attn_mask=span.mask, is_causal=span.context_slots is None, enable_gqa=True
        )
        out[span.start : end] = attn.squeeze(0).transpose(0, 1)
    return out
