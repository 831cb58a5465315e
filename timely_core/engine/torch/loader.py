"""Load a Hugging Face Llama-family checkpoint (config.json + *.safetensors) and
its tokenizer from a local folder; nothing is ever downloaded."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer

from timely_core.engine.torch.model.config import ModelConfig
from timely_core.engine.torch.model.llama import LayerWeights, LlamaModel, ModelWeights


class CheckpointError(ValueError):
    """The folder is not a loadable Llama-family checkpoint; the message says why."""


def load_model_config(path: str | Path) -> ModelConfig:
    config_path = Path(path) / "config.json"
    if not config_path.is_file():
        raise CheckpointError(f"no config.json in checkpoint folder {path}")
    return read_model_config(config_path, str(config_path))


def read_model_config(config_path: Path, where: str) -> ModelConfig:
    """An HF config.json file (a folder's, or a block zoo's stored copy)."""
    try:
        return ModelConfig.from_hf(json.loads(config_path.read_text()))
    except ValueError as exc:
        raise CheckpointError(f"{where}: {exc}") from exc


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The checkpoint's `tokenizer.json` as a `tokenizers.Tokenizer`."""
    tokenizer_path = Path(path) / "tokenizer.json"
    if not tokenizer_path.is_file():
        raise CheckpointError(f"no tokenizer.json in checkpoint folder {path}")
    return Tokenizer.from_file(str(tokenizer_path))


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's safetensors files, by name."""
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"no *.safetensors files in checkpoint folder {path}")
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        tensors.update(load_file(str(file)))
    return tensors


class _Weights:
    """Name-checked access to the raw tensors, cast to the engine's dtype."""

    def __init__(self, tensors: dict[str, torch.Tensor], dtype: torch.dtype, where: Path) -> None:
        self._tensors = tensors
        self._dtype = dtype
        self._where = where

    def get(self, name: str) -> torch.Tensor:
        if name not in self._tensors:
            raise CheckpointError(f"checkpoint {self._where} lacks tensor {name!r}")
        return self._tensors[name].to(self._dtype).contiguous()

    def optional(self, name: str, present: bool) -> torch.Tensor | None:
        return self.get(name) if present else None

    def has(self, name: str) -> bool:
        return name in self._tensors


def _cat(parts: list[torch.Tensor | None]) -> torch.Tensor | None:
    if all(part is None for part in parts):
        return None
    return torch.cat([part for part in parts if part is not None]).contiguous()


def _transposed(weight: torch.Tensor) -> torch.Tensor:
    """HF stores projections [out, in]; the model multiplies by [in, out]."""
    return weight.t().contiguous()


def _layer(w: _Weights, cfg: ModelConfig, i: int) -> LayerWeights:
    p = f"model.layers.{i}."
    att, mlp = p + "self_attn.", p + "mlp."
    bias, mlp_bias = cfg.attention_bias, cfg.mlp_bias
    qkv = torch.cat([w.get(att + f"{n}_proj.weight") for n in "qkv"]).contiguous()
    qkv_bias = _cat([w.optional(att + f"{n}_proj.bias", bias) for n in "qkv"])
    gate_up = torch.cat([w.get(mlp + "gate_proj.weight"), w.get(mlp + "up_proj.weight")])
    gate_up_bias = _cat(
        [w.optional(mlp + "gate_proj.bias", mlp_bias), w.optional(mlp + "up_proj.bias", mlp_bias)]
    )
    return LayerWeights(
        input_norm=w.get(p + "input_layernorm.weight"),
        qkv=_transposed(qkv),
        qkv_bias=qkv_bias,
        o=_transposed(w.get(att + "o_proj.weight")),
        o_bias=w.optional(att + "o_proj.bias", cfg.output_bias),
        post_norm=w.get(p + "post_attention_layernorm.weight"),
        gate_up=_transposed(gate_up),
        gate_up_bias=gate_up_bias,
        down=_transposed(w.get(mlp + "down_proj.weight")),
        down_bias=w.optional(mlp + "down_proj.bias", mlp_bias),
    )


def build_layer(
    tensors: dict[str, torch.Tensor], cfg: ModelConfig, i: int, dtype: torch.dtype, where: Path
) -> LayerWeights:
    """Layer `i` in the engine's layout from (at least) that layer's tensors."""
    return _layer(_Weights(tensors, dtype, where), cfg, i)


def build_weights(
    tensors: dict[str, torch.Tensor], cfg: ModelConfig, dtype: torch.dtype, where: Path
) -> ModelWeights:
    """The engine's layout (fused, transposed projections) of a checkpoint's tensors."""
    w = _Weights(tensors, dtype, where)
    embed = w.get("model.embed_tokens.weight")
    if embed.shape != (cfg.vocab_size, cfg.hidden_size):
        raise CheckpointError(
            f"embedding shape {tuple(embed.shape)} does not match config "
            f"(vocab_size={cfg.vocab_size}, hidden_size={cfg.hidden_size})"
        )
    tied = cfg.tie_word_embeddings or not w.has("lm_head.weight")
    return ModelWeights(
        embed=embed,
        layers=[_layer(w, cfg, i) for i in range(cfg.num_hidden_layers)],
        norm=w.get("model.norm.weight"),
        lm_head=_transposed(embed if tied else w.get("lm_head.weight")),
    )


def load_model(path: str | Path, dtype: torch.dtype = torch.float32) -> LlamaModel:
    """Build the model from a local checkpoint folder (sharded safetensors allowed)."""
    folder = Path(path)
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint folder {folder} does not exist")
    cfg = load_model_config(folder)
    return LlamaModel(cfg, build_weights(read_tensors(folder), cfg, dtype, folder), dtype)
