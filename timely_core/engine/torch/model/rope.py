"""Rotary position embeddings, computed exactly as Hugging Face does (so greedy
outputs match `transformers` token for token), with Llama-3 and linear scaling."""

from __future__ import annotations

import math

import torch

from timely_core.engine.torch.model.config import RopeConfig


def inverse_frequencies(rope: RopeConfig, head_dim: int) -> torch.Tensor:
    """Per-pair rotation frequencies, float32, shape [head_dim // 2]."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(dtype=torch.float) / head_dim
    inv_freq = 1.0 / (rope.rope_theta**exponents)
    if rope.rope_type == "linear":
        return inv_freq / rope.factor
    if rope.rope_type == "llama3":
        return _llama3_scaled(inv_freq, rope)
    return inv_freq


def _llama3_scaled(inv_freq: torch.Tensor, rope: RopeConfig) -> torch.Tensor:
    """Llama 3.1 frequency scaling: low frequencies slowed by `factor`, high ones
    kept, a smooth blend in between."""
    old_len = rope.original_max_position_embeddings
    low_freq_wavelen = old_len / rope.low_freq_factor
    high_freq_wavelen = old_len / rope.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / rope.factor, inv_freq)
    smooth = (old_len / wavelen - rope.low_freq_factor) / (
        rope.high_freq_factor - rope.low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


class RotaryTable:
    """cos/sin per position, grown on demand so any context length works."""

    def __init__(self, rope: RopeConfig, head_dim: int, dtype: torch.dtype) -> None:
        self._inv_freq = inverse_frequencies(rope, head_dim)
        self._dtype = dtype
        self._table = torch.empty(0, 2, head_dim, dtype=dtype)  # [position, (cos, sin), d]

    def _grow(self, length: int) -> None:
        size = max(length, 2 * self._table.shape[0], 1024)
        positions = torch.arange(size, dtype=torch.float)
        freqs = positions[:, None] * self._inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos().to(self._dtype)
        sin = emb.sin().to(self._dtype)
        half = sin.shape[-1] // 2
        # rotate_half(x) * sin == cat(x2, x1) * cat(-sin1, sin2): fold the sign in
        signed_sin = torch.cat((-sin[:, :half], sin[:, half:]), dim=-1)
        self._table = torch.stack((cos, signed_sin), dim=1)  # one row gather per step

    def lookup(
        self, positions: torch.Tensor, max_position: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sign-folded sin rows for `positions` ([T] long), each [T, 1, head_dim]."""
        if max_position >= self._table.shape[0]:
            self._grow(max_position + 1)
        rows = self._table.index_select(0, positions)
        return rows[:, :1], rows[:, 1:]


def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Rotate [T, heads, head_dim] by the angles of each token's position
    (x * cos + rotate_half(x) * sin, in three kernels); `out` may be `x` itself."""
    swapped = torch.roll(x, x.shape[-1] // 2, dims=-1)  # cat(x2, x1), one kernel
    return torch.addcmul(x * cos, swapped, signed_sin, out=out)
