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
    context_start: int | None  # first slot when the context slots are one run
    mask: torch.Tensor | None  # [length, context] bool; None: causal without context,
    # attend-to-all with context (a single-token chunk)


@dataclass(frozen=True)
class DecodeGroup:
    """The first `size` tokens of the batch, one per decoding generation."""

    size: int
    context_slots: torch.Tensor  # [size, max_context] flat slots, padded
    context_start: int | None  # size 1 and the slots are one run: read a view, no gather
    mask: torch.Tensor | None  # [size, 1, max_context] additive (0 / -inf); None: no padding


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

    q: [T, heads, d]; k, v: [T, kv_heads, d]; caches: [kv_heads, slots, d].
    Returns [T, heads, d].
    """
    k_cache.index_copy_(1, batch.slot_mapping, k.transpose(0, 1))
    v_cache.index_copy_(1, batch.slot_mapping, v.transpose(0, 1))
    group = batch.decode
    if group is not None and not batch.spans:
        return _decode_attention(q, k_cache, v_cache, group)
    out = torch.empty_like(q)
    if group is not None:
        out[: group.size] = _decode_attention(q[: group.size], k_cache, v_cache, group)
    for span in batch.spans:
        end = span.start + span.length
        sq = q[span.start : end].transpose(0, 1).unsqueeze(0)  # [1, heads, len, d]
        if span.context_slots is None:
            sk = k[span.start : end].transpose(0, 1).unsqueeze(0)
            sv = v[span.start : end].transpose(0, 1).unsqueeze(0)
        else:
            sk = _context(k_cache, span.context_slots, span.context_start).unsqueeze(0)
            sv = _context(v_cache, span.context_slots, span.context_start).unsqueeze(0)
        attn = F.scaled_dot_product_attention(
            sq, sk, sv, attn_mask=span.mask, is_causal=span.context_slots is None, enable_gqa=True
        )
        out[span.start : end] = attn.squeeze(0).transpose(0, 1)
    return out


def _context(cache: torch.Tensor, slots: torch.Tensor, start: int | None) -> torch.Tensor:
    """[kv_heads, len(slots), d] keys or values: a view when the slots are one run
    (blocks allocated back to back, the common case), else a gather."""
    if start is not None:
        return cache[:, start : start + slots.shape[0]]
    return cache.index_select(1, slots)


def _decode_attention(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, group: DecodeGroup
) -> torch.Tensor:
    """One query per generation against its gathered context, as two batched
    matmuls over (kv head, generation): cheaper than the fused kernel for a single
    query row. Query heads are grouped by the KV head they share (h // group)."""
    batch, length = group.context_slots.shape
    kv_heads, _, head_dim = k_cache.shape
    flat = group.context_slots.reshape(-1)
    keys = _context(k_cache, flat, group.context_start).view(kv_heads * batch, length, head_dim)
    values = _context(v_cache, flat, group.context_start).view(kv_heads * batch, length, head_dim)
    grouped = q.view(batch, kv_heads, -1, head_dim).transpose(0, 1)  # [kv, B, group, d]
    grouped = grouped.reshape(kv_heads * batch, -1, head_dim)
    scores = torch.bmm(grouped, keys.transpose(1, 2)) * head_dim**-0.5  # [kv*B, group, L]
    if group.mask is not None:
        scores = (scores.view(kv_heads, batch, -1, length) + group.mask).view_as(scores)
    probs = torch.softmax(scores, dim=-1)
    out = torch.bmm(probs, values).view(kv_heads, batch, -1, head_dim)
    return out.transpose(0, 1).reshape(batch, -1, head_dim)
