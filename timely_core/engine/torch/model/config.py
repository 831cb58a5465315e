"""The subset of a Hugging Face `config.json` that a Llama-family model needs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

SUPPORTED_MODEL_TYPES = ("llama", "qwen2")
SUPPORTED_ROPE_TYPES = ("default", "llama3", "linear")


class RopeConfig(BaseModel):
    """Rotary embedding parameters, read from `rope_parameters` (transformers >= 5)
    or from the older `rope_theta` + `rope_scaling` pair."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    rope_type: str = "default"
    rope_theta: float = 10000.0
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192

    @model_validator(mode="after")
    def _supported(self) -> RopeConfig:
        if self.rope_type not in SUPPORTED_ROPE_TYPES:
            raise ValueError(
                f"rope type {self.rope_type!r} is not supported "
                f"(supported: {', '.join(SUPPORTED_ROPE_TYPES)})"
            )
        return self


class ModelConfig(BaseModel):
    """Shape of a decoder-only Llama/Qwen2 model; validated so a wrong checkpoint
    fails at load time with the offending field named."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    model_type: str
    vocab_size: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_hidden_layers: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    rms_norm_eps: float = Field(gt=0)
    rope: RopeConfig
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # q/k/v (and o for Llama) projections have biases
    output_bias: bool = False  # o_proj has a bias (Llama with attention_bias)
    mlp_bias: bool = False
    hidden_act: str = "silu"
    eos_token_ids: tuple[int, ...] = ()
    # positions the model was trained for (None: the checkpoint does not say); past
    # them rotary positions are ones it never saw and its output is noise
    max_position_embeddings: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> ModelConfig:
        if self.model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"model_type {self.model_type!r} is not supported "
                f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.hidden_act != "silu":
            raise ValueError(f"hidden_act {self.hidden_act!r} is not supported (only 'silu')")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
        return self

    @classmethod
    def from_hf(cls, raw: dict[str, Any]) -> ModelConfig:
        """Normalise a `config.json` dict (any transformers version) into this shape."""
        model_type = raw.get("model_type", "")
        if raw.get("use_sliding_window"):
            raise ValueError("sliding-window attention (use_sliding_window=true) is not supported")
        rope_raw = raw.get("rope_parameters") or {}
        if not rope_raw:
            rope_raw = dict(raw.get("rope_scaling") or {})
            rope_raw.setdefault("rope_theta", raw.get("rope_theta", 10000.0))
        rope_raw = dict(rope_raw)
        if "type" in rope_raw and "rope_type" not in rope_raw:
            rope_raw["rope_type"] = rope_raw.pop("type")
        heads = raw.get("num_attention_heads", 0)
        hidden = raw.get("hidden_size", 0)
        head_dim = raw.get("head_dim") or (hidden // heads if heads else 0)
        eos = raw.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (eos,))
        is_qwen2 = model_type == "qwen2"
        llama_bias = bool(raw.get("attention_bias", False))
        return cls(
            model_type=model_type,
            vocab_size=raw.get("vocab_size", 0),
            hidden_size=hidden,
            intermediate_size=raw.get("intermediate_size", 0),
            num_hidden_layers=raw.get("num_hidden_layers", 0),
            num_attention_heads=heads,
            num_key_value_heads=raw.get("num_key_value_heads") or heads,
            head_dim=head_dim,
            rms_norm_eps=raw.get("rms_norm_eps", 1e-6),
            rope=RopeConfig.model_validate(rope_raw),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            attention_bias=is_qwen2 or llama_bias,
            output_bias=llama_bias and not is_qwen2,
            mlp_bias=bool(raw.get("mlp_bias", False)),
            hidden_act=raw.get("hidden_act", "silu"),
            eos_token_ids=eos_ids,
            max_position_embeddings=raw.get("max_position_embeddings"),
        )
