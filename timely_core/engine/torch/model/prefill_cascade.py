"""Prefill attention of several prompts that open with the same cached blocks.

A burst of robot requests (an event starting up to 16 tasks) prefills many short
requests after the same registered prefix of 1,000-2,000 tokens. Attended one
request at a time, the prefix is read by one small masked attention call per
request; on CPU that call is compute-bound and most of a burst's prefill time.
Here every query of the burst attends the shared blocks in one unmasked call (all
of them are earlier positions), then its own request's remaining context (causal)
in a small call; the two partial softmaxes are merged by their log-sum-exp, so the
result is the same attention (to float rounding). With the planner's prompts a
burst of 2-16 requests prefills 7-14% faster end to end (`bench/prefill_cascade.py`).

Uses the CPU flash-attention kernel because it returns the log-sum-exp; the runner
forms a cascade only for a CPU cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from timely_core.engine.torch.model.decode_attention import gather

_flash_with_lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu


@dataclass(frozen=True)
class CascadeSpan:
    """One prompt chunk of the cascade: rows [start, start + length) of the
    iteration, attending its private context (the tokens after the shared blocks)."""

    start: int
    length: int
    private_slots: torch.Tensor  # [private] flat slots, the chunk's own last
    private_start: int | None  # first slot when the private slots are one run
    # [length * group, private] additive (0 / -inf) in the model dtype, rows in
    # (token, query head of the KV head) order: the queries as folded below
    mask: torch.Tensor


@dataclass(frozen=True)
class SharedPrefill:
    """Chunks that all open with the same `shared` cached slots; their rows are the
    contiguous rows [start, end) of the iteration, span after span."""

    start: int
    end: int
    shared_slots: torch.Tensor
    shared_start: int | None  # the shared slots are one run starting here
    spans: tuple[CascadeSpan, ...]


def _fold(q: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """[T, heads, d] -> [1, kv_heads, T * group, d]: the query heads that read one KV
    head become extra query rows of it, so no key or value is repeated."""
    tokens, heads, dim = q.shape
    grouped = q.view(tokens, kv_heads, heads // kv_heads, dim).transpose(0, 1)
    return grouped.reshape(1, kv_heads, -1, dim)


def shared_prefill_attention(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, shared: SharedPrefill
) -> torch.Tensor:
    """q: the iteration's [T, heads, d]; caches [kv_heads, slots, d] holding this
    iteration's K/V already. Returns [end - start, heads, d] for the shared rows."""
    kv_heads, _, dim = k_cache.shape
    queries = q[shared.start : shared.end]
    folded = _fold(queries, kv_heads)
    group = queries.shape[1] // kv_heads
    count = shared.shared_slots.shape[0]
    shared_k = gather(k_cache, shared.shared_slots, shared.shared_start, count).unsqueeze(0)
    shared_v = gather(v_cache, shared.shared_slots, shared.shared_start, count).unsqueeze(0)
    out, lse = _flash_with_lse(folded, shared_k, shared_v)
    for span in shared.spans:
        rows = slice(
            (span.start - shared.start) * group, (span.start + span.length - shared.start) * group
        )
        private = span.private_slots.shape[0]
        own_k = gather(k_cache, span.private_slots, span.private_start, private).unsqueeze(0)
        own_v = gather(v_cache, span.private_slots, span.private_start, private).unsqueeze(0)
        own, own_lse = _flash_with_lse(folded[:, :, rows], own_k, own_v, attn_mask=span.mask)
        # softmax over both parts = each part's softmax weighted by its share of the
        # total exp-sum: sigmoid(lse_shared - lse_own) for the shared part
        weight = torch.sigmoid(lse[:, :, rows] - own_lse).to(own.dtype).unsqueeze(-1)
        out[:, :, rows] = torch.lerp(own, out[:, :, rows], weight)
    tokens = queries.shape[0]
    return out.reshape(kv_heads, tokens, group, dim).transpose(0, 1).reshape(tokens, -1, dim)
