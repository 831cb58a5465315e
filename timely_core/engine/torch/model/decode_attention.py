"""Attention of decoding generations: one query token each over its paged context.

Written as batched matmuls over (kv head, generation), cheaper than the fused
kernel for a single query row. When the generations share leading blocks (a
registered robot prefix), those blocks are read once and attended by every query
in one matmul (cascade attention), instead of being gathered once per generation;
the softmax runs over the shared and the private scores together, so the result
is the same attention. Generations of several prefixes (drones beside arms, or
fleet variants, whose prefix KV differs) are split into parts, one per prefix,
each attended this way.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

_NOTHING: dict[torch.dtype, torch.Tensor] = {}  # baddbmm's ignored input (beta=0), per dtype


def _nothing(dtype: torch.dtype) -> torch.Tensor:
    if dtype not in _NOTHING:
        _NOTHING[dtype] = torch.zeros((), dtype=dtype)
    return _NOTHING[dtype]


@dataclass(frozen=True)
class DecodeGroup:
    """The first `size` tokens of the batch, one per decoding generation."""

    size: int
    context_len: int  # longest private context (padded width)
    context_slots: torch.Tensor | None  # [size, context_len] private slots, padded
    context_start: int | None  # size 1 and the slots are one run: read a view, no gather
    mask: torch.Tensor | None  # [size, 1, max_private] additive (0 / -inf); None: no padding
    shared_slots: torch.Tensor | None = None  # [shared] slots every generation attends first
    shared_start: int | None = None  # the shared slots are one run starting here
    # size 1: the context as runs of back-to-back slots (first slot, length), each
    # read as a view; None: gather `context_slots`
    runs: tuple[tuple[int, int], ...] | None = None
    # generations of different prefixes (robot types, fleet variants): each part is
    # attended as its own group, with its own shared prefix; the fields above unused
    parts: tuple[DecodePart, ...] = ()

    @staticmethod
    def of_parts(size: int, parts: tuple[DecodePart, ...]) -> DecodeGroup:
        return DecodeGroup(size, 0, None, None, None, parts=parts)


@dataclass(frozen=True)
class DecodePart:
    """Rows of a decode group (a slice when contiguous) that share one prefix."""

    rows: slice | torch.Tensor
    group: DecodeGroup


def gather(
    cache: torch.Tensor, slots: torch.Tensor | None, start: int | None, length: int
) -> torch.Tensor:
    """[kv_heads, length, d] keys or values: a view when the slots are one run
    starting at `start` (blocks allocated back to back, the common case), else a
    gather of `slots`."""
    if start is not None:
        return cache[:, start : start + length]
    if slots is None:
        raise ValueError("a context needs either its slots or the start of its run")
    return cache.index_select(1, slots)


def _single(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    runs: tuple[tuple[int, int], ...],
    scale: float,
) -> torch.Tensor:
    """One generation whose context is a few runs of slots (the usual batch-1
    decode): every run read as a view, no gather, and as few tensor views as
    possible (each costs about a microsecond). Several runs share one softmax."""
    grouped = q.view(k_cache.shape[0], -1, k_cache.shape[2])  # [kv, group, d]
    nothing = _nothing(q.dtype)
    parts = [
        torch.baddbmm(nothing, grouped, k_cache[:, s : s + n].mT, beta=0, alpha=scale)
        for s, n in runs
    ]
    probs = torch.softmax(parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1), dim=-1)
    if len(runs) == 1:
        return torch.bmm(probs, v_cache[:, runs[0][0] : runs[0][0] + runs[0][1]]).view(q.shape)
    out, offset = None, 0
    for s, n in runs:
        part, values = probs[..., offset : offset + n], v_cache[:, s : s + n]
        out = torch.bmm(part, values) if out is None else out.baddbmm_(part, values)
        offset += n
    assert out is not None
    return out.view(q.shape)


def decode_attention(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, group: DecodeGroup
) -> torch.Tensor:
    """q: [B, heads, d]; caches [kv_heads, slots, d]. Returns [B, heads, d].
    Query heads are grouped by the KV head they share (head h reads h // group)."""
    if group.parts:
        out = torch.empty_like(q)
        for part in group.parts:
            if isinstance(part.rows, slice):
                out[part.rows] = decode_attention(q[part.rows], k_cache, v_cache, part.group)
            else:
                rows_out = decode_attention(q[part.rows], k_cache, v_cache, part.group)
                out.index_copy_(0, part.rows, rows_out)
        return out
    batch, length = group.size, group.context_len
    kv_heads, _, head_dim = k_cache.shape
    scale = head_dim**-0.5
    if batch == 1 and group.runs is not None:
        return _single(q, k_cache, v_cache, group.runs, scale)
    flat = None if group.context_slots is None else group.context_slots.reshape(-1)
    total = batch * length
    keys = gather(k_cache, flat, group.context_start, total).view(-1, length, head_dim)
    values = gather(v_cache, flat, group.context_start, total).view(-1, length, head_dim)
    grouped = q.view(batch, kv_heads, -1, head_dim).transpose(0, 1)  # [kv, B, group, d]
    grouped = grouped.reshape(kv_heads * batch, -1, head_dim)
    # scaled in the matmul (alpha): one kernel, no pass over the scores
    scores = torch.baddbmm(_nothing(q.dtype), grouped, keys.transpose(1, 2), beta=0, alpha=scale)
    if group.mask is not None:
        scores = (scores.view(kv_heads, batch, -1, length) + group.mask).view_as(scores)
    if group.shared_slots is None:
        probs = torch.softmax(scores, dim=-1)
        out = torch.bmm(probs, values).view(kv_heads, batch, -1, head_dim)
        return out.transpose(0, 1).reshape(batch, -1, head_dim)
    shared = group.shared_slots.shape[0]
    shared_k = gather(k_cache, group.shared_slots, group.shared_start, shared)  # [kv, P, d]
    shared_v = gather(v_cache, group.shared_slots, group.shared_start, shared)
    per_head = grouped.view(kv_heads, -1, head_dim)  # [kv, B*group, d]
    shared_scores = torch.baddbmm(  # [kv, B*group, P]
        _nothing(q.dtype), per_head, shared_k.transpose(1, 2), beta=0, alpha=scale
    )
    both = torch.cat(
        (shared_scores.view(kv_heads, batch, -1, shared), scores.view(kv_heads, batch, -1, length)),
        dim=-1,
    )
    probs = torch.softmax(both, dim=-1)
    shared_probs = probs[..., :shared].reshape(kv_heads, -1, shared)
    private_probs = probs[..., shared:].reshape(kv_heads * batch, -1, length)
    out = torch.bmm(shared_probs, shared_v).view(kv_heads, batch, -1, head_dim)
    out = out + torch.bmm(private_probs, values).view(kv_heads, batch, -1, head_dim)
    return out.transpose(0, 1).reshape(batch, -1, head_dim)
