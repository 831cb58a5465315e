"""A Llama-family decoder (Llama, Qwen2) that reads and writes a paged KV cache.

Weights are plain tensors; q/k/v and gate/up projections are fused into one
matmul each to cut per-step overhead, and every projection is stored transposed,
[in, out], because `x @ w` is about twice as fast as `x @ w.T` for the
one-row products of decoding on CPU (and no slower for prefill).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from timely_core.engine.torch.model.attention import AttentionBatch, paged_attention
from timely_core.engine.torch.model.config import ModelConfig
from timely_core.engine.torch.model.lora_batch import LoraBatch
from timely_core.engine.torch.model.rope import RotaryTable, apply_rotary

if TYPE_CHECKING:
    from collections.abc import Callable

    from timely_core.engine.torch.model.block_batch import BlockBatch, RowSplit


class RmsNorm:
    """RMSNorm exactly as Hugging Face computes it (float32 mean of squares, rsqrt,
    cast back, times the weight), bit for bit.

    In float32 it runs as sum, then eps + sum / width in one `addcdiv` (the very
    division `mean` does): about 2.5x faster than `F.rms_norm` on the one-row
    inputs of decoding, whose `mean` kernel dominates a step's norms.
    """

    def __init__(self, eps: float, width: int) -> None:
        self.eps = eps
        self._eps = torch.tensor(eps, dtype=torch.float32)
        self._width = torch.tensor(float(width), dtype=torch.float32)

    def __call__(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            squares = torch.sum(x * x, dim=-1, keepdim=True)
            return weight * (x * torch.addcdiv(self._eps, squares, self._width).rsqrt_())
        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * x32.to(x.dtype)


def linear(x: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x @ weight_t (+ bias) with weight_t stored [in, out]."""
    if bias is None:
        return torch.mm(x, weight_t)
    return torch.addmm(bias, x, weight_t)


def add_linear(
    hidden: torch.Tensor, x: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None
) -> None:
    """hidden += x @ weight_t (+ bias), in place: one kernel instead of a matmul and
    an add when there is no bias (the residual adds of every layer)."""
    if bias is None:
        hidden.addmm_(x, weight_t)
    else:
        hidden += torch.addmm(bias, x, weight_t)


def added_linear(
    hidden: torch.Tensor, x: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """hidden + x @ weight_t (+ bias) as a new tensor, the same kernels as `add_linear`."""
    if bias is None:
        return torch.addmm(hidden, x, weight_t)
    return hidden + torch.addmm(bias, x, weight_t)


@dataclass
class LayerWeights:
    """One decoder layer's parameters, projections [in, out] (biases None if absent)."""

    input_norm: torch.Tensor
    qkv: torch.Tensor  # [hidden, (heads + 2 * kv_heads) * head_dim]
    qkv_bias: torch.Tensor | None
    o: torch.Tensor  # [heads * head_dim, hidden]
    o_bias: torch.Tensor | None
    post_norm: torch.Tensor
    gate_up: torch.Tensor  # [hidden, 2 * intermediate]
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor  # [intermediate, hidden]
    down_bias: torch.Tensor | None


@dataclass
class ModelWeights:
    """All parameters of the model; `lm_head` is [hidden, vocab] (a transposed copy
    of the embedding when tied)."""

    embed: torch.Tensor  # [vocab, hidden]
    layers: list[LayerWeights]
    norm: torch.Tensor
    lm_head: torch.Tensor


class LlamaModel:
    """Forward pass over one iteration's flattened tokens."""

    def __init__(self, config: ModelConfig, weights: ModelWeights, dtype: torch.dtype) -> None:
        self.config = config
        self.weights = weights
        self.dtype = dtype
        self.rotary = RotaryTable(config.rope, config.head_dim, dtype)
        self.norm = RmsNorm(config.rms_norm_eps, config.hidden_size)
        self._q_size = config.num_attention_heads * config.head_dim
        self._kv_size = config.num_key_value_heads * config.head_dim

    @property
    def weights_nbytes(self) -> int:
        """Bytes of all parameters as held (an untied head counted once)."""
        w = self.weights
        tensors = [w.embed, w.norm, w.lm_head]
        for layer in w.layers:
            tensors.extend(t for t in vars(layer).values() if t is not None)
        return sum(t.nbytes for t in tensors)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        max_position: int,
        batch: AttentionBatch,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
        logits_index: torch.Tensor | None,
        lora: LoraBatch | None = None,
        blocks: BlockBatch | None = None,
    ) -> torch.Tensor:
        """Logits ([len(logits_index), vocab], float32) of the selected tokens (of
        every token when `logits_index` is None).

        kv_caches: per layer, the [2 (k, v), kv_heads, slots, head_dim] view and its
        k and v views. lora: the adapters of the rows that have one (their deltas
        added to the projections' outputs, rows of the base model untouched).
        blocks: the rows of full fine-tunes, each running its own blocks (None: every
        row runs the base's; layers no variant in the batch owns run as without).
        """
        cos, sin = self.rotary.lookup(positions, max_position)
        hidden = F.embedding(input_ids, self.weights.embed)
        if blocks is not None and (split := blocks.split("embedding")) is not None:
            hidden = split.map(input_ids, lambda w, ids: F.embedding(ids, w.embed))
        for i, (layer, cache) in enumerate(zip(self.weights.layers, kv_caches, strict=True)):
            if blocks is not None and i in blocks.layers:
                self._mixed_layer(i, hidden, cache, batch, cos, sin, lora, blocks)
                continue
            x = self.norm(hidden, layer.input_norm)
            qkv = linear(x, layer.qkv, layer.qkv_bias)
            if lora is not None:
                lora.add(qkv, x, i, "qkv")
            attn = self._attend(qkv, cos, sin, cache, batch)
            add_linear(hidden, attn, layer.o, layer.o_bias)
            if lora is not None:
                lora.add(hidden, attn, i, "o")
            x = self.norm(hidden, layer.post_norm)
            gate_up = linear(x, layer.gate_up, layer.gate_up_bias)
            if lora is not None:
                lora.add(gate_up, x, i, "gate_up")
            gate, up = gate_up.chunk(2, dim=-1)
            act = F.silu(gate, inplace=True).mul_(up)
            add_linear(hidden, act, layer.down, layer.down_bias)
            if lora is not None:
                lora.add(hidden, act, i, "down")
        selected = hidden if logits_index is None else hidden.index_select(0, logits_index)
        if blocks is None:
            selected = self.norm(selected, self.weights.norm)
            return (selected @ self.weights.lm_head).to(torch.float32)
        norm_split, head_split = blocks.head(logits_index)
        selected = self._split_norm(selected, norm_split, self.weights.norm, lambda w: w.norm)
        if head_split is None:
            return (selected @ self.weights.lm_head).to(torch.float32)
        return head_split.map(selected, lambda w, h: h @ w.lm_head).to(torch.float32)

    def _split_norm(
        self,
        x: torch.Tensor,
        split: RowSplit | None,
        base: torch.Tensor,
        pick: Callable[[ModelWeights], torch.Tensor],
    ) -> torch.Tensor:
        """RMSNorm with the base's weight, or, for a norm block variants own, each
        row's own weight (`split.row_weights`)."""
        return self.norm(x, base if split is None else split.row_weights(pick))

    def _attend(
        self,
        qkv: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        batch: AttentionBatch,
    ) -> torch.Tensor:
        """Rotary on q and k, the new k/v written to the cache, attention over every
        row ([tokens, heads * head_dim])."""
        cfg, tokens = self.config, qkv.shape[0]
        # q and k are adjacent columns: rotate them in one go, in place, so the
        # rotated k sits next to v and both enter the cache in one copy
        qk = qkv[:, : self._q_size + self._kv_size].view(tokens, -1, cfg.head_dim)
        apply_rotary(qk, cos, sin, out=qk)
        q = qk[:, : cfg.num_attention_heads]
        kv = qkv[:, self._q_size :].view(tokens, 2, -1, cfg.head_dim)
        return paged_attention(q, kv, cache, batch).reshape(tokens, self._q_size)

    def _mixed_layer(
        self,
        i: int,
        hidden: torch.Tensor,
        cache: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        batch: AttentionBatch,
        cos: torch.Tensor,
        sin: torch.Tensor,
        lora: LoraBatch | None,
        blocks: BlockBatch,
    ) -> None:
        """Layer `i` (in place on `hidden`) when a variant in the batch owns one of its
        blocks: each block the base's over most rows, the owners' over theirs."""
        base = self.weights.layers[i]
        p = f"layers.{i}."
        split = blocks.split(p + "input_norm")
        x = self._split_norm(hidden, split, base.input_norm, lambda w: w.layers[i].input_norm)
        attention = blocks.split(p + "attention")
        if attention is None:
            qkv = linear(x, base.qkv, base.qkv_bias)
        else:
            qkv = attention.map(x, lambda w, a: linear(a, w.layers[i].qkv, w.layers[i].qkv_bias))
        if lora is not None:
            lora.add(qkv, x, i, "qkv")
        attn = self._attend(qkv, cos, sin, cache, batch)
        if attention is None:
            add_linear(hidden, attn, base.o, base.o_bias)
        else:
            attention.residual(
                hidden, attn, lambda w, h, a: added_linear(h, a, w.layers[i].o, w.layers[i].o_bias)
            )
        if lora is not None:
            lora.add(hidden, attn, i, "o")
        split = blocks.split(p + "post_attention_norm")
        x = self._split_norm(hidden, split, base.post_norm, lambda w: w.layers[i].post_norm)
        ffn = blocks.split(p + "ffn")
        if ffn is None:
            gate_up = linear(x, base.gate_up, base.gate_up_bias)
        else:
            gate_up = ffn.map(
                x, lambda w, a: linear(a, w.layers[i].gate_up, w.layers[i].gate_up_bias)
            )
        if lora is not None:
            lora.add(gate_up, x, i, "gate_up")
        gate, up = gate_up.chunk(2, dim=-1)
        act = F.silu(gate, inplace=True).mul_(up)
        if ffn is None:
            add_linear(hidden, act, base.down, base.down_bias)
        else:
            ffn.residual(
                hidden,
                act,
                lambda w, h, a: added_linear(h, a, w.layers[i].down, w.layers[i].down_bias),
            )
        if lora is not None:
            lora.add(hidden, act, i, "down")
