"""Attention of one iteration's tokens over the paged KV cache.

The tokens of an iteration are flattened into one sequence so every projection is
a single matmul. Decodes come first (one token each, batched into one padded
attention call); prefill chunks follow (one attention call per chunk, causal
within the chunk and over the generation's cached context).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class PrefillSpan:
    """A chunk of one generation's prompt: tokens [start, start + length) of the
    flattened batch, attending to `context_slots` (cached tokens, then the chunk)."""

    start: int
    length: int
    context_slots: torch.Tensor | None  # [context] flat slots; None: no cached context
    mask: torch.Tensor | None  # [length, context] bool; None: causal without context,
    # attend-to-all with context (a single-token chunk)


@dataclass(frozen=True)
class DecodeGroup:
    """The first `size` tokens of the batch, one per decoding generation."""

    size: int
    context_slots: torch.Tensor  # [size, max_context] flat slots, padded
    mask: torch.Tensor | None  # [size, 1, 1, max_context] additive (0 / -inf); None: no padding


@dataclass(frozen=True)
class AttentionBatch:
    """Where each token's K/V goes and what each token attends to."""

    slot_mapping: torch.Tensor  # [tokens] flat slot written by each token
    decode: DecodeGroup | None
    spans: tuple[PrefillSpan, ...]


def paged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    batch: AttentionBatch,
) -> torch.Tensor:
    """Store this iteration's k/v in the cache, then attend.

    q: [T, heads, d]; k, v: [T, kv_heads, d]; caches: [slots, kv_heads, d].
    Returns [T, heads, d].
    """
    k_cache.index_copy_(0, batch.slot_mapping, k)
    v_cache.index_copy_(0, batch.slot_mapping, v)
    out = torch.empty_like(q)
    group = batch.decode
    if group is not None:
        out[: group.size] = _decode_attention(q[: group.size], k_cache, v_cache, group)
    for span in batch.spans:
        end = span.start + span.length
        sq = q[span.start : end].transpose(0, 1).unsqueeze(0)  # [1, heads, len, d]
        if span.context_slots is None:
            sk = k[span.start : end].transpose(0, 1).unsqueeze(0)
            sv = v[span.start : end].transpose(0, 1).unsqueeze(0)
        else:
            sk = k_cache.index_select(0, span.context_slots).transpose(0, 1).unsqueeze(0)
            sv = v_cache.index_select(0, span.context_slots).transpose(0, 1).unsqueeze(0)
        attn = F.scaled_dot_product_attention(
            sq, sk, sv, attn_mask=span.mask, is_causal=span.context_slots is None, enable_gqa=True
        )
        out[span.start : end] = attn.squeeze(0).transpose(0, 1)
    return out


def _decode_attention(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, group: DecodeGroup
) -> torch.Tensor:
    """One query per generation against its gathered context, as two batched
    matmuls: cheaper than the fused kernel for a single query row. Query heads
    are grouped by the KV head they share (head h reads KV head h // group)."""
    batch, length = group.context_slots.shape
    _, kv_heads, head_dim = k_cache.shape
    flat = group.context_slots.reshape(-1)
    keys = k_cache.index_select(0, flat).view(batch, length, kv_heads, head_dim)
    values = v_cache.index_select(0, flat).view(batch, length, kv_heads, head_dim)
    grouped = q.view(batch, kv_heads, -1, head_dim)  # [B, kv, group, d]
    scores = torch.matmul(grouped, keys.permute(0, 2, 3, 1)) * head_dim**-0.5
    if group.mask is not None:
        scores = scores + group.mask
    probs = torch.softmax(scores, dim=-1)  # [B, kv, group, L]
    return torch.matmul(probs, values.transpose(1, 2)).view(batch, -1, head_dim)
