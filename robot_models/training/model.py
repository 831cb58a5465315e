"""A Llama-architecture causal LM in plain torch, with HF Llama parameter names.

Used for training (it can run a shared prompt prefix once and expand its K/V over
a batch of suffixes) and saved in the Hugging Face Llama format, so that
`transformers.LlamaForCausalLM`, vLLM and our own engine load the result. The
math mirrors HF Llama: RMSNorm, rotate-half RoPE, grouped-query attention
(query head h reads K/V head h // group), SiLU-gated MLP, untied LM head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaShape:
    vocab_size: int
    hidden_size: int = 256
    intermediate_size: int = 688
    num_hidden_layers: int = 4
    num_attention_heads: int = 8
    num_key_value_heads: int = 2
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


KV = tuple[torch.Tensor, torch.Tensor]  # keys, values: [batch, kv_heads, positions, head_dim]


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(variance + self.eps)).to(x.dtype)


def rope_tables(shape: LlamaShape, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape [positions, head_dim] (HF default RoPE)."""
    dim = shape.head_dim
    inv_freq = 1.0 / (
        shape.rope_theta
        ** (torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device) / dim)
    )
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past_len: int, scale: float
) -> torch.Tensor:
    """SDPA of a chunk whose K/V are preceded by `past_len` past positions (GQA without
    repeating K/V: the prefix K/V is most of the memory). Without a past the mask is
    plain causal and SDPA is told so: it then takes its flash kernel, not the masked
    path (the full prefix runs every full-prefix training step)."""
    mask = None
    if past_len:
        n = q.shape[2]
        mask = torch.ones(n, past_len + n, dtype=torch.bool, device=q.device).tril(past_len)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=mask is None, scale=scale, enable_gqa=True
    )


class Attention(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.shape = shape
        h, d = shape.hidden_size, shape.head_dim
        self.q_proj = nn.Linear(h, shape.num_attention_heads * d, bias=False)
        self.k_proj = nn.Linear(h, shape.num_key_value_heads * d, bias=False)
        self.v_proj = nn.Linear(h, shape.num_key_value_heads * d, bias=False)
        self.o_proj = nn.Linear(shape.num_attention_heads * d, h, bias=False)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, past: KV | None
    ) -> tuple[torch.Tensor, KV]:
        """x: [batch, seq, hidden]; `past` K/V precede x (positions already rotated)."""
        s = self.shape
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, s.num_attention_heads, s.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, s.num_key_value_heads, s.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, s.num_key_value_heads, s.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        new_kv = (k, v)
        past_len = 0
        if past is not None:
            past_len = past[0].shape[2]
            k = torch.cat((past[0].expand(b, -1, -1, -1), k), dim=2)
            v = torch.cat((past[1].expand(b, -1, -1, -1), v), dim=2)
        out = causal_attention(q, k, v, past_len, 1.0 / math.sqrt(s.head_dim))
        return self.o_proj(out.transpose(1, 2).reshape(b, n, -1)), new_kv


class MLP(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(shape.hidden_size, shape.intermediate_size, bias=False)
        self.up_proj = nn.Linear(shape.hidden_size, shape.intermediate_size, bias=False)
        self.down_proj = nn.Linear(shape.intermediate_size, shape.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.self_attn = Attention(shape)
        self.mlp = MLP(shape)
        self.input_layernorm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, past: KV | None
    ) -> tuple[torch.Tensor, KV]:
        attn, kv = self.self_attn(self.input_layernorm(x), cos, sin, past)
        x = x + attn
        return x + self.mlp(self.post_attention_layernorm(x)), kv


class LlamaBody(nn.Module):
    """`model.*` of HF LlamaForCausalLM."""

    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(shape.vocab_size, shape.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(shape) for _ in range(shape.num_hidden_layers))
        self.norm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)


class TinyLlama(nn.Module):
    """Causal LM; `forward(ids, past)` returns logits and this chunk's K/V per layer."""

    def __init__(self, shape: LlamaShape, tie_embeddings: bool = False) -> None:
        """`tie_embeddings`: the output layer shares the input embedding matrix, so a
        token the model attends to in the request maps straight back to that token's
        logit (a rarely seen number token needs no output row of its own)."""
        super().__init__()
        self.shape = shape
        self.model = LlamaBody(shape)
        self.lm_head = nn.Linear(shape.hidden_size, shape.vocab_size, bias=False)
        self.apply(self._init)
        if tie_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def forward(
        self, ids: torch.Tensor, past: list[KV] | None = None
    ) -> tuple[torch.Tensor, list[KV]]:
        """ids: [batch, seq]. `past`: per-layer K/V of a preceding chunk (batch 1 or batch)."""
        start = 0 if past is None else past[0][0].shape[2]
        positions = torch.arange(start, start + ids.shape[1], device=ids.device)
        if start + ids.shape[1] > self.shape.max_position_embeddings:
            raise ValueError(
                f"sequence of {start + ids.shape[1]} tokens exceeds max_position_embeddings"
            )
        cos, sin = rope_tables(self.shape, positions)
        x = self.model.embed_tokens(ids)
        new_kv: list[KV] = []
        for i, layer in enumerate(self.model.layers):
            x, kv = layer(x, cos, sin, None if past is None else past[i])
            new_kv.append(kv)
        return self.lm_head(self.model.norm(x)), new_kv
