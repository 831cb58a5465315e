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

from timely_core.engine.model.attention import AttentionBatch, paged_attention
from timely_core.engine.model.config import ModelConfig
from timely_core.engine.model.rope import RotaryTable, apply_rotary


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm computed in float32 like Hugging Face, then cast back (the fused
    kernel gives bit-identical results in float32)."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)
    x32 = x.to(torch.float32)
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def linear(x: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x @ weight_t (+ bias) with weight_t stored [in, out]."""
    if bias is None:
        return torch.mm(x, weight_t)
    return torch.addmm(bias, x, weight_t)


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
        self._q_size = config.num_attention_heads * config.head_dim
        self._kv_size = config.num_key_value_heads * config.head_dim

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        max_position: int,
        batch: AttentionBatch,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
        logits_index: torch.Tensor,
    ) -> torch.Tensor:
        """Logits ([len(logits_index), vocab], float32) of the selected tokens.

        kv_caches: per layer, (k, v) flat views [slots, kv_heads, head_dim].
        """
        cfg = self.config
        cos, sin = self.rotary.lookup(positions, max_position)
        hidden = F.embedding(input_ids, self.weights.embed)
        tokens = input_ids.shape[0]
        for layer, (k_cache, v_cache) in zip(self.weights.layers, kv_caches, strict=True):
            x = rms_norm(hidden, layer.input_norm, cfg.rms_norm_eps)
            qkv = linear(x, layer.qkv, layer.qkv_bias)
            # q and k are adjacent columns: rotate them in one go
            qk = qkv[:, : self._q_size + self._kv_size].view(tokens, -1, cfg.head_dim)
            rotated = apply_rotary(qk, cos, sin)
            q, k = rotated[:, : cfg.num_attention_heads], rotated[:, cfg.num_attention_heads :]
            v = qkv[:, self._q_size + self._kv_size :].view(tokens, -1, cfg.head_dim)
            attn = paged_attention(q, k, v, k_cache, v_cache, batch)
            hidden += linear(attn.reshape(tokens, self._q_size), layer.o, layer.o_bias)
            x = rms_norm(hidden, layer.post_norm, cfg.rms_norm_eps)
            gate, up = linear(x, layer.gate_up, layer.gate_up_bias).chunk(2, dim=-1)
            hidden += linear(F.silu(gate) * up, layer.down, layer.down_bias)
        selected = hidden.index_select(0, logits_index)
        selected = rms_norm(selected, self.weights.norm, cfg.rms_norm_eps)
        return (selected @ self.weights.lm_head).to(torch.float32)
