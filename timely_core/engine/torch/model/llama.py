"""A Llama-family decoder (Llama, Qwen2) that reads and writes a paged KV cache.

Weights are plain tensors; q/k/v and gate/up projections are fused into one
matmul each to cut per-step overhead, and every projection is stored transposed,
[in, out], because `x @ w` is about twice as fast as `x @ w.T` for the
one-row products of decoding on CPU (and no slower for prefill).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from timely_core.engine.torch.model.attention import AttentionBatch, paged_attention
from timely_core.engine.torch.model.config import ModelConfig
from timely_core.engine.torch.model.lora_batch import LoraBatch
from timely_core.engine.torch.model.rope import RotaryTable, apply_rotary


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
    ) -> torch.Tensor:
        """Logits ([len(logits_index), vocab], float32) of the selected tokens (of
        every token when `logits_index` is None).

        kv_caches: per layer, the [2 (k, v), kv_heads, slots, head_dim] view and its
        k and v views. lora: the adapters of the rows that have one (their deltas
        added to the projections' outputs, rows of the base model untouched).
        """
        cfg = self.config
        cos, sin = self.rotary.lookup(positions, max_position)
        hidden = F.embedding(input_ids, self.weights.embed)
        tokens = input_ids.shape[0]
        for i, (layer, cache) in enumerate(zip(self.weights.layers, kv_caches, strict=True)):
            x = self.norm(hidden, layer.input_norm)
            qkv = linear(x, layer.qkv, layer.qkv_bias)
            if lora is not None:
                lora.add(qkv, x, i, "qkv")
            # q and k are adjacent columns: rotate them in one go, in place, so the
            # rotated k sits next to v and both enter the cache in one copy
            qk = qkv[:, : self._q_size + self._kv_size].view(tokens, -1, cfg.head_dim)
            apply_rotary(qk, cos, sin, out=qk)
            q = qk[:, : cfg.num_attention_heads]
            kv = qkv[:, self._q_size :].view(tokens, 2, -1, cfg.head_dim)
            attn = paged_attention(q, kv, cache, batch)
            attn = attn.reshape(tokens, self._q_size)
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
        selected = self.norm(selected, self.weights.norm)
        return (selected @ self.weights.lm_head).to(torch.float32)
